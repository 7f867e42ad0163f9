// Graphed training pairs: a forward and the user's backward captured into two graphs of one
// pool, the C++ counterpart of torch.cuda.make_graphed_callables for modules that train.
// C++ has no autograd: the user supplies the backward, and the surfaces say at compile time
// which arguments take a gradient (requires_grad), which are parameters read in place
// (param), and what the forward keeps for the backward without a gradient (save_for_backward).
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/flatten.hpp>
#include <cugraphs/graphed.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cugraphs {

/// Marks an argument of a graphed pair (a DeviceSpan or a tree of them) as taking a
/// gradient: the backward returns one for it, leaf for leaf.
template <class T>
struct Grad {
  T value;
};

/// Marks an argument of a graphed pair as a parameter: both halves read the caller's own
/// memory in place; it is never staged, and forward() does not take it.
template <class T>
struct Param {
  T value;
};

/// `arg` takes a gradient; requires_grad(param(w)) is a parameter that takes one.
template <class T>
[[nodiscard]] constexpr Grad<T> requires_grad(const T& arg) {
  return {arg};
}

/// `arg` is a parameter, read in place.
template <class T>
[[nodiscard]] constexpr Param<T> param(const T& arg) {
  return {arg};
}

/// What a forward returns to hand values to its backward that take no incoming gradient
/// (activations, masks): `outputs` are what forward() returns, `saved` what the backward
/// receives beside them. Leaves may be DeviceSpans or DeviceBuffers, as for outputs.
template <class Outputs, class Saved>
struct Saving {
  Outputs outputs;
  Saved saved;
};

template <class O, class S>
[[nodiscard]] Saving<std::decay_t<O>, std::decay_t<S>> save_for_backward(O&& outputs, S&& saved) {
  return {std::forward<O>(outputs), std::forward<S>(saved)};
}

