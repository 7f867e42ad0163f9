// GraphedCallable on the GPU: results bitwise equal to eager calls, size checks, aliasing,
// shared pools across chained callables, warm-up counts and pool allocations.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <array>
#include <tuple>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
constexpr std::size_t kN = 5000;  // not a multiple of the block size

__global__ void mix(float* out, const float* a, const float* b, std::size_t n, float k) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] * k + __sinf(b[i]);
}

// Ten kernels over three nested inputs; returns a buffer it allocates and a span of memory
// that outlives the capture.
struct Model {
  Out persistent;
  int* calls;
  std::tuple<DeviceBuffer<float>, Out> operator()(In a, std::pair<In, In> bc, std::tuple<std::array<In, 2>> de) const {
    ++*calls;
    const cudaStream_t s = cugraphs::current_stream();
    const std::size_t n = a.size();
    DeviceBuffer<float> t(n), result(n);
    mix<<<blocks_for(n), kThreads, 0, s>>>(t.data(), a.data(), bc.first.data(), n, 0.5f);
    mix<<<blocks_for(n), kThreads, 0, s>>>(result.data(), bc.second.data(), t.data(), n, -1.5f);
    for (int k = 0; k < 4; ++k) step_kernel<<<blocks_for(n), kThreads, 0, s>>>(result.data(), n, k);
    const auto& [d, e] = std::get<0>(de);
    mix<<<blocks_for(n), kThreads, 0, s>>>(t.data(), d.data(), result.data(), n, 2.0f);
    mix<<<blocks_for(n), kThreads, 0, s>>>(persistent.data(), e.data(), t.data(), n, 0.25f);
    for (int k = 4; k < 6; ++k) step_kernel<<<blocks_for(n), kThreads, 0, s>>>(persistent.data(), n, k);
    cugraphs::check_launch("Model");
    return {std::move(result), persistent};
  }
};

struct Inputs {
  std::array<DeviceBuffer<float>, 5> buffers;
  explicit Inputs(std::uint32_t seed) {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      buffers[i] = DeviceBuffer<float>(kN);
      buffers[i].copy_from_host(random_floats(kN, seed * 10 + static_cast<std::uint32_t>(i)));
    }
  }
  In a() const { return buffers[0]; }
  std::pair<In, In> bc() const { return {buffers[1], buffers[2]}; }
  std::tuple<std::array<In, 2>> de() const { return {{In(buffers[3]), In(buffers[4])}}; }
};

}  // namespace

TEST_CASE("GraphedCallable: 100 calls with fresh inputs give bitwise the eager outputs, with the inputs handed "
          "over as the staging copy's arguments or through the ring",
          "[graphed][gpu]") {
  for (const auto per_launch : {cugraphs::PerLaunch::Auto, cugraphs::PerLaunch::Ring}) {
    INFO("per launch: " << static_cast<int>(per_launch));
    DeviceBuffer<float> persistent(kN);
    int calls = 0;
    Model model{persistent, &calls};
    const Inputs samples(1);
    cugraphs::GraphedOptions opts;
    opts.per_launch = per_launch;
    auto g = cugraphs::make_graphed_callable(opts, model, samples.a(), samples.bc(), samples.de());
    CHECK(calls == 3 + 1);  // warm-up and capture
    const bool ring = per_launch == cugraphs::PerLaunch::Ring;
    CHECK(g.graph().per_launch() == (ring ? cugraphs::PerLaunch::Ring : cugraphs::PerLaunch::Parameters));
    // f's kernels and the staging copy; the ring's head and tail, or the event record node
    // that marks a launch's end when the values go as arguments.
    CHECK(g.graph().node_count() == 10 + 1 + (ring ? 2u : 1u));

    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    for (int call = 0; call < 100; ++call) {
      const Inputs fresh(100 + call);
      const auto& [first, second] = g(fresh.a(), fresh.bc(), fresh.de());
      const auto graphed_first = host(first), graphed_second = host(second);
      auto eager = model(fresh.a(), fresh.bc(), fresh.de());
      REQUIRE(bitwise_equal(graphed_first, host(std::get<0>(eager).span())));
      REQUIRE(bitwise_equal(graphed_second, host(std::get<1>(eager))));
    }
    CHECK(calls == 4 + 100);  // the eager references only
    CHECK(g.calls() == 100);
    CHECK(g.staged_copies() == 500);
  }
}

