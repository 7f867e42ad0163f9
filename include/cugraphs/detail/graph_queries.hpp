// Questions asked of a CUDA graph or of a capturing stream: the graph's nodes in capture
// order, its roots, where a node stands, whether the graph allocates an address, what a
// node type is called, where its work ends, and what a capturing stream attaches its next
// node to, which nodes nothing after a set of nodes waits for, and what a node is (its
// type, and a kernel's name).
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs::detail {

[[nodiscard]] constexpr std::string_view node_type_name(cudaGraphNodeType t) noexcept {
  switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host function";
    case cudaGraphNodeTypeGraph: return "child graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event wait";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeExtSemaphoreSignal: return "external semaphore signal";
    case cudaGraphNodeTypeExtSemaphoreWait: return "external semaphore wait";
    case cudaGraphNodeTypeMemAlloc: return "memory allocation";
    case cudaGraphNodeTypeMemFree: return "memory free";
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    case cudaGraphNodeTypeConditional: return "conditional";
#endif
    default: return "unknown";
  }
}

// The nodes of `g` in the order they were added (captured); with `roots`, only the nodes
// nothing depends on before them.
[[nodiscard]] std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g, std::string_view op, bool roots = false);

// The nodes of `g` whose end no other node waits for: where its work ends. A node whose
// only outgoing edges are programmatic (the next kernel may start once it triggers, or once
// it has launched) counts: its dependents can finish before it does, so whatever waits for
// the whole graph (the ring's tail, a staging graph's event record) must wait for it too.
[[nodiscard]] std::vector<cudaGraphNode_t> graph_sinks(cudaGraph_t g, std::string_view op);

// The nodes of `candidates` that are neither among `after` nor before one of them (no path
// of edges, of any kind, leads from them to one of `after`): work that whatever follows
// `after` does not wait for. Top-level nodes of `g` only; none when the graph cannot be read.
[[nodiscard]] std::optional<std::vector<cudaGraphNode_t>> not_before(cudaGraph_t g,
    std::span<const cudaGraphNode_t> after, std::span<const cudaGraphNode_t> candidates) noexcept;

// What `node` is, for an error message: its type, and for a kernel node its kernel's name
// (demangled where the C++ runtime can).
[[nodiscard]] std::string describe_node(cudaGraphNode_t node);

// How many nodes `g` has at its top level.
[[nodiscard]] std::size_t node_count(cudaGraph_t g, std::string_view op);

// Where `node` stands among the nodes of `g`, searched from the newest; none when it is not
// one of them (a node inside a conditional body, say).
[[nodiscard]] std::optional<std::size_t> node_index(cudaGraph_t g, cudaGraphNode_t node, std::string_view op);

// Whether `p` lies in an allocation made by a memory-allocation node of `graph` or of a
// child graph inside it. During a capture, cudaMallocAsync returns such an address before
// any physical memory backs it, and cudaPointerGetAttributes reports it as unregistered.
// Querying a graph that is being captured into is allowed; only destroying it or removing
// nodes is not.
[[nodiscard]] bool graph_allocates(cudaGraph_t graph, const void* p, std::string_view op);

// The allocations (address, bytes) of the memory-allocation nodes of `graph` and of its
// child graphs; an Error when one cannot be read.
[[nodiscard]] std::vector<std::pair<std::uintptr_t, std::size_t>> graph_allocation_ranges(cudaGraph_t graph,
                                                                                          std::string_view op);

// The first node of `g` (its index and type) that a graph launched from the device cannot
// hold: CUDA allows kernel, memcpy, memset and child-graph nodes only (child graphs are looked
// into: `inside` is then the type found there). Instantiation judges the rest (a memcpy of
// pageable memory, say).
struct NodeAt {
  std::size_t index;
  cudaGraphNodeType type;
  std::optional<cudaGraphNodeType> inside = std::nullopt;
};
[[nodiscard]] std::optional<NodeAt> node_not_for_device_launch(cudaGraph_t g, std::string_view op);

// A conditional node a capture made, with its bodies (CUDA has no call that gives a
// conditional node's bodies back).
struct ConditionalMade {
  cudaGraphNode_t node;
  std::vector<cudaGraph_t> bodies;
};

// The allocations of the graphs cugraphs holds (a NativeGraph each), kept process-wide: an
// address another graph's allocation node hands out is not backed before that graph first
// runs, and CUDA then knows it exactly as it knows memory that was freed (measured: the
// runtime's pointer attributes and the driver's range queries are the same for both).
// `hold_graph_allocations` records those of `g` under `owner` and says whether it had any;
// `release_graph_allocations` forgets `owner`'s; `held_graph_allocation` says whether `p` lies in
// one. None can fail (memory short while recording: the graph's allocations go unrecorded, and
// a copy of one that a later capture makes is then refused as unbacked).
bool hold_graph_allocations(const void* owner, cudaGraph_t g) noexcept;
void release_graph_allocations(const void* owner) noexcept;
[[nodiscard]] bool held_graph_allocation(const void* p) noexcept;

