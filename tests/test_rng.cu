// Graph-safe RNG: fresh numbers every replay, bitwise the numbers of the same calls run
// eagerly, several generators, reseeding, streams, and refused misuse.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <array>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::Generator;
using cugraphs::Graph;
using cugraphs::PerLaunch;
using cugraphs::PhiloxArgs;

namespace {

constexpr std::size_t kN = 1 << 20;

// The nodes PerLaunch::Advance adds to a graph: the advance kernel, which counts launches
// where streams can wait for the count, else also the end's event record node.
unsigned advance_nodes() { return cugraphs::detail::stream_waits() ? 1u : 2u; }

// For a scope, graphs captured under PerLaunch::Advance mark their launches' ends with an
// event record node (the fallback where cuStreamWaitValue32 cannot be had).
class WithoutStreamWaits {
public:
  WithoutStreamWaits() { cugraphs::detail::set_stream_waits(false); }
  ~WithoutStreamWaits() { cugraphs::detail::set_stream_waits(true); }
  WithoutStreamWaits(const WithoutStreamWaits&) = delete;
  WithoutStreamWaits& operator=(const WithoutStreamWaits&) = delete;
};

// Runs `body()` with stream waits, then without.
template <class Body>
void with_and_without_stream_waits(Body&& body) {
  for (const bool waits : {true, false}) {
    INFO("stream waits: " << waits);
    std::optional<WithoutStreamWaits> fallback;
    if (!waits) fallback.emplace();
    body();
  }
}

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

TEST_CASE("RNG: eager, replay, replay, eager, replay equals five eager calls bitwise, whichever way replays get "
          "their offsets", "[rng][gpu]") {
  for (const auto& [per_launch, waits] : {std::pair{PerLaunch::Parameters, true}, std::pair{PerLaunch::Ring, true},
                                          std::pair{PerLaunch::Advance, true}, std::pair{PerLaunch::Advance, false}}) {
    for (const bool explicit_stream : {false, true}) {
      INFO("explicit stream: " << explicit_stream << ", per launch: " << static_cast<int>(per_launch)
                               << ", stream waits: " << waits);
      std::optional<WithoutStreamWaits> fallback;
      if (!waits) fallback.emplace();
      cugraphs::Stream stream;
      Generator a(42), b(42);
      DeviceBuffer<float> out(kN, stream), ref(kN, stream);
      Graph g;
      const std::uint64_t before = a.offset();
      {
        cugraphs::CaptureOptions opts;
        opts.per_launch = per_launch;
        cugraphs::CaptureScope scope(g, opts);
        draw(a, out, 3, scope.stream());
      }
      CHECK(g.per_launch() == per_launch);
      // The ring's head and tail, or the advance kernel (and without stream waits the end's
      // event record node).
      CHECK(g.node_count() == (per_launch == PerLaunch::Parameters ? 1u
                               : per_launch == PerLaunch::Ring     ? 3u
                                                                   : 1u + advance_nodes()));
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
}

TEST_CASE("RNG: two generators in one graph advance independently; manual_seed between replays "
          "acts as it would eagerly", "[rng][gpu]") {
  for (const auto per_launch : {PerLaunch::Advance, PerLaunch::Parameters, PerLaunch::Ring}) {
    INFO("per launch: " << static_cast<int>(per_launch));
    cugraphs::Stream s;
    Generator g1(7), g2(8), r1(7), r2(8);
    DeviceBuffer<float> x(kN, s), y(kN, s), z(kN, s), rx(kN, s), ry(kN, s), rz(kN, s);
    Graph graph;
    {
      cugraphs::CaptureOptions opts;
      opts.per_launch = per_launch;
      cugraphs::CaptureScope scope(graph, opts);
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

TEST_CASE("RNG: a graphed callable that draws random numbers takes its inputs and offsets as kernel arguments "
          "(no extra node) or through one ring (one head and one tail node), and its calls draw bitwise what eager "
          "calls draw",
          "[rng][graphed][gpu]") {
  // The third way reads the inputs in place (InputMode::InPlace): one node set a call.
  for (const auto& [per_launch, in_place] : {std::pair{PerLaunch::Auto, false}, std::pair{PerLaunch::Ring, false},
                                            std::pair{PerLaunch::Auto, true}}) {
    INFO("per launch: " << static_cast<int>(per_launch) << ", in place: " << in_place);
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
    opts.per_launch = per_launch;
    opts.inputs = in_place ? cugraphs::InputMode::InPlace : cugraphs::InputMode::Copy;
    auto g = cugraphs::make_graphed_callable(opts, f, cugraphs::DeviceSpan<const float>(inputs[0].span()));
    const bool ring = per_launch == PerLaunch::Ring;
    CHECK(g.graph().per_launch() == (ring ? PerLaunch::Ring : PerLaunch::Parameters));  // Auto: two nodes take values
    // f's kernel and the staging copy; the ring's head and tail, or the event record node
    // that marks a launch's end when the values go as arguments.
    CHECK(g.graph().node_count() == (ring ? 1u + 3u : 1u + 2u));
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
    CHECK(g.staged_copies() == (in_place ? 0u : 6u));
  }
}

namespace {
// Draws as uniforms does with one value a thread, reading its PhiloxArgs from device memory.
__global__ void uniforms_from(float* out, std::size_t n, const PhiloxArgs* args) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(*args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = curand_uniform(&state);
}

// A sampling step's parameters as a port keeps them: the draw beside a temperature.
struct Sampling {
  PhiloxArgs rng;
  float temperature;
};
__global__ void scaled_uniforms(float* out, std::size_t n, Sampling p) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(p.rng);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = curand_uniform(&state) * p.temperature;
}

struct FreePinned {
  void operator()(void* p) const noexcept { (void)cudaFreeHost(p); }
};

// `body` captured with PerLaunch::Parameters is an Error saying `why` that leaves `g` empty;
// captured with PerLaunch::Auto, it advances its offsets on the device.
template <class Body>
void refuses_parameters(Graph& g, Body&& body, const char* why) {
  cugraphs::CaptureOptions forced;
  forced.per_launch = PerLaunch::Parameters;
  const auto e = expect_error([&] { cugraphs::capture(g, body, forced); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), why));
  CHECK(g.native_graph() == nullptr);
  cugraphs::capture(g, body);
  CHECK(g.per_launch() == PerLaunch::Advance);
}

// Replays `g` `replays` times; after each, every buffer of `outs` holds bitwise what one
// eager draw of one value a thread from `twin` gives.
void replays_draw_as_eager(Graph& g, Generator& twin, std::initializer_list<const DeviceBuffer<float>*> outs,
                           cudaStream_t s, int replays) {
  DeviceBuffer<float> ref((*outs.begin())->size());
  for (int replay = 0; replay < replays; ++replay) {
    g.replay();
    draw(twin, ref, 1, s);
    INFO("replay " << replay);
    for (const auto* out : outs) REQUIRE(bitwise_equal(out->to_host(), ref.to_host()));
  }
}
}  // namespace

TEST_CASE("RNG: PerLaunch::Auto hands offsets as kernel arguments to up to kAutoParameterNodes drawing kernels, "
          "and lets a graph that only draws advance them on the device beyond and when a draw reaches its kernel "
          "through memory; PerLaunch::Parameters there is an Error that leaves the graph reusable",
          "[rng][gpu]") {
  constexpr std::size_t n = 5000;
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  for (const unsigned kernels : {cugraphs::kAutoParameterNodes, cugraphs::kAutoParameterNodes + 1}) {
    INFO("drawing kernels: " << kernels);
    Generator a(11), b(11);
    std::vector<DeviceBuffer<float>> out, ref;
    for (unsigned k = 0; k < kernels; ++k) {
      out.emplace_back(n);
      ref.emplace_back(n);
    }
    Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) {
      for (unsigned k = 0; k < kernels; ++k) draw(a, out[k], 1 + static_cast<int>(k), s);
    });
    const bool by_arguments = kernels <= cugraphs::kAutoParameterNodes;
    CHECK(g.per_launch() == (by_arguments ? PerLaunch::Parameters : PerLaunch::Advance));
    CHECK(g.node_count() == kernels + (by_arguments ? 0u : advance_nodes()));
    for (int replay = 0; replay < 3; ++replay) {
      g.replay();
      for (unsigned k = 0; k < kernels; ++k) draw(b, ref[k], 1 + static_cast<int>(k), stream);
      for (unsigned k = 0; k < kernels; ++k) REQUIRE(bitwise_equal(out[k].to_host(), ref[k].to_host()));
    }
    CHECK(a.offset() == b.offset());
  }

  // The PhiloxArgs reach the kernel through a copy from pinned memory: no kernel argument
  // holds them, so only the device's words can refresh what the kernel reads.
  void* raw = nullptr;
  cugraphs::check(cudaHostAlloc(&raw, sizeof(PhiloxArgs), cudaHostAllocDefault), "cudaHostAlloc");
  const std::unique_ptr<void, FreePinned> pinned(raw);
  auto* host_args = static_cast<PhiloxArgs*>(raw);
  DeviceBuffer<PhiloxArgs> device_args(1);
  Generator a(12), b(12);
  DeviceBuffer<float> out(n);
  auto through_memory = [&](cudaStream_t s) {
    *host_args = a.philox(1);
    cugraphs::check(cudaMemcpyAsync(device_args.data(), host_args, sizeof(PhiloxArgs), cudaMemcpyHostToDevice, s),
                    "cudaMemcpyAsync");
    uniforms_from<<<blocks_for(n), kThreads, 0, s>>>(out.data(), n, device_args.data());
  };
  Graph g;
  refuses_parameters(g, through_memory, "PerLaunch::Parameters, but draw 0 of the capture");
  CHECK_NOTHROW(a.manual_seed(12));  // the failed capture let go of the generator
  replays_draw_as_eager(g, b, {&out}, stream, 3);

  // The same PhiloxArgs both ways: as a kernel argument and through the copy. Kernel
  // arguments would refresh the first kernel only, so Auto advances the words, and Parameters
  // is an Error naming the copy.
  DeviceBuffer<float> direct(n);
  auto both_ways = [&](cudaStream_t s) {
    *host_args = a.philox(1);
    uniforms<<<blocks_for(n), kThreads, 0, s>>>(direct.data(), n, *host_args, 1);
    cugraphs::check(cudaMemcpyAsync(device_args.data(), host_args, sizeof(PhiloxArgs), cudaMemcpyHostToDevice, s),
                    "cudaMemcpyAsync");
    uniforms_from<<<blocks_for(n), kThreads, 0, s>>>(out.data(), n, device_args.data());
  };
  Graph twice;
  refuses_parameters(twice, both_ways, "PerLaunch::Parameters, but a memcpy node copies the PhiloxArgs of a draw");
  replays_draw_as_eager(twice, b, {&direct, &out}, stream, 3);  // one draw, read by both kernels
}

namespace {
__global__ void set_flag(bool* flag, bool value) { *flag = value; }
}  // namespace

TEST_CASE("RNG: a draw handed both to a top-level kernel and to a kernel inside a While body takes its offsets from "
          "the device's words (node updates cannot reach the body); PerLaunch::Parameters is an Error there",
          "[rng][conditional][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Generator a(51), b(51);
  DeviceBuffer<float> outside(kN), inside(kN);
  DeviceBuffer<bool> go_on(1);
  auto body = [&](cugraphs::CaptureScope& scope) {
    const PhiloxArgs args = a.philox(1);
    uniforms<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(outside.data(), kN, args, 1);
    set_flag<<<1, 1, 0, scope.stream()>>>(go_on.data(), true);
    cugraphs::ConditionalScope<cugraphs::While> loop(scope, go_on.data());
    uniforms<<<blocks_for(kN), kThreads, 0, loop.stream()>>>(inside.data(), kN, args, 1);
    set_flag<<<1, 1, 0, loop.stream()>>>(go_on.data(), false);  // one iteration
  };
  Graph g;
  refuses_parameters(g, body, "PerLaunch::Parameters, but a kernel inside a conditional body or a child graph takes the "
                          "PhiloxArgs of a draw");
  replays_draw_as_eager(g, b, {&outside, &inside}, stream, 3);
}

TEST_CASE("RNG: a graph with device-updatable kernel nodes takes its offsets from the device's words (node updates "
          "from the host would overwrite the device's); PerLaunch::Parameters is an Error there",
          "[rng][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Generator a(31), b(31);
  DeviceBuffer<float> out(kN);
  cugraphs::LaunchConfig config;
  config.grid = dim3(static_cast<unsigned>(blocks_for(kN)));
  config.block = dim3(kThreads);
  auto body = [&](cudaStream_t) { (void)cugraphs::launch_updatable(config, uniforms, out.data(), kN, a.philox(1), 1); };
  Graph g;
  refuses_parameters(g, body, "PerLaunch::Parameters, but the graph holds device-updatable kernel nodes");
  replays_draw_as_eager(g, b, {&out}, stream, 2);
}

TEST_CASE("RNG: set_kernel_args on a drawing kernel's node: later replays keep the change and still draw fresh "
          "numbers, bitwise those of eager calls",
          "[rng][update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  for (const auto per_launch : {PerLaunch::Advance, PerLaunch::Parameters, PerLaunch::Ring}) {
    INFO("per launch: " << static_cast<int>(per_launch));
    Generator a(21), b(21);
    DeviceBuffer<float> x(kN), y(kN), ref(kN);
    cugraphs::KernelNode<float*, std::size_t, PhiloxArgs, int> node;
    PhiloxArgs args;
    Graph g;
    {
      cugraphs::CaptureOptions opts;
      opts.per_launch = per_launch;
      cugraphs::CaptureScope scope(g, opts);
      args = a.philox(2);
      uniforms<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, args, 2);
      node = cugraphs::captured_kernel_node(uniforms, scope.stream());
    }
    g.replay();
    draw(b, ref, 2, stream);
    REQUIRE(bitwise_equal(x.to_host(), ref.to_host()));
    g.set_kernel_args(node, y.data(), kN, args, 2);  // the same draw, into y
    put_all(x, -1.0f);
    for (int replay = 0; replay < 3; ++replay) {
      g.replay();
      draw(b, ref, 2, stream);
      REQUIRE(bitwise_equal(y.to_host(), ref.to_host()));
    }
    CHECK(x.to_host() == std::vector<float>(kN, -1.0f));  // no replay wrote x since
    CHECK(a.offset() == b.offset());
  }
}