namespace detail {

// What an argument of a pair is: its value (the marks taken off), whether it is a
// parameter, whether it takes a gradient.
template <class A>
struct arg_traits {
  using value = A;
  static constexpr bool param = false;
  static constexpr bool grad = false;
};
template <class T>
struct arg_traits<Param<T>> {
  static_assert(!arg_traits<T>::param && !arg_traits<T>::grad,
                "cugraphs: mark a parameter that takes a gradient as requires_grad(param(w)), with "
                "param innermost, and mark each argument once");
  using value = T;
  static constexpr bool param = true;
  static constexpr bool grad = false;
};
template <class T>
struct arg_traits<Grad<T>> {
  static_assert(!arg_traits<T>::grad, "cugraphs: an argument is marked requires_grad twice");
  using value = typename arg_traits<T>::value;
  static constexpr bool param = arg_traits<T>::param;
  static constexpr bool grad = true;
};

template <class A>
[[nodiscard]] const typename arg_traits<A>::value& unmarked(const A& a) noexcept {
  if constexpr (arg_traits<A>::grad) {
    return unmarked(a.value);
  } else if constexpr (arg_traits<A>::param) {
    return a.value;
  } else {
    return a;
  }
}

// The staged arguments: every argument that is not a parameter, marks taken off.
template <class... A>
using staged_tuple_t = decltype(std::tuple_cat(
    std::declval<std::conditional_t<arg_traits<A>::param, std::tuple<>, std::tuple<typename arg_traits<A>::value>>>()...));

// Where argument I is among the staged ones.
template <class... A>
constexpr std::size_t staged_index(std::size_t i) {
  constexpr std::array<bool, sizeof...(A) + 1> param{arg_traits<A>::param..., false};
  std::size_t n = 0;
  for (std::size_t k = 0; k != i; ++k) n += param[k] ? 0 : 1;
  return n;
}

// Argument I of a pair's halves: the caller's value for a parameter, else the staged one.
template <std::size_t I, class... A, class Values, class Staged>
[[nodiscard]] const auto& pick_arg(const Values& values, const Staged& staged) {
  if constexpr (arg_traits<std::tuple_element_t<I, std::tuple<A...>>>::param) {
    return std::get<I>(values);
  } else {
    return std::get<staged_index<A...>(I)>(staged);
  }
}

template <class F, class Tuple>
struct callable_of;
template <class F, class... S>
struct callable_of<F, std::tuple<S...>> {
  using type = GraphedCallable<F, S...>;
};

// The structure of a forward's result: its outputs and what it saves.
template <class R>
struct forward_parts {
  using outputs = R;
  using saved = std::tuple<>;
  static constexpr bool saving = false;
};
template <class O, class S>
struct forward_parts<Saving<O, S>> {
  using outputs = O;
  using saved = S;
  static constexpr bool saving = true;
};
template <>
struct forward_parts<void> {
  using outputs = std::tuple<>;
  using saved = std::tuple<>;
  static constexpr bool saving = false;
};

// A span tree with read-only leaves: the type of the incoming gradients.
template <class T>
struct const_tree {
  static_assert(always_false_v<T>,
                "cugraphs: the outputs of a graphed pair's forward must be DeviceSpan or DeviceBuffer "
                "leaves nested in std::tuple, std::pair or std::array (their incoming gradients take "
                "the same structure); the offending type is the T of const_tree<T>");
  using type = T;
};
template <class T>
struct const_tree<DeviceSpan<T>> {
  using type = DeviceSpan<const std::remove_const_t<T>>;
};
template <class... Ts>
struct const_tree<std::tuple<Ts...>> {
  using type = std::tuple<typename const_tree<Ts>::type...>;
};
template <class X, class Y>
struct const_tree<std::pair<X, Y>> {
  using type = std::pair<typename const_tree<X>::type, typename const_tree<Y>::type>;
};
template <class T, std::size_t N>
struct const_tree<std::array<T, N>> {
  using type = std::array<typename const_tree<T>::type, N>;
};
template <class T>
using const_tree_t = typename const_tree<T>::type;

template <class T>
[[nodiscard]] const_tree_t<T> as_const_tree(const T& tree) {
  if constexpr (is_span_v<T>) {
    return const_tree_t<T>(tree.data(), tree.size());
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return const_tree_t<T>{as_const_tree(std::get<I>(tree))...};
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  }
}

// The element types of a flat tuple of leaves, const taken off: gradients are compared by these.
template <class Flat>
struct value_types;
template <class... L>
struct value_types<std::tuple<L...>> {
  using type = std::tuple<typename L::value_type...>;
};
template <class T>
using value_types_t = typename value_types<flat_t<T>>::type;

// The element types the backward must return: those of each argument that takes a gradient.
template <class... A>
using expected_grad_values_t = decltype(std::tuple_cat(
    std::declval<std::conditional_t<arg_traits<A>::grad, value_types_t<typename arg_traits<A>::value>, std::tuple<>>>()...));

// Whether a tree holds a reference anywhere: outputs must be held by value.
template <class T>
inline constexpr bool holds_reference_v = std::is_reference_v<T>;
template <class... Ts>
inline constexpr bool holds_reference_v<std::tuple<Ts...>> = (holds_reference_v<Ts> || ...);
template <class X, class Y>
inline constexpr bool holds_reference_v<std::pair<X, Y>> = holds_reference_v<X> || holds_reference_v<Y>;
template <class T, std::size_t N>
inline constexpr bool holds_reference_v<std::array<T, N>> = holds_reference_v<T>;

// The forward half: calls the user's forward with the parameters in place and the staged
// arguments, and returns (outputs, saved) as one pair, the graphed callable's outputs.
template <class Fwd, class... A>
struct ForwardFn {
  using Values = std::tuple<typename arg_traits<A>::value...>;
  using Result = std::remove_cvref_t<std::invoke_result_t<Fwd&, const typename arg_traits<A>::value&...>>;
  using Parts = forward_parts<Result>;
  static_assert(!holds_reference_v<typename Parts::outputs> && !holds_reference_v<typename Parts::saved>,
                "cugraphs: the outputs and saved values of a graphed pair's forward must be held by value "
                "(DeviceSpans or DeviceBuffers, not references to them: std::tie makes references)");

