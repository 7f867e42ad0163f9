// The bodies of the functions <cugraphs/detail/native_graph.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/native_graph.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE std::string instantiate_failure(cudaError_t e, const cudaGraphInstantiateParams& p, cudaGraph_t g) {
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
  // A memset of memory freed since its capture (made and freed inside a Relaxed capture): CUDA
  // refuses it (cudaErrorInvalidValue, measured), naming the node or not.
  if (e == cudaErrorInvalidValue)
    if (const auto memset = unbacked_memset(g, p.errNode_out))
      why += format("; {}, where no allocation is: memory freed since the memset was captured, or before (a "
                    "scratch made and freed inside the captured step, which CaptureMode::Relaxed lets through). "
                    "Allocate it before the capture and keep it as long as the graph, or make it in the step as a "
                    "cugraphs::DeviceBuffer",
                    *memset);
  return detail::format("cugraphs: Graph::instantiate (cudaGraphInstantiateWithParams) failed: {}.{}",
                     why, error_hint(e));
}

CUGRAPHS_INLINE LastCapture& LastCapture::instance() {
  static auto* last = new LastCapture;  // never destroyed: no CUDA call after the runtime's teardown
  return *last;
}

CUGRAPHS_INLINE void LastCapture::set(std::shared_ptr<NativeGraph> g) {
  std::lock_guard lock(m_);
  graph_ = std::move(g);
}

CUGRAPHS_INLINE std::shared_ptr<NativeGraph> LastCapture::get() {
  std::lock_guard lock(m_);
  return graph_;
}

CUGRAPHS_INLINE void write_dot(cudaGraph_t g, const std::string& path, std::string_view op) {
  if (const cudaError_t e = cudaGraphDebugDotPrint(g, path.c_str(), cudaGraphDebugDotFlagsVerbose); e != cudaSuccess) {
    throw_cuda(e, detail::format("{}: cudaGraphDebugDotPrint to '{}' (is the path writable?)", op, path));
  }
}

}  // namespace cugraphs::detail