TEST_CASE("RNG: with offsets as kernel arguments, set_kernel_args that hands a draw's PhiloxArgs to a node that drew "
          "nothing when captured is an Error that changes nothing",
          "[rng][update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Generator a(41), b(41);
  DeviceBuffer<float> x(kN), y(kN), ref(kN);
  cugraphs::KernelNode<float*, std::size_t, PhiloxArgs, int> fixed;
  PhiloxArgs args;
  Graph g;
  {
    cugraphs::CaptureOptions opts;
    opts.per_launch = PerLaunch::Parameters;
    cugraphs::CaptureScope scope(g, opts);
    args = a.philox(1);
    uniforms<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, args, 1);
    uniforms<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), kN, PhiloxArgs{5, 0, nullptr}, 1);
    fixed = cugraphs::captured_kernel_node(uniforms, scope.stream());
  }
  REQUIRE(g.per_launch() == PerLaunch::Parameters);
  const auto e = expect_error([&] { g.set_kernel_args(fixed, y.data(), kN, args, 1); });
  CHECK(contains(e.what(), "it drew nothing when captured"));
  g.replay();
  draw(b, ref, 1, stream);
  CHECK(bitwise_equal(x.to_host(), ref.to_host()));
  DeviceBuffer<float> fixed_ref(kN);
  uniforms<<<blocks_for(kN), kThreads, 0, stream>>>(fixed_ref.data(), kN, PhiloxArgs{5, 0, nullptr}, 1);
  CHECK(bitwise_equal(y.to_host(), fixed_ref.to_host()));  // the node kept its captured arguments
}

