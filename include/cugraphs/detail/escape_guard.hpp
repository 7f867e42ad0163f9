// The escape guard: a blocking stream forked into a capture as an empty branch. While it
// captures, CUDA refuses work issued to the legacy default stream
// (cudaErrorStreamCaptureImplicit), which would otherwise run once, eagerly, at capture time
// and be missing from every replay.
#pragma once

#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>
#include <vector>

namespace cugraphs::detail {

class EscapeGuard {
public:
  // Forks this thread's guard stream for capture nesting `depth` on `device` into the
  // capture on `capture`.
  void fork(cudaStream_t capture, int device, std::size_t depth, std::string_view op) {
    const cudaStream_t g = thread_stream(ThreadStream::EscapeGuard, device, depth);
    event_ = event(device);
    check(cudaEventRecord(event_, capture), "{}: forking the escape guard (cudaEventRecord)", op);
    check(cudaStreamWaitEvent(g, event_, 0), "{}: forking the escape guard (cudaStreamWaitEvent)", op);
    guard_ = g;
  }

  // Joins the guard back into `capture` (it added no node). Returns the first failure (an
  // invalidated capture fails here; cudaStreamEndCapture says why).
  cudaError_t join(cudaStream_t capture) noexcept {
    if (guard_ == nullptr) return cudaSuccess;
    cudaError_t r = cudaEventRecord(event_, guard_);
    if (r == cudaSuccess) r = cudaStreamWaitEvent(capture, event_, 0);
    guard_ = nullptr;
    return r;
  }

private:
  // This thread's event on `device` (recorded and waited on at once, so one serves every
  // capture).
  [[nodiscard]] static cudaEvent_t event(int device) {
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

  cudaStream_t guard_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

}  // namespace cugraphs::detail
