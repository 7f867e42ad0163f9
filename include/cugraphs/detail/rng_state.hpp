// Graph-safe RNG state: a generator's (seed, offset), and what a graph records about the
// generators it draws from. Each replay posts every generator's current (seed, offset) in
// a slot of a pinned ring and advances the generator by what the graph consumes; a kernel
// at the head of the graph copies the slot into the graph-owned buffer the captured
// kernels read.
#pragma once

#include <cugraphs/detail/block_allocator.hpp>
#include <cugraphs/detail/host_ring.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
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
  HostRing ring;  // allocated when the capture ends
  bool capturing = true;

  GraphRng() = default;
  GraphRng(const GraphRng&) = delete;
  GraphRng& operator=(const GraphRng&) = delete;
  ~GraphRng() {
    end_capture();
    // Before `values` and `consumed` go: the head kernels of replays in flight write them.
    ring.wait_all("Graph: waiting for replays in flight (RNG)");
  }

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

  void allocate_ring() { ring = HostRing(kRngSlots, kRngSlotWidth, "Graph: the RNG ring"); }

  // Waits until the next replay's slot is free.
  void wait_for_slot(cudaStream_t stream) { (void)ring.next_slot(stream, "Graph::replay (RNG)"); }

  // Before a replay on `stream`: posts every generator's (seed, offset) for it, advancing
  // each generator by what the replay consumes.
  void post(cudaStream_t stream) {
    unsigned long long* slot = ring.next_slot(stream, "Graph::replay (RNG)");
    for (std::size_t i = 0; i < uses.size(); ++i) {
      const auto [seed, offset] = uses[i].generator->take(uses[i].increment);
      slot[1 + 2 * i] = seed;
      slot[2 + 2 * i] = offset;
    }
    ring.publish(slot);
  }
  void posted_one(cudaStream_t stream) noexcept { ring.launched(stream); }
};

}  // namespace cugraphs::detail
