// The bodies of the functions <cugraphs/detail/kernel_args.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/kernel_args.hpp>
#include <cugraphs/config.hpp>

#include <mutex>
#include <unordered_map>

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

#if CUGRAPHS_CTK_AT_LEAST(12, 5)
// A kernel node as the driver holds it: its launch, its parameters' layout and where each
// parameter's bytes are (in its kernelParams, or in the packed buffer of its `extra`).
struct DriverNode {
  CUDA_KERNEL_NODE_PARAMS launch{};
  std::vector<KernelArgs::Param> params;
  std::vector<void*> values;  // one a parameter
};

CUGRAPHS_INLINE void* driver_query_entry(const char* name) noexcept { return quiet_driver_entry_point(name, 12040); }

// Kernel node `node` read through the driver; none where it cannot be read or laid out whole.
CUGRAPHS_INLINE std::optional<DriverNode> read_driver_node(cudaGraphNode_t node) {
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using FuncInfo = CUresult (*)(CUfunction, std::size_t, std::size_t*, std::size_t*);
  using KernelInfo = CUresult (*)(CUkernel, std::size_t, std::size_t*, std::size_t*);
  static const auto get = reinterpret_cast<GetParams>(driver_query_entry("cuGraphKernelNodeGetParams"));
  static const auto func_info = reinterpret_cast<FuncInfo>(driver_query_entry("cuFuncGetParamInfo"));
  static const auto kernel_info = reinterpret_cast<KernelInfo>(driver_query_entry("cuKernelGetParamInfo"));
  DriverNode d;
  CUDA_KERNEL_NODE_PARAMS& p = d.launch;
  if (get == nullptr || get(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return std::nullopt;
  std::size_t end = 0;
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (p.func != nullptr && func_info != nullptr) r = func_info(p.func, i, &offset, &size);
    if (p.func == nullptr && p.kern != nullptr && kernel_info != nullptr) r = kernel_info(p.kern, i, &offset, &size);
    // Asked past the last parameter, the query fails with CUDA_ERROR_INVALID_VALUE; any other
    // failure leaves the layout unknown.
    if (r == CUDA_ERROR_INVALID_VALUE) break;
    if (r != CUDA_SUCCESS) return std::nullopt;
    d.params.push_back({offset, size});
    end = std::max(end, offset + size);
  }
  // No parameter: believed only where the node hands none either (a layout the driver cannot
  // give may look empty too).
  if (d.params.empty()) {
    if (p.kernelParams != nullptr || p.extra != nullptr) return std::nullopt;
    return d;
  }
  if (p.kernelParams != nullptr) {
    d.values.assign(p.kernelParams, p.kernelParams + d.params.size());
    return d;
  }
  // Arguments packed in one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER), laid out as the
  // parameters are.
  std::byte* buffer = nullptr;
  std::size_t bytes = 0;
  for (void** e = p.extra; e != nullptr && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = static_cast<std::byte*>(e[1]);
    else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE && e[1] != nullptr) bytes = *static_cast<const std::size_t*>(e[1]);
    else return std::nullopt;  // an option this reading does not know
  }
  if (buffer == nullptr || bytes < end) return std::nullopt;
  for (const KernelArgs::Param& q : d.params) d.values.push_back(buffer + q.offset);
  return d;
}
#endif

CUGRAPHS_INLINE std::vector<std::span<const std::byte>> KernelParamBytes::spans() const {
  std::vector<std::span<const std::byte>> out;
  if (runtime)
    for (const auto& q : runtime->params()) out.emplace_back(runtime->bytes() + q.offset, q.size);
  else
    out.assign(driver.begin(), driver.end());
  return out;
}

CUGRAPHS_INLINE std::optional<KernelParamBytes> kernel_param_bytes(cudaGraphNode_t node, bool runtime) {
  KernelParamBytes p;
  if (runtime) p.runtime = KernelArgs::read(node);
  if (p.runtime) return p;
  auto blobs = driver_kernel_args(node);
  if (!blobs) return std::nullopt;
  p.driver = std::move(*blobs);
  return p;
}

CUGRAPHS_INLINE std::optional<std::vector<std::vector<std::byte>>> driver_kernel_args(cudaGraphNode_t node) {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  const auto d = read_driver_node(node);
  if (!d) return std::nullopt;
  std::vector<std::vector<std::byte>> params;
  for (std::size_t i = 0; i < d->params.size(); ++i) {
    const auto* from = static_cast<const std::byte*>(d->values[i]);
    params.emplace_back(from, from + d->params[i].size);
  }
  return params;
#else
  (void)node;
  return std::nullopt;
#endif
}

CUGRAPHS_INLINE bool ArgumentReader::read(cudaGraphNode_t node, std::vector<std::span<const std::byte>>& out) {
  out.clear();
  cudaKernelNodeParams p{};
  if (cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess && p.func != nullptr && p.extra == nullptr) {
    auto known = std::ranges::find(layouts_, p.func, &decltype(layouts_)::value_type::first);
    if (known == layouts_.end()) known = layouts_.insert(layouts_.end(), {p.func, KernelArgs::layout(p.func)});
    if (const auto& layout = known->second; layout && (p.kernelParams != nullptr || layout->empty())) {
      for (std::size_t i = 0; i < layout->size(); ++i)
        out.emplace_back(static_cast<const std::byte*>(p.kernelParams[i]), (*layout)[i].size);
      return true;
    }
  }
  (void)cudaGetLastError();
  auto blobs = driver_kernel_args(node);
  if (!blobs) return false;
  blobs_ = std::move(*blobs);
  for (const auto& b : blobs_) out.emplace_back(b.data(), b.size());
  return true;
}