  Fwd fwd;
  Values values;  // the parameters (and the samples, for the other arguments: unused)

  template <class... S>
  auto operator()(const S&... staged) {
    const auto st = std::forward_as_tuple(staged...);
    auto call = [&]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
      return std::invoke(fwd, pick_arg<I, A...>(values, st)...);
    };
    constexpr auto all = std::index_sequence_for<A...>{};
    if constexpr (std::is_void_v<Result>) {
      call(all);
      return std::pair<std::tuple<>, std::tuple<>>{};
    } else if constexpr (Parts::saving) {
      auto r = call(all);
      return std::pair<typename Parts::outputs, typename Parts::saved>{std::move(r.outputs), std::move(r.saved)};
    } else {
      return std::pair<Result, std::tuple<>>{call(all), std::tuple<>{}};
    }
  }
};

// Calls the user's backward: backward(arguments..., outputs, [saved,] incoming gradients).
template <bool Saving, class Bwd, class Values, class Outputs, class Saved, class Grads>
decltype(auto) invoke_backward(Bwd& bwd, const Values& values, const Outputs& outputs, const Saved& saved,
                               const Grads& grads) {
  return std::apply(
      [&](const auto&... a) -> decltype(auto) {
        if constexpr (Saving) {
          return std::invoke(bwd, a..., outputs, saved, grads);
        } else {
          (void)saved;
          return std::invoke(bwd, a..., outputs, grads);
        }
      },
      values);
}

// The backward half: the arguments, outputs and saved values the forward graph holds, bound
// to the user's backward; the incoming gradients are its one staged argument.
template <bool Saving, class Bwd, class Values, class Outputs, class Saved>
struct BackwardFn {
  Bwd bwd;
  Values values;
  Outputs outputs;
  Saved saved;

  template <class Grads>
  auto operator()(const Grads& grads) {
    return invoke_backward<Saving>(bwd, values, outputs, saved, grads);
  }
};

template <bool Saving, class Bwd, class Values, class Outputs, class Saved, class Grads>
struct backward_call;
template <bool Saving, class Bwd, class... V, class Outputs, class Saved, class Grads>
struct backward_call<Saving, Bwd, std::tuple<V...>, Outputs, Saved, Grads> {
  static constexpr bool invocable = Saving ? std::is_invocable_v<Bwd&, const V&..., const Outputs&, const Saved&, const Grads&>
                                           : std::is_invocable_v<Bwd&, const V&..., const Outputs&, const Grads&>;
};

// Staging of a pair's forward: the staged samples, as a tuple of references.
template <class... A>
[[nodiscard]] auto staged_samples(const A&... samples) {
  return std::tuple_cat([&]() {
    if constexpr (arg_traits<A>::param) {
      return std::tuple<>{};
    } else {
      return std::tuple<const typename arg_traits<A>::value&>(unmarked(samples));
    }
  }()...);
}

}  // namespace detail

template <class Fwd, class Bwd, class... A>
class GraphedPair;

namespace detail {

struct PairMaker;

// forward(staged arguments...) with the staged types spelled out, so that a wrong argument
// list is a compile-time error in the pair's own words.
template <class Pair, class Staged>
class PairForward;
template <class Pair, class... S>
class PairForward<Pair, std::tuple<S...>> {
public:
  /// Stages the inputs and replays the forward on current_stream(); returns the outputs.
  decltype(auto) forward(const S&... inputs) { return self().run_forward(current_stream(), inputs...); }
  /// The same on `stream`.
  decltype(auto) forward(cudaStream_t stream, const S&... inputs) { return self().run_forward(stream, inputs...); }

