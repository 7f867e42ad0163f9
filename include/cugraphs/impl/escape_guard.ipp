// The bodies of the functions <cugraphs/detail/escape_guard.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/escape_guard.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void EscapeGuard::fork(cudaStream_t capture, int device, std::size_t depth, std::string_view op) {
  const cudaStream_t g = thread_stream(ThreadStream::EscapeGuard, device, depth);
  event_ = event(device);
  check(cudaEventRecord(event_, capture), "{}: forking the escape guard (cudaEventRecord)", op);
  check(cudaStreamWaitEvent(g, event_, 0), "{}: forking the escape guard (cudaStreamWaitEvent)", op);
  guard_ = g;
}

CUGRAPHS_INLINE cudaError_t EscapeGuard::join(cudaStream_t capture) noexcept {
  if (guard_ == nullptr) return cudaSuccess;
  cudaError_t r = cudaEventRecord(event_, guard_);
  if (r == cudaSuccess) r = cudaStreamWaitEvent(capture, event_, 0);
  guard_ = nullptr;
  return r;
}

CUGRAPHS_INLINE cudaEvent_t EscapeGuard::event(int device) {
  struct Events {
    std::vector<cudaEvent_t> events;
    ~Events() {
      for (cudaEvent_t e : events)
        if (e != nullptr) report_in_destructor(cudaEventDestroy(e), "cudaEventDestroy (escape guard)");
    }
  };
  thread_local Events cache;
  const auto index = static_cast<std::size_t>(device);
  if (cache.events.size() <= index) cache.events.resize(index + 1, nullptr);
  if (cache.events[index] == nullptr)
    check(cudaEventCreateWithFlags(&cache.events[index], cudaEventDisableTiming), "capture: cudaEventCreateWithFlags");
  return cache.events[index];
}

}  // namespace cugraphs::detail
