// GraphedPair on the GPU: forward and backward replays bitwise equal to eager calls, the
// parameter surface read in place, layered pairs captured in training order into one pool,
// saved values and fresh random numbers per step, and misuse refused with objects usable.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
constexpr std::size_t kN = 3000;  // not a multiple of the block size

// y = w * sin(x) + 0.1 * x
__global__ void layer_forward(float* y, const float* x, const float* w, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = w[i] * __sinf(x[i]) + 0.1f * x[i];
}

// dx = dy * (w * cos(x) + 0.1); dw = dy * sin(x)
__global__ void layer_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  dx[i] = dy[i] * (w[i] * __cosf(x[i]) + 0.1f);
  dw[i] = dy[i] * __sinf(x[i]);
}

// w -= lr * dw
__global__ void sgd(float* w, const float* dw, std::size_t n, float lr) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) w[i] -= lr * dw[i];
}

// d = y - t
__global__ void difference(float* d, const float* y, const float* t, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) d[i] = y[i] - t[i];
}

// One layer: the forward returns y; the backward returns dx and writes dw into user memory.
struct Layer {
  Out dw;
  std::vector<std::string>* log = nullptr;
  std::string name;

  explicit Layer(Out gradient, std::vector<std::string>* calls = nullptr, std::string label = {})
      : dw(gradient), log(calls), name(std::move(label)) {}

  DeviceBuffer<float> forward(In x, In w) const {
    if (log) log->push_back("f" + name);
    DeviceBuffer<float> y(x.size());
    layer_forward<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(y.data(), x.data(), w.data(),
                                                                                     x.size());
    cugraphs::check_launch("layer_forward");
    return y;
  }
  DeviceBuffer<float> backward(In x, In w, Out, In dy) const {
    if (log) log->push_back("b" + name);
    DeviceBuffer<float> dx(x.size());
    layer_backward<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(dx.data(), dw.data(), dy.data(),
                                                                                      x.data(), w.data(), x.size());
    cugraphs::check_launch("layer_backward");
    return dx;
  }
  auto forward_fn() const {
    return [*this](In x, In w) { return forward(x, w); };
  }
  auto backward_fn() const {
    return [*this](In x, In w, Out y, In dy) { return backward(x, w, y, dy); };
  }
  // For an input that takes no gradient: dx is computed (as a layer would) and dropped.
  auto backward_without_dx_fn() const {
    return [*this](In x, In w, Out y, In dy) { (void)backward(x, w, y, dy); };
  }
};

}  // namespace

TEST_CASE("GraphedPair: forward and backward with fresh inputs and gradients give bitwise the eager results, "
          "and parameters are read in place", "[training][gpu]") {
  DeviceBuffer<float> w = filled(kN, 1), dw(kN), dw_eager(kN);
  const Layer graphed{dw.span()}, eager{dw_eager.span()};
  const auto x0 = filled(kN, 2);
  auto pair = cugraphs::make_graphed_pair(graphed.forward_fn(), graphed.backward_fn(),
                                          cugraphs::requires_grad(In(x0)), cugraphs::param(In(w)));
  static_assert(std::is_same_v<decltype(pair)::Outputs, Out>);
  static_assert(std::is_same_v<decltype(pair)::GradOutputs, In>);
  static_assert(std::is_same_v<decltype(pair)::GradInputs, Out>);
  static_assert(std::is_same_v<decltype(pair)::StaticInputs, std::tuple<In>>);
  CHECK(pair.forward_graph().pool_id() == pair.backward_graph().pool_id());
  CHECK_FALSE(pair.backward_pending());

  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  for (int step = 0; step < 50; ++step) {
    const auto x = filled(kN, 100 + step), dy = filled(kN, 200 + step);
    if (step % 10 == 5) w.copy_from_host(random_floats(kN, 300 + step));  // read in place: no re-capture
    dw.copy_from_host(std::vector<float>(kN, -7.0f));                      // poison
    const Out y = pair.forward(In(x));
    const auto y_graphed = host(y);
    CHECK(pair.backward_pending());
    const Out dx = pair.backward(In(dy));
    const auto dx_graphed = host(dx), dw_graphed = host(dw.span());

    const auto y_eager = eager.forward(x.span(), w.span());
    const auto dx_eager = eager.backward(x.span(), w.span(), y_eager.span(), dy.span());
    REQUIRE(bitwise_equal(y_graphed, host(y_eager.span())));
    REQUIRE(bitwise_equal(dx_graphed, host(dx_eager.span())));
    REQUIRE(bitwise_equal(dw_graphed, host(dw_eager.span())));
  }
  CHECK(pair.forward_calls() == 50);
  CHECK(pair.backward_calls() == 50);
  const auto last = host(pair.static_outputs());
  CHECK(std::any_of(last.begin(), last.end(), [](float f) { return f != 0.0f; }));
}