  /// Any other argument list is a compile-time error that says so.
  template <class... Other>
    requires(!accepts_v<std::tuple<const S&...>, std::tuple<Other...>> &&
             !accepts_v<std::tuple<cudaStream_t, const S&...>, std::tuple<Other...>>)
  void forward(Other&&...) {
    static_assert(always_false_v<std::tuple<Other...>>,
                  "cugraphs: GraphedPair::forward was called with arguments that do not match the "
                  "pair's staged inputs: its sample arguments in order, without those marked param "
                  "and with the marks taken off, optionally after a cudaStream_t");
  }

private:
  Pair& self() noexcept { return static_cast<Pair&>(*this); }
};

}  // namespace detail

/// How graphed pairs are made: the same options as graphed callables (warm-up iterations,
/// pool, capture mode).
using GraphedPairOptions = GraphedOptions;

/// A forward and its backward, each captured into a graph of one shared pool, with static
/// input, output and gradient surfaces. forward(inputs...) stages the inputs (not the
/// parameters) and replays the forward graph; backward(grad_outputs) stages the incoming
/// gradients and replays the backward graph, which reads the arguments, the outputs and
/// the saved values of the forward graph, and returns the gradients of the arguments
/// marked requires_grad. Each call costs about one graph launch. Every forward() allows one
/// backward(); calls must be ordered (one stream, or streams the caller orders).
template <class Fwd, class Bwd, class... A>
class GraphedPair : public detail::PairForward<GraphedPair<Fwd, Bwd, A...>, detail::staged_tuple_t<A...>> {
  using ForwardFn = detail::ForwardFn<Fwd, A...>;
  using Values = typename ForwardFn::Values;
  using Parts = typename ForwardFn::Parts;
  using ForwardCallable = typename detail::callable_of<ForwardFn, detail::staged_tuple_t<A...>>::type;

public:
  /// What forward() returns: the forward's outputs, DeviceBuffer leaves as DeviceSpans.
  using Outputs = typename ForwardCallable::Outputs::first_type;
  /// What the forward saved for the backward (std::tuple<> when it returns no Saving).
  using Saved = typename ForwardCallable::Outputs::second_type;
  /// What backward() takes: one read-only leaf per output leaf, in the outputs' structure.
  using GradOutputs = detail::const_tree_t<Outputs>;
  /// The staged inputs, in order (the arguments not marked param, marks taken off).
  using StaticInputs = detail::staged_tuple_t<A...>;

private:
  static_assert(detail::backward_call<Parts::saving, Bwd, Values, Outputs, Saved, GradOutputs>::invocable,
                "cugraphs: the backward of a graphed pair must be callable as backward(arguments..., "
                "outputs, grad_outputs), or backward(arguments..., outputs, saved, grad_outputs) when the "
                "forward returns save_for_backward(outputs, saved): the arguments with their marks taken "
                "off, the outputs with DeviceBuffers as DeviceSpans, the incoming gradients with the "
                "outputs' structure and read-only leaves (GraphedPair::GradOutputs)");
  using BackwardFn = detail::BackwardFn<Parts::saving, Bwd, Values, Outputs, Saved>;
  using BackwardCallable = GraphedCallable<BackwardFn, GradOutputs>;

public:
  /// What backward() returns: the gradients the backward returned, DeviceBuffers as spans.
  using GradInputs = typename BackwardCallable::Outputs;

  static_assert(std::is_same_v<detail::value_types_t<GradInputs>, detail::expected_grad_values_t<A...>>,
                "cugraphs: the backward of a graphed pair must return one gradient per argument marked "
                "requires_grad, in argument order, each with that argument's leaves (same count and "
                "element types; DeviceSpan<T> or DeviceBuffer<T>): a std::tuple of them, the gradient "
                "alone when one argument is marked, nothing (void) when none is");

  /// Captures the forward (made by make_graphed_pair and make_graphed_pairs).
  GraphedPair(detail::BuildTag, ForwardFn fwd, Bwd bwd, const GraphedOptions& opts, const PoolHandle& pool,
              const A&... samples)
      : backward_fn_(std::move(bwd)), grad_sizes_(grad_sizes(samples...)) {
    std::apply(
        [&](const auto&... staged) { fwd_.emplace(detail::BuildTag{}, std::move(fwd), opts, pool, staged...); },
        detail::staged_samples(samples...));
    fwd_->names_ = {"GraphedPair::forward", "GraphedPair", "input leaf"};
  }

