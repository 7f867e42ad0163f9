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
  void fork(cudaStream_t capture, int device, std::size_t depth, std::string_view op);

  // Joins the guard back into `capture` (it added no node). Returns the first failure (an
  // invalidated capture fails here; cudaStreamEndCapture says why).
  cudaError_t join(cudaStream_t capture) noexcept;

private:
  // This thread's event on `device` (recorded and waited on at once, so one serves every
  // capture).
  [[nodiscard]] static cudaEvent_t event(int device);

  cudaStream_t guard_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/escape_guard.ipp>
#endif
