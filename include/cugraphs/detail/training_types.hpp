// The type machinery of graphed pairs (training.hpp): what each marked argument is, which
// arguments are staged and which take a gradient, the types of incoming gradients, and the
// forward and backward halves as the callables two GraphedCallables capture.
#pragma once

#include <cugraphs/flatten.hpp>
#include <cugraphs/graphed.hpp>
#include <cugraphs/span.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cugraphs {

// The marks and the forward's result of training.hpp, which defines them.
template <class T>
struct Grad;
template <class T>
struct Param;
template <class Outputs, class Saved>
struct Saving;

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

// The leaf map of incoming gradients: each leaf viewed read-only.
struct AsConstLeaf {
  template <class T>
  DeviceSpan<const T> operator()(DeviceSpan<T> leaf) const noexcept {
    return leaf;
  }
};

// A span tree with read-only leaves: the type of the incoming gradients. A tree_traits
// type becomes the std::tuple of its parts (see map_tree_t), unless its leaves are read-only
// already.
template <class T>
using const_tree_t = map_tree_t<AsConstLeaf, T>;

template <class T>
[[nodiscard]] const_tree_t<T> as_const_tree(const T& tree) {
  return map_tree(AsConstLeaf{}, tree);
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
    auto call = [&, this]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
      return detail::invoke(fwd, pick_arg<I, A...>(values, st)...);
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
          return detail::invoke(bwd, a..., outputs, saved, grads);
        } else {
          (void)saved;
          return detail::invoke(bwd, a..., outputs, grads);
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

}  // namespace cugraphs
