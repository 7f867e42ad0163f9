// Graphs that kernels launch: DeviceGraph, the trivially copyable handle of a Graph captured
// with CaptureOptions::device_launch, with the device-side launches (tail, fire-and-forget,
// sibling), and the status word through which a failed device-side launch reaches the host
// (Graph::check_device_launches).
#pragma once

#include <cugraphs/config.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <tuple>
#include <type_traits>

namespace cugraphs {

/// A graph instantiated for launch from the device, as kernels take it (by value). Get it
/// from Graph::device_graph(); it stays valid while the Graph holds that executable. A
/// launch that fails records its cudaError_t in the graph's status word (the first failure
/// only), which Graph::check_device_launches() reports on the host.
struct DeviceGraph {
  cudaGraphExec_t exec = nullptr;
  int* status = nullptr;  ///< first failed device-side launch (a cudaError_t), 0 for none

#if defined(__CUDACC__)
  /// Launches the graph once the launching graph has finished, in the same stream order
  /// (work queued after the launching graph waits for it too). Returns whether the launch
  /// was accepted.
  __device__ bool launch_tail() const { return launch(cudaStreamGraphTailLaunch); }
  /// Launches the graph now, beside the launching graph, as a child of it.
  __device__ bool launch_fire_and_forget() const { return launch(cudaStreamGraphFireAndForget); }
  /// Launches the graph now, beside the launching graph, as its sibling: independent of it.
  __device__ bool launch_sibling() const { return launch(cudaStreamGraphFireAndForgetAsSibling); }

  /// Launches into one of the device-side streams above.
  __device__ bool launch(cudaStream_t how) const {
#  if defined(__CUDA_ARCH__)
    const cudaError_t e = cudaGraphLaunch(exec, how);
    if (e != cudaSuccess && status != nullptr) atomicCAS(status, 0, static_cast<int>(e));
    return e == cudaSuccess;
#  else
    (void)how;
    return false;
#  endif
  }
#endif
};

#if CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES
/// A kernel node that kernels may change while its graph is instantiated (a device-updatable
/// node, CUDA 12.4+), as launch_updatable() returns it: trivially copyable, for kernels to
/// take by value. The node's kernel takes parameters P...; a change lasts until the next
/// change (or a host-side update of the executable). Each call returns the device runtime's
/// cudaError_t. A kernel that changes the node right before it runs, with the node launched
/// programmatically after it, calls __threadfence() before pdl::trigger().
template <class... P>
struct DeviceKernelNode {
  cudaGraphDeviceNode_t node = nullptr;
  std::size_t offsets[sizeof...(P) + 1] = {};  ///< each parameter's offset in the node's argument buffer

#  if defined(__CUDACC__)
  /// Enables the node, or disables it (it then does nothing when its graph runs).
  __device__ cudaError_t set_enabled(bool on) const {
#    if defined(__CUDA_ARCH__)
    return cudaGraphKernelNodeSetEnabled(node, on);
#    else
    (void)on;
    return cudaErrorNotSupported;
#    endif
  }
  /// Changes the node's grid.
  __device__ cudaError_t set_grid(dim3 grid) const {
#    if defined(__CUDA_ARCH__)
    return cudaGraphKernelNodeSetGridDim(node, grid);
#    else
    (void)grid;
    return cudaErrorNotSupported;
#    endif
  }
  /// Changes argument I of the node's kernel to `value`, converted to the parameter's type.
  template <std::size_t I, class V>
  __device__ cudaError_t set_arg(const V& value) const {
    static_assert(I < sizeof...(P), "cugraphs: DeviceKernelNode::set_arg<I>: I is not a parameter of the kernel");
    using T = std::remove_cvref_t<std::tuple_element_t<I, std::tuple<P...>>>;
    static_assert(std::is_convertible_v<const V&, T>,
                  "cugraphs: DeviceKernelNode::set_arg<I>: the value must convert to the parameter's type");
#    if defined(__CUDA_ARCH__)
    const T v = static_cast<T>(value);
    return cudaGraphKernelNodeSetParam(node, offsets[I], &v, sizeof(T));
#    else
    (void)value;
    return cudaErrorNotSupported;
#    endif
  }
#  endif
};
#endif

}  // namespace cugraphs