TEST_CASE("GraphedPair: layered pairs are warmed up in turn, forwards captured in order and backwards in reverse "
          "into one pool, and train bitwise as eager", "[training][pool][gpu]") {
  constexpr int kLayers = 3;
  std::array<DeviceBuffer<float>, kLayers> w, dw, w_eager, dw_eager;
  for (int l = 0; l < kLayers; ++l) {
    w[l] = filled(kN, 10 + l);
    w_eager[l] = filled(kN, 10 + l);
    dw[l] = DeviceBuffer<float>(kN);
    dw_eager[l] = DeviceBuffer<float>(kN);
  }
  std::vector<std::string> log;
  const Layer l1{dw[0].span(), &log, "1"}, l2{dw[1].span(), &log, "2"}, l3{dw[2].span(), &log, "3"};
  const auto x = filled(kN, 20), h1 = filled(kN, 21), h2 = filled(kN, 22);
  cugraphs::GraphedOptions opts;
  opts.warmup_iters = 2;
  auto [p1, p2, p3] = cugraphs::make_graphed_pairs(
      std::tuple{std::pair{l1.forward_fn(), l1.backward_without_dx_fn()}, std::pair{l2.forward_fn(), l2.backward_fn()},
                 std::pair{l3.forward_fn(), l3.backward_fn()}},
      std::tuple{std::tuple{In(x), cugraphs::param(In(w[0]))},  // the data takes no gradient
                 std::tuple{cugraphs::requires_grad(In(h1)), cugraphs::param(In(w[1]))},
                 std::tuple{cugraphs::requires_grad(In(h2)), cugraphs::param(In(w[2]))}},
      opts);
  const std::vector<std::string> expected{"f1", "b1", "f1", "b1", "f2", "b2", "f2", "b2", "f3", "b3",
                                          "f3", "b3", "f1", "f2", "f3", "b3", "b2", "b1"};
  CHECK(log == expected);
  const auto pool = p1.forward_graph().pool_id();
  for (const auto id : {p1.backward_graph().pool_id(), p2.forward_graph().pool_id(), p2.backward_graph().pool_id(),
                        p3.forward_graph().pool_id(), p3.backward_graph().pool_id()})
    CHECK(id == pool);
  // The first layer's input takes no gradient: its backward returns none.
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(p1)>::GradInputs, std::tuple<>>);

  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> d(kN), d_eager(kN);
  const float lr = 0.01f;
  for (int step = 0; step < 20; ++step) {
    const auto xs = filled(kN, 400 + step), target = filled(kN, 500 + step);
    // Graphed: three forwards, the loss gradient eagerly, three backwards, SGD.
    const Out y1 = p1.forward(In(xs));
    const Out y2 = p2.forward(In(y1));
    const Out y3 = p3.forward(In(y2));
    difference<<<blocks_for(kN), kThreads, 0, stream>>>(d.data(), y3.data(), target.data(), kN);
    const Out g3 = p3.backward(In(d));
    const Out g2 = p2.backward(In(g3));
    (void)p1.backward(In(g2));
    for (int l = 0; l < kLayers; ++l) sgd<<<blocks_for(kN), kThreads, 0, stream>>>(w[l].data(), dw[l].data(), kN, lr);
    cugraphs::check_launch("graphed step");

    // Eager, with its own weights.
    const Layer e1{dw_eager[0].span()}, e2{dw_eager[1].span()}, e3{dw_eager[2].span()};
    const auto a1 = e1.forward(xs.span(), w_eager[0].span());
    const auto a2 = e2.forward(a1.span(), w_eager[1].span());
    const auto a3 = e3.forward(a2.span(), w_eager[2].span());
    difference<<<blocks_for(kN), kThreads, 0, stream>>>(d_eager.data(), a3.data(), target.data(), kN);
    const auto d3 = e3.backward(a2.span(), w_eager[2].span(), a3.span(), d_eager.span());
    const auto d2 = e2.backward(a1.span(), w_eager[1].span(), a2.span(), d3.span());
    (void)e1.backward(xs.span(), w_eager[0].span(), a1.span(), d2.span());
    for (int l = 0; l < kLayers; ++l)
      sgd<<<blocks_for(kN), kThreads, 0, stream>>>(w_eager[l].data(), dw_eager[l].data(), kN, lr);
    cugraphs::check_launch("eager step");

    REQUIRE(bitwise_equal(host(y3), host(a3.span())));
    for (int l = 0; l < kLayers; ++l) {
      INFO("step " << step << ", layer " << l);
      REQUIRE(bitwise_equal(host(w[l].span()), host(w_eager[l].span())));
    }
  }
  const auto first = filled(kN, 10);
  CHECK_FALSE(bitwise_equal(host(w[0].span()), host(first.span())));  // training moved the weights
}

