// Typed tuple flattening: leaf counts, flat types and round trips, at compile time and at
// run time. Host-only: the spans point at host arrays and are never dereferenced.
#include "testing.hpp"

#include <cugraphs/flatten.hpp>

#include <array>
#include <tuple>
#include <type_traits>
#include <utility>

using cugraphs::DeviceSpan;
using cugraphs::flat_t;
using cugraphs::leaf_count_v;

namespace {

struct Particles {  // a user aggregate, opted in below
  DeviceSpan<float> pos;
  DeviceSpan<const int> ids;
};

float storage[64];
int ids[8];

template <class A, class B>
bool same_span(A a, B b) {
  return static_cast<const void*>(a.data()) == static_cast<const void*>(b.data()) && a.size() == b.size();
}

}  // namespace

template <>
struct cugraphs::tree_traits<Particles> {
  static constexpr bool custom = true;
  static auto to_tuple(const Particles& p) { return std::tuple{p.pos, p.ids}; }
  static Particles from_tuple(const std::tuple<DeviceSpan<float>, DeviceSpan<const int>>& t) {
    return {std::get<0>(t), std::get<1>(t)};
  }
};

using Leaf = DeviceSpan<float>;
using CLeaf = DeviceSpan<const float>;

// A custom type whose to_tuple returns references to its members (std::tie).
struct Tied {
  Leaf a;
  CLeaf b;
};
template <>
struct cugraphs::tree_traits<Tied> {
  static constexpr bool custom = true;
  static auto to_tuple(const Tied& t) { return std::tie(t.a, t.b); }
  static Tied from_tuple(const std::tuple<const Leaf&, const CLeaf&>& t) { return {std::get<0>(t), std::get<1>(t)}; }
};

using Nested = std::tuple<Leaf, std::pair<CLeaf, std::array<Leaf, 3>>, std::tuple<>, std::tuple<DeviceSpan<int>>>;

static_assert(leaf_count_v<Leaf> == 1);
static_assert(leaf_count_v<std::tuple<>> == 0);
static_assert(leaf_count_v<std::pair<Leaf, CLeaf>> == 2);
static_assert(leaf_count_v<std::array<std::pair<Leaf, Leaf>, 4>> == 8);
static_assert(leaf_count_v<Nested> == 6);
static_assert(leaf_count_v<Particles> == 2);
static_assert(leaf_count_v<std::tuple<Particles, std::array<Particles, 2>>> == 6);
static_assert(std::is_same_v<flat_t<Nested>, std::tuple<Leaf, CLeaf, Leaf, Leaf, Leaf, DeviceSpan<int>>>);
static_assert(std::is_same_v<flat_t<Particles>, std::tuple<Leaf, DeviceSpan<const int>>>);

TEST_CASE("Flatten: a nested tree flattens depth first and round-trips", "[flatten]") {
  const Nested tree{Leaf(storage, 1),
                    {CLeaf(storage + 1, 2), {Leaf(storage + 3, 3), Leaf(storage + 6, 4), Leaf(storage + 10, 5)}},
                    {},
                    {DeviceSpan<int>(ids, 6)}};
  const auto flat = cugraphs::flatten(tree);
  CHECK(same_span(std::get<0>(flat), Leaf(storage, 1)));
  CHECK(same_span(std::get<1>(flat), CLeaf(storage + 1, 2)));
  CHECK(same_span(std::get<2>(flat), Leaf(storage + 3, 3)));
  CHECK(same_span(std::get<4>(flat), Leaf(storage + 10, 5)));
  CHECK(same_span(std::get<5>(flat), DeviceSpan<int>(ids, 6)));

  const Nested back = cugraphs::unflatten<Nested>(flat);
  CHECK(same_span(std::get<0>(back), std::get<0>(tree)));
  CHECK(same_span(std::get<1>(back).first, std::get<1>(tree).first));
  for (std::size_t i = 0; i < 3; ++i) CHECK(same_span(std::get<1>(back).second[i], std::get<1>(tree).second[i]));
  CHECK(same_span(std::get<0>(std::get<3>(back)), DeviceSpan<int>(ids, 6)));
}

TEST_CASE("Flatten: user aggregates opt in through tree_traits", "[flatten]") {
  const std::tuple<Particles, std::array<Particles, 2>> tree{
      {Leaf(storage, 8), DeviceSpan<const int>(ids, 1)},
      {Particles{Leaf(storage + 8, 8), DeviceSpan<const int>(ids + 1, 1)},
       Particles{Leaf(storage + 16, 8), DeviceSpan<const int>(ids + 2, 1)}}};
  const auto flat = cugraphs::flatten(tree);
  CHECK(same_span(std::get<4>(flat), Leaf(storage + 16, 8)));
  CHECK(same_span(std::get<5>(flat), DeviceSpan<const int>(ids + 2, 1)));
  const auto back = cugraphs::unflatten<decltype(tree)>(flat);
  CHECK(same_span(std::get<1>(back)[1].pos, Leaf(storage + 16, 8)));
  CHECK(same_span(std::get<0>(back).ids, DeviceSpan<const int>(ids, 1)));
}

