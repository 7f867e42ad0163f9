// The bodies of the functions <cugraphs/memory.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/memory.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs {

CUGRAPHS_INLINE PoolHandle graph_pool_handle(int device, const PoolOptions& opts) {
  if (device < 0 || device >= detail::device_count())
    detail::throw_cuda(cudaErrorInvalidDevice, detail::format("graph_pool_handle({}): no such device", device));
  return PoolHandle(std::make_shared<detail::Pool>(device, opts.checked));
}

}  // namespace cugraphs
