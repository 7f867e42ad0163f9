// The captured graph as an object of its own: NativeGraph owns a cudaGraph_t (shared by its
// Graph and by export_dot's record of the most recent capture), with the words for
// instantiation failures and the DOT writer.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace cugraphs::detail {

// Why cudaGraphInstantiateWithParams failed, in words.
// `g` is the graph instantiated, to say where the failing node stands.
[[nodiscard]] inline std::string instantiate_failure(cudaError_t e, const cudaGraphInstantiateParams& p, cudaGraph_t g) {
  std::string why;
  switch (p.result_out) {
    case cudaGraphInstantiateInvalidStructure:
      why = "the graph's structure is invalid (for example it has a cycle)";
      break;
    case cudaGraphInstantiateNodeOperationNotSupported:
      why = "a node's operation is not supported by this kind of instantiation";
      break;
    case cudaGraphInstantiateMultipleDevicesNotSupported:
      why = "the graph's nodes belong to more than one device";
      break;
    case cudaGraphInstantiateConditionalHandleUnused:
      why = "a conditional handle was created but no conditional node uses it";
      break;
    default:
      why = detail::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
      break;
  }
  if (p.errNode_out != nullptr) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(p.errNode_out, &t) == cudaSuccess)
      why += detail::format("; the failing node is a {} node", node_type_name(t));
    CUGRAPHS_TRY {  // the instantiation's failure is the one to report
      if (const auto i = node_index(g, p.errNode_out, "Graph::instantiate")) why += format(", node {} of the capture", *i);
    } CUGRAPHS_CATCH_ALL {
    }
  }
  return detail::format("cugraphs: Graph::instantiate (cudaGraphInstantiateWithParams) failed: {}.{}",
                     why, error_hint(e));
}

// Owns a cudaGraph_t; shared so that export_dot can still write the most recently
// completed capture after its Graph was reset.
struct NativeGraph {
  cudaGraph_t graph;
  // CUDA graph objects are not internally synchronized, and export_dot may write this one
  // from another thread: every CUDA call on `graph` made after it is shared (instantiation,
  // DOT writes) holds this mutex.
  std::mutex m;
  explicit NativeGraph(cudaGraph_t g) noexcept : graph(g) {}
  ~NativeGraph() { report_in_destructor(cudaGraphDestroy(graph), "cudaGraphDestroy"); }
  NativeGraph(const NativeGraph&) = delete;
  NativeGraph& operator=(const NativeGraph&) = delete;
};

class LastCapture {
public:
  static LastCapture& instance() {
    static auto* last = new LastCapture;  // never destroyed: no CUDA call after the runtime's teardown
    return *last;
  }
  void set(std::shared_ptr<NativeGraph> g) {
    std::lock_guard lock(m_);
    graph_ = std::move(g);
  }
  [[nodiscard]] std::shared_ptr<NativeGraph> get() {
    std::lock_guard lock(m_);
    return graph_;
  }

private:
  std::mutex m_;
  std::shared_ptr<NativeGraph> graph_;
};

inline void write_dot(cudaGraph_t g, const std::string& path, std::string_view op) {
  if (const cudaError_t e = cudaGraphDebugDotPrint(g, path.c_str(), cudaGraphDebugDotFlagsVerbose); e != cudaSuccess) {
    throw_cuda(e, detail::format("{}: cudaGraphDebugDotPrint to '{}' (is the path writable?)", op, path));
  }
}

}  // namespace cugraphs::detail
