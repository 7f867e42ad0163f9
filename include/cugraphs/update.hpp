// Changing what an instantiated graph runs without instantiating it again: the types of
// Graph::update (a new capture applied with cudaGraphExecUpdate) and of per-node argument
// changes (KernelNode, Graph::set_kernel_args, cudaGraphExecKernelNodeSetParams).
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/format.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace cugraphs {

/// Why an executable could not take a new capture in place (cudaGraphExecUpdateResult).
enum class UpdateFailure {
  None,                       ///< it did
  TopologyChanged,            ///< other nodes, or other edges between them
  NodeTypeChanged,            ///< a node of another type at the same place
  FunctionChanged,            ///< a kernel node runs another function (drivers before 11.2)
  UnsupportedFunctionChange,  ///< a kernel's function changed in a way updates cannot follow
  ParametersChanged,          ///< a node's parameters changed in a way updates cannot follow
  AttributesChanged,          ///< a node's attributes changed in a way updates cannot follow
  NotSupported,               ///< a node's type or configuration cannot be updated
  Other,                      ///< CUDA gave no more specific reason
};

/// How Graph::update applies a new capture.
struct UpdateOptions {
  /// When the executable cannot take the capture in place, instantiate the capture instead,
  /// so that the graph runs it either way. Off: the graph keeps its executable unchanged.
  bool reinstantiate_on_failure = false;
};

/// What Graph::update did, and, when the executable could not be updated in place, why.
struct UpdateResult {
  bool updated = false;         ///< the executable now runs the new capture, updated in place
  bool reinstantiated = false;  ///< the in-place update failed and the capture was instantiated instead
  UpdateFailure failure = UpdateFailure::None;  ///< why the in-place update failed
  std::optional<cudaGraphNodeType> node_type;   ///< the node that blocked it, where CUDA names one
  std::optional<std::size_t> node_index;        ///< that node's index among the new capture's nodes
  std::string message;                          ///< the failure in words; empty when updated

  /// Whether the graph now runs the new capture (updated in place or instantiated again).
  [[nodiscard]] bool applied() const noexcept { return updated || reinstantiated; }
  explicit operator bool() const noexcept { return applied(); }
};

class Graph;

/// A kernel node of a captured graph, whose kernel takes parameters P...: the handle
/// Graph::set_kernel_args needs to change that node's arguments in the executable, without
/// a new capture. Take it with captured_kernel_node() right after the launch is captured.
/// It stays valid for its graph until the graph is reset; after Graph::update, nodes taken
/// in the capture that was instantiated and nodes taken in the capture now applied both work.
template <class... P>
class KernelNode {
public:
  /// The kernel's parameter types, as the node stores its arguments.
  using Arguments = std::tuple<std::remove_cvref_t<P>...>;

  /// An empty node, to be assigned from captured_kernel_node() (see kernel_node_for()).
  KernelNode() = default;
  /// Whether the node was taken from a capture.
  [[nodiscard]] bool empty() const noexcept { return node_ == nullptr; }
  /// The arguments the executable runs the node with now: the captured ones, then the ones
  /// set_kernel_args and set_kernel_arg changed (copies of a KernelNode share them).
  [[nodiscard]] const Arguments& arguments() const {
    if (!args_) detail::throw_misuse("KernelNode::arguments", "the node is empty; take it with captured_kernel_node()");
    return *args_;
  }
  /// The node in the captured graph it was taken from.
  [[nodiscard]] cudaGraphNode_t native() const noexcept { return node_; }
  /// Its index among that graph's nodes, in the order they were captured.
  [[nodiscard]] std::size_t index() const noexcept { return index_; }

private:
  friend class Graph;
  template <class... Q>
  friend KernelNode<Q...> captured_kernel_node(void (*)(Q...), cudaStream_t);

  cudaGraphNode_t node_ = nullptr;
  std::uint64_t capture_ = 0;  // the capture it was taken in
  std::size_t index_ = 0;
  cudaKernelNodeParams launch_{};  // function, grid, block, shared memory (no arguments)
  std::shared_ptr<Arguments> args_;  // the arguments the executable runs now
};

/// An empty KernelNode for `kernel`, so that a node can be declared with auto before the
/// capture block and assigned inside it: `auto node = kernel_node_for(adamw);` then
/// `node = captured_kernel_node(adamw);` right after the launch is captured.
template <class... P>
[[nodiscard]] KernelNode<P...> kernel_node_for(void (*)(P...)) noexcept {
  return {};
}

namespace detail {

// Whether V converts to P as P{v} would, without narrowing.
template <class V, class P>
concept converts_without_narrowing = requires(const V& v) { P{v}; };

[[nodiscard]] constexpr UpdateFailure to_failure(cudaGraphExecUpdateResult r) noexcept {
  switch (r) {
    case cudaGraphExecUpdateSuccess: return UpdateFailure::None;
    case cudaGraphExecUpdateErrorTopologyChanged: return UpdateFailure::TopologyChanged;
    case cudaGraphExecUpdateErrorNodeTypeChanged: return UpdateFailure::NodeTypeChanged;
    case cudaGraphExecUpdateErrorFunctionChanged: return UpdateFailure::FunctionChanged;
    case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return UpdateFailure::UnsupportedFunctionChange;
    case cudaGraphExecUpdateErrorParametersChanged: return UpdateFailure::ParametersChanged;
    case cudaGraphExecUpdateErrorAttributesChanged: return UpdateFailure::AttributesChanged;
    case cudaGraphExecUpdateErrorNotSupported: return UpdateFailure::NotSupported;
    default: return UpdateFailure::Other;
  }
}

[[nodiscard]] constexpr std::string_view describe(UpdateFailure f) noexcept {
  switch (f) {
    case UpdateFailure::None: return "none";
    case UpdateFailure::TopologyChanged:
      return "the topology changed (another number of nodes, or other edges between them)";
    case UpdateFailure::NodeTypeChanged: return "a node's type changed";
    case UpdateFailure::FunctionChanged: return "a kernel node's function changed";
    case UpdateFailure::UnsupportedFunctionChange:
      return "a kernel node's function changed in a way an update cannot follow";
    case UpdateFailure::ParametersChanged: return "a node's parameters changed in a way an update cannot follow";
    case UpdateFailure::AttributesChanged: return "a node's attributes changed in a way an update cannot follow";
    case UpdateFailure::NotSupported: return "a node's type or configuration cannot be updated";
    default: return "CUDA gave no more specific reason";
  }
}

// All arguments of a kernel taking P..., from `args` (Graph::set_kernel_args).
template <class... P, class... A>
[[nodiscard]] std::tuple<std::remove_cvref_t<P>...> all_kernel_args(const A&... args) {
  static_assert(sizeof...(A) == sizeof...(P),
                "cugraphs: Graph::set_kernel_args takes one argument per parameter of the node's kernel");
  static_assert((std::is_convertible_v<const A&, std::remove_cvref_t<P>> && ...),
                "cugraphs: Graph::set_kernel_args: every argument must convert to its kernel parameter's type");
  return {static_cast<std::remove_cvref_t<P>>(args)...};
}

// The arguments `node` runs with now, with arguments I... replaced by `values`
// (Graph::set_kernel_arg).
template <std::size_t... I, class... P, class... V>
[[nodiscard]] typename KernelNode<P...>::Arguments some_kernel_args(const KernelNode<P...>& node, const V&... values) {
  static_assert(sizeof...(I) == sizeof...(V), "cugraphs: Graph::set_kernel_arg<I...> takes one value per index");
  static_assert(((I < sizeof...(P)) && ...),
                "cugraphs: Graph::set_kernel_arg<I...>: an index is not a parameter of the node's kernel");
  using Args = typename KernelNode<P...>::Arguments;
  static_assert((converts_without_narrowing<V, std::tuple_element_t<I, Args>> && ...),
                "cugraphs: Graph::set_kernel_arg<I...>: each value must convert to its kernel parameter's type "
                "without narrowing (is the index right? write 1.0f for a float parameter)");
  auto args = node.arguments();
  ((std::get<I>(args) = static_cast<std::tuple_element_t<I, Args>>(values)), ...);
  return args;
}

// Calls `fn` with the launch parameters `launch`, the kernel's arguments being `values`.
template <class... T, class Fn>
void with_kernel_params(cudaKernelNodeParams launch, std::tuple<T...>& values, Fn&& fn) {
  std::apply(
      [&](auto&... value) {
        void* params[sizeof...(T) + 1] = {static_cast<void*>(std::addressof(value))..., nullptr};
        cudaKernelNodeParams p = launch;
        p.kernelParams = params;
        fn(p);
      },
      values);
}

// Whether a kernel node's function (as cudaGraphKernelNodeGetParams gives it back) is the
// __global__ function `kernel`: the runtime may return the function's host handle, its
// driver function or its cudaKernel_t.
[[nodiscard]] bool same_kernel(const void* node_func, const void* kernel) noexcept;

// A kernel node's arguments as its parameters' values, read from the node's parameter
// pointers (kernel parameters are trivially copyable).
template <class... D, std::size_t... I>
[[nodiscard]] std::tuple<D...> read_kernel_args(void** params, std::index_sequence<I...>) {
  static_assert((std::is_trivially_copyable_v<D> && ...), "cugraphs: kernel parameters must be trivially copyable");
  auto one = [&]<class T>(std::size_t i) {
    std::array<unsigned char, sizeof(T)> bytes;
    std::memcpy(bytes.data(), params[i], sizeof(T));
    return std::bit_cast<T>(bytes);
  };
  return std::tuple<D...>{one.template operator()<D>(I)...};
}

}  // namespace detail

/// The kernel node just captured on `stream`, a capture stream open on this thread: the
/// handle Graph::set_kernel_args changes that node's arguments with. Call it right after
/// the launch; an Error says what went wrong when the stream's last node is not a launch of
/// `kernel` (another node type, another kernel, several nodes joined from other streams),
/// and for streams that capture conditional bodies, whose nodes cannot be changed this way.
template <class... P>
[[nodiscard]] KernelNode<P...> captured_kernel_node(void (*kernel)(P...), cudaStream_t stream) {
  constexpr std::string_view op = "captured_kernel_node";
  const auto info = detail::capture_info(stream, op);
  const std::uint64_t capture =
      detail::capture_of_stream(stream, info.graph, info.status == cudaStreamCaptureStatusActive, op);
  if (info.status != cudaStreamCaptureStatusActive)
    detail::throw_cuda(cudaErrorStreamCaptureInvalidated, op);
  if (info.count != 1)
    detail::throw_misuse(op, "the capture does not end in one node on this stream (it ends in {}: nothing "
                             "captured yet, or work joined from other streams); take the node right after "
                             "the kernel's launch",
                         info.count);
  const cudaGraphNode_t node = info.deps[0];
  cudaGraphNodeType type{};
  detail::check(cudaGraphNodeGetType(node, &type), "{}: cudaGraphNodeGetType", op);
  if (type != cudaGraphNodeTypeKernel)
    detail::throw_misuse(op, "the last node captured on the stream is a {} node, not a kernel launch",
                         detail::node_type_name(type));
  cudaKernelNodeParams p{};
  detail::check(cudaGraphKernelNodeGetParams(node, &p), "{}: cudaGraphKernelNodeGetParams", op);
  if (!detail::same_kernel(p.func, reinterpret_cast<const void*>(kernel)))
    detail::throw_misuse(op, "the last kernel node captured on the stream runs another kernel than the one given");
  const auto index = detail::node_index(info.graph, node, op);
  if (!index) detail::throw_misuse(op, "the node is not among its graph's nodes");
  KernelNode<P...> k;
  k.node_ = node;
  k.capture_ = capture;
  k.index_ = *index;
  k.launch_.func = reinterpret_cast<void*>(kernel);  // the form the runtime takes back
  k.launch_.gridDim = p.gridDim;
  k.launch_.blockDim = p.blockDim;
  k.launch_.sharedMemBytes = p.sharedMemBytes;
  k.args_ = std::make_shared<typename KernelNode<P...>::Arguments>(
      detail::read_kernel_args<std::remove_cvref_t<P>...>(p.kernelParams, std::index_sequence_for<P...>{}));
  // In verify_replay's fresh capture of a step, the node its graph's capture took here: the
  // handle the step stores stays the graph's (the same kernel, so the same argument types).
  if (const detail::TakenNode* same = detail::note_taken_node(capture, {node, capture, *index, k.launch_, k.args_}, op)) {
    k.node_ = same->node;
    k.capture_ = same->capture;
    k.index_ = same->index;
    k.launch_ = same->launch;
    k.args_ = std::static_pointer_cast<typename KernelNode<P...>::Arguments>(same->args);
  }
  return k;
}

/// The same on current_stream(), which is the capture stream inside a CaptureScope.
template <class... P>
[[nodiscard]] KernelNode<P...> captured_kernel_node(void (*kernel)(P...)) {
  return captured_kernel_node(kernel, current_stream());
}

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/update.ipp>
#  include <cugraphs/impl/session_api.ipp>
#endif