namespace {

// Inverted dropout with keep probability 0.7: the mask is drawn from `args`.
__global__ void dropout_forward(float* y, float* mask, const float* x, std::size_t n, cugraphs::PhiloxArgs args) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  const float m = curand_uniform(&state) > 0.3f ? 1.0f / 0.7f : 0.0f;
  mask[i] = m;
  y[i] = x[i] * m;
}

__global__ void dropout_backward(float* dx, const float* dy, const float* mask, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dx[i] = dy[i] * mask[i];
}

auto dropout(cugraphs::Generator& gen) {
  return [&gen](In x) {
    DeviceBuffer<float> y(x.size()), mask(x.size());
    dropout_forward<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(y.data(), mask.data(), x.data(),
                                                                                       x.size(), gen.philox(4));
    cugraphs::check_launch("dropout_forward");
    return cugraphs::save_for_backward(std::move(y), std::move(mask));
  };
}

DeviceBuffer<float> dropout_grad(In dy, Out mask) {
  DeviceBuffer<float> dx(dy.size());
  dropout_backward<<<blocks_for(dy.size()), kThreads, 0, cugraphs::current_stream()>>>(dx.data(), dy.data(),
                                                                                       mask.data(), dy.size());
  cugraphs::check_launch("dropout_backward");
  return dx;
}

}  // namespace