namespace {
__device__ int bumps;
__global__ void bump() { ++bumps; }  // no parameters at all
}  // namespace

TEST_CASE("RNG: a kernel without parameters beside a draw leaves the offsets as kernel arguments (a layout of no "
          "parameters is not an unknown one)", "[rng][gpu]") {
  cugraphs::Stream stream;
  Generator a(3), b(3);
  DeviceBuffer<float> out(kN, stream), ref(kN, stream);
  const int zero = 0;
  REQUIRE(cudaMemcpyToSymbol(bumps, &zero, sizeof zero) == cudaSuccess);
  Graph g;
  cugraphs::CaptureOptions opts;
  opts.per_launch = PerLaunch::Parameters;
  cugraphs::capture(
      g,
      [&](cudaStream_t s) {
        bump<<<1, 1, 0, s>>>();
        draw(a, out, 2, s);
      },
      opts);
  CHECK(g.per_launch() == PerLaunch::Parameters);  // not refused: one node takes values
  CHECK(g.node_count() == 2u);
  for (int replay = 0; replay < 3; ++replay) {
    g.replay(stream);
    draw(b, ref, 2, stream);
    REQUIRE(bitwise_equal(out.to_host(stream), ref.to_host(stream)));
  }
  int counted = 0;
  REQUIRE(cudaMemcpyFromSymbol(&counted, bumps, sizeof counted) == cudaSuccess);
  CHECK(counted == 3);
}