TEST_CASE("GraphedCallable: calls that repeat the last call's inputs, with new contents, stage them again; "
          "inputs that alternate each stage their own",
          "[graphed][gpu]") {
  DeviceBuffer<float> persistent(kN);
  int calls = 0;
  Model model{persistent, &calls};
  Inputs a(7), b(8);
  auto g = cugraphs::make_graphed_callable(model, a.a(), a.bc(), a.de());
  REQUIRE(g.graph().per_launch() == cugraphs::PerLaunch::Parameters);
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  // The same addresses as the last call leave the staging node's arguments as they are
  // (no node update): the copy must still read the buffers' new contents.
  const std::array<int, 7> order{0, 0, 0, 1, 1, 0, 1};  // 0: a, 1: b
  for (std::size_t k = 0; k < order.size(); ++k) {
    Inputs& in = order[k] == 0 ? a : b;
    in.buffers[0].copy_from_host(random_floats(kN, 500 + static_cast<std::uint32_t>(k)));
    const auto& [first, second] = g(in.a(), in.bc(), in.de());
    const auto graphed_first = host(first), graphed_second = host(second);
    auto eager = model(in.a(), in.bc(), in.de());
    INFO("call " << k);
    REQUIRE(bitwise_equal(graphed_first, host(std::get<0>(eager).span())));
    REQUIRE(bitwise_equal(graphed_second, host(std::get<1>(eager))));
  }
  CHECK(g.staged_copies() == 5 * order.size());
}

TEST_CASE("GraphedCallable: a size mismatch is an Error and leaves the static inputs unchanged",
          "[graphed][gpu]") {
  DeviceBuffer<float> persistent(kN);
  int calls = 0;
  const Inputs samples(2);
  auto g = cugraphs::make_graphed_callable(Model{persistent, &calls}, samples.a(), samples.bc(), samples.de());
  const Inputs fresh(3);
  (void)g(fresh.a(), fresh.bc(), fresh.de());
  const auto statics_before = host(Out(const_cast<float*>(std::get<0>(g.static_inputs()).data()), kN));
  DeviceBuffer<float> shorter(kN - 1);
  const auto e = expect_error([&] { (void)g(fresh.a(), {fresh.bc().first, shorter.span()}, fresh.de()); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "input leaf 2 has 4999 elements but its static leaf has 5000"));
  cugraphs::check(cudaDeviceSynchronize(), "sync");
  CHECK(bitwise_equal(host(Out(const_cast<float*>(std::get<0>(g.static_inputs()).data()), kN)), statics_before));
  CHECK(g.calls() == 1);
  (void)g(fresh.a(), fresh.bc(), fresh.de());  // still usable
  CHECK(g.calls() == 2);
}

TEST_CASE("GraphedCallable: inputs already at their static buffers are not copied", "[graphed][gpu]") {
  DeviceBuffer<float> persistent(kN);
  int calls = 0;
  Model model{persistent, &calls};
  const Inputs samples(4);
  auto g = cugraphs::make_graphed_callable(model, samples.a(), samples.bc(), samples.de());
  const auto& [sa, sbc, sde] = g.static_inputs();
  const auto& outputs = g(sa, sbc, sde);  // every input aliased
  CHECK(g.staged_copies() == 0);
  const auto graphed = host(std::get<0>(outputs));
  // The statics hold the samples' values: the same result as the samples eagerly.
  auto eager = model(samples.a(), samples.bc(), samples.de());
  CHECK(bitwise_equal(graphed, host(std::get<0>(eager).span())));
  const Inputs fresh(5);
  (void)g(sa, fresh.bc(), sde);  // two of five leaves copied
  CHECK(g.staged_copies() == 2);
}

