// The bodies of the functions <cugraphs/detail/graph_queries.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/kernel_args.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>

#include <cuda.h>  // types only: the driver is reached through the runtime's entry points

#if defined(__linux__) && defined(__GLIBC__)
#  include <pthread.h>
#  define CUGRAPHS_DETAIL_HAS_STACK_BOUNDS 1
#else
#  define CUGRAPHS_DETAIL_HAS_STACK_BOUNDS 0
#endif

#if __has_include(<cxxabi.h>)
#  include <cxxabi.h>
#  define CUGRAPHS_DETAIL_HAS_CXXABI 1
#else
#  define CUGRAPHS_DETAIL_HAS_CXXABI 0
#endif

namespace cugraphs::detail {

namespace graph_queries_detail {

// The nodes of `g` (or its roots) into `out`; CUDA's error, left on the thread, if it fails.
inline cudaError_t try_graph_nodes(cudaGraph_t g, bool roots, std::vector<cudaGraphNode_t>& out) {
  const auto get = roots ? cudaGraphGetRootNodes : cudaGraphGetNodes;
  std::size_t n = 0;
  if (const cudaError_t e = get(g, nullptr, &n); e != cudaSuccess) return e;
  out.assign(n, nullptr);
  if (n != 0)
    if (const cudaError_t e = get(g, out.data(), &n); e != cudaSuccess) return e;
  out.resize(n);
  return cudaSuccess;
}

// Every edge of `g`: its sources, its targets and their data, index by index. The edges'
// data is asked for too: without it CUDA refuses the query (cudaErrorLossyQuery) on a graph
// that holds edges other than plain ones, the programmatic edges of a captured PDL launch say.
struct Edges {
  std::vector<cudaGraphNode_t> from, to;
  std::vector<cudaGraphEdgeData> data;
};
inline cudaError_t try_graph_edges(cudaGraph_t g, Edges& e) {
  std::size_t n = 0;
  const auto edges = [&](cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* data) {
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
    return cudaGraphGetEdges(g, from, to, data, &n);
#else
    return cudaGraphGetEdges_v2(g, from, to, data, &n);  // CUDA 12.3 to 12.9
#endif
  };
  if (const cudaError_t r = edges(nullptr, nullptr, nullptr); r != cudaSuccess) return r;
  e.from.assign(n, nullptr);
  e.to.assign(n, nullptr);
  e.data.assign(n, cudaGraphEdgeData{});
  if (n != 0)
    if (const cudaError_t r = edges(e.from.data(), e.to.data(), e.data.data()); r != cudaSuccess) return r;
  e.from.resize(n);
  e.to.resize(n);
  e.data.resize(n);
  return cudaSuccess;
}
inline Edges graph_edges(cudaGraph_t g, std::string_view op) {
  Edges e;
  check(try_graph_edges(g, e), "{}: cudaGraphGetEdges", op);
  return e;
}

// `name` demangled where the C++ runtime can, else as it is.
inline std::string demangled(const char* name) {
#if CUGRAPHS_DETAIL_HAS_CXXABI
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  if (status == 0 && d) return d.get();
#endif
  return name;
}

}  // namespace graph_queries_detail

CUGRAPHS_INLINE std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g, std::string_view op, bool roots) {
  std::vector<cudaGraphNode_t> nodes;
  check(graph_queries_detail::try_graph_nodes(g, roots, nodes), "{}: {}", op,
        roots ? "cudaGraphGetRootNodes" : "cudaGraphGetNodes");
  return nodes;
}

CUGRAPHS_INLINE std::vector<cudaGraphNode_t> graph_sinks(cudaGraph_t g, std::string_view op) {
  const auto e = graph_queries_detail::graph_edges(g, op);
  // Only an edge that waits for its source's completion orders the source's end.
  std::vector<cudaGraphNode_t> waited;
  for (std::size_t i = 0; i < e.from.size(); ++i)
    if (e.data[i].type == cudaGraphDependencyTypeDefault && e.data[i].from_port == cudaGraphKernelNodePortDefault)
      waited.push_back(e.from[i]);
  std::ranges::sort(waited);
  std::vector<cudaGraphNode_t> sinks;
  for (cudaGraphNode_t node : graph_nodes(g, op))
    if (!std::ranges::binary_search(waited, node)) sinks.push_back(node);
  return sinks;
}