CUGRAPHS_INLINE CurandHostKernel curand_host_kernel_kind(std::string_view name) noexcept {
  // _Z<length><base>...: the kernels of cuRAND's generators whose replays repeat
  // (tools/diagnostics/curand_host_capture.cu, H100, CUDA 13.0): the quasi-random (Sobol)
  // generators take their position as an argument; MT19937 generates on the host's call and
  // captures only the conversion of what it generated. A program's own kernel (one that takes
  // a curandState: the device API) has another base name. XORWOW, MRG32K3A, MTGP32 and Philox
  // keep their states in device memory: their replays draw fresh numbers, unless the capture
  // holds the kernel that seeds those states (generate_seed_pseudo: the generator was seeded,
  // or its offset set, inside the capture, or its first draw was captured), which every replay
  // would run again with the capture's seed.
  using enum CurandHostKernel;
  if (!name.starts_with("_Z")) return none;
  std::size_t at = 2, length = 0;
  for (; at < name.size() && name[at] >= '0' && name[at] <= '9' && length < name.size(); ++at)
    length = length * 10 + static_cast<std::size_t>(name[at] - '0');
  if (at == 2 || length > name.size() - at) return none;
  const std::string_view base = name.substr(at, length);
  if (base == "mt19937_scratch_convert") return repeats;
  const bool takes_state = name.find("curandState", at + length) != std::string_view::npos;
  if (!takes_state) return none;
  if (base == "gen_quasi" || base == "gen_quasi_scrambled") return repeats;
  return base == "generate_seed_pseudo" ? seeds : none;
}

CUGRAPHS_INLINE CurandHostKernel curand_host_kernel(cudaGraphNode_t node, std::string& name) noexcept {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using FuncName = CUresult (*)(const char**, CUfunction);
  using KernelName = CUresult (*)(const char**, CUkernel);
  static const auto get = reinterpret_cast<GetParams>(driver_query_entry("cuGraphKernelNodeGetParams"));
  static const auto func_name = reinterpret_cast<FuncName>(driver_query_entry("cuFuncGetName"));
  static const auto kernel_name = reinterpret_cast<KernelName>(driver_query_entry("cuKernelGetName"));
  CUDA_KERNEL_NODE_PARAMS p{};
  if (get == nullptr || get(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return CurandHostKernel::none;
  const void* key = p.func != nullptr ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
  if (key == nullptr) return CurandHostKernel::none;
  const auto name_of = [&]() -> const char* {
    const char* n = nullptr;
    const CUresult r = p.func != nullptr ? (func_name ? func_name(&n, p.func) : CUDA_ERROR_NOT_SUPPORTED)
                                         : (kernel_name ? kernel_name(&n, p.kern) : CUDA_ERROR_NOT_SUPPORTED);
    return r == CUDA_SUCCESS ? n : nullptr;
  };
  // Each function's verdict, kept: a graph runs few functions, many times. A function found to
  // be cuRAND's is named again (rare), so a handle reused after a module was unloaded cannot
  // give a false finding.
  static std::mutex m;
  static std::unordered_map<const void*, CurandHostKernel> known;
  CUGRAPHS_TRY {
    std::lock_guard lock(m);
    auto it = known.find(key);
    if (it == known.end()) {
      const char* n = name_of();
      it = known.emplace(key, n != nullptr ? curand_host_kernel_kind(n) : CurandHostKernel::none).first;
    }
    if (it->second == CurandHostKernel::none) return CurandHostKernel::none;
    const char* n = name_of();
    const auto kind = n != nullptr ? curand_host_kernel_kind(n) : CurandHostKernel::none;
    if (kind != CurandHostKernel::none) name = n;
    return kind;
  } CUGRAPHS_CATCH_ALL {
    return CurandHostKernel::none;
  }
#else
  (void)node;
  (void)name;
  return CurandHostKernel::none;
#endif
}

CUGRAPHS_INLINE std::optional<DriverKernel> read_driver_kernel(cudaGraphNode_t node) {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  using KernelFunction = CUresult (*)(CUfunction*, CUkernel);
  static const auto function_of = reinterpret_cast<KernelFunction>(driver_query_entry("cuKernelGetFunction"));
  auto d = read_driver_node(node);
  if (!d) return std::nullopt;
  const CUDA_KERNEL_NODE_PARAMS& p = d->launch;
  CUfunction function = p.func;
  // A library's kernel (CUkernel): its function in the current context, the capture's device's
  // (LaunchRing::attach); relaxed, since it may load the kernel's module while a capture is open.
  if (function == nullptr && p.kern != nullptr) {
    RelaxedCaptureMode relaxed;
    if (function_of == nullptr || function_of(&function, p.kern) != CUDA_SUCCESS) return std::nullopt;
  }
  if (function == nullptr) return std::nullopt;
  cudaKernelNodeParams launch{};
  launch.func = nullptr;  // set through `function` (set_exec_kernel_node)
  launch.gridDim = dim3(p.gridDimX, p.gridDimY, p.gridDimZ);
  launch.blockDim = dim3(p.blockDimX, p.blockDimY, p.blockDimZ);
  launch.sharedMemBytes = p.sharedMemBytes;
  launch.kernelParams = d->values.data();
  return DriverKernel{KernelArgs(launch, std::move(d->params)), reinterpret_cast<cudaFunction_t>(function)};
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
    // Refused (a function of another context, say): the runtime's call from now on, where the
    // runtime knows the kernel; a library's kernel (no runtime function) keeps the driver's.
    if (p.func != nullptr) function = nullptr;
  }
#else
  (void)function;
#endif
  return cudaGraphExecKernelNodeSetParams(exec, node, &p);
}

}  // namespace cugraphs::detail