// Whether the host cannot use `p`: on Linux, no mapping of this process holds it, or the one
// that does grants no access (where the CUDA driver keeps device address space, freed or not:
// tools/diagnostics/freed_mapping.cu); false where the map cannot be read or elsewhere.
[[nodiscard]] bool host_unusable(const void* p) noexcept;
// Whether `p` lies in a mapping of this process that grants no access (address space set
// aside: where the CUDA driver keeps device memory, live or freed); false where the map
// cannot be read.
[[nodiscard]] bool host_reserved(const void* p) noexcept;

// Whether `p` is plain pageable host memory (CUDA knows it as unregistered) outside every
// range of `excluded` (a graph's own allocations, not backed yet when a capture has just
// ended, say the same) and outside the allocations of the graphs cugraphs holds. A query in
// relaxed capture mode that leaves no error behind.
[[nodiscard]] bool plain_pageable(const void* p,
                                  std::span<const std::pair<std::uintptr_t, std::size_t>> excluded) noexcept;

// A memset node of `g` (or of its child graphs) whose destination no memory backs (freed:
// CUDA refuses its instantiation with cudaErrorInvalidValue, measured), described: `failed`
// itself where CUDA named the failing node, else the first such node found. The queries
// leave no error behind.
[[nodiscard]] std::optional<std::string> unbacked_memset(cudaGraph_t g, cudaGraphNode_t failed) noexcept;

// What a finished capture holds that no replay could do right, found in one walk of `g` and
// of its child graphs and the bodies of `conditionals`, at any depth (the walk stops at the
// first pageable or unbacked copy). With `escapes` false (the capture's escape check is off
// by default, EscapeCheck::Auto outside Global mode) only `unbacked` is looked for.
//  - `unbacked`: a copy with a side at an address that nothing backs (not device, host or
//    managed memory, not an allocation of `g`'s own memory-allocation nodes nor of a graph
//    cugraphs holds, and not memory the host can use: host_unusable), whatever the copy's
//    kind: memory freed since the copy was captured (made and freed inside a Relaxed
//    capture), described. CUDA crashes the process instantiating such a copy (measured,
//    driver 580).
//  - `unbacked_kernel` (with `kernels`: a Relaxed capture, where cudaFree is let through): a
//    kernel with an 8-byte argument that reads as an address nothing backs, among live
//    cudaMalloc memory that the graph names (FreedArguments says how it is judged): memory
//    freed since the kernel was captured, described. Looked for once the walk found no copy to
//    refuse. Every replay would write it with no error (measured, driver 580).
//  - `pageable`: a copy that reads or writes plain pageable host memory, described.
//    Addresses a memory-allocation node of `g` or of a graph cugraphs holds hands out count
//    as device memory (they are not backed yet when a capture has just ended), and so does a
//    side the copy's kind names as device memory.
//  - `curand`: a kernel of cuRAND's host API whose replays draw the numbers drawn at
//    capture (curand_host_kernel: a Sobol generator's, MT19937's, or the kernel that seeds a
//    generator's states, then `curand_seeds`), described.
//  - `stack_data`: a host function node whose data lies on this thread's stack below
//    `gone_below` (in the frame of a function that returned while the capture was open; 0:
//    not checked), described: every replay would hand the callback a dead frame's address.
// A node that cannot be read is passed over. The queries run in relaxed capture mode and leave
// no error behind.
struct CaptureAudit {
  std::optional<std::string> unbacked;
  std::optional<std::string> unbacked_kernel;
  std::optional<std::string> pageable;
  std::optional<std::string> curand;
  bool curand_seeds = false;
  std::optional<std::string> stack_data;
};
[[nodiscard]] CaptureAudit audit_capture(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                         std::uintptr_t gone_below, bool escapes, bool kernels) noexcept;

// What a capturing stream will attach its next node to.
struct CaptureInfo {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  std::size_t count = 0;
};

[[nodiscard]] CaptureInfo capture_info(cudaStream_t s, std::string_view op);
// The same, returning CUDA's error (left on the thread) instead of throwing.
[[nodiscard]] cudaError_t try_capture_info(cudaStream_t s, CaptureInfo& info) noexcept;

// Adds `from -> to` to `g`.
void add_edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to, std::string_view op);

// Adds `from -> to` to `g` as a programmatic edge (programmatic dependent launch: `to` may be
// scheduled as `from` ends, or as soon as it triggers, and must wait for it with
// griddepcontrol.wait before it touches what `from` touches). Returns false, adding nothing
// and leaving no error behind, where CUDA refuses it.
[[nodiscard]] bool add_programmatic_edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to) noexcept;

// Whether `node` is a kernel node neither cooperative nor device-updatable, as far as CUDA
// says (false where it cannot say whether it is cooperative).
[[nodiscard]] bool plain_kernel_node(cudaGraphNode_t node) noexcept;

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Adds a node after the stream's current dependencies and makes it the only one.
cudaGraphNode_t add_node_to_capture(cudaStream_t s, const CaptureInfo& info, cudaGraphNodeParams& params,
                                    std::string_view op);
#endif

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/graph_queries.ipp>
#endif
