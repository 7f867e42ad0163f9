// The escape guard: a blocking stream forked into a capture as an empty branch. While it
// captures, CUDA refuses work issued to the legacy default stream
// (cudaErrorStreamCaptureImplicit), which would otherwise run once, eagerly, at capture time
// and be missing from every replay. The capturing thread's per-thread default stream
// (cudaStreamPerThread: stream 0 in units built with --default-stream per-thread) is forked
// in the same way, where nothing else captures it: work issued to it is then captured
// instead of run, and work the capture stream never waits for is refused at the end.
#pragma once

#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cugraphs::detail {

class EscapeGuard {
public:
  // Before the capture begins: makes sure this thread's per-thread default stream on the
  // current device exists (its first use creates it).
  void prepare() noexcept;

  // Forks this thread's guard stream for capture nesting `depth` on `device` into the
  // capture on `capture`, and the per-thread default stream where no capture holds it (this
  // one did not take it as its own stream).
  void fork(cudaStream_t capture, int device, std::size_t depth, std::string_view op);

  // Joins the guard (and the per-thread default stream) back into `capture` (they added no
  // node). Returns the first failure (an invalidated capture fails here; cudaStreamEndCapture
  // says why). With `look`, where work on the per-thread default stream was never waited for
  // by the capture stream, per_thread_escape() describes it afterwards.
  cudaError_t join(cudaStream_t capture, bool look) noexcept;

  // Whether this capture forked the per-thread default stream in (until join()), or did
  // (afterwards): a synchronize or query of that stream then fails the capture.
  [[nodiscard]] bool forked_per_thread() const noexcept { return forked_per_thread_; }

  // What join() found on the per-thread default stream that the capture stream never waited
  // for ("" when nothing): the number of nodes at that branch's end and what they are.
  [[nodiscard]] const std::string& per_thread_escape() const noexcept { return escaped_; }

private:
  // This thread's event on `device` (recorded and waited on at once, so one serves every
  // capture).
  [[nodiscard]] static cudaEvent_t event(int device);

  // The nodes the per-thread default stream's next node would follow, unless the capture
  // stream already waits for them, described; "" when there are none (or they cannot be read).
  // Leaves no error behind.
  [[nodiscard]] static std::string unjoined_per_thread(cudaStream_t capture) noexcept;

  cudaStream_t guard_ = nullptr;
  cudaEvent_t event_ = nullptr;
  bool per_thread_ = false;       // forked into this capture, not yet joined
  bool forked_per_thread_ = false;
  int device_ = 0;                // the capture's, whose per-thread default stream was forked
  std::string escaped_;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/escape_guard.ipp>
#endif
