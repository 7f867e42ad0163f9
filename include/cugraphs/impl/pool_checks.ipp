// The bodies of the functions <cugraphs/detail/pool_checks.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/pool_checks.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE std::size_t overlap_bytes(const AddressRange& a, const AddressRange& b) noexcept {
  const std::uintptr_t lo = std::max(a.begin, b.begin), hi = std::min(a.end, b.end);
  return hi > lo ? hi - lo : 0;
}

CUGRAPHS_INLINE std::vector<AddressRange> merged(std::vector<AddressRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  std::vector<AddressRange> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.begin <= out.back().end) out.back().end = std::max(out.back().end, r.end);
    else out.push_back(r);
  }
  return out;
}

CUGRAPHS_INLINE std::size_t overlap_bytes(const std::vector<AddressRange>& a,
    const std::vector<AddressRange>& b) noexcept {
  std::size_t total = 0;
  for (const auto& x : a)
    for (const auto& y : b) total += overlap_bytes(x, y);
  return total;
}

CUGRAPHS_INLINE PoolChecks::~PoolChecks() {
  for (auto& [id, g] : graphs_)
    if (g.done != nullptr) report_in_destructor(cudaEventDestroy(g.done), "cudaEventDestroy (checked pool)");
}

CUGRAPHS_INLINE void PoolChecks::freed(std::uint64_t serial) noexcept {
  // ended_ too: another thread may free a block between a capture's end and its graph's
  // registration, and a stale output would later match whatever reuses its addresses.
  for (auto* records : {&pending_, &ended_})
    for (auto& [capture, blocks] : *records)
      for (auto& b : blocks)
        if (b.serial == serial) b.live = false;
  for (auto& [id, g] : graphs_) std::erase_if(g.outputs, [&](const Output& o) { return o.serial == serial; });
  std::erase_if(overwritten_, [&](const Overwrite& o) { return o.serial == serial; });
}

CUGRAPHS_INLINE void PoolChecks::end_capture(std::uint64_t capture, bool keep) {
  auto it = pending_.find(capture);
  if (it == pending_.end()) return;
  if (keep) ended_[capture] = std::move(it->second);
  pending_.erase(it);
}

CUGRAPHS_INLINE void PoolChecks::register_graph(std::uint64_t capture) {
  Record g;
  g.order = ++captured_;
  if (auto it = ended_.find(capture); it != ended_.end()) {
    std::vector<AddressRange> all;
    for (const auto& b : it->second) {
      all.push_back(b.range);
      if (b.live) g.outputs.push_back({b.range, b.serial});
    }
    g.footprint = merged(std::move(all));
    ended_.erase(it);
  }
  check(cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming), "checked pool: cudaEventCreateWithFlags");
  graphs_[capture] = std::move(g);
}

CUGRAPHS_INLINE void PoolChecks::forget_graph(std::uint64_t capture) noexcept {
  ended_.erase(capture);
  auto it = graphs_.find(capture);
  if (it == graphs_.end()) return;
  if (it->second.done != nullptr) report_in_destructor(cudaEventDestroy(it->second.done), "cudaEventDestroy (checked pool)");
  // The marks this graph's replays left stay: the outputs they name were overwritten all
  // the same, and stay so until their own graph replays or their buffer is freed.
  graphs_.erase(it);
}

CUGRAPHS_INLINE void PoolChecks::before_replay(std::uint64_t capture, cudaStream_t stream) const {
  const auto self = graphs_.find(capture);
  if (self == graphs_.end()) return;
  for (const auto& [id, other] : graphs_) {
    if (id == capture || !other.replayed || other.stream == stream) continue;
    const std::size_t shared = overlap_bytes(self->second.footprint, other.footprint);
    if (shared == 0) continue;
    const cudaError_t q = cudaEventQuery(other.done);
    if (q == cudaSuccess) continue;
    (void)cudaGetLastError();  // cudaErrorNotReady is an answer; a failure is thrown, not left behind
    if (q != cudaErrorNotReady) throw_cuda(q, "Graph::replay: cudaEventQuery (checked pool)");
    throw_misuse("Graph::replay",
                 "checked pool {}: graph #{} would run beside graph #{}, which shares {} bytes "
                 "of the pool with it and is still running on another stream; graphs sharing a "
                 "pool must not run concurrently. Replay them on one stream, wait for graph #{} "
                 "(synchronize its stream) first, or give them separate pools",
                 pool_id_, self->second.order, other.order, shared, other.order);
  }
}

CUGRAPHS_INLINE void PoolChecks::after_replay(std::uint64_t capture, cudaStream_t stream) {
  const auto self = graphs_.find(capture);
  if (self == graphs_.end()) return;
  Record& g = self->second;
  check(cudaEventRecord(g.done, stream), "Graph::replay: cudaEventRecord (checked pool)");
  g.stream = stream;
  g.replayed = true;
  // Its own outputs are fresh again; other graphs' live outputs inside its blocks are not.
  for (const auto& out : g.outputs) std::erase_if(overwritten_, [&](const Overwrite& o) { return o.serial == out.serial; });
  for (const auto& [id, other] : graphs_) {
    if (id == capture || !other.replayed) continue;
    for (const auto& out : other.outputs)
      for (const auto& r : g.footprint)
        if (overlap_bytes(out.range, r) != 0) mark_overwritten(out, other.order, g.order);
  }
}

CUGRAPHS_INLINE void PoolChecks::check_read(std::uintptr_t addr, std::size_t bytes, std::string_view op) const {
  const AddressRange want{addr, addr + bytes};
  for (const auto& o : overwritten_) {
    if (overlap_bytes(o.range, want) == 0) continue;
    throw_misuse(op,
                 "checked pool {}: this memory holds outputs of graph #{}, but graph #{} (captured "
                 "earlier into the same pool, whose blocks the outputs reuse) was replayed after "
                 "it and overwrote them. Graphs sharing a pool must be replayed in capture order: "
                 "use graph #{}'s outputs before replaying graph #{}, replay graph #{} again, or "
                 "give the graphs separate pools",
                 pool_id_, o.victim, o.by, o.victim, o.by, o.victim);
  }
}

CUGRAPHS_INLINE void PoolChecks::written(std::uintptr_t addr, std::size_t bytes) noexcept {
  const AddressRange range{addr, addr + bytes};
  std::erase_if(overwritten_, [&](const Overwrite& o) { return overlap_bytes(o.range, range) != 0; });
}

CUGRAPHS_INLINE void PoolChecks::mark_overwritten(const Output& out, std::uint64_t victim, std::uint64_t by) {
  for (auto& o : overwritten_)
    if (o.serial == out.serial) {
      o.by = by;
      return;
    }
  overwritten_.push_back({out.range, out.serial, victim, by});
}

}  // namespace cugraphs::detail
