// expect: a result type opted in through tree_traits holds DeviceBuffer leaves
// A user aggregate opted in through tree_traits, returned by a graphed callable with a
// DeviceBuffer member: its buffer cannot become a DeviceSpan inside the same type.
#include <cugraphs/graph.hpp>

#include <tuple>

struct Result {
  cugraphs::DeviceBuffer<float> logits;
  cugraphs::DeviceSpan<int> labels;
};

template <>
struct cugraphs::tree_traits<Result> {
  static constexpr bool custom = true;
  static auto to_tuple(const Result& r) { return std::tie(r.logits, r.labels); }
  static Result from_tuple(const std::tuple<const cugraphs::DeviceBuffer<float>&, cugraphs::DeviceSpan<int>>&) {
    return {};
  }
};

void make(cugraphs::DeviceSpan<float> sample, cugraphs::DeviceSpan<int> labels) {
  auto g = cugraphs::make_graphed_callable(
      [labels](cugraphs::DeviceSpan<float> x) { return Result{cugraphs::DeviceBuffer<float>(x.size()), labels}; },
      sample);
  (void)g;
}
