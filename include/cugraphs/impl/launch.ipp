// The bodies of the functions <cugraphs/launch.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/launch.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void check_programmatic(const void* kernel, std::string_view op) {
  const int ptx = kernel_ptx_version(kernel, op);
  if (ptx < 90)
    throw_misuse(op, "a programmatic launch of a kernel compiled for compute capability {}.{}: pdl::wait() is compiled "
                     "out below 9.0, so the kernel would read its predecessor's output before it is written. Build "
                     "it for sm_90 or newer, or launch it without LaunchConfig::programmatic",
                 ptx / 10, ptx % 10);
}

}  // namespace cugraphs::detail