CUGRAPHS_INLINE std::optional<std::vector<cudaGraphNode_t>> not_before(cudaGraph_t g,
    std::span<const cudaGraphNode_t> after, std::span<const cudaGraphNode_t> candidates) noexcept {
  std::vector<cudaGraphNode_t> out;
  for (cudaGraphNode_t c : candidates)
    if (std::ranges::find(after, c) == after.end()) out.push_back(c);
  if (out.empty()) return out;
  // Walk back from `after` along the edges, sorted by target.
  graph_queries_detail::Edges e;
  std::vector<cudaGraphNode_t> nodes;
  if (graph_queries_detail::try_graph_edges(g, e) != cudaSuccess ||
      graph_queries_detail::try_graph_nodes(g, false, nodes) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> back;  // (to, from)
  back.reserve(e.from.size());
  for (std::size_t i = 0; i < e.from.size(); ++i) back.emplace_back(e.to[i], e.from[i]);
  std::ranges::sort(back);
  std::ranges::sort(nodes);
  std::vector<bool> seen(nodes.size());
  const auto visit = [&](cudaGraphNode_t n) {  // false when seen before
    const auto at = std::ranges::lower_bound(nodes, n);
    if (at == nodes.end() || *at != n) return true;  // not at the top level: no edges to follow
    const auto i = static_cast<std::size_t>(at - nodes.begin());
    if (seen[i]) return false;
    seen[i] = true;
    return true;
  };
  std::vector<cudaGraphNode_t> todo;
  for (cudaGraphNode_t n : after)
    if (visit(n)) todo.push_back(n);
  while (!todo.empty() && !out.empty()) {
    const cudaGraphNode_t n = todo.back();
    todo.pop_back();
    const auto first = std::ranges::lower_bound(back, std::pair<cudaGraphNode_t, cudaGraphNode_t>(n, nullptr));
    for (auto it = first; it != back.end() && it->first == n; ++it) {
      if (!visit(it->second)) continue;
      todo.push_back(it->second);
      std::erase(out, it->second);
    }
  }
  return out;
}

CUGRAPHS_INLINE std::string describe_node(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) {
    (void)cudaGetLastError();
    return "a node";
  }
  std::string what(node_type_name(type));
#if CUGRAPHS_CTK_AT_LEAST(12, 4)  // cudaFuncGetName
  if (type == cudaGraphNodeTypeKernel) {
    cudaKernelNodeParams p{};
    const char* name = nullptr;
    if (cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess && cudaFuncGetName(&name, p.func) == cudaSuccess &&
        name != nullptr)
      return format("kernel {}", graph_queries_detail::demangled(name));
    (void)cudaGetLastError();
  }
#endif
  return what + " node";
}

CUGRAPHS_INLINE std::size_t node_count(cudaGraph_t g, std::string_view op) {
  std::size_t n = 0;
  check(cudaGraphGetNodes(g, nullptr, &n), "{}: cudaGraphGetNodes", op);
  return n;
}

CUGRAPHS_INLINE std::optional<std::size_t> node_index(cudaGraph_t g, cudaGraphNode_t node, std::string_view op) {
  const auto nodes = graph_nodes(g, op);
  for (std::size_t i = nodes.size(); i-- > 0;)
    if (nodes[i] == node) return i;
  return std::nullopt;
}

namespace graph_queries_detail {

// The address ranges (base, bytes) that the memory-allocation nodes of `g` and of the child
// graphs inside it hand out, appended to `out`. A node that cannot be read is passed over; the
// first such failure is returned (and left on the thread).
using Ranges = std::vector<std::pair<std::uintptr_t, std::size_t>>;
inline cudaError_t try_graph_allocations(cudaGraph_t g, Ranges& out) {
  std::vector<cudaGraphNode_t> nodes;
  if (const cudaError_t e = try_graph_nodes(g, false, nodes); e != cudaSuccess) return e;
  cudaError_t first = cudaSuccess;
  const auto note = [&](cudaError_t e) {
    if (first == cudaSuccess) first = e;
    return e == cudaSuccess;
  };
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t{};
    if (!note(cudaGraphNodeGetType(node, &t))) continue;
    if (cudaMemAllocNodeParams a{}; t == cudaGraphNodeTypeMemAlloc && note(cudaGraphMemAllocNodeGetParams(node, &a)))
      out.emplace_back(reinterpret_cast<std::uintptr_t>(a.dptr), a.bytesize);
    else if (cudaGraph_t child = nullptr;
             t == cudaGraphNodeTypeGraph && note(cudaGraphChildGraphNodeGetGraph(node, &child)))
      (void)note(try_graph_allocations(child, out));
  }
  return first;
}