  GraphedPair(GraphedPair&&) noexcept = default;
  GraphedPair& operator=(GraphedPair&&) = delete;
  GraphedPair(const GraphedPair&) = delete;
  GraphedPair& operator=(const GraphedPair&) = delete;
  ~GraphedPair() = default;

  using detail::PairForward<GraphedPair, StaticInputs>::forward;

  /// Stages the incoming gradients and replays the backward on current_stream(); returns
  /// the gradients of the arguments marked requires_grad.
  const GradInputs& backward(const GradOutputs& grad_outputs) { return backward(current_stream(), grad_outputs); }

  /// The same on `stream`. Refused (an Error, nothing launched) before any forward(), and a
  /// second time for one forward().
  const GradInputs& backward(cudaStream_t stream, const GradOutputs& grad_outputs) {
    constexpr std::string_view op = "GraphedPair::backward";
    check_usable(op);
    if (forwards_ == 0)
      detail::throw_misuse(op, "backward() was called before any forward(): the backward reads the inputs, "
                               "outputs and saved values of a forward call; call forward() first");
    if (!pending_)
      detail::throw_misuse(op, "backward() was already called for the last forward(); each forward() allows "
                               "one backward() (call forward() again first)");
    const GradInputs& grads = bwd_->stage_and_launch(stream, grad_outputs);
    pending_ = false;
    ++backwards_;
    return grads;
  }

  /// The staged inputs the forward was captured with (buffers from the pool).
  [[nodiscard]] const StaticInputs& static_inputs() const noexcept { return fwd_->static_inputs(); }
  /// The outputs every forward() overwrites.
  [[nodiscard]] const Outputs& static_outputs() const noexcept { return fwd_->static_outputs().first; }
  /// The values the forward saved for the backward.
  [[nodiscard]] const Saved& saved() const noexcept { return fwd_->static_outputs().second; }
  /// The incoming gradients every backward() stages (buffers from the pool).
  [[nodiscard]] const GradOutputs& static_grad_outputs() const noexcept {
    return std::get<0>(bwd_->static_inputs());
  }
  /// The gradients every backward() overwrites.
  [[nodiscard]] const GradInputs& static_grad_inputs() const noexcept { return bwd_->static_outputs(); }
  /// Graph::set_kernel_args on whichever of the pair's graphs captured `node` (taken with
  /// captured_kernel_node() in the forward or the backward): later steps run it with `args`.
  template <class... P, class... V>
  void set_kernel_args(const KernelNode<P...>& node, const V&... args) {
    if (holds_forward(node)) {
      fwd_->set_kernel_args(node, args...);
    } else {
      bwd_->set_kernel_args(node, args...);
    }
  }
  /// Graph::set_kernel_arg<I...> on whichever graph captured `node`: per-step scalars (an
  /// optimizer's step count or learning rate in the backward), kept for later steps.
  template <std::size_t... I, class... P, class... V>
    requires(sizeof...(I) > 0)
  void set_kernel_arg(const KernelNode<P...>& node, const V&... values) {
    if (holds_forward(node)) {
      fwd_->template set_kernel_arg<I...>(node, values...);
    } else {
      bwd_->template set_kernel_arg<I...>(node, values...);
    }
  }

  [[nodiscard]] const Graph& forward_graph() const noexcept { return fwd_->graph(); }
  [[nodiscard]] const Graph& backward_graph() const noexcept { return bwd_->graph(); }
  [[nodiscard]] std::uint64_t forward_calls() const noexcept { return forwards_; }
  [[nodiscard]] std::uint64_t backward_calls() const noexcept { return backwards_; }
  /// Whether the last forward() still awaits its backward().
  [[nodiscard]] bool backward_pending() const noexcept { return pending_; }

private:
  // Whether `node` is the forward's (else the backward's; neither is an Error).
  template <class... P>
  [[nodiscard]] bool holds_forward(const KernelNode<P...>& node) const {
    if (fwd_->graph().holds(node)) return true;
    if (bwd_->graph().holds(node)) return false;
    detail::throw_misuse("GraphedPair::set_kernel_args", "the KernelNode was not taken in this pair's forward or "
                                                         "backward capture (take it with captured_kernel_node() "
                                                         "right after the launch, inside forward or backward)");
  }