TEST_CASE("GraphedCallable: chained callables share one pool, reserve less, and match eager",
          "[graphed][pool][gpu]") {
  constexpr std::size_t n = 1 << 20;  // 4 MiB temporaries
  auto stage1 = [](In x) {
    DeviceBuffer<float> temp(4 * n), out(n);
    copy_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(temp.data(), x.data(), n);
    affine_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(temp.data(), n, 2.0f, 1.0f);
    copy_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), temp.data(), n);
    return out;
  };
  auto stage2 = [](In y) {
    DeviceBuffer<float> temp(4 * n), out(n);
    copy_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(temp.data(), y.data(), n);
    step_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(temp.data(), n, 3);
    copy_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), temp.data(), n);
    return out;
  };
  DeviceBuffer<float> x(n), y(n);
  x.copy_from_host(random_floats(n, 9));
  y.copy_from_host(random_floats(n, 10));
  auto [g1, g2] = cugraphs::make_graphed_callables(std::tuple{stage1, stage2},
                                                   std::tuple{std::tuple{In(x)}, std::tuple{In(y)}});
  CHECK(g1.graph().pool_id() == g2.graph().pool_id());
  const std::size_t shared = g1.graph().pool().reserved_bytes();

  auto s1 = cugraphs::make_graphed_callable(stage1, In(x));
  auto s2 = cugraphs::make_graphed_callable(stage2, In(y));
  CHECK(s1.graph().pool_id() != s2.graph().pool_id());
  const std::size_t separate = s1.graph().pool().reserved_bytes() + s2.graph().pool().reserved_bytes();
  std::printf("chained callables: shared pool %zu bytes, separate pools %zu bytes\n", shared, separate);
  CHECK(shared < separate);

  for (int r = 0; r < 5; ++r) {
    x.copy_from_host(random_floats(n, 20 + r));
    const Out mid = g1(In(x));
    const Out out = g2(In(mid));
    auto eager_mid = stage1(In(x));
    auto eager_out = stage2(In(eager_mid.span()));
    REQUIRE(bitwise_equal(host(out), host(eager_out.span())));
  }
}

TEST_CASE("GraphedCallable: static inputs lie outside the pool, so a callable captured before in a "
          "shared pool never overwrites them", "[graphed][pool][gpu]") {
  // The zero-copy path: write a callable's static inputs once and pass them back at every
  // call. Allocated from the capture's pool, the second callable's static input took the
  // block the first one's temporary had held, and every call of the first overwrote it.
  constexpr std::size_t n = 1 << 16;
  auto stage1 = [](In x) {
    DeviceBuffer<float> temp(n), out(n);
    fill_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(temp.data(), n, -7.0f);
    copy_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), x.data(), n);
    step_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(temp.data(), n, 1);
    affine_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), n, 1.0f, 0.0f);
    cugraphs::check_launch("stage1");
    return out;
  };
  auto stage2 = [](In y) {
    DeviceBuffer<float> out(n);
    copy_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), y.data(), n);
    step_kernel<<<blocks_for(n), kThreads, 0, cugraphs::current_stream()>>>(out.data(), n, 3);
    return out;
  };
  DeviceBuffer<float> x(n), y(n), written(n);
  x.copy_from_host(random_floats(n, 31));
  y.copy_from_host(random_floats(n, 32));
  written.copy_from_host(random_floats(n, 33));
  auto [g1, g2] = cugraphs::make_graphed_callables(std::tuple{stage1, stage2},
                                                   std::tuple{std::tuple{In(x)}, std::tuple{In(y)}});
  REQUIRE(g1.graph().pool_id() == g2.graph().pool_id());
  const In statics = std::get<0>(g2.static_inputs());
  CHECK(reinterpret_cast<std::uintptr_t>(statics.data()) % 256 == 0);
  cugraphs::check(cudaMemcpy(const_cast<float*>(statics.data()), written.data(), n * sizeof(float),
                             cudaMemcpyDeviceToDevice),
                  "writing the static input");
  const auto expected = host(stage2(In(written)).span());
  for (int r = 0; r < 3; ++r) {
    (void)g1(In(x));  // its temporary is written at every call
    const Out out = g2(statics);
    REQUIRE(bitwise_equal(host(out), expected));
  }
  CHECK(g2.staged_copies() == 0);
}