namespace {
__global__ void accumulate(float* sum, const float* x, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) sum[i] += x[i];
}
}  // namespace

TEST_CASE("RNG: a graph that advances its offsets, replayed on another stream while its last launch still runs and "
          "after an eager draw, draws bitwise the eager numbers (the words wait for that launch's end, through the "
          "device's launch count or the end's event)",
          "[rng][gpu]") {
  with_and_without_stream_waits([&] {
    constexpr std::size_t n = 4096;
    cugraphs::Stream first, second, eager_stream;
    Generator a(77), b(77);
    DeviceBuffer<float> slow(n), out(n), sum(n), between(n), ref(n), ref_sum(n);
    put_all(sum, 0.5f);
    put_all(ref_sum, 0.5f);
    Graph g;
    cugraphs::CaptureOptions opts;
    opts.per_launch = PerLaunch::Advance;
    cugraphs::capture(
        g,
        [&](cudaStream_t s) {
          // 20 ms of waiting first: the next replay's words are set while this launch still runs.
          slow_fill_kernel<<<1, kThreads, 0, s>>>(slow.data(), n, 1.0f, 20'000'000);
          draw(a, out, 2, s);
          accumulate<<<blocks_for(n), kThreads, 0, s>>>(sum.data(), out.data(), n);
        },
        opts);
    REQUIRE(g.per_launch() == PerLaunch::Advance);
    g.replay(first);
    draw(a, between, 1, eager_stream);  // the generator moves without the graph
    g.replay(second);                   // its words must wait for the first launch's draw
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    cugraphs::Stream s;
    for (const int per_thread : {2, 1, 2}) {  // replay, eager, replay
      draw(b, ref, per_thread, s);
      if (per_thread == 2) accumulate<<<blocks_for(n), kThreads, 0, s>>>(ref_sum.data(), ref.data(), n);
      else REQUIRE(bitwise_equal(between.to_host(s), ref.to_host(s)));
    }
    CHECK(bitwise_equal(sum.to_host(s), ref_sum.to_host(s)));
    CHECK(a.offset() == b.offset());
  });
}

TEST_CASE("RNG: PerLaunch::Advance on a graphed callable, which stages inputs, is an Error at capture that says why",
          "[rng][graphed][gpu]") {
  Generator a(5);
  DeviceBuffer<float> x(kN), out(kN);
  cugraphs::GraphedOptions opts;
  opts.per_launch = PerLaunch::Advance;
  auto f = [&](cugraphs::DeviceSpan<const float> in) {
    uniforms<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(out.data(), kN, a.philox(1), 1);
    copy_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(), kN);
  };
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(opts, f, cugraphs::DeviceSpan<const float>(x)); });
  CHECK(contains(e.what(), "PerLaunch::Advance, which refreshes a graph's random numbers on the device, but it "
                           "stages a graphed callable's inputs"));
  CHECK_NOTHROW(a.manual_seed(6));  // the failed capture let go of the generator
}

namespace {

// This thread's uniform from `args`, as uniforms() with per_thread 1 draws it.
__device__ void draw_one(float* out, std::size_t n, const cugraphs::PhiloxArgs& args) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = curand_uniform(&state);
}

