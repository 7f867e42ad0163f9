// Frees of stream-ordered memory that must wait until their stream stops capturing.
#pragma once

#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <mutex>
#include <vector>

namespace cugraphs::detail {

// Frees of stream-ordered allocations whose stream was capturing at the time: issuing
// cudaFreeAsync then would put the free into the graph. They run once the stream's
// capture has ended.
class DeferredFrees {
public:
  static DeferredFrees& instance();

  void add(void* p, cudaStream_t stream);

  // Frees every pending pointer whose stream is no longer capturing.
  void drain() noexcept;

private:
  struct Entry {
    void* ptr;
    cudaStream_t stream;
  };
  std::mutex m_;
  std::vector<Entry> pending_;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/deferred_frees.ipp>
#endif