TEST_CASE("GraphedCallable: warm-up runs exactly warmup_iters times and capture allocations come "
          "from the pool", "[graphed][pool][gpu]") {
  for (int warmups : {0, 1, 5}) {
    int calls = 0, captured_calls = 0;
    std::uint64_t pool_of_temp = 0;
    auto f = [&](In x) {
      ++calls;
      DeviceBuffer<float> out(x.size());
      if (cugraphs::is_current_stream_capturing()) {
        ++captured_calls;
        pool_of_temp = out.pool() ? out.pool()->id() : 0;
      }
      copy_kernel<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), x.data(), x.size());
      return out;
    };
    DeviceBuffer<float> x(1000);
    x.copy_from_host(random_floats(1000, 11));
    cugraphs::GraphedOptions opts;
    opts.warmup_iters = warmups;
    auto g = cugraphs::make_graphed_callable(opts, f, In(x));
    CHECK(calls == warmups + 1);
    CHECK(captured_calls == 1);
    CHECK(pool_of_temp == g.graph().pool_id());
    CHECK(g.graph().pool().allocated_bytes() >= 1000 * sizeof(float));  // the output (static inputs lie outside)
    const Out out = g(In(x));
    CHECK(bitwise_equal(host(out), x.to_host()));
    CHECK(calls == warmups + 1);  // calls replay; they do not call f
  }
  const auto e = expect_error([] {
    cugraphs::GraphedOptions bad;
    bad.warmup_iters = -1;
    DeviceBuffer<float> x(8);
    (void)cugraphs::make_graphed_callable(bad, [](In) {}, In(x));
  });
  CHECK(contains(e.what(), "warmup_iters is -1"));
}

TEST_CASE("GraphedCallable: many calls in flight each stage their own input, whether handed over as arguments "
          "(set for later launches only) or through more calls than the ring has slots",
          "[graphed][gpu]") {
  // More calls than ring slots, queued behind a slow kernel, each with its own input.
  for (const auto per_launch : {cugraphs::PerLaunch::Parameters, cugraphs::PerLaunch::Ring}) {
    INFO("per launch: " << static_cast<int>(per_launch));
    constexpr std::size_t n = 256;
    constexpr int kCalls = 200;
    auto accumulate_into = [](Out acc) {
      return [acc](In x) {  // acc = x + sin(acc)
        mix<<<1, n, 0, cugraphs::current_stream()>>>(acc.data(), x.data(), acc.data(), n, 1.0f);
      };
    };
    std::vector<DeviceBuffer<float>> inputs;
    for (int i = 0; i < kCalls; ++i) {
      inputs.emplace_back(n);
      inputs.back().copy_from_host(std::vector<float>(n, 0.001f * static_cast<float>(i + 1)));
    }
    DeviceBuffer<float> acc(n), ref(n);
    cugraphs::GraphedOptions opts;
    opts.per_launch = per_launch;
    auto g = cugraphs::make_graphed_callable(opts, accumulate_into(acc), In(inputs[0]));
    CHECK(g.graph().per_launch() == per_launch);
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    acc.copy_from_host(std::vector<float>(n, 0.0f));
    slow_fill_kernel<<<1, 32, 0, stream>>>(ref.data(), 0, 0.0f, 5'000'000);  // holds the queue back
    for (int i = 0; i < kCalls; ++i) g(In(inputs[i]));
    const auto got = acc.to_host();
    CHECK(g.calls() == kCalls);
    CHECK(g.staged_copies() == kCalls);

    ref.copy_from_host(std::vector<float>(n, 0.0f));
    auto eager = accumulate_into(ref);
    for (int i = 0; i < kCalls; ++i) eager(In(inputs[i]));
    CHECK(bitwise_equal(got, ref.to_host()));
    CHECK(got[0] != 0.0f);
  }
}

namespace {
constexpr int kWide = 70;  // more input leaves than a warp, and than two
struct WidePointers {
  const float* p[kWide];
};
// out[i] = sum over k of (k + 1) * in[k][i]: a swapped or missed leaf changes the result.
__global__ void weighted_sum(WidePointers in, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int k = 0; k < kWide; ++k) s += static_cast<float>(k + 1) * in.p[k][i];
  out[i] = s;
}
}  // namespace

