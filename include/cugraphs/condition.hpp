// Condition: a conditional node's condition, passed to kernels by value.
#pragma once

#include <cugraphs/config.hpp>

#include <cuda_runtime_api.h>

#include <type_traits>

namespace cugraphs {

/// A conditional node's condition, passed to kernels by value; device code calls set().
/// Made by a ConditionalScope opened with SetByKernels (ConditionalScope::condition()), or
/// before its node by CaptureScope::make_condition() and handed to the ConditionalScope
/// later, so that kernels captured before the node can set it.
class Condition {
public:
  Condition() = default;
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  explicit Condition(cudaGraphConditionalHandle h, cudaGraph_t graph = nullptr) noexcept
      : handle_(h), graph_(graph) {}
  [[nodiscard]] cudaGraphConditionalHandle handle() const noexcept { return handle_; }
  /// The graph the condition belongs to (null for a default-made, empty Condition).
  [[nodiscard]] cudaGraph_t graph() const noexcept { return graph_; }
#  if defined(__CUDACC__)
  /// Sets the condition: for If, While and IfElse whether the body (the then-body) runs (a
  /// While: whether another iteration runs after this one), for a Switch the case to run.
  /// Takes bool and any integral or enumeration value.
  template <class T>
    requires(std::is_integral_v<T> || std::is_enum_v<T>)
  __device__ void set(T value) const {
    if constexpr (std::is_same_v<T, bool>) {
      cudaGraphSetConditional(handle_, value ? 1u : 0u);
    } else {
      cudaGraphSetConditional(handle_, static_cast<unsigned>(value));
    }
  }
  template <class T>
    requires(!std::is_integral_v<T> && !std::is_enum_v<T>)
  __device__ void set(T) const {
    static_assert(sizeof(T) == 0, "cugraphs: Condition::set takes a bool, an integer or an enumeration value "
                                  "(for a Switch, the case to run); convert the value first");
  }
#  endif

private:
  cudaGraphConditionalHandle handle_{};
  cudaGraph_t graph_ = nullptr;
#endif
};

}  // namespace cugraphs