  template <class, class>
  friend class detail::PairForward;
  friend struct detail::PairMaker;

  static constexpr std::size_t grad_leaves = std::tuple_size_v<detail::expected_grad_values_t<A...>>;

  template <class... S>
  const Outputs& run_forward(cudaStream_t stream, const S&... inputs) {
    check_usable("GraphedPair::forward");
    const Outputs& outputs = fwd_->stage_and_launch(stream, inputs...).first;
    pending_ = true;
    ++forwards_;
    return outputs;
  }

  void check_usable(std::string_view op) const {
    if (!fwd_ || fwd_->moved_from()) detail::throw_misuse(op, "this GraphedPair was moved from");
    if (!bwd_) detail::throw_misuse(op, "this GraphedPair's backward was never captured");
  }

  // The sizes of the leaves that take a gradient, in order.
  static std::array<std::size_t, grad_leaves> grad_sizes(const A&... samples) {
    std::array<std::size_t, grad_leaves> sizes{};
    [[maybe_unused]] std::size_t next = 0;
    [[maybe_unused]] auto record = [&](std::size_t i, auto leaf) { sizes[i] = leaf.size(); };
    auto one = [&](const auto& a) {
      if constexpr (detail::arg_traits<std::remove_cvref_t<decltype(a)>>::grad)
        detail::visit_leaves(detail::unmarked(a), next, record);
    };
    (one(samples), ...);
    return sizes;
  }