// This thread's stack, [first, second), where the platform tells it ({0, 0} elsewhere).
inline std::pair<std::uintptr_t, std::uintptr_t> thread_stack() noexcept {
#if CUGRAPHS_DETAIL_HAS_STACK_BOUNDS
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return {0, 0};
  void* base = nullptr;
  std::size_t bytes = 0;
  const int e = pthread_attr_getstack(&attr, &base, &bytes);
  (void)pthread_attr_destroy(&attr);
  if (e != 0) return {0, 0};
  const auto low = reinterpret_cast<std::uintptr_t>(base);
  return {low, low + bytes};
#else
  return {0, 0};
#endif
}

// This process's mappings that the host can use (read, write or run), from /proc/self/maps:
// none, and `known` false, where there is none to read (not Linux). The CUDA driver reserves device
// address space with no access and keeps freed device memory there, while pageable host
// memory is readable (measured: tools/diagnostics/freed_mapping.cu).
struct HostMappings {
  bool known = false;  // the map was read
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> usable;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> reserved;  // no access: address space set aside
};
inline HostMappings read_host_mappings() {
  HostMappings out;
#if defined(__linux__)
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return out;
  bool line_start = true;
  char line[1024];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    const bool at_start = std::exchange(line_start, std::strchr(line, '\n') != nullptr);
    unsigned long long low = 0, high = 0;  // NOLINT(google-runtime-int): %llx
    char access[5] = {};
    if (at_start && std::sscanf(line, "%llx-%llx %4s", &low, &high, access) == 3)
      (std::string_view(access, 3) != "---" ? out.usable : out.reserved)
          .emplace_back(static_cast<std::uintptr_t>(low), static_cast<std::uintptr_t>(high));
  }
  (void)std::fclose(maps);
  out.known = true;
#endif
  return out;
}

// Whether the host cannot use `p`: the map was read and no usable mapping holds it.
inline bool host_unusable(const HostMappings& maps, const void* p) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  return maps.known && std::ranges::none_of(maps.usable, [&](const auto& m) { return m.first <= address && address < m.second; });
}

// The no-access mapping that holds `p`, if one does.
inline std::optional<std::pair<std::uintptr_t, std::uintptr_t>> reservation(const HostMappings& maps,
                                                                             std::uintptr_t p) noexcept {
  const auto r = std::ranges::find_if(maps.reserved, [&](const auto& m) { return m.first <= p && p < m.second; });
  if (r == maps.reserved.end()) return std::nullopt;
  return *r;
}

inline bool in_ranges(const Ranges& ranges, const void* p) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  return std::ranges::any_of(ranges, [&](const auto& r) { return address - r.first < r.second; });
}

// The allocations of the graphs cugraphs holds, by owner.
struct HeldAllocations {
  std::mutex m;
  std::vector<std::pair<const void*, Ranges>> graphs;
};
inline HeldAllocations& held_allocations() {
  static auto* held = new HeldAllocations;  // never destroyed: graphs may outlive static destruction
  return *held;
}

}  // namespace graph_queries_detail

CUGRAPHS_INLINE bool hold_graph_allocations(const void* owner, cudaGraph_t g) noexcept {
  CUGRAPHS_TRY {
    graph_queries_detail::Ranges ranges;
    if (graph_queries_detail::try_graph_allocations(g, ranges) != cudaSuccess) (void)cudaGetLastError();
    if (ranges.empty()) return false;
    auto& held = graph_queries_detail::held_allocations();
    const std::lock_guard lock(held.m);
    held.graphs.emplace_back(owner, std::move(ranges));
    return true;
  } CUGRAPHS_CATCH_ALL {
    return false;
  }
}

CUGRAPHS_INLINE void release_graph_allocations(const void* owner) noexcept {
  CUGRAPHS_TRY {
    auto& held = graph_queries_detail::held_allocations();
    const std::lock_guard lock(held.m);
    std::erase_if(held.graphs, [&](const auto& g) { return g.first == owner; });
  } CUGRAPHS_CATCH_ALL {
  }
}

CUGRAPHS_INLINE bool held_graph_allocation(const void* p) noexcept {
  CUGRAPHS_TRY {
    auto& held = graph_queries_detail::held_allocations();
    const std::lock_guard lock(held.m);
    return std::ranges::any_of(held.graphs,
                               [&](const auto& g) { return graph_queries_detail::in_ranges(g.second, p); });
  } CUGRAPHS_CATCH_ALL {
    return false;
  }
}