TEST_CASE("GraphedPair: values saved for the backward take no gradient, and a forward that draws random numbers "
          "draws fresh ones every step, bitwise those of eager calls", "[training][rng][gpu]") {
  cugraphs::Generator gen(7), gen_eager(7);
  const auto x0 = filled(kN, 30);
  auto pair = cugraphs::make_graphed_pair(
      dropout(gen), [](In, Out, Out mask, In dy) { return dropout_grad(dy, mask); }, cugraphs::requires_grad(In(x0)));
  static_assert(std::is_same_v<decltype(pair)::Outputs, Out>);
  static_assert(std::is_same_v<decltype(pair)::Saved, Out>);
  static_assert(std::is_same_v<decltype(pair)::GradOutputs, In>);  // no gradient for the mask
  gen.manual_seed(99);  // the warm-up gave its draws back; both reseeded alike anyway
  gen_eager.manual_seed(99);
  auto eager = dropout(gen_eager);

  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<float> previous_mask;
  for (int step = 0; step < 20; ++step) {
    const auto x = filled(kN, 600 + step), dy = filled(kN, 700 + step);
    const Out y = pair.forward(In(x));
    const auto y_graphed = host(y), mask_graphed = host(pair.saved());
    const Out dx = pair.backward(In(dy));
    const auto dx_graphed = host(dx);

    auto [y_eager, mask_eager] = eager(x.span());
    const auto dx_eager = dropout_grad(dy.span(), mask_eager.span());
    REQUIRE(bitwise_equal(mask_graphed, host(mask_eager.span())));
    REQUIRE(bitwise_equal(y_graphed, host(y_eager.span())));
    REQUIRE(bitwise_equal(dx_graphed, host(dx_eager.span())));
    const auto dropped = std::count(mask_graphed.begin(), mask_graphed.end(), 0.0f);
    CHECK(dropped > static_cast<long>(kN) / 5);  // about 30% dropped
    CHECK(dropped < static_cast<long>(kN) * 2 / 5);
    CHECK_FALSE(bitwise_equal(mask_graphed, previous_mask));  // fresh numbers every step
    previous_mask = mask_graphed;
  }
  CHECK(gen.offset() == gen_eager.offset());
}

TEST_CASE("GraphedPair: misuse is an Error that leaves the pair usable", "[training][gpu]") {
  DeviceBuffer<float> w = filled(kN, 40), dw(kN);
  const Layer layer{dw.span()};
  const auto x = filled(kN, 41), dy = filled(kN, 42);
  DeviceBuffer<float> shorter(kN - 1);
  auto pair = cugraphs::make_graphed_pair(layer.forward_fn(), layer.backward_fn(), cugraphs::requires_grad(In(x)),
                                          cugraphs::param(In(w)));
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);

  auto e = expect_error([&] { (void)pair.backward(In(dy)); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "GraphedPair::backward: backward() was called before any forward()"));

  (void)pair.forward(In(x));
  (void)pair.backward(In(dy));
  e = expect_error([&] { (void)pair.backward(In(dy)); });
  CHECK(contains(e.what(), "backward() was already called for the last forward()"));

  e = expect_error([&] { (void)pair.forward(In(shorter)); });
  CHECK(contains(e.what(), "GraphedPair::forward: input leaf 0 has 2999 elements but its static leaf has 3000"));
  CHECK(pair.forward_calls() == 1);
  CHECK_FALSE(pair.backward_pending());

  const Out y = pair.forward(In(x));
  e = expect_error([&] { (void)pair.backward(In(shorter)); });
  CHECK(contains(e.what(), "incoming gradient leaf 0 has 2999 elements but its static leaf has 3000; nothing was "
                           "staged or launched"));
  CHECK(pair.backward_pending());  // the failed call changed nothing
  const auto y_before = host(y);
  const Out dx = pair.backward(In(dy));
  const auto y_eager = layer.forward(x.span(), w.span());
  CHECK(bitwise_equal(y_before, host(y_eager.span())));
  CHECK(bitwise_equal(host(dx), host(layer.backward(x.span(), w.span(), y_eager.span(), dy.span()).span())));
  CHECK(pair.backward_calls() == 2);

  // Called inside the capture of another graph: refused before anything is enqueued, and
  // that capture goes on.
  cugraphs::Graph other;
  DeviceBuffer<float> copied(kN);
  (void)pair.forward(In(x));  // a backward is pending: the capture check is what refuses it
  {
    cugraphs::CaptureScope scope(other);
    e = expect_error([&] { (void)pair.forward(In(x)); });
    CHECK(contains(e.what(), "GraphedPair::forward: a capture is open on this thread; a GraphedPair cannot be "
                             "called inside a capture"));
    e = expect_error([&] { (void)pair.backward(In(dy)); });
    CHECK(contains(e.what(), "GraphedPair::backward: a capture is open on this thread; a GraphedPair cannot be "
                             "called inside a capture"));
    copy_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(copied.data(), x.data(), kN);
  }
  other.replay();
  CHECK(bitwise_equal(host(copied.span()), host(x.span())));
  CHECK(pair.forward_calls() == 3);
  CHECK(pair.backward_pending());
  (void)pair.backward(In(dy));

  // Moved from: an Error; the pair it was moved to works.
  auto moved = std::move(pair);
  e = expect_error([&] { (void)pair.forward(In(x)); });
  CHECK(contains(e.what(), "this GraphedPair was moved from"));
  (void)moved.forward(In(x));
  (void)moved.backward(In(dy));
  CHECK(moved.backward_calls() == 4);

  // A backward whose gradient does not match its argument's size.
  e = expect_error([&] {
    (void)cugraphs::make_graphed_pair(
        layer.forward_fn(),
        [](In x_, In, Out, In) {
          DeviceBuffer<float> half(x_.size() / 2);
          fill_kernel<<<blocks_for(half.size()), kThreads, 0, cugraphs::current_stream()>>>(half.data(), half.size(),
                                                                                            1.0f);
          return half;
        },
        cugraphs::requires_grad(In(x)), cugraphs::param(In(w)));
  });
  CHECK(contains(e.what(), "make_graphed_pair: the backward's gradient leaf 0 has 1500 elements, but the argument "
                           "leaf it is the gradient of has 3000"));
  cugraphs::GraphedOptions bad;
  bad.warmup_iters = -1;
  e = expect_error([&] {
    (void)cugraphs::make_graphed_pair(bad, layer.forward_fn(), layer.backward_fn(), cugraphs::requires_grad(In(x)),
                                      cugraphs::param(In(w)));
  });
  CHECK(contains(e.what(), "make_graphed_pair: warmup_iters is -1"));
}

