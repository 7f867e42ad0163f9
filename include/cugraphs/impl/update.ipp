// The bodies of the functions <cugraphs/update.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/update.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE bool same_kernel(const void* node_func, const void* kernel) noexcept {
  if (node_func == kernel) return true;
  cudaFunction_t f = nullptr;
  if (cudaGetFuncBySymbol(&f, kernel) == cudaSuccess && node_func == static_cast<const void*>(f)) return true;
  cudaKernel_t k = nullptr;
  if (cudaGetKernel(&k, kernel) == cudaSuccess && node_func == static_cast<const void*>(k)) return true;
  (void)cudaGetLastError();
  return false;
}

}  // namespace cugraphs::detail