// A kernel written for programmatic chains: it lets the kernels after it start at once
// (pdl::trigger), then waits about `ns` and only then reads its (seed, offset) and draws.
__global__ void uniforms_after_trigger(float* out, std::size_t n, cugraphs::PhiloxArgs args, unsigned long long ns) {
  cugraphs::pdl::trigger();
  if (threadIdx.x == 0) spin_ns(ns);
  __syncthreads();
  draw_one(out, n, args);
}

// Launched programmatically after the kernel before it: waits for it, then draws.
__global__ void uniforms_waiting(float* out, std::size_t n, cugraphs::PhiloxArgs args) {
  cugraphs::pdl::wait();
  draw_one(out, n, args);
}

// Replays `g` `rounds` times; after each, draws one uniform a thread from `eager` into each of
// `refs` in turn and requires each of `outs` (the graph's draws, in capture order) to match.
void require_replays_match(Graph& g, Generator& eager, std::initializer_list<DeviceBuffer<float>*> outs,
                           std::initializer_list<DeviceBuffer<float>*> refs, cudaStream_t s, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    g.replay(s);
    for (DeviceBuffer<float>* ref : refs) draw(eager, *ref, 1, s);
    INFO("replay " << r);
    auto ref = refs.begin();
    for (DeviceBuffer<float>* out : outs) REQUIRE(bitwise_equal(out->to_host(s), (*ref++)->to_host(s)));
  }
}

// Whether the advance kernel this translation unit registered waits for programmatic edges
// (griddepcontrol.wait, compiled for sm_90+), as its edges then are (with CUDA 12.3+).
bool advance_waits() {
  cudaFuncAttributes attributes{};
  REQUIRE(cudaFuncGetAttributes(&attributes, cugraphs::detail::advance_kernel()) == cudaSuccess);
  return attributes.ptxVersion >= 90;
}

}  // namespace

TEST_CASE("RNG: under PerLaunch::Advance a last drawing kernel that lets its dependents start early (pdl::trigger) "
          "still draws before the offsets advance",
          "[rng][gpu]") {
  constexpr std::size_t n = 1 << 16;  // 256 blocks: all resident at once, all trigger at their start
  cugraphs::Stream s;
  Generator a(31), b(31);
  DeviceBuffer<float> out(n, s), ref(n, s);
  Graph g;
  cugraphs::CaptureOptions opts;
  opts.per_launch = PerLaunch::Advance;
  cugraphs::capture(
      g,
      [&](cudaStream_t cs) {
        uniforms_after_trigger<<<blocks_for(n), kThreads, 0, cs>>>(out.data(), n, a.philox(1), 1'000'000);  // 1 ms
        cugraphs::check_launch("uniforms_after_trigger");
      },
      opts);
  REQUIRE(g.per_launch() == PerLaunch::Advance);
  // With code for sm_90+ the advance kernel follows the drawing kernel through a programmatic
  // edge (scheduled as the kernel ends, or as soon as it triggers, and waiting for it): the
  // case this test is for.
  CHECK(programmatic_edges(g.native_graph()) == (advance_waits() ? 1u : 0u));
  require_replays_match(g, b, {&out}, {&ref}, s, 4);
  CHECK(a.offset() == b.offset());
}