CUGRAPHS_INLINE bool graph_allocates(cudaGraph_t graph, const void* p, std::string_view op) {
  return graph_queries_detail::in_ranges(graph_allocation_ranges(graph, op), p);
}

CUGRAPHS_INLINE std::vector<std::pair<std::uintptr_t, std::size_t>> graph_allocation_ranges(cudaGraph_t graph,
                                                                                             std::string_view op) {
  graph_queries_detail::Ranges ranges;
  check(graph_queries_detail::try_graph_allocations(graph, ranges), "{}: reading the graph's allocation nodes", op);
  return ranges;
}

CUGRAPHS_INLINE bool host_unusable(const void* p) noexcept {
  CUGRAPHS_TRY {
    return graph_queries_detail::host_unusable(graph_queries_detail::read_host_mappings(), p);
  } CUGRAPHS_CATCH_ALL {
    return false;
  }
}

CUGRAPHS_INLINE bool host_reserved(const void* p) noexcept {
  CUGRAPHS_TRY {
    return graph_queries_detail::reservation(graph_queries_detail::read_host_mappings(),
                                             reinterpret_cast<std::uintptr_t>(p))
        .has_value();
  } CUGRAPHS_CATCH_ALL {
    return false;
  }
}

CUGRAPHS_INLINE bool plain_pageable(const void* p,
                                    std::span<const std::pair<std::uintptr_t, std::size_t>> excluded) noexcept {
  if (p == nullptr) return false;
  RelaxedCaptureMode relaxed;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  return a.type == cudaMemoryTypeUnregistered &&
         std::ranges::none_of(excluded, [&](const auto& r) { return address - r.first < r.second; }) &&
         !held_graph_allocation(p);
}

