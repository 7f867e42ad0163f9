// Questions asked of a CUDA graph or of a capturing stream: the graph's nodes in capture
// order, its roots, where a node stands, whether the graph allocates an address, what a
// node type is called, where its work ends, and what a capturing stream attaches its next
// node to.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
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
[[nodiscard]] inline std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g, std::string_view op, bool roots = false) {
  const auto get = roots ? cudaGraphGetRootNodes : cudaGraphGetNodes;
  const char* what = roots ? "cudaGraphGetRootNodes" : "cudaGraphGetNodes";
  std::size_t n = 0;
  check(get(g, nullptr, &n), "{}: {}", op, what);
  std::vector<cudaGraphNode_t> nodes(n);
  if (n != 0) check(get(g, nodes.data(), &n), "{}: {}", op, what);
  nodes.resize(n);
  return nodes;
}

// The nodes of `g` nothing depends on: where its work ends.
[[nodiscard]] inline std::vector<cudaGraphNode_t> graph_sinks(cudaGraph_t g, std::string_view op) {
  std::size_t n = 0;
  const auto edges = [&](cudaGraphNode_t* from, cudaGraphNode_t* to) {
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
    return cudaGraphGetEdges(g, from, to, nullptr, &n);
#else
    return cudaGraphGetEdges(g, from, to, &n);
#endif
  };
  check(edges(nullptr, nullptr), "{}: cudaGraphGetEdges", op);
  std::vector<cudaGraphNode_t> from(n), to(n);
  if (n != 0) check(edges(from.data(), to.data()), "{}: cudaGraphGetEdges", op);
  from.resize(n);
  std::ranges::sort(from);
  std::vector<cudaGraphNode_t> sinks;
  for (cudaGraphNode_t node : graph_nodes(g, op))
    if (!std::ranges::binary_search(from, node)) sinks.push_back(node);
  return sinks;
}

// How many nodes `g` has at its top level.
[[nodiscard]] inline std::size_t node_count(cudaGraph_t g, std::string_view op) {
  std::size_t n = 0;
  check(cudaGraphGetNodes(g, nullptr, &n), "{}: cudaGraphGetNodes", op);
  return n;
}

// Where `node` stands among the nodes of `g`, searched from the newest; none when it is not
// one of them (a node inside a conditional body, say).
[[nodiscard]] inline std::optional<std::size_t> node_index(cudaGraph_t g, cudaGraphNode_t node, std::string_view op) {
  const auto nodes = graph_nodes(g, op);
  for (std::size_t i = nodes.size(); i-- > 0;)
    if (nodes[i] == node) return i;
  return std::nullopt;
}

// Whether `p` lies in an allocation made by a memory-allocation node of `graph` or of a
// child graph inside it. During a capture, cudaMallocAsync returns such an address before
// any physical memory backs it, and cudaPointerGetAttributes reports it as unregistered.
// Querying a graph that is being captured into is allowed; only destroying it or removing
// nodes is not.
[[nodiscard]] inline bool graph_allocates(cudaGraph_t graph, const void* p, std::string_view op) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (cudaGraphNode_t node : graph_nodes(graph, op)) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "{}: cudaGraphNodeGetType", op);
    if (type == cudaGraphNodeTypeMemAlloc) {
      cudaMemAllocNodeParams params{};
      check(cudaGraphMemAllocNodeGetParams(node, &params), "{}: cudaGraphMemAllocNodeGetParams", op);
      const auto base = reinterpret_cast<std::uintptr_t>(params.dptr);
      if (address >= base && address - base < params.bytesize) return true;
    } else if (type == cudaGraphNodeTypeGraph) {
      cudaGraph_t child = nullptr;
      check(cudaGraphChildGraphNodeGetGraph(node, &child), "{}: cudaGraphChildGraphNodeGetGraph", op);
      if (graph_allocates(child, p, op)) return true;
    }
  }
  return false;
}

// The first node of `g` (its index and type) that a graph launched from the device cannot
// hold: CUDA allows kernel, memcpy, memset and child-graph nodes only (child graphs are looked
// into: `inside` is then the type found there). Instantiation judges the rest (a memcpy of
// pageable memory, say).
struct NodeAt {
  std::size_t index;
  cudaGraphNodeType type;
  std::optional<cudaGraphNodeType> inside = std::nullopt;
};
[[nodiscard]] inline std::optional<NodeAt> node_not_for_device_launch(cudaGraph_t g, std::string_view op) {
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

// A conditional node a capture made, with its bodies (CUDA has no call that gives a
// conditional node's bodies back).
struct ConditionalMade {
  cudaGraphNode_t node;
  std::vector<cudaGraph_t> bodies;
};

// What a capturing stream will attach its next node to.
struct CaptureInfo {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  std::size_t count = 0;
};

[[nodiscard]] inline CaptureInfo capture_info(cudaStream_t s, std::string_view op) {
  CaptureInfo i;
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  check(cudaStreamGetCaptureInfo(s, &i.status, nullptr, &i.graph, &i.deps, &i.edges, &i.count),
        "{}: cudaStreamGetCaptureInfo", op);
#else
  check(cudaStreamGetCaptureInfo_v3(s, &i.status, nullptr, &i.graph, &i.deps, &i.edges, &i.count),
        "{}: cudaStreamGetCaptureInfo", op);
#endif
  return i;
}

// Adds `from -> to` to `g`.
inline void add_edge(cudaGraph_t g, cudaGraphNode_t from, cudaGraphNode_t to, std::string_view op) {
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  check(cudaGraphAddDependencies(g, &from, &to, nullptr, 1), "{}: cudaGraphAddDependencies", op);
#else
  check(cudaGraphAddDependencies(g, &from, &to, 1), "{}: cudaGraphAddDependencies", op);
#endif
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Adds a node after the stream's current dependencies and makes it the only one.
inline cudaGraphNode_t add_node_to_capture(cudaStream_t s, const CaptureInfo& info, cudaGraphNodeParams& params,
                                           std::string_view op) {
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
