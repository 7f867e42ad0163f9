// The bodies of the functions <cugraphs/detail/graph_queries.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/config.hpp>

#include <algorithm>

namespace cugraphs::detail {

CUGRAPHS_INLINE std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g, std::string_view op, bool roots) {
  const auto get = roots ? cudaGraphGetRootNodes : cudaGraphGetNodes;
  const char* what = roots ? "cudaGraphGetRootNodes" : "cudaGraphGetNodes";
  std::size_t n = 0;
  check(get(g, nullptr, &n), "{}: {}", op, what);
  std::vector<cudaGraphNode_t> nodes(n);
  if (n != 0) check(get(g, nodes.data(), &n), "{}: {}", op, what);
  nodes.resize(n);
  return nodes;
}

CUGRAPHS_INLINE std::vector<cudaGraphNode_t> graph_sinks(cudaGraph_t g, std::string_view op) {
  std::size_t n = 0;
  // The edges' data is asked for too: without it CUDA refuses the query (cudaErrorLossyQuery)
  // on a graph that holds edges other than plain ones, the programmatic edges of a captured
  // PDL launch say.
  const auto edges = [&](cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* data) {
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
    return cudaGraphGetEdges(g, from, to, data, &n);
#else
    return cudaGraphGetEdges_v2(g, from, to, data, &n);  // CUDA 12.3 to 12.9
#endif
  };
  check(edges(nullptr, nullptr, nullptr), "{}: cudaGraphGetEdges", op);
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (n != 0) check(edges(from.data(), to.data(), data.data()), "{}: cudaGraphGetEdges", op);
  // Only an edge that waits for its source's completion orders the source's end.
  std::vector<cudaGraphNode_t> waited;
  for (std::size_t i = 0; i < n; ++i)
    if (data[i].type == cudaGraphDependencyTypeDefault && data[i].from_port == cudaGraphKernelNodePortDefault)
      waited.push_back(from[i]);
  std::ranges::sort(waited);
  std::vector<cudaGraphNode_t> sinks;
  for (cudaGraphNode_t node : graph_nodes(g, op))
    if (!std::ranges::binary_search(waited, node)) sinks.push_back(node);
  return sinks;
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

CUGRAPHS_INLINE bool graph_allocates(cudaGraph_t graph, const void* p, std::string_view op) {
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

CUGRAPHS_INLINE CaptureInfo capture_info(cudaStream_t s, std::string_view op) {
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
