// The compile-time surfaces of graphed pairs: which arguments are staged, which take a
// gradient, the types of incoming gradients, and the const views of output trees.
// Host-only: the spans point at host arrays and are never dereferenced.
#include "testing.hpp"

#include <cugraphs/training.hpp>

#include <array>
#include <tuple>
#include <type_traits>
#include <utility>

using cugraphs::DeviceSpan;
namespace d = cugraphs::detail;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
using Ids = DeviceSpan<const int>;
float storage[32];
int ids[4];

// A pair's argument list: data (no gradient), a parameter, a tree that takes a gradient and
// a parameter that takes one.
using Data = Ids;
using Weights = cugraphs::Param<In>;
using Hidden = cugraphs::Grad<std::pair<In, std::array<In, 2>>>;
using Bias = cugraphs::Grad<cugraphs::Param<In>>;

static_assert(std::is_same_v<d::staged_tuple_t<Data, Weights, Hidden, Bias>,
                             std::tuple<Ids, std::pair<In, std::array<In, 2>>>>);
static_assert(d::staged_index<Data, Weights, Hidden, Bias>(2) == 1);
static_assert(d::staged_index<Data, Weights, Hidden, Bias>(3) == 2);
static_assert(d::arg_traits<Bias>::param && d::arg_traits<Bias>::grad);
static_assert(!d::arg_traits<Weights>::grad && d::arg_traits<Weights>::param);
static_assert(!d::arg_traits<Data>::grad && !d::arg_traits<Data>::param);
// Gradients are expected for Hidden's three leaves, then Bias's one.
static_assert(std::is_same_v<d::expected_grad_values_t<Data, Weights, Hidden, Bias>,
                             std::tuple<float, float, float, float>>);
static_assert(std::is_same_v<d::expected_grad_values_t<Data, Weights>, std::tuple<>>);
// Incoming gradients take the outputs' structure with read-only leaves.
static_assert(std::is_same_v<d::const_tree_t<std::tuple<Out, std::array<DeviceSpan<int>, 2>>>,
                             std::tuple<In, std::array<Ids, 2>>>);
static_assert(std::is_same_v<d::const_tree_t<std::tuple<>>, std::tuple<>>);

// An output type opted in through tree_traits: its incoming gradients are the tuple of its
// parts with read-only leaves (the type cannot hold those), unless its leaves are read-only.
struct Logits {
  Out scores;
  std::array<Out, 2> heads;
};
struct Labels {
  Ids ids;
};

// Graphed callables' results: DeviceBuffer leaves become spans, in tuples and user types.
static_assert(std::is_same_v<d::span_tree_t<std::pair<cugraphs::DeviceBuffer<float>, std::array<Ids, 2>>>,
                             std::pair<Out, std::array<Ids, 2>>>);
static_assert(std::is_same_v<d::span_tree_t<void>, std::tuple<>>);

}  // namespace

template <>
struct cugraphs::tree_traits<Logits> {
  static constexpr bool custom = true;
  static auto to_tuple(const Logits& l) { return std::tuple{l.scores, l.heads}; }
  static Logits from_tuple(const std::tuple<Out, std::array<Out, 2>>& t) { return {std::get<0>(t), std::get<1>(t)}; }
};
template <>
struct cugraphs::tree_traits<Labels> {
  static constexpr bool custom = true;
  static auto to_tuple(const Labels& l) { return std::tuple{l.ids}; }
  static Labels from_tuple(const std::tuple<Ids>& t) { return {std::get<0>(t)}; }
};

static_assert(std::is_same_v<d::const_tree_t<std::pair<Logits, Labels>>,
                              std::pair<std::tuple<In, std::array<In, 2>>, Labels>>);
static_assert(std::is_same_v<d::span_tree_t<std::tuple<Logits, Labels>>, std::tuple<Logits, Labels>>);

TEST_CASE("Graphed pairs: marks come off arguments, and staged samples skip parameters", "[training][host]") {
  const In w(storage, 8), h(storage + 8, 4), a(storage + 12, 4), b(storage + 16, 4), bias(storage + 20, 2);
  const Ids data(ids, 4);
  const auto marked_bias = cugraphs::requires_grad(cugraphs::param(bias));
  CHECK(d::unmarked(marked_bias).data() == bias.data());
  CHECK(d::unmarked(cugraphs::param(w)).size() == 8);
  const auto weights = cugraphs::param(w);
  const auto hidden = cugraphs::requires_grad(std::pair{h, std::array<In, 2>{a, b}});
  const auto staged = d::staged_samples(data, weights, hidden, marked_bias);  // references to the samples
  static_assert(std::tuple_size_v<decltype(staged)> == 2);
  CHECK(std::get<0>(staged).data() == ids);
  CHECK(std::get<1>(staged).first.data() == h.data());
  CHECK(std::get<1>(staged).second[1].data() == b.data());
}

TEST_CASE("Graphed pairs: output trees are viewed read-only leaf for leaf", "[training][host]") {
  const auto tree = std::tuple{Out(storage, 3), std::array<DeviceSpan<int>, 2>{DeviceSpan<int>(ids, 1),
                                                                                DeviceSpan<int>(ids + 1, 3)}};
  const auto view = d::as_const_tree(tree);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(view)>, std::tuple<In, std::array<Ids, 2>>>);
  CHECK(std::get<0>(view).data() == storage);
  CHECK(std::get<0>(view).size() == 3);
  CHECK(std::get<1>(view)[1].data() == ids + 1);
  CHECK(std::get<1>(view)[1].size() == 3);
}

TEST_CASE("Graphed pairs: a tree_traits output's incoming gradients are the tuple of its parts, read-only",
          "[training][host]") {
  const std::pair<Logits, Labels> outputs{{Out(storage, 4), {Out(storage + 4, 2), Out(storage + 6, 3)}},
                                          {Ids(ids, 2)}};
  const auto view = d::as_const_tree(outputs);
  CHECK(std::get<0>(view.first).data() == storage);
  CHECK(std::get<0>(view.first).size() == 4);
  CHECK(std::get<1>(view.first)[1].data() == storage + 6);
  CHECK(std::get<1>(view.first)[1].size() == 3);
  CHECK(view.second.ids.data() == ids);  // already read-only: the type itself
  CHECK(view.second.ids.size() == 2);
}
