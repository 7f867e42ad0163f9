// Graph-safe RNG state: a generator's (seed, offset), and what a graph records about the
// generators it draws from. Each replay posts every generator's current (seed, offset) in
// a slot of a pinned ring and advances the generator by what the graph consumes; a kernel
// at the head of the graph copies the slot into the graph-owned buffer the captured
// kernels read.
#pragma once

#include <cugraphs/detail/block_allocator.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace cugraphs::detail {

struct GeneratorState {
  std::mutex m;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  int open_captures = 0;  // captures that recorded this generator and are still open

  // The current (seed, offset), then advances the offset by `increment`.
  std::pair<std::uint64_t, std::uint64_t> take(std::uint64_t increment) {
    std::lock_guard lock(m);
    const auto now = std::pair{seed, offset};
    offset += increment;
    return now;
  }
};

// Arguments of the refresh kernel at the head of a graph that draws random numbers.
struct RngRefreshArgs {
  const unsigned long long* ring;  // slots x (1 tag + 2 x generators), pinned and mapped
  unsigned slots;
  unsigned generators;
  unsigned long long* values;       // 2 x generators: (seed, offset) read by captured kernels
  unsigned long long* consumed;     // replays consumed (device)
  unsigned long long* host_done;    // `consumed`, mirrored to pinned memory
};

// The refresh kernel, registered by an nvcc-compiled translation unit.
inline std::atomic<const void*> rng_refresh_kernel{nullptr};

inline constexpr unsigned kMaxGeneratorsPerGraph = 8;
inline constexpr unsigned kRngSlots = 64;
inline constexpr unsigned kRngSlotWidth = 1 + 2 * kMaxGeneratorsPerGraph;  // tag, then (seed, offset) pairs

// What one graph records about its generators, and the ring its replays post to.
struct GraphRng {
  struct Use {
    std::shared_ptr<GeneratorState> generator;
    std::uint64_t increment = 0;  // consumed by one replay
  };
  std::vector<Use> uses;
  void* values = nullptr;  // 2 x kMaxGeneratorsPerGraph words, then the counter
  std::shared_ptr<void> values_owner;  // device memory outside the graph's pool
  unsigned long long* consumed = nullptr;
  unsigned long long* ring = nullptr;  // pinned
  bool capturing = true;
  std::uint64_t posted = 0;

  GraphRng() = default;
  GraphRng(const GraphRng&) = delete;
  GraphRng& operator=(const GraphRng&) = delete;
  ~GraphRng() {
    end_capture();
    if (ring != nullptr) {
      wait_all();
      report_in_destructor(cudaFreeHost(ring), "cudaFreeHost (RNG ring)");
    }
  }

  [[nodiscard]] static constexpr unsigned width() { return kRngSlotWidth; }
  [[nodiscard]] volatile unsigned long long* host_done() const { return ring + kRngSlots * width(); }

  // The index of `g` among this graph's generators, recording it on first use.
  unsigned index_of(const std::shared_ptr<GeneratorState>& g, std::string_view op) {
    for (unsigned i = 0; i < uses.size(); ++i)
      if (uses[i].generator == g) return i;
    if (uses.size() == kMaxGeneratorsPerGraph)
      throw_misuse(op, "a graph may draw from at most {} generators", kMaxGeneratorsPerGraph);
    {
      std::lock_guard lock(g->m);
      ++g->open_captures;
    }
    uses.push_back({g, 0});
    return static_cast<unsigned>(uses.size() - 1);
  }

  void end_capture() noexcept {
    if (!capturing) return;
    capturing = false;
    for (auto& u : uses) {
      std::lock_guard lock(u.generator->m);
      --u.generator->open_captures;
    }
  }

  void allocate_ring() {
    check(cudaHostAlloc(reinterpret_cast<void**>(&ring), (kRngSlots * width() + 1) * sizeof(unsigned long long),
                        cudaHostAllocMapped | cudaHostAllocPortable),
          "Graph: cudaHostAlloc of the RNG ring");
    std::memset(ring, 0, (kRngSlots * width() + 1) * sizeof(unsigned long long));
  }

  // Waits until the next replay's slot is free (the replay kRngSlots posts ago took it).
  // Only the graph's own (single) thread posts, so the slot stays free until post().
  void wait_for_slot(cudaStream_t stream) const {
    for (unsigned spins = 1; static_cast<std::int64_t>(posted - *host_done()) >= kRngSlots; ++spins) {
      if (spins % 256 == 0) {
        const cudaError_t e = cudaStreamQuery(stream);
        if (e != cudaSuccess && e != cudaErrorNotReady) throw_cuda(e, "Graph::replay: waiting for a free RNG slot");
      }
      std::this_thread::yield();
    }
  }

  // Before a replay on `stream`: posts every generator's (seed, offset) for it.
  void post(cudaStream_t stream) {
    wait_for_slot(stream);
    const std::uint64_t k = posted;
    unsigned long long* slot = ring + (k % kRngSlots) * width();
    for (std::size_t i = 0; i < uses.size(); ++i) {
      const auto [seed, offset] = uses[i].generator->take(uses[i].increment);
      slot[1 + 2 * i] = seed;
      slot[2 + 2 * i] = offset;
    }
    std::atomic_ref<unsigned long long>(slot[0]).store(k + 1, std::memory_order_release);
  }
  void posted_one(cudaStream_t stream) noexcept {
    ++posted;
    last_stream = stream;
  }

  // Waits until every posted replay has taken its slot (the ring is then free to go).
  void wait_all() noexcept {
    while (*host_done() < posted) {
      const cudaError_t e = cudaStreamQuery(last_stream);
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        report_in_destructor(e, "Graph: waiting for replays in flight (RNG)");
        return;
      }
      std::this_thread::yield();
    }
  }
  cudaStream_t last_stream = nullptr;
};

}  // namespace cugraphs::detail
