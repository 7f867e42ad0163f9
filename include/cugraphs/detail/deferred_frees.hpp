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
  static DeferredFrees& instance() {
    static DeferredFrees* d = new DeferredFrees;  // outlives every static user at exit
    return *d;
  }

  void add(void* p, cudaStream_t stream) {
    std::lock_guard lock(m_);
    pending_.push_back({p, stream});
  }

  // Frees every pending pointer whose stream is no longer capturing.
  void drain() noexcept {
    std::lock_guard lock(m_);
    std::erase_if(pending_, [](const Entry& e) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(e.stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone)
        return false;
      report_in_destructor(cudaFreeAsync(e.ptr, e.stream), "cudaFreeAsync (deferred past a capture)");
      return true;
    });
  }

private:
  struct Entry {
    void* ptr;
    cudaStream_t stream;
  };
  std::mutex m_;
  std::vector<Entry> pending_;
};

}  // namespace cugraphs::detail