  // Captures the backward into `pool`, after the forward (and, for several pairs, after the
  // backwards of the pairs captured after this one).
  void capture_backward(const GraphedOptions& opts, const PoolHandle& pool) {
    const auto& fwd_outputs = fwd_->static_outputs();
    const auto& staged = fwd_->static_inputs();
    Values values = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return Values{detail::pick_arg<I, A...>(fwd_->f_.values, staged)...};
    }(std::index_sequence_for<A...>{});
    const GradOutputs sample = detail::as_const_tree(fwd_outputs.first);
    bwd_.emplace(detail::BuildTag{},
                 BackwardFn{std::move(*backward_fn_), std::move(values), fwd_outputs.first, fwd_outputs.second}, opts,
                 pool, sample);
    backward_fn_.reset();
    bwd_->names_ = {"GraphedPair::backward", "GraphedPair", "incoming gradient leaf"};
    // The gradients' element types were checked at compile time; their sizes are known now.
    std::size_t next = 0;
    [[maybe_unused]] auto check = [&](std::size_t i, auto leaf) {
      if (leaf.size() != grad_sizes_[i])
        detail::throw_misuse("make_graphed_pair", "the backward's gradient leaf {} has {} elements, but the "
                                                  "argument leaf it is the gradient of has {}",
                             i, leaf.size(), grad_sizes_[i]);
      if (leaf.data() == nullptr && leaf.size() != 0)
        detail::throw_misuse("make_graphed_pair", "the backward's gradient leaf {} is a null pointer", i);
    };
    detail::visit_leaves(bwd_->static_outputs(), next, check);
  }

  // Warm-up: `iterations` eager forward and backward calls on the samples, on the capture
  // stream, with zeros as the incoming gradients.
  static void warm_up(ForwardFn& fwd, Bwd& bwd, cudaStream_t s, int iterations, const A&... samples) {
    constexpr std::string_view op = "make_graphed_pair";
    detail::check_warm_up(op, iterations, detail::unmarked(samples)...);
    StreamGuard on(s);
    for (int i = 0; i < iterations; ++i) {
      detail::Owners keep;  // buffers the forward returns live until its backward has run
      auto parts = detail::take_outputs(
          std::apply([&](const auto&... staged) { return fwd(staged...); }, detail::staged_samples(samples...)),
          keep);
      using Flat = flat_t<GradOutputs>;
      Flat zeros = zero_leaves(flatten(parts.first), keep, s, std::make_index_sequence<std::tuple_size_v<Flat>>{});
      const GradOutputs grads = unflatten<GradOutputs>(zeros);
      if constexpr (std::is_void_v<decltype(detail::invoke_backward<Parts::saving>(
                        bwd, fwd.values, parts.first, parts.second, grads))>) {
        detail::invoke_backward<Parts::saving>(bwd, fwd.values, parts.first, parts.second, grads);
      } else {
        auto discarded = detail::invoke_backward<Parts::saving>(bwd, fwd.values, parts.first, parts.second,
                                                                grads);
        (void)discarded;  // buffers it returns are freed here
      }
    }
    detail::check(cudaStreamSynchronize(s), "make_graphed_pair: waiting for the warm-up calls");
  }

  // One zero-filled buffer per leaf of `like`, kept in `keep`, as read-only spans.
  template <class Like, std::size_t... I>
  static flat_t<GradOutputs> zero_leaves(const Like& like, detail::Owners& keep, cudaStream_t s,
                                         std::index_sequence<I...>) {
    auto zero = [&]<class Leaf>(std::type_identity<Leaf>, std::size_t count) {
      using Value = typename Leaf::value_type;
      auto buffer = std::make_shared<DeviceBuffer<Value>>(count, s);
      if (count != 0)
        detail::check(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), s),
                      "make_graphed_pair: zeroing a warm-up gradient");
      Leaf leaf(buffer->data(), count);
      keep.push_back(std::move(buffer));
      return leaf;
    };
    return flat_t<GradOutputs>{
        zero(std::type_identity<std::tuple_element_t<I, flat_t<GradOutputs>>>{}, std::get<I>(like).size())...};
  }

  std::optional<ForwardCallable> fwd_;
  std::optional<BackwardCallable> bwd_;
  std::optional<Bwd> backward_fn_;  // until the backward is captured
  std::array<std::size_t, grad_leaves> grad_sizes_{};
  std::uint64_t forwards_ = 0;
  std::uint64_t backwards_ = 0;
  bool pending_ = false;
};

namespace detail {

// Makes graphed pairs: the free functions below, with access to the pairs' machinery.
struct PairMaker {
  template <class F, class B, class... S>
  static GraphedPair<std::decay_t<F>, std::decay_t<B>, S...> make(const GraphedOptions& opts, F&& forward,
                                                                  B&& backward, const S&... samples) {
    using Pair = GraphedPair<std::decay_t<F>, std::decay_t<B>, S...>;
    typename Pair::ForwardFn fwd{std::decay_t<F>(std::forward<F>(forward)), {unmarked(samples)...}};
    std::decay_t<B> bwd(std::forward<B>(backward));
    Pair::warm_up(fwd, bwd, detail::work_stream(opts), opts.warmup_iters, samples...);
    const PoolHandle pool = opts.pool ? *opts.pool : graph_pool_handle();
    Pair pair(BuildTag{}, std::move(fwd), std::move(bwd), opts, pool, samples...);
    pair.capture_backward(opts, pool);
    return pair;
  }

