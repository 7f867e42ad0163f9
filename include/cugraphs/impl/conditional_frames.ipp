// The bodies of the functions <cugraphs/detail/conditional_frames.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/conditional_frames.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE std::uint64_t next_capture_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

CUGRAPHS_INLINE cudaStream_t ConditionalFrames::now() const noexcept {
  if (frames_.empty()) return top_;
  return frames_.back().active < 0 ? frames_.back().parent : frames_.back().stream;
}

CUGRAPHS_INLINE void ConditionalFrames::abandon() noexcept {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (it->active < 0) continue;
    cudaGraph_t body = nullptr;
    (void)cudaStreamEndCapture(it->stream, &body);
  }
  frames_.clear();
}

}  // namespace cugraphs::detail