namespace graph_queries_detail {

// The addresses a walk of graph `g`'s copies and memsets meets, judged: `unknown` where CUDA
// knows no memory there and no allocation of `g` or of a graph cugraphs holds lies there
// (plain pageable host memory, or nothing); `freed` where the host cannot use such an
// address either (nothing backs it). The process's map is read once, at the first address
// that needs it.
class AddressJudge {
public:
  explicit AddressJudge(cudaGraph_t g) { (void)try_graph_allocations(g, allocations_); }
  [[nodiscard]] bool unknown(const void* p) const noexcept { return plain_pageable(p, allocations_); }
  [[nodiscard]] bool freed(const void* p) { return unknown(p) && host_unusable_known(p); }
  // For an address already found unknown.
  [[nodiscard]] bool host_unusable_known(const void* p) { return host_unusable(maps(), p); }
  // Whether an allocation of `g` or of a graph cugraphs holds lies at `p`.
  [[nodiscard]] bool graph_allocated(const void* p) const noexcept {
    return in_ranges(allocations_, p) || held_graph_allocation(p);
  }
  [[nodiscard]] const HostMappings& maps() {
    if (!maps_) maps_ = read_host_mappings();
    return *maps_;
  }

private:
  Ranges allocations_;
  std::optional<HostMappings> maps_;
};

// Whether `p` lies in memory a memory pool (cudaMallocAsync's, a cudaMemPool_t's) handed out;
// true where the driver cannot say.
inline bool pool_memory(std::uintptr_t p) noexcept {
  using GetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  static const auto get = reinterpret_cast<GetAttribute>(quiet_driver_entry_point("cuPointerGetAttribute", 12000));
  CUmemoryPool pool = nullptr;
  return get == nullptr ||
         (get(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, static_cast<CUdeviceptr>(p)) == CUDA_SUCCESS && pool != nullptr);
}

// The allocation that holds `p` as the driver records it: its start and its end (one past its
// last byte); {0, 0} where it knows none there or cannot say.
inline std::pair<std::uintptr_t, std::uintptr_t> allocation_range(std::uintptr_t p) noexcept {
  using GetRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  static const auto get = reinterpret_cast<GetRange>(quiet_driver_entry_point("cuMemGetAddressRange", 12000));
  CUdeviceptr base = 0;
  std::size_t bytes = 0;
  if (get == nullptr || get(&base, &bytes, static_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return {0, 0};
  return {static_cast<std::uintptr_t>(base), static_cast<std::uintptr_t>(base) + bytes};
}
inline std::uintptr_t allocation_end(std::uintptr_t p) noexcept { return allocation_range(p).second; }

// Whether an allocation starts in the 64 bytes after `at`, which no allocation holds: `at` is
// then a pointer moved back from that allocation's start, as for indexing from 1 (`a - 1`) or
// from a halo, not freed memory. A freed block's own start never reads so: cudaMalloc's blocks
// are at least 256 bytes apart.
inline bool just_before_allocation(std::uintptr_t at) noexcept {
  for (std::uintptr_t ahead = 8; ahead <= 64; ahead += 8)
    if (const auto [start, end] = allocation_range(at + ahead); end != 0) return start > at;
  return false;
}

// The 8-byte words of a Relaxed capture's kernels' arguments (pointers among them, also inside
// structures), gathered over the audit's walk and judged after it. A word reads as freed memory
// where CUDA knows no memory there, no allocation of the graph or of a graph cugraphs holds
// lies there, it is not the end of an allocation that the same kernel names (an end pointer)
// nor just before the start of one (a pointer indexed from 1), and it lies in a reservation of
// CUDA's (a no-access mapping: freed device memory stays in one, measured by
// tools/diagnostics/freed_mapping.cu) that also holds live memory of cudaMalloc's that the
// graph names. That last condition keeps out 64-bit values that are not addresses: a pair of
// ints (a shape {n, 8}) falls in the huge reservation that memory pools and graph allocations
// draw from, where cudaMalloc's memory does not lie.
class FreedArguments {
public:
  void look(cudaGraphNode_t node, std::size_t index, const char* where, const AddressJudge& judge) {
    if (!reader_.read(node, params_)) return;
    kernel_.clear();
    for (std::size_t k = 0; k < params_.size(); ++k)
      for (std::size_t at = 0; at + 8 <= params_[k].size(); at += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, params_[k].data() + at, sizeof w);
        if (w < kLowest || w >= kBeyond) continue;
        const auto* p = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(w));
        cudaPointerAttributes a{};
        if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
          (void)cudaGetLastError();
          continue;
        }
        if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeUnregistered) continue;
        if (judge.graph_allocated(p)) continue;
        kernel_.push_back({static_cast<std::uintptr_t>(w), k, at, a.type == cudaMemoryTypeDevice, params_[k].size()});
      }
    for (const Word& w : kernel_) {
      if (w.device) {
        if (live_.size() < kMost) live_.push_back(w.value);
      } else if (suspects_.size() < kMost && !seen_.contains(w.value) && !ends_named(w.value) &&
                 !before_start(w.value)) {
        // An end pointer here may be a suspect in another kernel: only suspects are seen.
        seen_.insert(w.value);
        suspects_.push_back({w.value, node, index, where, w.param, w.offset, w.param_bytes});
      }
    }
  }

  [[nodiscard]] std::optional<std::string> found(AddressJudge& judge) {
    if (suspects_.empty() || live_.empty()) return std::nullopt;
    std::ranges::sort(live_);
    live_.erase(std::unique(live_.begin(), live_.end()), live_.end());
    // Whether a reservation holds live cudaMalloc memory the graph names, asked once a reservation.
    std::vector<std::pair<std::uintptr_t, bool>> rooms;
    for (const Suspect& s : suspects_) {
      const auto room = reservation(judge.maps(), s.at);
      if (!room) continue;
      auto known = std::ranges::find(rooms, room->first, &std::pair<std::uintptr_t, bool>::first);
      if (known == rooms.end()) {
        const auto from = std::ranges::lower_bound(live_, room->first);
        const auto to = std::ranges::lower_bound(live_, room->second);
        known = rooms.insert(rooms.end(), {room->first, std::any_of(from, to, [](std::uintptr_t l) { return !pool_memory(l); })});
      }
      if (!known->second) continue;
      const std::string inside = s.param_bytes == 8 ? std::string{} : format(" at byte {}", s.offset);
      return format("node {}{}, {}: its argument {} holds device address {}{}, which no allocation backs", s.index,
                    s.where, describe_node(s.node), s.param, reinterpret_cast<const void*>(s.at), inside);
    }
    return std::nullopt;
  }