TEST_CASE("RNG: under PerLaunch::Advance the offsets advance after every last kernel: two drawing branches, and a "
          "programmatic chain whose last kernel draws",
          "[rng][gpu]") {
  constexpr std::size_t n = 1 << 16;
  cugraphs::Stream s, side;
  Generator a(41), b(41);
  DeviceBuffer<float> x(n, s), y(n, s), z(n, s), rx(n, s), ry(n, s), rz(n, s);
  cudaEvent_t fork = nullptr, join = nullptr;
  cugraphs::check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  cugraphs::check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "event");
  Graph g;
  cugraphs::CaptureOptions opts;
  opts.per_launch = PerLaunch::Advance;
  cugraphs::capture(
      g,
      [&](cudaStream_t cs) {
        // Two branches, each ending in a drawing kernel: two last kernels.
        cugraphs::check(cudaEventRecord(fork, cs), "fork");
        cugraphs::check(cudaStreamWaitEvent(side, fork), "fork wait");
        uniforms_after_trigger<<<blocks_for(n), kThreads, 0, cs>>>(x.data(), n, a.philox(1), 200'000);
        uniforms_after_trigger<<<blocks_for(n), kThreads, 0, side>>>(y.data(), n, a.philox(1), 400'000);
        cugraphs::check_launch("uniforms_after_trigger");
        // On the side branch, a drawing kernel launched programmatically after the one before.
        cugraphs::LaunchConfig config;
        config.grid = dim3(blocks_for(n));
        config.block = dim3(kThreads);
        config.programmatic = true;
        cugraphs::launch(side.get(), config, uniforms_waiting, z.data(), n, a.philox(1));
        cugraphs::check(cudaEventRecord(join, side), "join");
        cugraphs::check(cudaStreamWaitEvent(cs, join), "join wait");
      },
      opts);
  REQUIRE(g.per_launch() == PerLaunch::Advance);
  // The chain's own edge, and the advance kernel's from each branch's last kernel (the one
  // triggering first on the side branch counts as last too: only a programmatic edge leaves it).
  CHECK(programmatic_edges(g.native_graph()) == (advance_waits() ? 4u : 1u));
  require_replays_match(g, b, {&x, &y, &z}, {&rx, &ry, &rz}, s, 3);
  CHECK(a.offset() == b.offset());
  cugraphs::check(cudaEventDestroy(fork), "cudaEventDestroy");
  cugraphs::check(cudaEventDestroy(join), "cudaEventDestroy");
}

TEST_CASE("RNG: a graph that advances its offsets, destroyed while its launch still runs, waits for that launch "
          "before its words go (through the device's launch count or the end's event)",
          "[rng][gpu]") {
  with_and_without_stream_waits([&] {
    constexpr std::size_t n = 4096;
    cugraphs::Stream s;
    Generator a(19), b(19);
    DeviceBuffer<float> slow(n, s), out(n, s), ref(n, s);
    {
      Graph g;
      cugraphs::CaptureOptions opts;
      opts.per_launch = PerLaunch::Advance;
      cugraphs::capture(
          g,
          [&](cudaStream_t cs) {
            slow_fill_kernel<<<1, kThreads, 0, cs>>>(slow.data(), n, 1.0f, 50'000'000);  // 50 ms
            draw(a, out, 1, cs);
          },
          opts);
      REQUIRE(g.per_launch() == PerLaunch::Advance);
      CHECK(g.node_count() == 2u + advance_nodes());
      g.replay(s);
      g.replay(s);
      const auto start = std::chrono::steady_clock::now();
      // g goes here: its destructor waits until both launches have finished with the words.
      g.reset();
      CHECK(seconds_since(start) > 0.060);  // most of the two launches' 100 ms
      CHECK(cudaStreamQuery(s) == cudaSuccess);
    }
    draw(b, ref, 1, s);
    draw(b, ref, 1, s);
    CHECK(bitwise_equal(out.to_host(s), ref.to_host(s)));
    CHECK(a.offset() == b.offset());
  });
}

namespace {
// Spins for `ns`, then counts one in *word.
__global__ void bump_after(unsigned* word, unsigned long long ns) {
  spin_ns(ns);
  *word += 1;
}
__global__ void copy_word(unsigned* dst, const unsigned* src) { *dst = *src; }
}  // namespace

TEST_CASE("RNG: the waits behind PerLaunch::Advance's launch count: a stream waits until a word a kernel writes on "
          "another stream reaches a value, the host until it has, and a count that wrapped still counts as reached",
          "[rng][gpu]") {
  cugraphs::Stream worker, waiter;
  // The word is plain cudaMalloc memory, as the ring's words are (private_device_memory): on
  // an H100 (driver 580) the driver refused the wait on a DeviceBuffer's stream-ordered pool
  // memory (CUDA_ERROR_INVALID_VALUE).
  cugraphs::detail::PrivateArray<unsigned> word(1, "test word");
  DeviceBuffer<unsigned> seen(1);
  cugraphs::check(cudaMemset(word.data(), 0, sizeof(unsigned)), "cudaMemset");
  cugraphs::check(cudaMemset(seen.data(), 0, sizeof(unsigned)), "cudaMemset");
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  // Built with CUDA 12.5+ for a driver that has cuStreamWaitValue32: Advance counts launches.
  REQUIRE(cugraphs::detail::stream_waits());
#endif
  if (!cugraphs::detail::stream_waits()) {
    CHECK(cugraphs::detail::stream_wait_at_least(waiter, word.data(), 1) == cudaErrorNotSupported);
    return;
  }
  const int device = cugraphs::detail::current_device();
  bump_after<<<1, 1, 0, worker>>>(word.data(), 50'000'000);  // 50 ms, then the word is 1
  cugraphs::check_launch("bump_after");
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(cugraphs::detail::wait_at_least(device, word.data(), 0) == cudaSuccess);  // reached already
  CHECK(seconds_since(t0) < 0.025);
  CHECK(cudaStreamQuery(worker) == cudaErrorNotReady);
  // A kernel queued after the stream's wait reads the word once the other stream's kernel wrote it.
  REQUIRE(cugraphs::detail::stream_wait_at_least(waiter, word.data(), 1) == cudaSuccess);
  copy_word<<<1, 1, 0, waiter>>>(seen.data(), word.data());
  cugraphs::check_launch("copy_word");
  const bool spinning = cudaStreamQuery(worker) == cudaErrorNotReady;
  REQUIRE(cugraphs::detail::wait_at_least(device, word.data(), 1) == cudaSuccess);
  // The host waited for the word, not merely for time (the worker may have ended already
  // where kernels run slowly, under compute-sanitizer say).
  unsigned now = 0;
  REQUIRE(cudaMemcpy(&now, word.data(), sizeof now, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(now == 1u);
  INFO("the worker was still spinning when the wait began: " << spinning);
  REQUIRE(cudaStreamSynchronize(waiter) == cudaSuccess);
  unsigned got = 0;
  REQUIRE(cudaMemcpy(&got, seen.data(), sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got == 1u);
  // Compared cyclically: 2 has reached 2^32 - 1 (the count went past 2^32).
  const unsigned wrapped = 2;
  REQUIRE(cudaMemcpy(word.data(), &wrapped, sizeof wrapped, cudaMemcpyHostToDevice) == cudaSuccess);
  t0 = std::chrono::steady_clock::now();
  REQUIRE(cugraphs::detail::wait_at_least(device, word.data(), 0xFFFFFFFFu) == cudaSuccess);
  CHECK(seconds_since(t0) < 0.025);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

namespace {

// A ported dropout-style kernel: it takes the Philox seed and offset as plain numbers, 64-bit
// or (as older ports have them) 32-bit.
template <class Word>
__global__ void uniforms_from_numbers(float* out, std::size_t n, Word seed, Word offset) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = curand_uniform(&state);
}
// Copies n floats; its last arguments are zeros, which a placeholder seed of 0 would match.
__global__ void copy_with_zeros(float* out, const float* in, std::size_t n, const float* unused, std::size_t zero) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = in[i] + (unused != nullptr ? unused[zero] : 0.0f);
}

}  // namespace

// Before: accepted; inside a capture a PhiloxArgs holds (0, its offset in the graph, the
// address of the graph's words), so the kernel drew seed 0 at the same offset in every
// replay: the same "random" numbers every time, silently.
TEST_CASE("RNG: a kernel given a draw's .seed and .offset as numbers (a ported kernel) is an Error at the capture's "
          "end naming rng::unpack, and the graph captures again; PerLaunch::Advance keeps a draw unused on purpose",
          "[rng][escapes][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Generator a(61), b(61);
  DeviceBuffer<float> x(kN), ref(kN);
  const auto numbers = [&](cudaStream_t s) {
    const PhiloxArgs args = a.philox(1);
    uniforms_from_numbers<std::uint64_t><<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, args.seed, args.offset);
  };
  Graph g;
  for (const auto per_launch : {PerLaunch::Auto, PerLaunch::Parameters}) {
    cugraphs::CaptureOptions o;
    o.per_launch = per_launch;
    const auto e = expect_error([&] { cugraphs::capture(g, numbers, o); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "no node of the graph reaches its draws"));
    CHECK(contains(e.what(), ".seed and .offset"));
    CHECK(contains(e.what(), "rng::unpack"));
    CHECK_FALSE(g.is_capturing());
    CHECK_FALSE(g.is_instantiated());
  }
  CHECK(a.offset() == 0);  // nothing was replayed
  // The same graph captures the draw passed as it should be, and replays the eager numbers.
  cugraphs::capture(g, [&](cudaStream_t s) {
    uniforms<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, a.philox(1), 1);
  });
  for (int r = 0; r < 3; ++r) {
    g.replay();
    draw(b, ref, 1, stream);
    REQUIRE(bitwise_equal(x.to_host(), ref.to_host()));
  }
  // A draw unused on purpose (the eager code draws and discards it) under Advance: the
  // generator moves as it would eagerly.
  Graph u;
  cugraphs::CaptureOptions adv;
  adv.per_launch = PerLaunch::Advance;
  cugraphs::capture(u, [&](cudaStream_t s) {
    (void)a.philox(4);
    uniforms<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, a.philox(1), 1);
  }, adv);
  for (int r = 0; r < 2; ++r) {
    u.replay();
    (void)b.philox(4);
    draw(b, ref, 1, stream);
    REQUIRE(bitwise_equal(x.to_host(), ref.to_host()));
  }
  CHECK(a.offset() == b.offset());
}

