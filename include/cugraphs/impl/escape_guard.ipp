// The bodies of the functions <cugraphs/detail/escape_guard.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/escape_guard.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/graph_queries.hpp>

#include <atomic>
#include <utility>

namespace cugraphs::detail {

// Open escape guards, all threads together (escape_guards_open): one counter for the program.
CUGRAPHS_INLINE std::atomic<int>& open_guards() noexcept {
  static std::atomic<int> open{0};
  return open;
}

CUGRAPHS_INLINE bool escape_guards_open() noexcept { return open_guards().load(std::memory_order_acquire) > 0; }

CUGRAPHS_INLINE void EscapeGuard::prepare(cudaStream_t prior, cudaStream_t capture, int device) noexcept {
  // The first use of the per-thread default stream creates it: done here, before the capture
  // begins, so that it is no call made during the capture.
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(cudaStreamPerThread, &status) != cudaSuccess) (void)cudaGetLastError();
  // The stream current until now: a stream of the program's (the default streams are watched
  // otherwise), of this device, that no capture holds (an enclosing capture's stream, or one
  // it forked, is that capture's business).
  candidate_ = nullptr;
  if (prior == nullptr || prior == cudaStreamLegacy || prior == cudaStreamPerThread || prior == capture) return;
  int on = -1;
  status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(prior, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone ||
      cudaStreamGetDevice(prior, &on) != cudaSuccess || on != device) {
    (void)cudaGetLastError();  // a stream CUDA cannot say anything of is left alone
    return;
  }
  candidate_ = prior;
}

CUGRAPHS_INLINE void EscapeGuard::fork(cudaStream_t capture, int device, std::size_t depth, std::string_view op) {
  const cudaStream_t g = thread_stream(ThreadStream::EscapeGuard, device, depth);
  event_ = event(device);
  escaped_.clear();
  watched_escaped_.clear();
  watched_ = nullptr;
  check(cudaEventRecord(event_, capture), "{}: forking the escape guard (cudaEventRecord)", op);
  check(cudaStreamWaitEvent(g, event_, 0), "{}: forking the escape guard (cudaStreamWaitEvent)", op);
  guard_ = g;
  open_guards().fetch_add(1, std::memory_order_acq_rel);
  if (const cudaStream_t c = std::exchange(candidate_, nullptr); c != nullptr) {
    // Another thread's capture may have taken the stream since prepare() (CUDA refuses to
    // merge two captures): then it is that capture's, and this one does not watch it.
    if (cudaStreamWaitEvent(c, event_, 0) == cudaSuccess) {
      watched_ = c;
      watching_ = true;
    } else {
      (void)cudaGetLastError();
    }
  }
  if (capture == cudaStreamPerThread) return;
  // A stream some capture already holds (an enclosing capture forked it or captures on it, or
  // it is this capture's own stream: stream 0 of a --default-stream per-thread unit), or a
  // stream of another device than the one current (the per-thread stream named here would be
  // the current device's): not watched.
  int current = -1;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaGetDevice(&current) != cudaSuccess || current != device ||
      cudaStreamIsCapturing(cudaStreamPerThread, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError();
    return;
  }
  check(cudaStreamWaitEvent(cudaStreamPerThread, event_, 0),
        "{}: forking the per-thread default stream into the capture (cudaStreamWaitEvent)", op);
  per_thread_ = true;
  forked_per_thread_ = true;
  device_ = device;
}

CUGRAPHS_INLINE cudaError_t EscapeGuard::join_branch(cudaStream_t branch, cudaStream_t capture) const noexcept {
  const cudaError_t r = cudaEventRecord(event_, branch);
  return r == cudaSuccess ? cudaStreamWaitEvent(capture, event_, 0) : r;
}

CUGRAPHS_INLINE cudaError_t EscapeGuard::join(cudaStream_t capture, bool look) noexcept {
  cudaError_t r = cudaSuccess;
  if (watching_) {
    watching_ = false;
    if (look) watched_escaped_ = unjoined(watched_, capture);
    r = join_branch(watched_, capture);
  }
  if (per_thread_) {
    per_thread_ = false;
    // The per-thread default stream named is the current device's: the capture's, whatever
    // the program made current since.
    int previous = device_;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    if (look) escaped_ = unjoined(cudaStreamPerThread, capture);
    const cudaError_t p = join_branch(cudaStreamPerThread, capture);
    if (r == cudaSuccess) r = p;
    if (switched) (void)cudaSetDevice(previous);
  }
  if (guard_ == nullptr) return r;
  const cudaError_t g = join_branch(guard_, capture);
  guard_ = nullptr;
  open_guards().fetch_sub(1, std::memory_order_acq_rel);
  return r != cudaSuccess ? r : g;
}

CUGRAPHS_INLINE std::string EscapeGuard::unjoined(cudaStream_t branch, cudaStream_t capture) noexcept {
  // An invalidated capture, or one that cannot be read, is left to cudaStreamEndCapture.
  CaptureInfo pt, origin;
  if (try_capture_info(branch, pt) != cudaSuccess || pt.status != cudaStreamCaptureStatusActive ||
      pt.count == 0) {  // nothing issued there
    (void)cudaGetLastError();
    return {};
  }
  const std::vector<cudaGraphNode_t> last(pt.deps, pt.deps + pt.count);
  if (try_capture_info(capture, origin) != cudaSuccess || origin.status != cudaStreamCaptureStatusActive) {
    (void)cudaGetLastError();
    return {};
  }
  const std::vector<cudaGraphNode_t> waited(origin.deps, origin.deps + origin.count);
  const auto left = not_before(pt.graph, waited, last);
  if (!left || left->empty()) return {};  // forked and joined by the program itself: a branch of the graph
  std::string what;
  for (std::size_t i = 0; i < left->size() && i < 4; ++i) what += (i == 0 ? "" : ", ") + describe_node((*left)[i]);
  if (left->size() > 4) what += ", ...";
  return format("{} node(s) at its end: {}", left->size(), what);
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
