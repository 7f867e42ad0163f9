// A kernel node's launch held as bytes: its function, shape and arguments, laid out as the
// kernel's parameters are (cudaFuncGetParamInfo), so that values inside the arguments can be
// found and rewritten and the node set again; and, for kernels the runtime cannot read, the
// argument bytes alone, read through the driver. The per-launch values of a graph
// (launch_ring.hpp) reach its kernels this way when they are passed as kernel arguments.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cugraphs::detail {

class KernelArgs {
public:
  // One parameter's place in the bytes.
  struct Param {
    std::size_t offset;
    std::size_t size;
  };

  // A copy of the launch `p` describes, with `params` its parameters' layout.
  KernelArgs(const cudaKernelNodeParams& p, std::vector<Param> params);
  // Moves keep the vectors' storage, and with it the pointers into it.
  KernelArgs(KernelArgs&&) noexcept = default;
  KernelArgs& operator=(KernelArgs&&) noexcept = default;
  KernelArgs(const KernelArgs&) = delete;
  KernelArgs& operator=(const KernelArgs&) = delete;

  // The layout of `func`'s parameters; none where CUDA cannot say it (a toolkit before 12.4,
  // a kernel launched through the driver API by a library).
  [[nodiscard]] static std::optional<std::vector<Param>> layout(const void* func);

  // The launch of kernel node `node`; none when its parameters' layout is unknown.
  [[nodiscard]] static std::optional<KernelArgs> read(cudaGraphNode_t node);

  [[nodiscard]] const cudaKernelNodeParams& launch() const noexcept { return launch_; }
  [[nodiscard]] std::span<const Param> params() const noexcept { return params_; }
  [[nodiscard]] std::byte* bytes() noexcept { return bytes_.data(); }
  [[nodiscard]] const std::byte* bytes() const noexcept { return bytes_.data(); }

  // Writes the 64-bit word `w` at byte `at` of the arguments.
  void set_word(std::size_t at, std::uint64_t w) noexcept { std::memcpy(bytes_.data() + at, &w, sizeof w); }
  // Writes `w` at byte `at`; returns whether that changed the bytes.
  bool update_word(std::size_t at, std::uint64_t w) noexcept {
    if (std::memcmp(bytes_.data() + at, &w, sizeof w) == 0) return false;
    set_word(at, w);
    return true;
  }
  // Writes `n` bytes from `from` at byte `at`; returns whether that changed the bytes.
  bool update_bytes(std::size_t at, const void* from, std::size_t n) noexcept {
    if (std::memcmp(bytes_.data() + at, from, n) == 0) return false;
    std::memcpy(bytes_.data() + at, from, n);
    return true;
  }

private:
  cudaKernelNodeParams launch_{};
  std::vector<Param> params_;
  std::vector<std::byte> bytes_;
  std::vector<void*> pointers_;  // launch_.kernelParams: one into bytes_ a parameter
};

// The argument bytes of kernel node `node`, one blob a parameter, read through the driver
// API: for kernels this runtime cannot name (launched through the driver API, or by another
// shared library with a CUDA runtime of its own), which KernelArgs::read cannot read. None
// where this fails too (the driver entry points need CUDA 12.5 at build time); no blobs for a
// kernel without parameters.
[[nodiscard]] std::optional<std::vector<std::vector<std::byte>>> driver_kernel_args(cudaGraphNode_t node);

// A kernel node's argument bytes: as the runtime lays them out (KernelArgs::read) or, for a
// kernel only the driver can read (launched through the driver API, by a library such as
// cuBLAS), as the driver does (driver_kernel_args).
struct KernelParamBytes {
  std::optional<KernelArgs> runtime;              // none: read through the driver
  std::vector<std::vector<std::byte>> driver;     // one blob a parameter
  // One span a parameter, into this object's bytes.
  [[nodiscard]] std::vector<std::span<const std::byte>> spans() const;
};
// None where neither can read them; `runtime` false asks the driver only.
[[nodiscard]] std::optional<KernelParamBytes> kernel_param_bytes(cudaGraphNode_t node, bool runtime = true);

// Kernel nodes' arguments, read node by node over a walk of a graph, each kernel's layout asked
// once (a graph runs few kernels many times): as the runtime lays them out, else through the
// driver (a library's kernel, such as cuBLAS's).
class ArgumentReader {
public:
  // One span a parameter of kernel node `node` into `out` (cleared first), valid until the next
  // read or until the node changes; false, and none, where neither can read them.
  bool read(cudaGraphNode_t node, std::vector<std::span<const std::byte>>& out);

private:
  std::vector<std::pair<const void*, std::optional<std::vector<KernelArgs::Param>>>> layouts_;
  std::vector<std::vector<std::byte>> blobs_;  // the last driver read's
};

// What a kernel of cuRAND's host API does to a graph's replays: nothing of note (`none`: not
// cuRAND's, or a generator that advances on the device), draw the capture's numbers again
// (`repeats`: a quasi-random (Sobol) generator's position, MT19937's conversion), or seed the
// generator's states again with the capture's seed (`seeds`).
enum class CurandHostKernel : unsigned char { none, repeats, seeds };
// The kind of the kernel that node `node` runs (curand_host_kernel_kind); its mangled name in
// `name` where it is not `none`. Asked of the driver, which names a library's kernels too; each
// function is named once a process. `none` where it cannot be asked (CUDA before 12.5 at build
// time). Leaves no error.
[[nodiscard]] CurandHostKernel curand_host_kernel(cudaGraphNode_t node, std::string& name) noexcept;
// The kind of the kernel of mangled name `name`.
[[nodiscard]] CurandHostKernel curand_host_kernel_kind(std::string_view name) noexcept;

// A kernel node that this runtime cannot name (launched through the driver API, by a library
// such as cuBLAS), read through the driver: its launch as KernelArgs, whose function is null,
// and the function (CUfunction) that set_exec_kernel_node sets it with. Its arguments may
// have been given as kernelParams or packed in `extra`. None where the driver cannot read or
// lay them out (the driver entry points need CUDA 12.5 at build time).
struct DriverKernel {
  KernelArgs args;
  cudaFunction_t function;
};
[[nodiscard]] std::optional<DriverKernel> read_driver_kernel(cudaGraphNode_t node);

// The function (CUfunction) of kernel `func` in the current device's context, for
// set_exec_kernel_node; null where it cannot be had or the driver path is not built (CUDA
// before 12.5). Asked in relaxed capture mode; leaves behind no error of its own.
[[nodiscard]] cudaFunction_t kernel_function(const void* func) noexcept;

// Sets kernel node `node` of `exec` to `p`, as cudaGraphExecKernelNodeSetParams does, for the
// node updates made at every launch and by Graph::set_kernel_args: through the driver's
// cuGraphExecKernelNodeSetParams with `function` (the kernel's, from kernel_function, kept by
// the caller), whose extra cost over the launch is about half the runtime call's
// (tools/diagnostics/node_update_cost.cu); through the runtime's call where `function` is
// null, `p` passes its arguments through `extra`, or the driver's entry point cannot be had.
// Where the driver refuses, `function` is forgotten (nulled) and the runtime's call decides.
[[nodiscard]] cudaError_t set_exec_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node, const cudaKernelNodeParams& p,
                                               cudaFunction_t& function) noexcept;

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/kernel_args.ipp>
#endif