// A draw's placeholder seed was 0, so under Auto any kernel taking two zero words (a null
// pointer, a zero count, the staging kernel's empty table) looked like a ported kernel given
// .seed and .offset, and a draw unused on purpose was refused. The placeholder is now a
// distinctive value per generator, which a 32-bit seed parameter shows too.
TEST_CASE("RNG: under PerLaunch::Auto a draw unused on purpose stays legal beside kernels that take zeros, in a "
          "graph and a graphed callable; a 32-bit seed parameter given .seed is an Error",
          "[rng][escapes][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Generator a(81), b(81);
  DeviceBuffer<float> x(kN), y(kN), ref(kN);
  draw(b, x, 1, stream);  // any values
  Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) {
    (void)a.philox(4);  // drawn and discarded, as the eager code does
    copy_with_zeros<<<blocks_for(kN), kThreads, 0, s>>>(y.data(), x.data(), kN, nullptr, 0);
  });
  g.replay();
  stream.synchronize();
  CHECK(bitwise_equal(y.to_host(), x.to_host()));

  auto f = [&a](cugraphs::DeviceSpan<const float> in) {
    (void)a.philox(4);
    DeviceBuffer<float> out(in.size());
    copy_with_zeros<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(),
                                                                                        in.size(), nullptr, 0);
    return out;
  };
  auto callable = cugraphs::make_graphed_callable(f, cugraphs::DeviceSpan<const float>(x.span()));
  CHECK(bitwise_equal(host(callable(cugraphs::DeviceSpan<const float>(x.span()))), x.to_host()));

  const auto narrow = [&](cudaStream_t s) {
    const PhiloxArgs args = a.philox(1);
    uniforms_from_numbers<unsigned><<<blocks_for(kN), kThreads, 0, s>>>(ref.data(), kN, static_cast<unsigned>(args.seed),
                                                                        static_cast<unsigned>(args.offset));
  };
  Graph n;
  const auto e = expect_error([&] { cugraphs::capture(n, narrow); });
  CHECK(contains(e.what(), "no node of the graph reaches its draws"));
  CHECK(contains(e.what(), "rng::unpack"));
  CHECK_FALSE(n.is_instantiated());
}

