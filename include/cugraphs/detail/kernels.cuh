// Device code of cugraphs' host API, compiled only by nvcc, registered in launchers.hpp.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/launchers.hpp>

#if !defined(__CUDACC__)
#  error "cugraphs/detail/kernels.cuh is device code: include it only from sources compiled by nvcc"
#endif

namespace cugraphs::detail {

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// A template, so that every translation unit may define it without clashing.
template <int = 0>
__global__ void set_condition_kernel(cudaGraphConditionalHandle handle, const void* flag, unsigned width) {
  const unsigned value = width == 1 ? *static_cast<const unsigned char*>(flag)
                                    : *static_cast<const unsigned*>(flag);
  cudaGraphSetConditional(handle, value);
}

template <int = 0>
cudaError_t launch_set_condition_kernel(cudaGraphConditionalHandle handle, const void* flag,
                                        unsigned width, cudaStream_t stream) {
  set_condition_kernel<<<1, 1, 0, stream>>>(handle, flag, width);
  return cudaGetLastError();
}

// Internal linkage: every nvcc translation unit registers at start-up (an unused inline
// variable might never be emitted).
[[maybe_unused]] static const bool kernels_registered = [] {
  set_condition_launcher.store(&launch_set_condition_kernel<>, std::memory_order_release);
  return true;
}();
#endif

}  // namespace cugraphs::detail