namespace {
__global__ void add_first(float* acc, const float* x) { *acc += x[0]; }
}  // namespace

// Before: a pair's warm-up ran on the capture stream, unordered with the caller's stream,
// and read a sample still being written there (a port that fills its first batch, or clears
// the optimizer's moments, just before making the pair).
TEST_CASE("GraphedPair: the warm-up comes after the work queued on the current stream", "[training][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> x(1), acc(1), scratch(1);
  // Loaded first: a kernel's first launch loads its module (lazy loading), which may wait for
  // the device and would order the warm-up after the fill by accident.
  add_first<<<1, 1, 0, stream>>>(acc.data(), x.data());
  copy_kernel<<<1, kThreads, 0, stream>>>(scratch.data(), x.data(), 1);
  fill_late(x, acc, stream);  // x = 7 after 50 ms
  cugraphs::GraphedOptions o;
  o.warmup_iters = 1;
  auto pair = cugraphs::make_graphed_pair(
      o,
      [a = acc.span()](In in) {
        add_first<<<1, 1, 0, cugraphs::current_stream()>>>(a.data(), in.data());
        DeviceBuffer<float> y(1);
        copy_kernel<<<1, kThreads, 0, cugraphs::current_stream()>>>(y.data(), in.data(), 1);
        cugraphs::check_launch("forward");
        return y;
      },
      [](In, Out, In dy) {
        DeviceBuffer<float> dx(1);
        copy_kernel<<<1, kThreads, 0, cugraphs::current_stream()>>>(dx.data(), dy.data(), 1);
        cugraphs::check_launch("backward");
        return dx;
      },
      cugraphs::requires_grad(In(x)));
  stream.synchronize();
  CHECK(get(acc) == 7.0f);  // the warm-up's forward read the filled value
  (void)pair.forward(In(x));
  stream.synchronize();
  CHECK(get(acc) == 14.0f);
}
