// Condition: a conditional node's condition, passed to kernels by value.
#pragma once

#include <cugraphs/config.hpp>

#include <cuda_runtime_api.h>

#include <type_traits>

namespace cugraphs {

namespace detail {
// The 32-bit value Condition::set gives CUDA for `value`: a bool as 0 or 1, an enumeration
// as its underlying value, an integer as it is where it fits; a wider one that does not fit
// (a 64-bit count of 2^32 bytes left, a mask's high bit) as the largest value, never its low
// bits, which could read as 0 (false, or case 0). Narrower negative values wrap, nonzero.
template <class T>
[[nodiscard]] CUGRAPHS_HOST_DEVICE constexpr unsigned condition_value(T value) noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? 1u : 0u;
  } else if constexpr (std::is_enum_v<T>) {
    return condition_value(static_cast<std::underlying_type_t<T>>(value));
  } else if constexpr (sizeof(T) <= sizeof(unsigned)) {
    return static_cast<unsigned>(value);
  } else {
    if constexpr (std::is_signed_v<T>)
      if (value < 0) return 0xFFFFFFFFu;
    return static_cast<unsigned long long>(value) > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<unsigned>(value);
  }
}
}  // namespace detail

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
  /// Takes bool and any integral or enumeration value; a 64-bit value too large for the
  /// condition's 32 bits counts as the largest (true; for a Switch, no case), never as its
  /// low bits.
  template <class T>
    requires(std::is_integral_v<T> || std::is_enum_v<T>)
  __device__ void set(T value) const {
    cudaGraphSetConditional(handle_, detail::condition_value(value));
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
