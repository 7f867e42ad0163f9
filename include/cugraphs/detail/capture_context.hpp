// Per-thread record of the captures open on this thread, so that allocations made while a
// capture is open draw from that capture's pool; and the frees of stream-ordered memory
// that must wait until their stream stops capturing.
#pragma once

#include <cugraphs/detail/pool.hpp>
#include <cugraphs/detail/rng_state.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace cugraphs::detail {

// One open conditional node of a capture: the body being captured and how it ends.
struct ConditionalFrame {
  std::uint64_t id = 0;                 // identifies the scope that opened it
  int kind = 0;                         // ConditionalKind
  cudaGraphConditionalHandle handle{};  // the node's condition
  cudaGraph_t* bodies = nullptr;        // owned by the node
  unsigned body_count = 0;
  int active = -1;                      // index of the body being captured, -1 for none
  std::vector<bool> captured;           // which bodies have been captured
  cudaStream_t parent = nullptr;        // the stream capturing the graph that holds the node
  cudaStream_t stream = nullptr;        // the stream capturing the active body
  cudaStream_t previous_current = nullptr;  // current_stream() before the frame opened
  const void* refresh = nullptr;        // While: flag re-read at the end of each iteration
};

struct CaptureContext {
  std::shared_ptr<Pool> pool;
  std::uint64_t id = 0;
  cudaStream_t stream = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  bool instantiate = true;                     // capture_end instantiates (CaptureOptions::instantiate)
  std::vector<ConditionalFrame> conditionals;  // open conditional nodes, innermost last
  std::unique_ptr<GraphRng> rng;               // generators drawn from, once one is
};

// The captures open on this thread, innermost last.
inline thread_local std::vector<CaptureContext*> tls_captures;

[[nodiscard]] inline CaptureContext* innermost_capture() noexcept {
  return tls_captures.empty() ? nullptr : tls_captures.back();
}

[[nodiscard]] inline std::uint64_t next_capture_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

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