TEST_CASE("Flatten: a single leaf and an empty tree", "[flatten]") {
  const auto one = cugraphs::flatten(Leaf(storage, 64));
  CHECK(same_span(std::get<0>(one), Leaf(storage, 64)));
  CHECK(std::tuple_size_v<decltype(cugraphs::flatten(std::tuple<>{}))> == 0);
}

TEST_CASE("Flatten: visit_leaves walks the leaves flatten gives, in its order and numbering", "[flatten]") {
  // The graphed call's hot path stages through visit_leaves, and its index i must name the
  // same static leaf as flatten's i: nested tuples, pairs, arrays and user aggregates.
  const std::tuple<Nested, std::array<Particles, 2>> tree{
      Nested{Leaf(storage, 1),
             {CLeaf(storage + 1, 2), {Leaf(storage + 3, 3), Leaf(storage + 6, 4), Leaf(storage + 10, 5)}},
             {},
             {DeviceSpan<int>(ids, 6)}},
      {Particles{Leaf(storage + 20, 7), DeviceSpan<const int>(ids + 1, 1)},
       Particles{Leaf(storage + 30, 8), DeviceSpan<const int>(ids + 2, 2)}}};
  const auto flat = cugraphs::flatten(tree);
  constexpr std::size_t leaves = std::tuple_size_v<decltype(flat)>;
  static_assert(leaves == 10);
  std::array<const void*, leaves> flat_data{};
  std::array<std::size_t, leaves> flat_size{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((flat_data[I] = std::get<I>(flat).data(), flat_size[I] = std::get<I>(flat).size()), ...);
  }(std::make_index_sequence<leaves>{});

  std::size_t next = 3;  // numbering continues from where the caller's count stands
  std::size_t visits = 0;
  auto check = [&](std::size_t i, auto leaf) {
    REQUIRE(i >= 3);
    REQUIRE(i - 3 < leaves);
    CHECK(static_cast<const void*>(leaf.data()) == flat_data[i - 3]);
    CHECK(leaf.size() == flat_size[i - 3]);
    ++visits;
  };
  cugraphs::detail::visit_leaves(tree, next, check);
  CHECK(visits == leaves);
  CHECK(next == 3 + leaves);
}

TEST_CASE("Flatten: map_leaves rebuilds a tree with new leaves in flatten's order, through a custom type whose "
          "to_tuple returns references and over an array of 1,100 leaves",
          "[flatten]") {
  using Tree = std::pair<Tied, std::array<Leaf, 1100>>;
  static_assert(leaf_count_v<Tree> == 1102);
  Tree t{};
  t.first = {Leaf(storage, 1), CLeaf(storage + 1, 2)};
  for (std::size_t k = 0; k < t.second.size(); ++k) t.second[k] = Leaf(storage, k % 7);
  std::size_t next = 0;
  auto fn = [](std::size_t i, auto leaf) { return decltype(leaf)(storage + (i % 16), i); };
  const Tree u = cugraphs::detail::map_leaves(t, next, fn);
  CHECK(next == 1102);
  CHECK(same_span(u.first.a, Leaf(storage, 0)));
  CHECK(same_span(u.first.b, CLeaf(storage + 1, 1)));
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < u.second.size(); ++k) wrong += same_span(u.second[k], Leaf(storage + (k + 2) % 16, k + 2)) ? 0 : 1;
  CHECK(wrong == 0);
  CHECK(same_span(t.second[5], Leaf(storage, 5)));  // the tree itself is unchanged
}

