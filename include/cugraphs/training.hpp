// Graphed training pairs: a forward and the user's backward captured into two graphs of one
// pool, the C++ counterpart of torch.cuda.make_graphed_callables for modules that train.
// C++ has no autograd: the user supplies the backward, and the surfaces say at compile time
// which arguments take a gradient (requires_grad), which are parameters read in place
// (param), and what the forward keeps for the backward without a gradient (save_for_backward).
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/detail/training_types.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/flatten.hpp>
#include <cugraphs/graphed.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
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

struct PairMaker;

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
  /// What backward() takes: one read-only leaf per output leaf, in the outputs' structure
  /// (a tree_traits type, which cannot hold read-only leaves, as the std::tuple of its parts).
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
        [&, this](const auto&... staged) {
          fwd_.emplace(detail::BuildTag{}, std::move(fwd), halves(opts), pool, staged...);
        },
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

  // The options of each half: neither is judged for inputs it leaves unread, which a pair has
  // by design (targets only the backward reads, an incoming gradient a loss's backward ignores).
  static GraphedOptions halves(GraphedOptions opts) {
    opts.allow_unused_input = true;
    return opts;
  }

  // Captures the backward into `pool`, after the forward (and, for several pairs, after the
  // backwards of the pairs captured after this one).
  void capture_backward(const GraphedOptions& opts, const PoolHandle& pool) {
    const auto& fwd_outputs = fwd_->static_outputs();
    const auto& staged = fwd_->static_inputs();
    Values values = [&, this]<std::size_t... I>(std::index_sequence<I...>) {
      return Values{detail::pick_arg<I, A...>(fwd_->f_.values, staged)...};
    }(std::index_sequence_for<A...>{});
    const GradOutputs sample = detail::as_const_tree(fwd_outputs.first);
    bwd_.emplace(detail::BuildTag{},
                 BackwardFn{std::move(*backward_fn_), std::move(values), fwd_outputs.first, fwd_outputs.second},
                 halves(opts), pool, sample);
    backward_fn_.reset();
    bwd_->names_ = {"GraphedPair::backward", "GraphedPair", "incoming gradient leaf"};
    // The gradients' element types were checked at compile time; their sizes are known now.
    std::size_t next = 0;
    [[maybe_unused]] auto check = [&, this](std::size_t i, auto leaf) {
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
  // stream after the work queued on current_stream(), with zeros as the incoming gradients.
  // The staged arguments (not the parameters, read in place) are watched for writes.
  static void warm_up(ForwardFn& fwd, Bwd& bwd, const GraphedOptions& opts, const A&... samples) {
    constexpr std::string_view op = "make_graphed_pair";
    const cudaStream_t s = detail::work_stream(opts);
    detail::check_warm_up(op, opts.warmup_iters, detail::unmarked(samples)...);
    detail::WriteWatch watch(op, "the forward or the backward", "input leaf",
                             "Pass what the step updates (weights, an optimizer's moments) as param(w), which "
                             "both graphs read and write in place, or as a DeviceSpan<const T> if it should not "
                             "be written; set GraphedOptions::allow_written_input where the writes are scratch "
                             "whose changes you do not need");
    if (!opts.allow_written_input)
      std::apply([&](const auto&... staged) { watch.add_writable(staged...); }, detail::staged_samples(samples...));
    detail::warm_up(op, s, opts.warmup_iters, [&] {
      detail::Owners keep;  // buffers the forward returns live until its backward has run
      auto parts = detail::take_outputs(
          std::apply([&](const auto&... staged) { return fwd(staged...); }, detail::staged_samples(samples...)),
          keep);
      // One zero-filled buffer per output leaf, kept in `keep`, as a read-only span.
      auto zeros = [&]<class T>(DeviceSpan<T> like) {
        auto buffer = std::make_shared<DeviceBuffer<std::remove_const_t<T>>>(like.size(), s);
        if (like.size() != 0)
          detail::check(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), s),
                        "make_graphed_pair: zeroing a warm-up gradient");
        const DeviceSpan<const T> leaf(buffer->data(), like.size());
        keep.push_back(std::move(buffer));
        return leaf;
      };
      const GradOutputs grads = detail::map_tree(zeros, parts.first);
      // Buffers the backward returns are freed here, before those in `keep`.
      static_cast<void>(detail::invoke_backward<Parts::saving>(bwd, fwd.values, parts.first, parts.second, grads));
    }, current_stream(), &watch);
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
  // A pair's backward reads the static inputs its forward was captured with, which inputs
  // read in place would leave stale.
  static void refuse_in_place(const GraphedOptions& opts, std::string_view op) {
    if (opts.inputs == InputMode::InPlace)
      throw_misuse(op, "graphed pairs copy their inputs (InputMode::Copy): the backward reads the static inputs "
                       "the forward was captured with, which inputs read in place would leave stale");
  }

  template <class F, class B, class... S>
  static GraphedPair<std::decay_t<F>, std::decay_t<B>, S...> make(const GraphedOptions& opts, F&& forward,
                                                                  B&& backward, const S&... samples) {
    refuse_in_place(opts, "make_graphed_pair");
    using Pair = GraphedPair<std::decay_t<F>, std::decay_t<B>, S...>;
    typename Pair::ForwardFn fwd{std::decay_t<F>(std::forward<F>(forward)), {unmarked(samples)...}};
    std::decay_t<B> bwd(std::forward<B>(backward));
    Pair::warm_up(fwd, bwd, opts, samples...);
    const PoolHandle pool = opts.pool ? *opts.pool : graph_pool_handle();
    Pair pair(BuildTag{}, std::move(fwd), std::move(bwd), opts, pool, samples...);
    pair.capture_backward(opts, pool);
    return pair;
  }

  template <class... Fs, class... Bs, class... Samples>
  static auto make_many(std::tuple<std::pair<Fs, Bs>...>& pairs, const std::tuple<Samples...>& samples,
                        const GraphedOptions& opts) {
    refuse_in_place(opts, "make_graphed_pairs");
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
            Pair::warm_up(std::get<I>(fwds), std::get<I>(pairs).second, opts, a...);
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