TEST_CASE("GraphedCallable: a call with 70 input leaves stages every leaf into its own static buffer",
          "[graphed][gpu]") {
  constexpr std::size_t n = 300;
  constexpr int kSetsOfInputs = 3;
  std::vector<DeviceBuffer<float>> storage;
  std::array<std::array<In, kWide>, kSetsOfInputs> sets{};
  std::array<std::vector<std::vector<float>>, kSetsOfInputs> host{};
  for (int s = 0; s < kSetsOfInputs; ++s) {
    for (int k = 0; k < kWide; ++k) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((s * 31 + k * 7 + static_cast<int>(i)) % 13) - 6.0f;
      storage.emplace_back(n);
      storage.back().copy_from_host(v);
      sets[s][k] = In(storage.back());
      host[s].push_back(std::move(v));
    }
  }
  DeviceBuffer<float> out(n);
  auto f = [o = out.span()](const std::array<In, kWide>& xs) {
    WidePointers p{};
    for (int k = 0; k < kWide; ++k) p.p[k] = xs[k].data();
    weighted_sum<<<(n + 127) / 128, 128, 0, cugraphs::current_stream()>>>(p, o.data(), n);
  };
  auto g = cugraphs::make_graphed_callable(f, sets[0]);
  // More leaves than the staging copy takes as arguments: the ring hands them over.
  CHECK(g.graph().per_launch() == cugraphs::PerLaunch::Ring);
  cugraphs::GraphedOptions forced;
  forced.per_launch = cugraphs::PerLaunch::Parameters;
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(forced, f, sets[0]); });
  CHECK(contains(e.what(), "PerLaunch::Parameters, but the staging copy takes at most 64 input leaves as arguments "
                           "and this callable stages 70"));
  for (int call = 0; call < 7; ++call) {
    const int s = (call * 2 + 1) % kSetsOfInputs;
    out.copy_from_host(std::vector<float>(n, -1e30f));  // poison
    g(sets[s]);
    const auto got = out.to_host();
    // Small integers: the sums are exact in float, in any order.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float expected = 0.0f;
      for (int k = 0; k < kWide; ++k) expected += static_cast<float>(k + 1) * host[s][k][i];
      wrong += got[i] != expected ? 1 : 0;
    }
    INFO("call " << call << ", input set " << s);
    REQUIRE(wrong == 0);
  }
  CHECK(g.calls() == 7);
  CHECK(g.staged_copies() == 7u * kWide);
}

namespace {
constexpr int kMany = 1024;
constexpr std::size_t kLeafN = 4;
struct ManyPointers {
  const float* p[kMany];  // 8 KiB of kernel parameters (CUDA 12.1 and later take 32 KiB)
};
__global__ void leaf_sums(ManyPointers in, const float* extra, float* out) {
  const int k = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (k >= kMany) return;
  float s = extra[k % kLeafN];
  for (std::size_t i = 0; i < kLeafN; ++i) s += static_cast<float>(i + 1) * in.p[k][i];
  out[k] = s;
}
using ManyInputs = std::pair<std::array<In, kMany>, In>;
}  // namespace

TEST_CASE("GraphedCallable: 1,025 input leaves (an std::array of 1,024 and one more) compile under nvcc, and every "
          "call stages each leaf",
          "[graphed][gpu]") {
  constexpr int kSets = 2;
  std::vector<DeviceBuffer<float>> storage;
  std::array<ManyInputs, kSets> sets{};
  std::array<std::vector<float>, kSets> leaves_host{}, extra_host{};
  for (int s = 0; s < kSets; ++s) {
    leaves_host[s].resize(kMany * kLeafN);
    for (std::size_t i = 0; i < leaves_host[s].size(); ++i)
      leaves_host[s][i] = static_cast<float>((static_cast<int>(i) * 7 + s * 5) % 11) - 5.0f;
    extra_host[s] = {1.0f + s, 2.0f - s, 3.0f * s, -4.0f};
    storage.emplace_back(leaves_host[s].size());
    storage.back().copy_from_host(leaves_host[s]);
    for (int k = 0; k < kMany; ++k) sets[s].first[k] = In(storage.back().data() + k * kLeafN, kLeafN);
    storage.emplace_back(kLeafN);
    storage.back().copy_from_host(extra_host[s]);
    sets[s].second = In(storage.back());
  }
  DeviceBuffer<float> out(kMany);
  auto f = [o = out.span()](const ManyInputs& xs) {
    ManyPointers p{};
    for (int k = 0; k < kMany; ++k) p.p[k] = xs.first[k].data();
    leaf_sums<<<kMany / 128, 128, 0, cugraphs::current_stream()>>>(p, xs.second.data(), o.data());
    std::array<Out, kMany> parts{};  // 1,024 output leaves too
    for (int k = 0; k < kMany; ++k) parts[k] = Out(o.data() + k, 1);
    return parts;
  };
  auto g = cugraphs::make_graphed_callable(f, sets[0]);
  static_assert(decltype(g)::input_leaves == kMany + 1);
  for (int call = 0; call < 5; ++call) {
    const int s = (call + 1) % kSets;
    out.copy_from_host(std::vector<float>(kMany, -1e30f));  // poison
    const auto& parts = g(sets[s]);
    const auto got = out.to_host();
    std::size_t wrong = 0;
    for (int k = 0; k < kMany; ++k) {
      float expected = extra_host[s][k % kLeafN];
      for (std::size_t i = 0; i < kLeafN; ++i) expected += static_cast<float>(i + 1) * leaves_host[s][k * kLeafN + i];
      wrong += got[k] != expected ? 1 : 0;  // small integers: exact
    }
    INFO("call " << call << ", input set " << s);
    REQUIRE(wrong == 0);
    CHECK(parts[kMany - 1].data() == out.data() + kMany - 1);
  }
  CHECK(g.calls() == 5);
  CHECK(g.staged_copies() == 5u * (kMany + 1));
}