private:
  static constexpr std::uint64_t kLowest = 1ULL << 16;  // below: counts and flags, not addresses
  static constexpr std::uint64_t kBeyond = 1ULL << 48;  // at and above: no user address (x86-64, aarch64)
  static constexpr std::size_t kMost = 1 << 16;

  struct Word {
    std::uintptr_t value;
    std::size_t param, offset;
    bool device;
    std::size_t param_bytes;
  };
  struct Suspect {
    std::uintptr_t at;
    cudaGraphNode_t node;
    std::size_t index;
    const char* where;  // a literal of the walk's
    std::size_t param, offset, param_bytes;
  };

  // Whether `at` is the end of an allocation that the kernel being read names (an end pointer).
  [[nodiscard]] bool ends_named(std::uintptr_t at) const noexcept {
    return std::ranges::any_of(kernel_, [&](const Word& w) { return w.device && w.value < at && allocation_end(w.value) == at; });
  }

  // just_before_allocation, asked once a word (up to 8 driver calls; a pointer indexed from 1
  // is often handed to every kernel of a step). It does not depend on the kernel.
  [[nodiscard]] bool before_start(std::uintptr_t at) {
    if (before_.contains(at)) return true;
    if (!just_before_allocation(at)) return false;
    before_.insert(at);
    return true;
  }

  ArgumentReader reader_;
  std::vector<std::span<const std::byte>> params_;
  std::vector<Word> kernel_;  // the words of the kernel being read that CUDA knows or knows nothing of
  std::vector<Suspect> suspects_;
  std::unordered_set<std::uintptr_t> seen_;    // the suspects' addresses
  std::unordered_set<std::uintptr_t> before_;  // words found just before an allocation's start
  std::vector<std::uintptr_t> live_;
};

}  // namespace graph_queries_detail

CUGRAPHS_INLINE std::optional<std::string> unbacked_memset(cudaGraph_t g, cudaGraphNode_t failed) noexcept {
  RelaxedCaptureMode relaxed;
  std::optional<std::string> found;
  CUGRAPHS_TRY {
    graph_queries_detail::AddressJudge judge(g);
    const auto freed = [&](cudaGraphNode_t node, cudaMemsetParams& m) {
      cudaGraphNodeType t{};
      return cudaGraphNodeGetType(node, &t) == cudaSuccess && t == cudaGraphNodeTypeMemset &&
             cudaGraphMemsetNodeGetParams(node, &m) == cudaSuccess && judge.freed(m.dst);
    };
    const auto walk = [&](const auto& self, cudaGraph_t graph, std::string_view where) -> void {
      std::vector<cudaGraphNode_t> nodes;
      if (graph_queries_detail::try_graph_nodes(graph, false, nodes) != cudaSuccess) return;
      for (std::size_t i = 0; i < nodes.size() && !found; ++i) {
        cudaMemsetParams m{};
        cudaGraph_t child = nullptr;
        if (freed(nodes[i], m))
          found = format("memset node {}{} sets device address {}", i, where, m.dst);
        else if (cudaGraphChildGraphNodeGetGraph(nodes[i], &child) == cudaSuccess)
          self(self, child, " of a child graph");
      }
    };
    if (cudaMemsetParams m{}; failed != nullptr && freed(failed, m))
      found = format("that memset sets device address {}", m.dst);
    else if (failed == nullptr)
      walk(walk, g, "");
  } CUGRAPHS_CATCH_ALL {
  }
  (void)cudaGetLastError();  // the queries' own failures are not the caller's
  return found;
}

