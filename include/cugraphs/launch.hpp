// Typed kernel launches through cudaLaunchKernelEx: argument types checked at compile time;
// on request a programmatic dependent launch (PDL), whose captured edge from the previous
// kernel becomes a programmatic dependency; and captured launches made device-updatable.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/device_launch.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cugraphs {

/// How cugraphs::launch runs a kernel.
struct LaunchConfig {
  dim3 grid{1, 1, 1};
  dim3 block{1, 1, 1};
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block
  /// Programmatic dependent launch (compute capability 9.0 and newer): the kernel may start
  /// while the kernel before it on the stream is still running, and must call pdl::wait()
  /// before its first access to global memory, read or write (in a capture a buffer freed
  /// earlier may lend its memory to a later one, so a write before the wait can land on
  /// memory the previous kernel still uses), and on every path before it ends (one that never
  /// waits may finish before the kernel it follows, and work ordered after it would not wait
  /// for that one); its prologue (index math, loads of parameters) then overlaps the previous
  /// kernel's tail. Captured, the edge from the previous kernel becomes a programmatic
  /// dependency of the graph. A kernel whose code was built below compute capability 9.0
  /// (where pdl::wait() is compiled out) is refused.
  bool programmatic = false;
};

namespace detail {

// Refuses a programmatic launch of a kernel whose code was compiled below compute capability
// 9.0 (PTX JIT-compiled on a newer device, say): pdl::wait() is compiled out there, so the
// kernel would read its predecessor's output before it is written. Asked once per kernel.
void check_programmatic(const void* kernel, std::string_view op);

// cudaLaunchKernelEx with `config`'s attributes; with `updatable`, the captured node is made
// device-updatable and its handle written there.
template <class... P, class... A>
void launch_ex(cudaStream_t stream, const LaunchConfig& config, void (*kernel)(P...), void* updatable,
               std::string_view op, const A&... args) {
  static_assert(sizeof...(A) == sizeof...(P), "cugraphs::launch takes one argument per parameter of the kernel");
  static_assert((std::is_convertible_v<const A&, std::remove_cvref_t<P>> && ...),
                "cugraphs::launch: every argument must convert to its kernel parameter's type");
  if (config.programmatic) check_programmatic(reinterpret_cast<const void*>(kernel), op);
  std::tuple<std::remove_cvref_t<P>...> values(static_cast<std::remove_cvref_t<P>>(args)...);
  std::apply(
      [&](auto&... value) {
        void* params[sizeof...(P) + 1] = {static_cast<void*>(std::addressof(value))..., nullptr};
        cudaLaunchAttribute attributes[2]{};
        unsigned n = 0;
        if (config.programmatic) {
          attributes[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attributes[n++].val.programmaticStreamSerializationAllowed = 1;
        }
#if CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES
        if (updatable != nullptr) {
          attributes[n].id = cudaLaunchAttributeDeviceUpdatableKernelNode;
          attributes[n++].val.deviceUpdatableKernelNode.deviceUpdatable = 1;
        }
#endif
        cudaLaunchConfig_t c{};
        c.gridDim = config.grid;
        c.blockDim = config.block;
        c.dynamicSmemBytes = config.shared_bytes;
        c.stream = stream;
        c.attrs = n != 0 ? attributes : nullptr;
        c.numAttrs = n;
        check(cudaLaunchKernelExC(&c, reinterpret_cast<const void*>(kernel), params), "{} (cudaLaunchKernelEx{})", op,
              config.programmatic ? ", programmatic" : "");
#if CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES
        if (updatable != nullptr)
          *static_cast<cudaGraphDeviceNode_t*>(updatable) = attributes[n - 1].val.deviceUpdatableKernelNode.devNode;
#endif
      },
      values);
}

}  // namespace detail

/// Launches `kernel` with `args` on `stream` as `config` says (cudaLaunchKernelEx). Each
/// argument must convert to its parameter's type; a failed launch is an Error.
template <class... P, class... A>
void launch(cudaStream_t stream, const LaunchConfig& config, void (*kernel)(P...), const A&... args) {
  detail::launch_ex(stream, config, kernel, nullptr, "cugraphs::launch", args...);
}

/// The same on this thread's current_stream() (the capture stream inside a CaptureScope).
template <class... P, class... A>
void launch(const LaunchConfig& config, void (*kernel)(P...), const A&... args) {
  launch(current_stream(), config, kernel, args...);
}

#if CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES
/// Captures a launch of `kernel` on `stream` (a capturing stream) as a device-updatable
/// kernel node (CUDA 12.4+) and returns its handle, which kernels use to enable or disable
/// the node, change its grid or one of its arguments while the graph is instantiated. A
/// graph holding such nodes is instantiated once (CUDA refuses a second instantiation).
template <class... P, class... A>
[[nodiscard]] DeviceKernelNode<P...> launch_updatable(cudaStream_t stream, const LaunchConfig& config,
                                                      void (*kernel)(P...), const A&... args) {
  constexpr std::string_view op = "cugraphs::launch_updatable";
  if (!is_capturing(stream))
    detail::throw_misuse(op, "the stream is not capturing: a device-updatable kernel node exists only in a graph; "
                             "launch it inside a CaptureScope (on scope.stream() or current_stream())");
  DeviceKernelNode<P...> node;
  {
    detail::RelaxedCaptureMode relaxed;  // a query, but one that must not risk the capture
    for (std::size_t i = 0; i < sizeof...(P); ++i) {
      std::size_t size = 0;
      detail::check(cudaFuncGetParamInfo(reinterpret_cast<const void*>(kernel), i, &node.offsets[i], &size),
                    "{}: cudaFuncGetParamInfo (parameter {})", op, i);
    }
  }
  detail::launch_ex(stream, config, kernel, &node.node, op, args...);
  detail::mark_updatable_nodes();  // such a graph is never updated
  return node;
}

/// The same on current_stream() (the capture stream inside a CaptureScope).
template <class... P, class... A>
[[nodiscard]] DeviceKernelNode<P...> launch_updatable(const LaunchConfig& config, void (*kernel)(P...),
                                                      const A&... args) {
  return launch_updatable(current_stream(), config, kernel, args...);
}
#endif

#if defined(__CUDACC__)
/// Device side of programmatic dependent launch. Both compile to nothing in code built below
/// compute capability 9.0; cugraphs::launch refuses a programmatic launch of such code.
namespace pdl {

/// Waits until the kernels this one depends on programmatically have completed and their
/// writes are visible: call it before reading their results (cudaGridDependencySynchronize).
__device__ inline void wait() {
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#  endif
}

/// Lets a programmatic kernel after this one be scheduled once every block of this one has
/// called it (or exited), so its launch and prologue overlap this kernel's work; its wait()
/// still waits for this kernel to complete (cudaTriggerProgrammaticLaunchCompletion). For
/// short kernels, call it right after wait() (a chain of 16-block kernels ran 1.67x the plain
/// chain's speed on an H200 that way, 1.27x triggering after the work: docs/launch.md).
__device__ inline void trigger() {
#  if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#  endif
}

}  // namespace pdl
#endif

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/launch.ipp>
#  include <cugraphs/impl/session_api.ipp>
#endif