  template <class... Fs, class... Bs, class... Samples>
  static auto make_many(std::tuple<std::pair<Fs, Bs>...>& pairs, const std::tuple<Samples...>& samples,
                        const GraphedOptions& opts) {
    constexpr auto indices = std::index_sequence_for<Fs...>{};
    auto pair_type = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      return std::apply(
          [&](const auto&... a) {
            using Fwd = std::decay_t<std::tuple_element_t<I, std::tuple<Fs...>>>;
            using Bwd = std::decay_t<std::tuple_element_t<I, std::tuple<Bs...>>>;
            return std::type_identity<GraphedPair<Fwd, Bwd, std::remove_cvref_t<decltype(a)>...>>{};
          },
          std::get<I>(samples));
    };
    auto forward_of = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      using Pair = typename decltype(pair_type(std::integral_constant<std::size_t, I>{}))::type;
      return std::apply(
          [&](const auto&... a) {
            return typename Pair::ForwardFn{std::move(std::get<I>(pairs).first), {unmarked(a)...}};
          },
          std::get<I>(samples));
    };
    auto fwds = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple{forward_of(std::integral_constant<std::size_t, I>{})...};
    }(indices);
    // Every pair's halves, warmed up in order.
    auto warm = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      using Pair = typename decltype(pair_type(std::integral_constant<std::size_t, I>{}))::type;
      std::apply(
          [&](const auto&... a) {
            Pair::warm_up(std::get<I>(fwds), std::get<I>(pairs).second, detail::work_stream(opts), opts.warmup_iters, a...);
          },
          std::get<I>(samples));
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (warm(std::integral_constant<std::size_t, I>{}), ...);
    }(indices);
    const PoolHandle pool = opts.pool ? *opts.pool : graph_pool_handle();
    auto make_one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      using Pair = typename decltype(pair_type(std::integral_constant<std::size_t, I>{}))::type;
      return std::apply(
          [&](const auto&... a) {
            return Pair(BuildTag{}, std::move(std::get<I>(fwds)), std::move(std::get<I>(pairs).second), opts, pool,
                        a...);
          },
          std::get<I>(samples));
    };
    // Braced initialisation runs left to right: the forwards are captured in the given order.
    auto made = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<decltype(make_one(std::integral_constant<std::size_t, I>{}))...>{
          make_one(std::integral_constant<std::size_t, I>{})...};
    }(indices);
    // Then the backwards, last pair first.
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      constexpr std::size_t n = sizeof...(I);
      (std::get<n - 1 - I>(made).capture_backward(opts, pool), ...);
    }(indices);
    return made;
  }
};

}  // namespace detail

/// Warms the pair up (opts.warmup_iters eager forward and backward calls on the capture
/// stream, with zeros as incoming gradients), captures forward(static inputs) and then
/// backward(arguments, outputs, [saved,] static incoming gradients) into one pool, and
/// returns the pair. `samples` are the forward's arguments, each optionally marked
/// requires_grad and/or param. The warm-up runs the backward too: side effects it has on
/// parameters (an optimizer step) happen warmup_iters times before the pair exists.
template <class F, class B, class... S>
[[nodiscard]] GraphedPair<std::decay_t<F>, std::decay_t<B>, S...> make_graphed_pair(const GraphedOptions& opts,
                                                                                   F&& forward, B&& backward,
                                                                                   const S&... samples) {
  return detail::PairMaker::make(opts, std::forward<F>(forward), std::forward<B>(backward), samples...);
}

/// The same with default options.
template <class F, class B, class... S>
  requires(!std::same_as<std::remove_cvref_t<F>, GraphedOptions>)
[[nodiscard]] GraphedPair<std::decay_t<F>, std::decay_t<B>, S...> make_graphed_pair(F&& forward, B&& backward,
                                                                                   const S&... samples) {
  return detail::PairMaker::make(GraphedOptions{}, std::forward<F>(forward), std::forward<B>(backward), samples...);
}

/// Several pairs, as the layers of a model: each is warmed up in turn, then the forwards
/// are captured in the given order and the backwards in reverse, all into one pool, so
/// that a training step replays them in capture order (forwards, then backwards from the
/// last layer down). `samples` holds one tuple of sample arguments per pair.
template <class... Fs, class... Bs, class... Samples>
[[nodiscard]] auto make_graphed_pairs(std::tuple<std::pair<Fs, Bs>...> pairs, const std::tuple<Samples...>& samples,
                                      const GraphedOptions& opts = {}) {
  static_assert(sizeof...(Fs) == sizeof...(Samples), "make_graphed_pairs: one tuple of sample arguments per pair");
  return detail::PairMaker::make_many(pairs, samples, opts);
}

}  // namespace cugraphs
