// Typed tuple flattening: any nesting of std::tuple, std::pair and std::array with
// DeviceSpan<T> leaves becomes a flat, typed tuple of its leaves at compile time, and back;
// and the one map over such trees (detail::map_tree) that every tree transform uses.
#pragma once

#include <cugraphs/span.hpp>

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cugraphs {

template <class T>
class DeviceBuffer;  // memory.hpp: an owning leaf, allowed in graphed callables' results

/// Opt-in for user aggregates: specialise tree_traits<T> with
///   static constexpr bool custom = true;
///   static auto to_tuple(const T&);          // a std::tuple of T's members (leaves or trees)
///   static T from_tuple(const Tuple&);       // Tuple = the type to_tuple returns
/// and T flattens like that tuple.
template <class T>
struct tree_traits {
  static constexpr bool custom = false;
};

namespace detail {

template <class T>
inline constexpr bool is_span_v = false;
template <class T>
inline constexpr bool is_span_v<DeviceSpan<T>> = true;

template <class T>
inline constexpr bool is_buffer_v = false;
template <class T>
inline constexpr bool is_buffer_v<DeviceBuffer<T>> = true;

template <class T>
inline constexpr bool is_tuple_like_v = false;
template <class... Ts>
inline constexpr bool is_tuple_like_v<std::tuple<Ts...>> = true;
template <class A, class B>
inline constexpr bool is_tuple_like_v<std::pair<A, B>> = true;

template <class T>
inline constexpr bool is_array_v = false;
template <class T, std::size_t N>
inline constexpr bool is_array_v<std::array<T, N>> = true;

template <class T>
inline constexpr bool always_false_v = false;

// Instantiated for a type that is none of the above: the compiler's message names T.
template <class T>
struct not_a_tree {
  static_assert(always_false_v<T>,
                "cugraphs: this type cannot be flattened. The arguments and results of a graphed "
                "callable must be DeviceSpan<T> leaves (results may also be DeviceBuffer<T>), nested "
                "in std::tuple, std::pair or std::array, or a type opted in by specialising "
                "cugraphs::tree_traits. The offending type is the T of not_a_tree<T> above.");
  using type = std::tuple<>;
};

template <class T>
struct flat;

template <class... Ts>
struct flat_cat;
template <>
struct flat_cat<> {
  using type = std::tuple<>;
};
template <class... As, class... Rest>
struct flat_cat<std::tuple<As...>, Rest...> {
  using type = decltype(std::tuple_cat(std::declval<std::tuple<As...>>(),
                                       std::declval<typename flat_cat<Rest...>::type>()));
};

template <class T, std::size_t... I>
auto flat_of_tuple(std::index_sequence<I...>) -> typename flat_cat<typename flat<std::tuple_element_t<I, T>>::type...>::type;

template <class T>
struct flat {
  using U = std::remove_cvref_t<T>;
  static auto pick() {
    if constexpr (is_span_v<U> || is_buffer_v<U>) {
      return std::type_identity<std::tuple<U>>{};
    } else if constexpr (is_tuple_like_v<U> || is_array_v<U>) {
      return std::type_identity<decltype(flat_of_tuple<U>(std::make_index_sequence<std::tuple_size_v<U>>{}))>{};
    } else if constexpr (tree_traits<U>::custom) {
      return std::type_identity<typename flat<decltype(tree_traits<U>::to_tuple(std::declval<const U&>()))>::type>{};
    } else {
      return std::type_identity<typename not_a_tree<U>::type>{};
    }
  }
  using type = typename decltype(pick())::type;
};

}  // namespace detail

/// The flat tuple of T's leaves, in depth-first order.
template <class T>
using flat_t = typename detail::flat<T>::type;

namespace detail {

// Walks over a tree's type without building its flat tuple, which for thousands of leaves
// would be a std::tuple too deep for the compilers (nvcc stops at about 200 elements): an
// std::array counts as N times its element.
template <class T>
constexpr std::size_t count_leaves() noexcept;
template <class T>
constexpr bool only_spans() noexcept;

template <class U, std::size_t... I>
constexpr std::size_t count_parts(std::index_sequence<I...>) noexcept {
  return (std::size_t{0} + ... + count_leaves<std::tuple_element_t<I, U>>());
}
template <class U, std::size_t... I>
constexpr bool spans_in_parts(std::index_sequence<I...>) noexcept {
  return (true && ... && only_spans<std::tuple_element_t<I, U>>());
}

template <class T>
constexpr std::size_t count_leaves() noexcept {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_span_v<U> || is_buffer_v<U>) {
    return 1;
  } else if constexpr (is_array_v<U>) {
    return std::tuple_size_v<U> * count_leaves<typename U::value_type>();
  } else if constexpr (is_tuple_like_v<U>) {
    return count_parts<U>(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else if constexpr (tree_traits<U>::custom) {
    return count_leaves<decltype(tree_traits<U>::to_tuple(std::declval<const U&>()))>();
  } else {
    return std::tuple_size_v<typename not_a_tree<U>::type>;
  }
}

// Whether every leaf of T is a DeviceSpan (the other leaf kind is DeviceBuffer).
template <class T>
constexpr bool only_spans() noexcept {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_span_v<U>) {
    return true;
  } else if constexpr (is_buffer_v<U>) {
    return false;
  } else if constexpr (is_array_v<U>) {
    return only_spans<typename U::value_type>();
  } else if constexpr (is_tuple_like_v<U>) {
    return spans_in_parts<U>(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else if constexpr (tree_traits<U>::custom) {
    return only_spans<decltype(tree_traits<U>::to_tuple(std::declval<const U&>()))>();
  } else {
    return std::tuple_size_v<typename not_a_tree<U>::type> != 0;
  }
}

}  // namespace detail

/// How many leaves T has.
template <class T>
inline constexpr std::size_t leaf_count_v = detail::count_leaves<T>();

namespace detail {

template <class T>
auto flatten_impl(const T& tree) {
  if constexpr (is_span_v<T>) {
    return std::tuple<T>(tree);
  } else if constexpr (is_tuple_like_v<T> || is_array_v<T>) {
    return std::apply([](const auto&... parts) { return std::tuple_cat(flatten_impl(parts)...); }, tree);
  } else if constexpr (tree_traits<T>::custom) {
    return flatten_impl(tree_traits<T>::to_tuple(tree));
  } else {
    return typename not_a_tree<T>::type{};
  }
}

// Calls fn(i, leaf) on each leaf of `tree` in flatten's order, with i counting on from
// `next`, without building the flat tuple: the hot path of a graphed call. std::arrays are
// walked by a loop, so an array of 64 inputs costs one short loop.
template <class T, class Fn>
void visit_leaves(const T& tree, std::size_t& next, Fn& fn) {
  if constexpr (is_span_v<T>) {
    fn(next++, tree);
  } else if constexpr (is_array_v<T>) {
    for (const auto& part : tree) visit_leaves(part, next, fn);
  } else if constexpr (is_tuple_like_v<T>) {
    std::apply([&](const auto&... parts) { (visit_leaves(parts, next, fn), ...); }, tree);
  } else if constexpr (tree_traits<T>::custom) {
    visit_leaves(tree_traits<T>::to_tuple(tree), next, fn);
  } else {
    [[maybe_unused]] typename not_a_tree<T>::type none{};
  }
}

// The tuple (or pair) of T's element types without references or const.
template <class T>
struct value_tuple {
  using type = std::remove_cvref_t<T>;
};
template <class... Ts>
struct value_tuple<std::tuple<Ts...>> {
  using type = std::tuple<std::remove_cvref_t<Ts>...>;
};
template <class A, class B>
struct value_tuple<std::pair<A, B>> {
  using type = std::pair<std::remove_cvref_t<A>, std::remove_cvref_t<B>>;
};

// The parts a tree_traits type T maps through: what its to_tuple returns, held by value.
template <class T>
using custom_parts_t = typename value_tuple<decltype(tree_traits<T>::to_tuple(std::declval<const T&>()))>::type;

template <class Fn, class T>
struct tree_map;

// The one tree map: the type of T's tree with each leaf L (a DeviceSpan or a DeviceBuffer)
// replaced by what an Fn lvalue returns for an L rvalue, by value. std::tuple, std::pair
// and std::array keep their shape, with their elements by value. A tree_traits type stays
// itself where the map keeps the types of all its leaves (from_tuple rebuilds it), and
// otherwise becomes the std::tuple of its to_tuple parts, mapped: it cannot hold leaves of
// other types.
template <class Fn, class T>
using map_tree_t = typename tree_map<Fn, std::remove_cvref_t<T>>::type;

template <class Fn, class T>
struct tree_map {
  static auto pick() {
    if constexpr (is_span_v<T> || is_buffer_v<T>) {
      return std::type_identity<std::remove_cvref_t<std::invoke_result_t<Fn&, T>>>{};
    } else if constexpr (tree_traits<T>::custom) {
      using Mapped = map_tree_t<Fn, custom_parts_t<T>>;
      return std::type_identity<std::conditional_t<std::is_same_v<Mapped, custom_parts_t<T>>, T, Mapped>>{};
    } else {
      return std::type_identity<typename not_a_tree<T>::type>{};
    }
  }
  using type = typename decltype(pick())::type;
  // Whether every tree_traits type in T stays itself.
  static constexpr bool keeps_custom = !tree_traits<T>::custom || std::is_same_v<type, T>;
  // Whether a std::tuple or std::pair in T holds a part by reference (a std::tie, say).
  static constexpr bool holds_reference = false;
};
template <class Fn, class... Ts>
struct tree_map<Fn, std::tuple<Ts...>> {
  using type = std::tuple<map_tree_t<Fn, Ts>...>;
  static constexpr bool keeps_custom = (tree_map<Fn, std::remove_cvref_t<Ts>>::keeps_custom && ...);
  static constexpr bool holds_reference =
      ((std::is_reference_v<Ts> || tree_map<Fn, std::remove_cvref_t<Ts>>::holds_reference) || ...);
};
template <class Fn, class A, class B>
struct tree_map<Fn, std::pair<A, B>> : tree_map<Fn, std::tuple<A, B>> {
  using type = std::pair<map_tree_t<Fn, A>, map_tree_t<Fn, B>>;
};
template <class Fn, class E, std::size_t N>
struct tree_map<Fn, std::array<E, N>> {
  using type = std::array<map_tree_t<Fn, E>, N>;
  static constexpr bool keeps_custom = tree_map<Fn, std::remove_cv_t<E>>::keeps_custom;
  static constexpr bool holds_reference = tree_map<Fn, std::remove_cv_t<E>>::holds_reference;
};

// Whether map_tree_t<Fn, T> keeps every tree_traits type of T as itself.
template <class Fn, class T>
inline constexpr bool map_keeps_custom_v = tree_map<Fn, std::remove_cvref_t<T>>::keeps_custom;

// The map that keeps every leaf, for types only.
struct SameLeaf {
  template <class L>
  L operator()(L&& leaf) const;
};

// Whether T, or a std::tuple or std::pair in its tree, holds a part by reference (std::tie
// makes such tuples): such a tree cannot be rebuilt or kept by value as it is.
template <class T>
inline constexpr bool holds_reference_v =
    std::is_reference_v<T> || tree_map<SameLeaf, std::remove_cvref_t<T>>::holds_reference;

// `tree` rebuilt as map_tree_t<Fn, T>, each leaf replaced by fn(leaf), called in flatten's
// order. The leaves of an rvalue tree are passed as rvalues (a DeviceBuffer can be moved
// out), but those of a tree_traits type always as copies of its to_tuple parts. std::arrays
// are rebuilt by a loop, so a tree of thousands of leaves stays shallow for the compiler.
template <class Fn, class T>
map_tree_t<std::remove_reference_t<Fn>, T> map_tree(Fn&& fn, T&& tree) {
  using U = std::remove_cvref_t<T>;
  using Out = map_tree_t<std::remove_reference_t<Fn>, U>;
  if constexpr (is_span_v<U> || is_buffer_v<U>) {
    return fn(std::forward<T>(tree));
  } else if constexpr (is_array_v<U>) {
    Out out{};
    for (std::size_t k = 0; k != out.size(); ++k) {
      if constexpr (std::is_lvalue_reference_v<T>)
        out[k] = map_tree(fn, tree[k]);
      else
        out[k] = map_tree(fn, std::move(tree[k]));
    }
    return out;
  } else if constexpr (is_tuple_like_v<U>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return Out{map_tree(fn, std::get<I>(std::forward<T>(tree)))...};  // braces: left to right
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else if constexpr (tree_traits<U>::custom) {
    // to_tuple may return references (std::tie): the new leaves go into a tuple of values,
    // which from_tuple reads (through references, if it takes them) before it returns.
    const custom_parts_t<U> parts(tree_traits<U>::to_tuple(tree));
    if constexpr (std::is_same_v<Out, U>) {
      return tree_traits<U>::from_tuple(map_tree(fn, parts));
    } else {
      return map_tree(fn, parts);
    }
  } else {
    return typename not_a_tree<U>::type{};
  }
}

// A copy of `tree` with every leaf replaced by fn(i, leaf), which returns the leaf's type;
// i counts on from `next` in flatten's order.
template <class T, class Fn>
T map_leaves(const T& tree, std::size_t& next, Fn& fn) {
  constexpr bool by_value = !holds_reference_v<T>;
  static_assert(by_value, "cugraphs: a tuple of references (std::tie) cannot be rebuilt with new leaves; pass a "
                          "tuple of DeviceSpan values");
  if constexpr (by_value) {
    return map_tree([&](const auto& leaf) { return fn(next++, leaf); }, tree);
  } else {
    return tree;  // refused above; no second error
  }
}

// Where each of Ts' leaves start in their concatenated flat tuple: prefix sums of the
// leaf counts.
template <class... Ts>
constexpr std::array<std::size_t, sizeof...(Ts)> leaf_offsets() {
  constexpr std::array<std::size_t, sizeof...(Ts)> counts{count_leaves<Ts>()...};
  std::array<std::size_t, sizeof...(Ts)> offsets{};
  std::size_t sum = 0;
  for (std::size_t k = 0; k != counts.size(); ++k) {  // != : no "k < 0" warning without Ts
    offsets[k] = sum;
    sum += counts[k];
  }
  return offsets;
}

// Rebuilds T from the leaves of `flat` starting at index Offset.
template <class T, std::size_t Offset, class Flat>
T unflatten_at(const Flat& flat) {
  if constexpr (is_span_v<T>) {
    return std::get<Offset>(flat);
  } else if constexpr (is_tuple_like_v<T> || is_array_v<T>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      [[maybe_unused]] constexpr auto offsets = leaf_offsets<std::tuple_element_t<I, T>...>();
      return T{unflatten_at<std::tuple_element_t<I, T>, Offset + offsets[I]>(flat)...};
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (tree_traits<T>::custom) {
    using Tuple = decltype(tree_traits<T>::to_tuple(std::declval<const T&>()));
    return tree_traits<T>::from_tuple(unflatten_at<Tuple, Offset>(flat));
  } else {
    return typename not_a_tree<T>::type{};
  }
}

}  // namespace detail

/// The leaves of `tree`, depth first, as a flat tuple of DeviceSpans.
template <class T>
[[nodiscard]] flat_t<T> flatten(const T& tree) {
  return detail::flatten_impl(tree);
}

/// Rebuilds a T from its flat leaves: unflatten<T>(flatten(t)) == t, leaf by leaf.
template <class T>
[[nodiscard]] std::remove_cvref_t<T> unflatten(const flat_t<T>& leaves) {
  return detail::unflatten_at<std::remove_cvref_t<T>, 0>(leaves);
}

}  // namespace cugraphs