CUGRAPHS_INLINE CaptureAudit audit_capture(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                           std::uintptr_t gone_below, bool escapes, bool kernels) noexcept {
  RelaxedCaptureMode relaxed;  // another capture may be open on this thread or, in Global mode, on others
  // This thread's stack below `gone_below` (frames that returned while the capture was open),
  // read at the first host node: empty where unknown, or where the capture's entry points ran
  // on another stack (a fiber's) than the thread's.
  std::optional<std::pair<std::uintptr_t, std::uintptr_t>> gone;
  const auto on_gone_frame = [&](const void* p) {
    if (gone_below == 0 || p == nullptr) return false;
    if (!gone) {
      const auto [low, high] = graph_queries_detail::thread_stack();
      gone = low <= gone_below && gone_below < high ? std::pair{low, gone_below} : std::pair{std::uintptr_t{0}, std::uintptr_t{0}};
    }
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    return gone->first <= address && address < gone->second;
  };
  // g's allocations, found once (those that can be read), and the process's map, read once.
  graph_queries_detail::AddressJudge judge(g);
  std::optional<graph_queries_detail::FreedArguments> arguments;
  if (kernels) arguments.emplace();
  CaptureAudit found;
  std::string name;
  // A node that cannot be read (a kind of copy this runtime does not describe) is passed over.
  const auto walk = [&](const auto& self, cudaGraph_t graph, const char* where) -> void {
    std::vector<cudaGraphNode_t> nodes;
    if (graph_queries_detail::try_graph_nodes(graph, false, nodes) != cudaSuccess) return;
    // A pageable or unbacked copy is reported before a cuRAND kernel (its Error comes first):
    // the walk goes on past a kernel found, and stops at the first copy.
    for (std::size_t i = 0; i < nodes.size() && !found.pageable && !found.unbacked; ++i) {
      cudaGraphNodeType t{};
      if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) continue;
      if (t == cudaGraphNodeTypeKernel) {
        if (const auto kind = found.curand || !escapes ? CurandHostKernel::none : curand_host_kernel(nodes[i], name);
            kind != CurandHostKernel::none) {
          found.curand = format("kernel node {}{} runs {}", i, where, graph_queries_detail::demangled(name.c_str()));
          found.curand_seeds = kind == CurandHostKernel::seeds;
        }
        if (arguments) arguments->look(nodes[i], i, where, judge);
      } else if (cudaHostNodeParams h{}; t == cudaGraphNodeTypeHost && escapes) {
        if (!found.stack_data && cudaGraphHostNodeGetParams(nodes[i], &h) == cudaSuccess && on_gone_frame(h.userData))
          found.stack_data = format("host function node {}{} (a cudaLaunchHostFunc) is handed {}", i, where, h.userData);
      } else if (t == cudaGraphNodeTypeMemcpy) {
        cudaMemcpy3DParms p{};
        if (cudaGraphMemcpyNodeGetParams(nodes[i], &p) != cudaSuccess) continue;
        const std::size_t bytes = p.extent.width * std::max<std::size_t>(p.extent.height, 1) *
                                  std::max<std::size_t>(p.extent.depth, 1);
        if (bytes == 0) continue;
        // Each side CUDA does not know is judged by the host's map: device memory that nothing
        // backs where the host cannot use it (whatever the copy's kind says: on systems where
        // devices reach pageable memory, a device side may be host memory), plain pageable
        // host memory where the host can and the kind does not name the side as device memory.
        const bool src_device = p.kind == cudaMemcpyDeviceToDevice || p.kind == cudaMemcpyDeviceToHost;
        const bool dst_device = p.kind == cudaMemcpyDeviceToDevice || p.kind == cudaMemcpyHostToDevice;
        const bool src_unknown = p.srcArray == nullptr && judge.unknown(p.srcPtr.ptr);
        const bool dst_unknown = p.dstArray == nullptr && judge.unknown(p.dstPtr.ptr);
        const bool src_freed = src_unknown && judge.host_unusable_known(p.srcPtr.ptr);
        const bool dst_freed = dst_unknown && judge.host_unusable_known(p.dstPtr.ptr);
        if (src_freed)
          found.unbacked = format("memcpy node {}{}: {} bytes from device address {}, which no allocation backs",
                                  i, where, bytes, p.srcPtr.ptr);
        else if (dst_freed)
          found.unbacked = format("memcpy node {}{}: {} bytes to device address {}, which no allocation backs",
                                  i, where, bytes, p.dstPtr.ptr);
        else if (escapes && !src_device && src_unknown)
          found.pageable = format("memcpy node {}{}: {} bytes from host address {} reads plain pageable host memory",
                                  i, where, bytes, p.srcPtr.ptr);
        else if (escapes && !dst_device && dst_unknown)
          found.pageable = format("memcpy node {}{}: {} bytes to host address {} writes plain pageable host memory",
                                  i, where, bytes, p.dstPtr.ptr);
      } else if (cudaGraph_t child = nullptr;
                 t == cudaGraphNodeTypeGraph && cudaGraphChildGraphNodeGetGraph(nodes[i], &child) == cudaSuccess) {
        self(self, child, " of a child graph");
      }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
      else if (t == cudaGraphNodeTypeConditional) {
        for (const ConditionalMade& c : conditionals)
          if (c.node == nodes[i])
            for (cudaGraph_t body : c.bodies) self(self, body, " of a conditional body");
      }
#endif
    }
  };
  CUGRAPHS_TRY {
    walk(walk, g, "");
    if (arguments && !found.unbacked && !found.pageable) found.unbacked_kernel = arguments->found(judge);
  } CUGRAPHS_CATCH_ALL {
    // Out of memory while describing: whatever was found stands.
  }
  (void)cudaGetLastError();  // the queries' own failures are not the caller's
  return found;
}