// Before: a graphed callable's warm-up (f run eagerly warmup_iters times when it is made) and
// a cache's (at each bucket's first use) kept what they drew, so every later call drew
// numbers the eager program would not have drawn: graphed and eager runs diverged, silently.
TEST_CASE("RNG: the warm-up of a graphed callable and of a cache's bucket takes its draws back, so every call draws "
          "bitwise what the same eager calls draw", "[rng][graphed][cache][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Generator a(71), b(71);
  DeviceBuffer<float> in(kN), ref(kN);
  cugraphs::check(cudaMemset(in.data(), 0, in.bytes()), "cudaMemset");  // out = 0 + u: the uniforms, bitwise
  auto noise = [&a](cugraphs::DeviceSpan<const float> x) {
    DeviceBuffer<float> out(x.size());
    add_uniforms<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), x.data(), x.size(),
                                                                                   a.philox(1));
    return out;
  };
  auto g = cugraphs::make_graphed_callable(noise, cugraphs::DeviceSpan<const float>(in.span()));
  CHECK(a.offset() == 0);  // three warm-up calls drew, and gave it back
  for (int call = 0; call < 3; ++call) {
    const auto out = g(cugraphs::DeviceSpan<const float>(in.span()));
    draw(b, ref, 1, stream);
    REQUIRE(bitwise_equal(host(out), ref.to_host()));
  }
  // A cache: the first use of each bucket warms it up; calls in any order of buckets.
  auto rows = [&a](const int& n) {
    DeviceBuffer<float> out(static_cast<std::size_t>(n));
    uniforms<<<blocks_for(out.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), out.size(), a.philox(1),
                                                                                  1);
    return out;
  };
  auto cache = cugraphs::make_graph_cache(std::vector<int>{256, 1024}, rows);
  DeviceBuffer<float> small(256), large(1024);
  for (const int key : {256, 1024, 256, 1024}) {
    const auto out = cache(key);
    DeviceBuffer<float>& want = key == 256 ? small : large;
    draw(b, want, 1, stream);
    REQUIRE(bitwise_equal(host(out), want.to_host()));
  }
  CHECK(a.offset() == b.offset());
}

// Before: a PhiloxArgs drawn before the capture (at the top of a training step, as the eager
// program drew it) and handed to a captured kernel was baked into the graph: every replay drew
// the same numbers (a dropout mask frozen for good), silently.
TEST_CASE("RNG: a captured kernel given numbers drawn before the capture is an Error; drawn inside, every replay "
          "draws afresh",
          "[rng][gpu]") {
  Generator gen(11);
  DeviceBuffer<float> out(4096);
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  const PhiloxArgs drawn = gen.philox(1);  // the eager step drew here
  Graph g;
  const auto e = expect_error([&] {
    cugraphs::capture(g, [&](cudaStream_t s) {
      uniforms<<<blocks_for(out.size()), kThreads, 0, s>>>(out.data(), out.size(), drawn, 1);
    });
  });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "takes random numbers drawn outside it"));
  CHECK(contains(e.what(), "seed 11 and offset 0"));
  CHECK_FALSE(g.is_capturing());
  const auto again = expect_error([&] {  // a retry with the same draw is refused again
    cugraphs::capture(g, [&](cudaStream_t s) {
      uniforms<<<blocks_for(out.size()), kThreads, 0, s>>>(out.data(), out.size(), drawn, 1);
    });
  });
  CHECK(contains(again.what(), "takes random numbers drawn outside it"));
  // Before: a PhiloxArgs inside a struct (a sampling step's parameters) was not judged, and
  // every replay drew the capture's numbers, silently.
  const PhiloxArgs nested = gen.philox(1);
  const auto in_struct = expect_error([&] {
    cugraphs::capture(g, [&](cudaStream_t s) {
      scaled_uniforms<<<blocks_for(out.size()), kThreads, 0, s>>>(out.data(), out.size(), Sampling{nested, 0.5f});
    });
  });
  CHECK(contains(in_struct.what(), "takes random numbers drawn outside it"));
  CHECK(contains(in_struct.what(), "seed 11 and offset " + std::to_string(nested.offset)));
  CHECK_FALSE(g.is_capturing());
  // Drawn inside the capture: every replay draws afresh.
  cugraphs::capture(g, [&](cudaStream_t s) { draw(gen, out, 1, s); });
  g.replay();
  const auto a = out.to_host();
  g.replay();
  CHECK_FALSE(bitwise_equal(out.to_host(), a));
  // EscapeCheck::Off keeps fixed numbers on purpose.
  const PhiloxArgs fixed = gen.philox(1);
  Graph off;
  cugraphs::CaptureOptions o;
  o.escapes = cugraphs::EscapeCheck::Off;
  cugraphs::capture(off, [&](cudaStream_t s) {
    uniforms<<<blocks_for(out.size()), kThreads, 0, s>>>(out.data(), out.size(), fixed, 1);
  }, o);
  off.replay();
  const auto c = out.to_host();
  off.replay();
  CHECK(bitwise_equal(out.to_host(), c));
}
