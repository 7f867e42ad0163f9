// The bodies of the functions <cugraphs/detail/deferred_frees.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/deferred_frees.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE DeferredFrees& DeferredFrees::instance() {
  static DeferredFrees* d = new DeferredFrees;  // outlives every static user at exit
  return *d;
}

CUGRAPHS_INLINE void DeferredFrees::add(void* p, cudaStream_t stream) {
  std::lock_guard lock(m_);
  pending_.push_back({p, stream});
}

CUGRAPHS_INLINE void DeferredFrees::drain() noexcept {
  std::lock_guard lock(m_);
  std::erase_if(pending_, [](const Entry& e) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(e.stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone)
      return false;
    report_in_destructor(cudaFreeAsync(e.ptr, e.stream), "cudaFreeAsync (deferred past a capture)");
    return true;
  });
}

}  // namespace cugraphs::detail
