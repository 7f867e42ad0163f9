// The bodies of the functions <cugraphs/detail/kernel_args.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/kernel_args.hpp>
#include <cugraphs/config.hpp>

#include <cuda.h>  // types only: the driver is reached through the runtime's entry points

namespace cugraphs::detail {

CUGRAPHS_INLINE KernelArgs::KernelArgs(const cudaKernelNodeParams& p, std::vector<Param> params)
    : launch_(p), params_(std::move(params)) {
  std::size_t end = 0;
  for (const Param& q : params_) end = std::max(end, q.offset + q.size);
  bytes_.assign(end, std::byte{0});
  for (std::size_t i = 0; i < params_.size(); ++i)
    std::memcpy(bytes_.data() + params_[i].offset, p.kernelParams[i], params_[i].size);
  pointers_.reserve(params_.size());
  for (const Param& q : params_) pointers_.push_back(bytes_.data() + q.offset);
  launch_.kernelParams = pointers_.data();
  launch_.extra = nullptr;
}

CUGRAPHS_INLINE auto KernelArgs::layout(const void* func) -> std::optional<std::vector<Param>> {
#if CUGRAPHS_CTK_AT_LEAST(12, 4)
  RelaxedCaptureMode relaxed;  // a query, but one that must not risk a capture open on the thread
  std::vector<Param> params;
  for (std::size_t i = 0;; ++i) {
    Param q{};
    const cudaError_t e = cudaFuncGetParamInfo(func, i, &q.offset, &q.size);
    if (e == cudaSuccess) {
      params.push_back(q);
      continue;
    }
    (void)cudaGetLastError();
    // The query past the last parameter fails with cudaErrorInvalidValue by design; any
    // other failure leaves the layout unknown (a short one would have the driver read past
    // the arguments it is given).
    if (e != cudaErrorInvalidValue) return std::nullopt;
    break;
  }
  if (params.empty()) {
    // No parameter, or a function the runtime cannot name: only a known kernel has none.
    cudaFuncAttributes attr{};
    const bool known = cudaFuncGetAttributes(&attr, func) == cudaSuccess;
    (void)cudaGetLastError();
    if (!known) return std::nullopt;
  }
  return params;
#else
  (void)func;
  return std::nullopt;
#endif
}

CUGRAPHS_INLINE std::optional<KernelArgs> KernelArgs::read(cudaGraphNode_t node) {
  cudaKernelNodeParams p{};
  if (cudaGraphKernelNodeGetParams(node, &p) != cudaSuccess || p.func == nullptr || p.extra != nullptr) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  auto params = layout(p.func);
  if (!params || (p.kernelParams == nullptr && !params->empty())) return std::nullopt;
  return KernelArgs(p, std::move(*params));
}

CUGRAPHS_INLINE std::optional<std::vector<std::vector<std::byte>>> driver_kernel_args(cudaGraphNode_t node) {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using FuncInfo = CUresult (*)(CUfunction, std::size_t, std::size_t*, std::size_t*);
  using KernelInfo = CUresult (*)(CUkernel, std::size_t, std::size_t*, std::size_t*);
  static const auto entry = [](const char* name) {
    void* fn = driver_entry_point(name, 12040);
    if (fn == nullptr) (void)cudaGetLastError();
    return fn;
  };
  static const auto get = reinterpret_cast<GetParams>(entry("cuGraphKernelNodeGetParams"));
  static const auto func_info = reinterpret_cast<FuncInfo>(entry("cuFuncGetParamInfo"));
  static const auto kernel_info = reinterpret_cast<KernelInfo>(entry("cuKernelGetParamInfo"));
  CUDA_KERNEL_NODE_PARAMS p{};
  if (get == nullptr || get(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return std::nullopt;
  std::vector<std::vector<std::byte>> params;
  if (p.kernelParams == nullptr) return params;  // a kernel without parameters
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (p.func != nullptr && func_info != nullptr) r = func_info(p.func, i, &offset, &size);
    if (p.func == nullptr && p.kern != nullptr && kernel_info != nullptr) r = kernel_info(p.kern, i, &offset, &size);
    if (r != CUDA_SUCCESS) break;
    const auto* from = static_cast<const std::byte*>(p.kernelParams[i]);
    params.emplace_back(from, from + size);
  }
  if (params.empty()) return std::nullopt;  // parameters it could not lay out
  return params;
#else
  (void)node;
  return std::nullopt;
#endif
}

CUGRAPHS_INLINE cudaFunction_t kernel_function(const void* func) noexcept {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  if (func == nullptr) return nullptr;
  const bool pending = cudaPeekAtLastError() != cudaSuccess;
  RelaxedCaptureMode relaxed;  // it may load the kernel's module: no risk to a capture open on this thread
  cudaFunction_t function = nullptr;
  if (cudaGetFuncBySymbol(&function, func) != cudaSuccess) {
    if (!pending) (void)cudaGetLastError();
    return nullptr;
  }
  return function;
#else
  (void)func;
  return nullptr;
#endif
}

CUGRAPHS_INLINE cudaError_t set_exec_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node,
    const cudaKernelNodeParams& p, cudaFunction_t& function) noexcept {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  // Version 12000: the call that takes CUDA_KERNEL_NODE_PARAMS_v2.
  using SetParams = CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*);
  static const auto set = reinterpret_cast<SetParams>(quiet_driver_entry_point("cuGraphExecKernelNodeSetParams", 12000));
  if (set != nullptr && function != nullptr && p.extra == nullptr) {
    CUDA_KERNEL_NODE_PARAMS_v2 d{};
    d.func = reinterpret_cast<CUfunction>(function);
    d.gridDimX = p.gridDim.x;
    d.gridDimY = p.gridDim.y;
    d.gridDimZ = p.gridDim.z;
    d.blockDimX = p.blockDim.x;
    d.blockDimY = p.blockDim.y;
    d.blockDimZ = p.blockDim.z;
    d.sharedMemBytes = p.sharedMemBytes;
    d.kernelParams = p.kernelParams;
    if (set(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUgraphNode>(node), &d) == CUDA_SUCCESS)
      return cudaSuccess;
    function = nullptr;  // refused (a function of another context, say): the runtime's call from now on
  }
#else
  (void)function;
#endif
  return cudaGraphExecKernelNodeSetParams(exec, node, &p);
}

}  // namespace cugraphs::detail