CUGRAPHS_INLINE std::optional<NodeAt> node_not_for_device_launch(cudaGraph_t g, std::string_view op) {
  const auto nodes = graph_nodes(g, op);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    cudaGraphNodeType t{};
    check(cudaGraphNodeGetType(nodes[i], &t), "{}: cudaGraphNodeGetType", op);
    switch (t) {
      case cudaGraphNodeTypeKernel:
      case cudaGraphNodeTypeMemcpy:
      case cudaGraphNodeTypeMemset:
        break;
      case cudaGraphNodeTypeGraph: {
        cudaGraph_t child = nullptr;
        check(cudaGraphChildGraphNodeGetGraph(nodes[i], &child), "{}: cudaGraphChildGraphNodeGetGraph", op);
        if (const auto inner = node_not_for_device_launch(child, op)) return NodeAt{i, t, inner->inside.value_or(inner->type)};
        break;
      }
      default:
        return NodeAt{i, t};
    }
  }
  return std::nullopt;
}

CUGRAPHS_INLINE cudaError_t try_capture_info(cudaStream_t s, CaptureInfo& i) noexcept {
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  return cudaStreamGetCaptureInfo(s, &i.status, nullptr, &i.graph, &i.deps, &i.edges, &i.count);
#else
  return cudaStreamGetCaptureInfo_v3(s, &i.status, nullptr, &i.graph, &i.deps, &i.edges, &i.count);
#endif
}

CUGRAPHS_INLINE CaptureInfo capture_info(cudaStream_t s, std::string_view op) {
  CaptureInfo i;
  check(try_capture_info(s, i), "{}: cudaStreamGetCaptureInfo", op);
  return i;
}

CUGRAPHS_INLINE void add_edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to, std::string_view op) {
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  check(cudaGraphAddDependencies(g, &from, &to, nullptr, 1), "{}: cudaGraphAddDependencies", op);
#else
  check(cudaGraphAddDependencies(g, &from, &to, 1), "{}: cudaGraphAddDependencies", op);
#endif
}

CUGRAPHS_INLINE bool add_programmatic_edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to) noexcept {
  cudaGraphEdgeData edge{};
  edge.type = cudaGraphDependencyTypeProgrammatic;
  edge.from_port = cudaGraphKernelNodePortProgrammatic;
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  const cudaError_t e = cudaGraphAddDependencies(g, &from, &to, &edge, 1);
#else  // CUDA 12.3 to 12.9
  const cudaError_t e = cudaGraphAddDependencies_v2(g, &from, &to, &edge, 1);
#endif
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess;
}

CUGRAPHS_INLINE bool plain_kernel_node(cudaGraphNode_t node) noexcept {
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess || type != cudaGraphNodeTypeKernel) {
    (void)cudaGetLastError();
    return false;
  }
  cudaLaunchAttributeValue cooperative{};
  if (cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeCooperative, &cooperative) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  bool updatable = false;
#if CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES
  // Where CUDA does not answer, the node is taken for a plain one: the library's own
  // device-updatable nodes are known to it without asking.
  cudaLaunchAttributeValue v{};
  if (cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode, &v) == cudaSuccess)
    updatable = v.deviceUpdatableKernelNode.deviceUpdatable != 0;
  else
    (void)cudaGetLastError();
#endif
  return cooperative.cooperative == 0 && !updatable;
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE cudaGraphNode_t add_node_to_capture(cudaStream_t s, const CaptureInfo& info,
    cudaGraphNodeParams& params, std::string_view op) {
  cudaGraphNode_t node = nullptr;
#  if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  check(cudaGraphAddNode(&node, info.graph, info.deps, info.edges, info.count, &params), "{}: cudaGraphAddNode", op);
  check(cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies),
        "{}: cudaStreamUpdateCaptureDependencies", op);
#  else
  check(cudaGraphAddNode_v2(&node, info.graph, info.deps, info.edges, info.count, &params), "{}: cudaGraphAddNode", op);
  check(cudaStreamUpdateCaptureDependencies_v2(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies),
        "{}: cudaStreamUpdateCaptureDependencies", op);
#  endif
  return node;
}
#endif

}  // namespace cugraphs::detail