TEST_CASE("GraphedCallable: a call while a capture is open on the thread is an Error; the capture goes on and the "
          "callable works after it", "[graphed][gpu]") {
  DeviceBuffer<float> x(kN), out(kN), copied(kN);
  x.copy_from_host(random_floats(kN, 77));
  auto g = cugraphs::make_graphed_callable(
      [o = out.span()](In in) {
        copy_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(o.data(), in.data(), kN);
      },
      In(x));
  cugraphs::Graph other;
  {
    cugraphs::CaptureScope scope(other);
    const auto e = expect_error([&] { g(In(x)); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "GraphedCallable: a capture is open on this thread; a GraphedCallable cannot be called "
                             "inside a capture"));
    copy_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(copied.data(), x.data(), kN);
  }
  CHECK(g.calls() == 0);
  other.replay();
  out.copy_from_host(std::vector<float>(kN, -3.0f));  // poison
  g(In(x));
  CHECK(bitwise_equal(host(out.span()), x.to_host()));
  CHECK(bitwise_equal(host(copied.span()), x.to_host()));
}

namespace {
__global__ void accumulate(float* acc, const float* x, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) acc[i] += x[i];
}
}  // namespace

TEST_CASE("GraphedCallable: calls on two unordered streams each stage their own inputs", "[graphed][gpu]") {
  // CUDA runs the launches of one executable one after another whatever their streams, so
  // calls need no ordering between streams for staging: every call adds its own input, and
  // the sum shows each input staged exactly once.
  constexpr std::size_t n = 1024;
  constexpr int calls = 200;
  DeviceBuffer<float> acc(n);
  std::vector<DeviceBuffer<float>> inputs;
  for (int k = 0; k < calls; ++k) {  // input k holds k + 1 everywhere: every sum is exact
    inputs.emplace_back(n);
    inputs.back().copy_from_host(std::vector<float>(n, static_cast<float>(k + 1)));
  }
  cugraphs::check(cudaDeviceSynchronize(), "fill the inputs");
  auto add = cugraphs::make_graphed_callable(
      [sum = acc.span()](In x) {
        accumulate<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(sum.data(), x.data(), x.size());
      },
      In(inputs[0].data(), n));
  cugraphs::check(cudaMemset(acc.data(), 0, acc.bytes()), "clear the sum after the warm-up");
  cugraphs::check(cudaDeviceSynchronize(), "the sum is clear before the calls on other streams");
  cugraphs::Stream a, b;
  for (int k = 0; k < calls; ++k) {
    const cudaStream_t s = k % 2 == 0 ? a.get() : b.get();
    // Now and then one stream is held back, so that calls on the other overtake it.
    if (k % 10 == 0) slow_fill_kernel<<<1, kThreads, 0, s>>>(nullptr, 0, 0.0f, 200'000);
    add(s, In(inputs[static_cast<std::size_t>(k)].data(), n));
  }
  a.synchronize();
  b.synchronize();
  const float expected = static_cast<float>(calls) * (calls + 1) / 2;  // exact in float
  const auto sum = acc.to_host();
  INFO("first element: " << sum[0] << ", last: " << sum[n - 1] << ", expected " << expected);
  CHECK(std::all_of(sum.begin(), sum.end(), [&](float v) { return v == expected; }));
  CHECK(add.calls() == static_cast<std::uint64_t>(calls));
  CHECK(add.staged_copies() == static_cast<std::uint64_t>(calls));
}

// Before: both copies ran at once in the one staging kernel, so leaf 0 read a mix of the
// static input's old values and those leaf 1 was writing over them, silently.
TEST_CASE("Graphed callables: feeding outputs that are views of the static inputs back crosswise (a two-step "
          "integrator's (previous, current)) is an Error before anything is staged; a copy of the input works",
          "[graphed][gpu]") {
  auto step = [](In previous, In current) {
    DeviceBuffer<float> next(current.size());
    mix<<<blocks_for(current.size()), kThreads, 0, cugraphs::current_stream()>>>(next.data(), current.data(),
                                                                                 previous.data(), current.size(), 2.0f);
    return std::pair{current, std::move(next)};  // (current, next): the next call's (previous, current)
  };
  const auto p0 = filled(kN, 1), c0 = filled(kN, 2);
  auto g = cugraphs::make_graphed_callable(step, In(p0.span()), In(c0.span()));
  const auto& [p, c] = g(In(p0.span()), In(c0.span()));
  const std::uint64_t copies = g.staged_copies();
  const auto e = expect_error([&] { (void)g(In(p), In(c)); });  // p is static input 1, which c's copy overwrites
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "input leaf 0 lies in static input 1, which this call also overwrites with input leaf 1"));
  CHECK(contains(e.what(), "nothing was staged or launched"));
  CHECK(g.staged_copies() == copies);
  // The remedy: the previous state copied out first.
  DeviceBuffer<float> held(kN);
  cugraphs::check(cudaMemcpy(held.data(), p.data(), kN * sizeof(float), cudaMemcpyDeviceToDevice), "cudaMemcpy");
  // A view of a static input shifted within it races with its own copy too.
  const auto shifted = expect_error([&] { (void)g(In(held.span()), In(p.data() + 1, kN)); });
  CHECK(contains(shifted.what(), "input leaf 1 lies in static input 1"));
  const auto want_current = host(c);
  const auto eager = step(In(held.span()), In(c));
  const auto want_next = host(eager.second.span());
  const auto& [q, d] = g(In(held.span()), In(c));
  CHECK(bitwise_equal(host(q), want_current));
  CHECK(bitwise_equal(host(d), want_next));
}

