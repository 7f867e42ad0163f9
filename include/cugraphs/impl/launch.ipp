// The bodies of the functions <cugraphs/launch.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/launch.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void check_programmatic(const void* kernel, std::string_view op) {
  thread_local std::vector<std::pair<const void*, int>> seen;
  int ptx = -1;
  for (const auto& [k, v] : seen)
    if (k == kernel) ptx = v;
  if (ptx < 0) {
    RelaxedCaptureMode relaxed;  // a query, but one that must not risk a capture
    cudaFuncAttributes attributes{};
    check(cudaFuncGetAttributes(&attributes, kernel), "{}: cudaFuncGetAttributes", op);
    ptx = attributes.ptxVersion;
    seen.emplace_back(kernel, ptx);
  }
  if (ptx < 90)
    throw_misuse(op, "a programmatic launch of a kernel compiled for compute capability {}.{}: pdl::wait() is compiled "
                     "out below 9.0, so the kernel would read its predecessor's output before it is written. Build "
                     "it for sm_90 or newer, or launch it without LaunchConfig::programmatic",
                 ptx / 10, ptx % 10);
}

}  // namespace cugraphs::detail