namespace {

// Leaf maps for the tree map: one that views each leaf read-only (the leaf type changes)
// and one that keeps the leaf type.
struct ToConst {
  template <class T>
  DeviceSpan<const T> operator()(DeviceSpan<T> leaf) const {
    return leaf;
  }
};
struct Shift {
  template <class T>
  DeviceSpan<T> operator()(DeviceSpan<T> leaf) const {
    return {leaf.data() + 1, leaf.size()};
  }
};

namespace d = cugraphs::detail;
using ConstNested =
    std::tuple<CLeaf, std::pair<CLeaf, std::array<CLeaf, 3>>, std::tuple<>, std::tuple<DeviceSpan<const int>>>;

// Tuples, pairs and arrays keep their shape; each leaf becomes what the map returns.
static_assert(std::is_same_v<d::map_tree_t<ToConst, Nested>, ConstNested>);
static_assert(std::is_same_v<d::map_tree_t<Shift, Nested>, Nested>);
static_assert(std::is_same_v<d::map_tree_t<ToConst, std::array<std::pair<Leaf, Leaf>, 2000>>,
                             std::array<std::pair<CLeaf, CLeaf>, 2000>>);
// A tree_traits type stays itself where its leaves keep their types, and otherwise becomes
// the tuple of its parts (it cannot hold the new leaves).
static_assert(std::is_same_v<d::map_tree_t<Shift, std::pair<Particles, Tied>>, std::pair<Particles, Tied>>);
static_assert(std::is_same_v<d::map_tree_t<ToConst, std::pair<Particles, Tied>>,
                             std::pair<std::tuple<CLeaf, DeviceSpan<const int>>, std::tuple<CLeaf, CLeaf>>>);
static_assert(d::map_keeps_custom_v<Shift, std::array<Particles, 2>>);
static_assert(!d::map_keeps_custom_v<ToConst, std::array<Particles, 2>>);
// Only ids already read-only: the map keeps that type.
static_assert(std::is_same_v<d::map_tree_t<ToConst, std::tuple<DeviceSpan<const int>>>, std::tuple<DeviceSpan<const int>>>);
// References (std::tie) are seen anywhere in the tree, and the map holds the parts by value.
static_assert(d::holds_reference_v<std::pair<Leaf, std::tuple<const Leaf&>>>);
static_assert(!d::holds_reference_v<std::pair<Tied, std::array<Leaf, 2>>>);
static_assert(std::is_same_v<d::map_tree_t<Shift, std::tuple<const Leaf&, Leaf&>>, std::tuple<Leaf, Leaf>>);

}  // namespace

TEST_CASE("Flatten: map_tree rebuilds a nested tree leaf by leaf, in flatten's order", "[flatten]") {
  const Nested tree{Leaf(storage, 1),
                    {CLeaf(storage + 1, 2), {Leaf(storage + 3, 3), Leaf(storage + 6, 4), Leaf(storage + 10, 5)}},
                    {},
                    {DeviceSpan<int>(ids, 6)}};
  std::array<std::size_t, 6> sizes{};
  std::size_t calls = 0;
  auto record = [&]<class T>(DeviceSpan<T> leaf) {
    sizes[calls++] = leaf.size();
    return DeviceSpan<const T>(leaf);
  };
  const ConstNested view = d::map_tree(record, tree);
  CHECK(calls == 6);
  CHECK(sizes == std::array<std::size_t, 6>{1, 2, 3, 4, 5, 6});  // depth first, left to right
  CHECK(same_span(std::get<0>(view), Leaf(storage, 1)));
  CHECK(same_span(std::get<1>(view).first, CLeaf(storage + 1, 2)));
  CHECK(same_span(std::get<1>(view).second[2], Leaf(storage + 10, 5)));
  CHECK(same_span(std::get<0>(std::get<3>(view)), DeviceSpan<int>(ids, 6)));

  const Nested shifted = d::map_tree(Shift{}, tree);
  CHECK(same_span(std::get<0>(shifted), Leaf(storage + 1, 1)));
  CHECK(same_span(std::get<1>(shifted).second[1], Leaf(storage + 7, 4)));
  CHECK(same_span(std::get<0>(std::get<3>(shifted)), DeviceSpan<int>(ids + 1, 6)));
  CHECK(same_span(std::get<0>(tree), Leaf(storage, 1)));  // the tree itself is unchanged
}

TEST_CASE("Flatten: map_tree rebuilds a tree_traits type through from_tuple, or gives the tuple of its parts "
          "when the leaves change type",
          "[flatten]") {
  const std::pair<Particles, Tied> tree{{Leaf(storage, 8), DeviceSpan<const int>(ids, 2)},
                                        {Leaf(storage + 8, 3), CLeaf(storage + 12, 4)}};
  const std::pair<Particles, Tied> shifted = d::map_tree(Shift{}, tree);
  CHECK(same_span(shifted.first.pos, Leaf(storage + 1, 8)));
  CHECK(same_span(shifted.first.ids, DeviceSpan<const int>(ids + 1, 2)));
  CHECK(same_span(shifted.second.a, Leaf(storage + 9, 3)));
  CHECK(same_span(shifted.second.b, CLeaf(storage + 13, 4)));

  const auto view = d::map_tree(ToConst{}, tree);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(view)>,
                               std::pair<std::tuple<CLeaf, DeviceSpan<const int>>, std::tuple<CLeaf, CLeaf>>>);
  CHECK(same_span(std::get<0>(view.first), Leaf(storage, 8)));
  CHECK(same_span(std::get<1>(view.first), DeviceSpan<const int>(ids, 2)));
  CHECK(same_span(std::get<0>(view.second), Leaf(storage + 8, 3)));
  CHECK(same_span(std::get<1>(view.second), CLeaf(storage + 12, 4)));
}
