// The escape guard: a blocking stream forked into a capture as an empty branch. While it
// captures, CUDA refuses work issued to the legacy default stream
// (cudaErrorStreamCaptureImplicit), which would otherwise run once, eagerly, at capture time
// and be missing from every replay. The capturing thread's per-thread default stream
// (cudaStreamPerThread: stream 0 in units built with --default-stream per-thread) is forked
// in the same way, where nothing else captures it: work issued to it is then captured
// instead of run, and work the capture stream never waits for is refused at the end. So is
// the stream that was the thread's current stream when the capture began (a stream of the
// program's that a library handle may still be bound to, or that a launch names by a saved
// variable), watched the same way while the capture is open.
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
  // current device exists (its first use creates it), and chooses `prior` (the thread's
  // current stream) to be watched where it is a stream of the program's on `device`, not
  // `capture` and not capturing.
  void prepare(cudaStream_t prior, cudaStream_t capture, int device) noexcept;

  // Forks this thread's guard stream for capture nesting `depth` on `device` into the
  // capture on `capture`, the stream prepare() chose, and the per-thread default stream where
  // no capture holds it (this one did not take it as its own stream).
  void fork(cudaStream_t capture, int device, std::size_t depth, std::string_view op);

  // Joins the guard (and the watched and per-thread default streams) back into `capture`.
  // Returns the first failure (an invalidated capture fails here; cudaStreamEndCapture says
  // why). With `look`, where work on the watched or the per-thread default stream was never
  // waited for by the capture stream, watched_escape() or per_thread_escape() describes it
  // afterwards.
  cudaError_t join(cudaStream_t capture, bool look) noexcept;

  // Whether this capture forked the per-thread default stream in (until join()), or did
  // (afterwards): a synchronize or query of that stream then fails the capture.
  [[nodiscard]] bool forked_per_thread() const noexcept { return forked_per_thread_; }

  // What join() found on the per-thread default stream that the capture stream never waited
  // for ("" when nothing): the number of nodes at that branch's end and what they are.
  [[nodiscard]] const std::string& per_thread_escape() const noexcept { return escaped_; }

  // The stream current when the capture began that this capture forked in (null: none); a
  // synchronize or query of it fails the capture while it is open.
  [[nodiscard]] cudaStream_t watched() const noexcept { return watched_; }
  // What join() found on it that the capture stream never waited for ("" when nothing).
  [[nodiscard]] const std::string& watched_escape() const noexcept { return watched_escaped_; }

private:
  // This thread's event on `device` (recorded and waited on at once, so one serves every
  // capture).
  [[nodiscard]] static cudaEvent_t event(int device);

  // The nodes `branch`'s next node would follow, unless the capture stream already waits for
  // them, described; "" when there are none (or they cannot be read). Leaves no error behind.
  [[nodiscard]] static std::string unjoined(cudaStream_t branch, cudaStream_t capture) noexcept;

  // Makes `capture` wait for `branch` (recorded on the event): ends a fork.
  [[nodiscard]] cudaError_t join_branch(cudaStream_t branch, cudaStream_t capture) const noexcept;

  cudaStream_t guard_ = nullptr;
  cudaEvent_t event_ = nullptr;
  cudaStream_t candidate_ = nullptr;  // chosen by prepare(), forked by fork()
  cudaStream_t watched_ = nullptr;    // forked into this capture
  bool watching_ = false;             // forked, not yet joined
  bool per_thread_ = false;           // forked into this capture, not yet joined
  bool forked_per_thread_ = false;
  int device_ = 0;                    // the capture's, whose per-thread default stream was forked
  std::string escaped_;
  std::string watched_escaped_;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/escape_guard.ipp>
#endif