// A callable without inputs whose f queues nothing (a frame hook with nothing registered)
// records no work: an Error by default, which names the options to set; with
// GraphedOptions::allow_empty it is kept and its calls do nothing.
TEST_CASE("GraphedCallable: an f without inputs that records no work is an Error unless allow_empty",
          "[graphed][gpu]") {
  std::vector<int> hooks;  // nothing registered
  DeviceBuffer<float> x(kN);
  x.copy_from_host(std::vector<float>(kN, 1.5f));
  auto frame = [&] {
    for (int k : hooks) step_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), kN, k);
    cugraphs::check_launch("step_kernel");
  };
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(frame); });
  CHECK(contains(e.what(), "recorded no work"));
  CHECK(contains(e.what(), "GraphedOptions"));
  cugraphs::GraphedOptions opts;
  opts.allow_empty = true;
  auto g = cugraphs::make_graphed_callable(opts, frame);
  g();
  g();
  CHECK(g.calls() == 2);
  CHECK(bitwise_equal(host(x.span()), std::vector<float>(kN, 1.5f)));
}

// A port that fills an input (or clears an optimizer's moments) on its stream and then makes
// the callable. Before: the warm-up calls and the copy of the samples onto the static inputs
// ran on the capture stream, unordered with the caller's stream, and read the input before
// the fill (the warm-up's effect and the static input both silently stale).
TEST_CASE("GraphedCallable: the warm-up and the static inputs' first values come after the work queued on the "
          "current stream",
          "[graphed][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> x(1), acc(1);
  // Loaded first: the first launch of a kernel loads its module (lazy loading), which may wait
  // for the device and would order the warm-up after the fill by accident.
  accumulate<<<1, 1, 0, stream>>>(acc.data(), x.data(), 1);
  fill_late(x, acc, stream);  // x = 7 after 50 ms
  cugraphs::GraphedOptions o;
  o.warmup_iters = 1;
  auto g = cugraphs::make_graphed_callable(
      o,
      [a = acc.span()](In in) {
        accumulate<<<1, 1, 0, cugraphs::current_stream()>>>(a.data(), in.data(), 1);
        cugraphs::check_launch("accumulate");
      },
      In(x));
  stream.synchronize();
  CHECK(host(acc.span())[0] == 7.0f);  // the warm-up added the filled value
  g(std::get<0>(g.static_inputs()));   // the static input as it was made: no copy, reads the sample's value
  stream.synchronize();
  CHECK(host(acc.span())[0] == 14.0f);
}

