// Checked mode of a graph pool: what each graph captured into the pool uses, and the two
// ways graphs sharing a pool corrupt each other, caught before or where they would be seen.
//   1. Concurrent replays. A graph replayed on one stream while another graph whose blocks
//      overlap its own is still running on a different stream: refused at replay.
//   2. Out-of-order replays. A graph replayed after a graph captured later into the pool
//      overwrites that graph's outputs where its own blocks (usually its temporaries) were
//      reused for them. That is harmless if the outputs were used before, so the replay is
//      allowed; the outputs are marked overwritten, and reading them through cugraphs (a
//      host copy of the buffer, or passing them to a graphed callable of the pool) is
//      refused until the graph that owns them is replayed again.
// Everything here runs under the pool's mutex, except the CUDA event calls' effects.
#pragma once

#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs::detail {

// A map from capture ids to V as a sorted vector: a pool knows few graphs, and <map> would
// cost every translation unit that includes cugraphs its compile time.
template <class V>
class IdMap {
public:
  using value_type = std::pair<std::uint64_t, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  [[nodiscard]] iterator begin() noexcept { return items_.begin(); }
  [[nodiscard]] iterator end() noexcept { return items_.end(); }
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }
  [[nodiscard]] iterator find(std::uint64_t id) { return items_.begin() + std::as_const(*this).index_of(id); }
  [[nodiscard]] const_iterator find(std::uint64_t id) const { return items_.begin() + index_of(id); }
  V& operator[](std::uint64_t id) {
    auto it = lower(id);
    if (it == items_.end() || it->first != id) it = items_.insert(it, value_type{id, V{}});
    return it->second;
  }
  iterator erase(iterator it) { return items_.erase(it); }
  void erase(std::uint64_t id) {
    if (const auto it = find(id); it != items_.end()) items_.erase(it);
  }

private:
  iterator lower(std::uint64_t id) { return items_.begin() + lower_index(id); }
  [[nodiscard]] std::ptrdiff_t lower_index(std::uint64_t id) const {
    return std::lower_bound(items_.begin(), items_.end(), id,
                            [](const value_type& a, std::uint64_t b) { return a.first < b; }) -
           items_.begin();
  }
  // Where `id` is, or size() when absent.
  [[nodiscard]] std::ptrdiff_t index_of(std::uint64_t id) const {
    const std::ptrdiff_t i = lower_index(id);
    return i != static_cast<std::ptrdiff_t>(items_.size()) && items_[static_cast<std::size_t>(i)].first == id
               ? i
               : static_cast<std::ptrdiff_t>(items_.size());
  }
  std::vector<value_type> items_;
};

struct AddressRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;  // one past the last byte
};

[[nodiscard]] std::size_t overlap_bytes(const AddressRange& a, const AddressRange& b) noexcept;

// Sorted, non-overlapping union of `ranges`.
[[nodiscard]] std::vector<AddressRange> merged(std::vector<AddressRange> ranges);

[[nodiscard]] std::size_t overlap_bytes(const std::vector<AddressRange>& a,
                                               const std::vector<AddressRange>& b) noexcept;

class PoolChecks {
public:
  explicit PoolChecks(std::uint64_t pool_id) : pool_id_(pool_id) {}
  PoolChecks(const PoolChecks&) = delete;
  PoolChecks& operator=(const PoolChecks&) = delete;
  ~PoolChecks();

  // A block handed out to capture `capture` (serial: unique per allocation).
  void allocated(std::uint64_t capture, std::uintptr_t addr, std::size_t size, std::uint64_t serial) {
    pending_[capture].push_back({{addr, addr + size}, serial, true});
  }

  // A block given back; `serial` identifies the allocation.
  void freed(std::uint64_t serial) noexcept;

  // The capture ended; `keep`: it produced a graph (register_graph follows).
  void end_capture(std::uint64_t capture, bool keep);

  // The graph of capture `capture` exists: from now on its replays are checked.
  void register_graph(std::uint64_t capture);

  void forget_graph(std::uint64_t capture) noexcept;

  // Before graph `capture` is launched on `stream`: refuses a launch that would run beside
  // an overlapping graph still running on another stream.
  void before_replay(std::uint64_t capture, cudaStream_t stream) const;

  // After graph `capture` was launched on `stream`.
  void after_replay(std::uint64_t capture, cudaStream_t stream);

  // Reading [addr, addr + bytes) through cugraphs: refused where a graph's outputs there
  // were overwritten by a later replay of another graph.
  void check_read(std::uintptr_t addr, std::size_t bytes, std::string_view op) const;

  // [addr, addr + bytes) was written through cugraphs (a host copy): fresh again.
  void written(std::uintptr_t addr, std::size_t bytes) noexcept;

private:
  struct Output;
  void mark_overwritten(const Output& out, std::uint64_t victim, std::uint64_t by);

  struct Allocation {
    AddressRange range;
    std::uint64_t serial = 0;
    bool live = true;  // still allocated when the capture ended: an output of the graph
  };
  struct Output {
    AddressRange range;
    std::uint64_t serial = 0;
  };
  struct Record {
    std::uint64_t order = 0;                // 1 for the first graph captured into the pool
    std::vector<AddressRange> footprint;    // every block it used, merged
    std::vector<Output> outputs;            // blocks still allocated after its capture
    cudaEvent_t done = nullptr;             // recorded after its last replay
    cudaStream_t stream = nullptr;          // of its last replay
    bool replayed = false;
  };
  struct Overwrite {
    AddressRange range;
    std::uint64_t serial = 0;   // the overwritten allocation
    std::uint64_t victim = 0;   // order of the graph whose output it is
    std::uint64_t by = 0;       // order of the graph whose replay overwrote it
  };

  std::uint64_t pool_id_;
  std::uint64_t captured_ = 0;
  IdMap<std::vector<Allocation>> pending_;  // open captures
  IdMap<std::vector<Allocation>> ended_;    // ended, graph not yet registered
  IdMap<Record> graphs_;                    // by capture id
  std::vector<Overwrite> overwritten_;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/pool_checks.ipp>
#endif
