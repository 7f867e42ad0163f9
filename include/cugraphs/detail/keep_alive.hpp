// The generic hook for resources that captured work uses and cugraphs does not own (a
// library's workspace): kept alive with the graph of the capture that used them.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>

#include <algorithm>
#include <memory>

namespace cugraphs::detail {

// Keeps `resource` alive as long as the graph of the innermost capture open on this thread,
// and its executable, live: for memory captured work uses that cugraphs does not own (a
// cuBLAS workspace), so that it cannot be freed under a later replay. Returns false outside
// a capture (or when out of host memory).
inline bool keep_alive_with_capture(std::shared_ptr<void> resource) noexcept {
  CaptureSession* s = innermost_capture();
  if (s == nullptr) return false;
  CUGRAPHS_TRY {
    // std::find, not std::ranges::find: nvcc's front end rejects the ranges form for
    // shared_ptr<void> in some translation units (tests/test_cublas.cu built header-only).
    if (std::find(s->keep_alive.begin(), s->keep_alive.end(), resource) == s->keep_alive.end())
      s->keep_alive.push_back(std::move(resource));
  } CUGRAPHS_CATCH_ALL {
    return false;
  }
  return true;
}

// The graph the innermost capture open on this thread is for (CaptureSession::workspace_key:
// its GraphCore's address, or for a recapture the graph it updates), or 0 outside any: a
// library keeps its per-capture resources (cuBLAS workspaces) per graph with it.
[[nodiscard]] inline std::uint64_t capture_graph_key() noexcept {
  const CaptureSession* s = innermost_capture();
  return s == nullptr ? 0 : s->workspace_key;
}

}  // namespace cugraphs::detail