TEST_CASE("GraphedCallable: allow_written_input lets f use an input as scratch (calls leave the caller's buffer "
          "as it was); InPlace keeps f's writes; a warm-up of 0 calls watches nothing",
          "[graphed][gpu]") {
  // x = 0.5 x + 1 on the input, then out = x.
  auto step = [](Out x) {
    DeviceBuffer<float> out(x.size());
    const cudaStream_t s = cugraphs::current_stream();
    affine_kernel<<<blocks_for(x.size()), kThreads, 0, s>>>(x.data(), x.size(), 0.5f, 1.0f);
    copy_kernel<<<blocks_for(x.size()), kThreads, 0, s>>>(out.data(), x.data(), x.size());
    return out;
  };
  auto sample = filled(kN, 1);
  CHECK(contains(expect_error([&] { (void)cugraphs::make_graphed_callable(step, Out(sample.span())); }).what(),
                 "f wrote input leaf 0"));

  const auto x = filled(kN, 2);
  const auto x_before = host(x.span());
  std::vector<float> want(kN);
  for (std::size_t i = 0; i < kN; ++i) want[i] = 0.5f * x_before[i] + 1.0f;

  cugraphs::GraphedOptions scratch;
  scratch.allow_written_input = true;
  auto copying = cugraphs::make_graphed_callable(scratch, step, Out(sample.span()));
  for (int call = 0; call < 3; ++call) {
    REQUIRE(bitwise_equal(host(copying(Out(x.span()))), want));  // from a fresh copy each call
    REQUIRE(bitwise_equal(host(x.span()), x_before));                        // the caller's buffer as it was
  }

  cugraphs::DeviceBuffer<float> aligned(kN);  // 256-byte aligned: read and written in place
  cugraphs::check(cudaMemcpy(aligned.data(), x.data(), x.bytes(), cudaMemcpyDeviceToDevice), "cudaMemcpy");
  cugraphs::GraphedOptions in_place;
  in_place.inputs = cugraphs::InputMode::InPlace;
  auto writing = cugraphs::make_graphed_callable(in_place, step, Out(sample.span()));
  std::vector<float> expect = x_before;
  for (int call = 0; call < 3; ++call) {
    for (auto& v : expect) v = 0.5f * v + 1.0f;
    REQUIRE(bitwise_equal(host(writing(Out(aligned.span()))), expect));
    REQUIRE(bitwise_equal(host(aligned.span()), expect));  // f's writes reach the caller's buffer
  }

  // One element changed, in the last, partial word of a leaf that starts 4 bytes past an
  // 8-byte boundary (1001 floats): seen.
  DeviceBuffer<float> wide(1002);
  cugraphs::check(cudaMemset(wide.data(), 0x3f, wide.bytes()), "cudaMemset");  // 0.747f each: none is 7
  const Out odd(wide.data() + 1, 1001);
  auto last_only = [](Out v) {
    affine_kernel<<<1, 1, 0, cugraphs::current_stream()>>>(v.data() + v.size() - 1, 1, 0.0f, 7.0f);
  };
  CHECK(contains(expect_error([&] { (void)cugraphs::make_graphed_callable(last_only, odd); }).what(),
                 "f wrote input leaf 0 (4004 bytes at"));
  // And one in the middle of an aligned leaf whose size is not a multiple of 8 bytes (-x != x).
  const Out middle_leaf(wide.data(), 999);
  auto middle = [](Out v) {
    affine_kernel<<<1, 1, 0, cugraphs::current_stream()>>>(v.data() + 500, 1, -1.0f, 0.0f);
  };
  CHECK(contains(expect_error([&] { (void)cugraphs::make_graphed_callable(middle, middle_leaf); }).what(),
                 "f wrote input leaf 0 (3996 bytes at"));

  cugraphs::GraphedOptions no_warm_up;
  no_warm_up.warmup_iters = 0;  // nothing runs eagerly: nothing to watch, as documented
  const auto before = host(sample.span());
  auto unwatched = cugraphs::make_graphed_callable(no_warm_up, step, Out(sample.span()));
  CHECK(bitwise_equal(host(sample.span()), before));
  CHECK(bitwise_equal(host(unwatched(Out(x.span()))), want));
}
