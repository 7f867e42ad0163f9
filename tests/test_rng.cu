// Graph-safe RNG: fresh numbers every replay, bitwise the numbers of the same calls run
// eagerly, several generators, reseeding, streams, and refused misuse.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <array>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::Generator;
using cugraphs::Graph;
using cugraphs::PhiloxArgs;

namespace {

constexpr std::size_t kN = 1 << 20;

}  // namespace

TEST_CASE("RNG: consecutive replays draw different numbers", "[rng][gpu]") {
  Generator gen(1234);
  DeviceBuffer<float> out(kN);
  Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) { draw(gen, out, 1, s); });
  g.replay();
  const auto first = out.to_host();
  g.replay();
  const auto second = out.to_host();
  CHECK_FALSE(bitwise_equal(first, second));
  std::size_t equal = 0;
  for (std::size_t i = 0; i < kN; ++i) {
    REQUIRE(first[i] > 0.0f);
    REQUIRE(first[i] <= 1.0f);
    equal += first[i] == second[i] ? 1 : 0;
  }
  CHECK(equal < kN / 1000);
  CHECK(gen.offset() == 8);  // two replays of a graph drawing 4 (one rounded up) per thread
}

TEST_CASE("RNG: eager, replay, replay, eager, replay equals five eager calls bitwise", "[rng][gpu]") {
  for (const bool explicit_stream : {false, true}) {
    INFO("explicit stream: " << explicit_stream);
    cugraphs::Stream stream;
    Generator a(42), b(42);
    DeviceBuffer<float> out(kN, stream), ref(kN, stream);
    Graph g;
    const std::uint64_t before = a.offset();
    {
      cugraphs::CaptureScope scope(g);
      draw(a, out, 3, scope.stream());
    }
    CHECK(a.offset() == before);  // capture does not advance the generator
    for (const char step : std::string("ERRER")) {
      if (step == 'E') {
        draw(a, out, 3, stream);
      } else if (explicit_stream) {
        g.replay(stream);
      } else {
        cugraphs::StreamGuard on(stream);
        g.replay();
      }
      draw(b, ref, 3, stream);
      REQUIRE(bitwise_equal(out.to_host(stream), ref.to_host(stream)));
    }
    CHECK(a.offset() == b.offset());
  }
}

TEST_CASE("RNG: two generators in one graph advance independently; manual_seed between replays "
          "acts as it would eagerly", "[rng][gpu]") {
  cugraphs::Stream s;
  Generator g1(7), g2(8), r1(7), r2(8);
  DeviceBuffer<float> x(kN, s), y(kN, s), z(kN, s), rx(kN, s), ry(kN, s), rz(kN, s);
  Graph graph;
  {
    cugraphs::CaptureScope scope(graph);
    draw(g1, x, 1, scope.stream());
    draw(g2, y, 5, scope.stream());
    draw(g1, z, 9, scope.stream());
  }
  auto check_same = [&] {
    REQUIRE(bitwise_equal(x.to_host(s), rx.to_host(s)));
    REQUIRE(bitwise_equal(y.to_host(s), ry.to_host(s)));
    REQUIRE(bitwise_equal(z.to_host(s), rz.to_host(s)));
  };
  auto eager = [&] {
    draw(r1, rx, 1, s);
    draw(r2, ry, 5, s);
    draw(r1, rz, 9, s);
  };
  for (int round = 0; round < 3; ++round) {
    graph.replay(s);
    eager();
    check_same();
  }
  CHECK(g1.offset() == 3 * (4 + 12));
  CHECK(g2.offset() == 3 * 8);
  g1.manual_seed(99);
  r1.manual_seed(99);
  graph.replay(s);
  eager();
  check_same();
  CHECK(g2.offset() == r2.offset());
}

TEST_CASE("RNG: bad use is a clear Error", "[rng][gpu]") {
  Generator gen(5), other(6);
  DeviceBuffer<float> out(1024);
  DeviceBuffer<bool> flag(1);
  Graph g;
  {
    cugraphs::CaptureScope scope(g);
    draw(gen, out, 1, scope.stream());
    const auto e = expect_error([&] { gen.manual_seed(1); });
    CHECK(contains(e.what(), "capture that draws from this generator is still open"));
    CHECK_NOTHROW(other.manual_seed(3));  // not recorded by this capture
    cugraphs::ConditionalScope<cugraphs::If> when(scope, flag.data());
    const auto inside = expect_error([&] { (void)gen.philox(1); });
    CHECK(contains(inside.what(), "inside a conditional body"));
  }
  CHECK_NOTHROW(gen.manual_seed(1));  // after the capture
  const auto e = expect_error([] { (void)cugraphs::default_generator(1 << 20); });
  CHECK(e.code() == cudaErrorInvalidDevice);
  CHECK(&cugraphs::default_generator() == &cugraphs::default_generator(0));
}

namespace {
__global__ void add_uniforms(float* out, const float* in, std::size_t n, cugraphs::PhiloxArgs args) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = in[i] + curand_uniform(&state);
}
}  // namespace

TEST_CASE("RNG: a graphed callable that draws random numbers has one per-launch ring (one head and one tail "
          "node) and its calls draw bitwise what eager calls draw",
          "[rng][graphed][gpu]") {
  constexpr std::size_t n = 3000;
  Generator a(77), b(77);
  std::array<DeviceBuffer<float>, 2> inputs{DeviceBuffer<float>(n), DeviceBuffer<float>(n)};
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 3 + k * 17) % 29) - 14.0f;
    inputs[k].copy_from_host(v);
  }
  DeviceBuffer<float> out(n), ref(n);
  auto f = [&](cugraphs::DeviceSpan<const float> in) {
    add_uniforms<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(), n, a.philox(1));
  };
  cugraphs::GraphedOptions opts;
  opts.warmup_iters = 0;  // no eager draws before the capture
  auto g = cugraphs::make_graphed_callable(opts, f, cugraphs::DeviceSpan<const float>(inputs[0].span()));
  std::size_t nodes = 0;
  cugraphs::check(cudaGraphGetNodes(g.graph().native_graph(), nullptr, &nodes), "count nodes");
  CHECK(nodes == 1 + 3);  // f's kernel; the ring's head and tail, the staging copy
  for (int call = 0; call < 6; ++call) {
    const auto& in = inputs[static_cast<std::size_t>(call % 2)];
    out.copy_from_host(std::vector<float>(n, -1e30f));  // poison
    g(cugraphs::DeviceSpan<const float>(in.span()));
    add_uniforms<<<blocks_for(n), kThreads>>>(ref.data(), in.data(), n, b.philox(1));
    cugraphs::check_launch("add_uniforms");
    INFO("call " << call);
    REQUIRE(bitwise_equal(out.to_host(), ref.to_host()));
  }
  CHECK(a.offset() == b.offset());
  CHECK(a.offset() == 6 * 4);
}
