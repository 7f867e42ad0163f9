// How a conditional node is chosen: its kind and where its condition comes from. Light (no
// capture machinery), for the public templates that open conditional scopes.
#pragma once

#include <cugraphs/config.hpp>

#include <cuda_runtime_api.h>

#include <string_view>

namespace cugraphs::detail {

enum class ConditionalKind { If, While, IfElse, Switch };

[[nodiscard]] constexpr std::string_view name(ConditionalKind k) noexcept {
  switch (k) {
    case ConditionalKind::If: return "If";
    case ConditionalKind::While: return "While";
    case ConditionalKind::IfElse: return "IfElse";
    default: return "Switch";
  }
}

// Where a conditional node's condition comes from on every launch: a device flag read just
// before the node (a bool for If/While/IfElse, an unsigned index for Switch), kernels inside
// the graph (Condition::set) starting from `initial`, or a handle made earlier in the same
// graph (CaptureScope::make_condition), which kernels set before or inside the node.
struct ConditionSource {
  enum class Type : unsigned char { SetByKernels, Bool, Index, Handle };
  Type type = Type::SetByKernels;
  const void* flag = nullptr;
  unsigned initial = 0;
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  cudaGraphConditionalHandle handle{};  // Type::Handle: made in `graph`
#endif
  cudaGraph_t graph = nullptr;

  [[nodiscard]] static ConditionSource device_flag(const bool* f) noexcept { return {Type::Bool, f, 0}; }
  [[nodiscard]] static ConditionSource device_index(const unsigned* i) noexcept { return {Type::Index, i, 0}; }
  [[nodiscard]] static ConditionSource set_by_kernels(unsigned initial) noexcept {
    return {Type::SetByKernels, nullptr, initial};
  }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  [[nodiscard]] static ConditionSource made_handle(cudaGraphConditionalHandle h, cudaGraph_t g) noexcept;
#endif
  [[nodiscard]] bool from_flag() const noexcept { return type == Type::Bool || type == Type::Index; }
  // The flag's size, which is also the alignment a kernel reading it needs.
  [[nodiscard]] unsigned flag_bytes() const noexcept { return type == Type::Index ? 4u : 1u; }
};

}  // namespace cugraphs::detail
