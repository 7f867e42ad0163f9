// Checked pools: graphs sharing a pool that are replayed concurrently, or out of capture
// order where that overwrites another graph's outputs, are caught with an Error.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cmath>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;
using cugraphs::PoolHandle;

namespace {

constexpr std::size_t kN = 16384;  // 64 KiB of floats

CaptureOptions into(const PoolHandle& pool, cudaStream_t stream = nullptr) {
  CaptureOptions o;
  o.pool = pool;
  o.stream = stream;
  return o;
}

PoolHandle checked_pool() {
  cugraphs::PoolOptions opts;
  opts.checked = true;
  return cugraphs::graph_pool_handle(opts);
}

// Graph A: a temporary filled slowly (about `ns`), then copied into `out` (outside the
// pool). Returns the temporary's address.
const float* capture_slow_temporary(Graph& g, const PoolHandle& pool, float* out, float value,
                                    unsigned long long ns) {
  const float* where = nullptr;
  cugraphs::capture(
      g,
      [&](cudaStream_t s) {
        DeviceBuffer<float> tmp(kN, s);
        where = tmp.data();
        slow_fill_kernel<<<1, kThreads, 0, s>>>(tmp.data(), kN, value, ns);
        copy_kernel<<<blocks_for(kN), kThreads, 0, s>>>(out, tmp.data(), kN);
      },
      into(pool));
  return where;
}

// Graph B: an output buffer made in the capture (so it stays allocated), filled with `value`.
DeviceBuffer<float> capture_output(Graph& g, const PoolHandle& pool, float value) {
  DeviceBuffer<float> result;
  cugraphs::capture(
      g,
      [&](cudaStream_t s) {
        result = DeviceBuffer<float>(kN, s);
        fill_kernel<<<blocks_for(kN), kThreads, 0, s>>>(result.data(), kN, value);
      },
      into(pool));
  return result;
}

std::vector<float> expected_fill(float value) {
  std::vector<float> v(kN);
  // fill_kernel's value + 0.001f * k, which nvcc contracts into one fused multiply-add.
  for (std::size_t i = 0; i < kN; ++i) v[i] = std::fma(0.001f, static_cast<float>(i % 1000), value);
  return v;
}

}  // namespace

TEST_CASE("Checked pools: PoolOptions::checked is off by default and reported by the handle",
          "[checked][gpu]") {
  CHECK_FALSE(cugraphs::graph_pool_handle().checked());
  CHECK(checked_pool().checked());
}

TEST_CASE("Checked pools: two graphs sharing memory replayed concurrently on two streams are "
          "refused with an Error naming both; on one stream, or after a wait, they run",
          "[checked][gpu]") {
  const PoolHandle pool = checked_pool();
  DeviceBuffer<float> out_a(kN), out_b(kN);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the buffers exist before other streams use them
  Graph a, b;
  const float* temp_a = capture_slow_temporary(a, pool, out_a.data(), 3.0f, 200'000'000ull);  // 200 ms
  const float* temp_b = capture_slow_temporary(b, pool, out_b.data(), 5.0f, 1'000ull);
  REQUIRE(temp_a == temp_b);  // b's temporary reuses a's block: they must not run together

  cugraphs::Stream s1, s2;
  a.replay(s1);
  const auto e = expect_error([&] { b.replay(s2); });
  CHECK(e.code() == cudaSuccess);
  const std::string msg = e.what();
  CHECK(contains(msg, "checked pool"));
  CHECK(contains(msg, "graph #2 would run beside graph #1"));
  CHECK(contains(msg, "still running on another stream"));
  CHECK(contains(msg, "separate pools"));

  // Nothing of b was launched; once a is done, b runs on s2, and both results are right.
  s1.synchronize();
  b.replay(s2);
  s2.synchronize();
  CHECK(out_a.to_host() == std::vector<float>(kN, 3.0f));
  CHECK(out_b.to_host() == std::vector<float>(kN, 5.0f));

  // On one stream the replays are ordered: no Error, however long the first runs.
  a.replay(s1);
  b.replay(s1);
  a.replay(s1);
  s1.synchronize();
  CHECK(out_a.to_host() == std::vector<float>(kN, 3.0f));
  CHECK(out_b.to_host() == std::vector<float>(kN, 5.0f));
}

TEST_CASE("Checked pools: graphs of one pool that share no memory may run concurrently",
          "[checked][gpu]") {
  const PoolHandle pool = checked_pool();
  DeviceBuffer<float> out_a(kN), out_b(kN);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  Graph a, b;
  // Each keeps its block (allocated in the capture, freed only after both captures).
  DeviceBuffer<float> keep_a, keep_b;
  cugraphs::capture(
      a,
      [&](cudaStream_t s) {
        keep_a = DeviceBuffer<float>(kN, s);
        slow_fill_kernel<<<1, kThreads, 0, s>>>(keep_a.data(), kN, 2.0f, 100'000'000ull);
        copy_kernel<<<blocks_for(kN), kThreads, 0, s>>>(out_a.data(), keep_a.data(), kN);
      },
      into(pool));
  cugraphs::capture(
      b,
      [&](cudaStream_t s) {
        keep_b = DeviceBuffer<float>(kN, s);
        slow_fill_kernel<<<1, kThreads, 0, s>>>(keep_b.data(), kN, 4.0f, 1'000ull);
        copy_kernel<<<blocks_for(kN), kThreads, 0, s>>>(out_b.data(), keep_b.data(), kN);
      },
      into(pool));
  REQUIRE(keep_a.data() != keep_b.data());
  cugraphs::Stream s1, s2;
  a.replay(s1);
  b.replay(s2);  // a is still running (100 ms), but shares nothing with b
  CHECK(cugraphs::is_capturing(s2) == false);
  s1.synchronize();
  s2.synchronize();
  CHECK(out_a.to_host() == std::vector<float>(kN, 2.0f));
  CHECK(out_b.to_host() == std::vector<float>(kN, 4.0f));
}

TEST_CASE("Checked pools: replaying an earlier graph after a later one overwrites the later "
          "one's outputs in its reused blocks; reading them is refused until it replays again",
          "[checked][gpu]") {
  for (const bool checked : {true, false}) {
    cugraphs::PoolOptions opts;
    opts.checked = checked;
    const PoolHandle pool = cugraphs::graph_pool_handle(opts);
    DeviceBuffer<float> out_a(kN);
    Graph a, b;
    const float* temp_a = capture_slow_temporary(a, pool, out_a.data(), 7.0f, 1'000ull);
    DeviceBuffer<float> out_b = capture_output(b, pool, 1.5f);
    REQUIRE(out_b.data() == temp_a);  // b's output lives in a's temporary

    // In capture order: b's output is intact.
    a.replay();
    b.replay();
    CHECK(out_b.to_host() == expected_fill(1.5f));

    // Out of order: a's temporary overwrites b's output.
    b.replay();
    a.replay();
    CHECK(host(out_b.span()) == std::vector<float>(kN, 7.0f));  // a raw read, unchecked  // the hazard is real: b's values are gone
    if (checked) {
      const auto e = expect_error([&] { (void)out_b.to_host(); });
      CHECK(e.code() == cudaSuccess);
      const std::string msg = e.what();
      CHECK(contains(msg, "DeviceBuffer::copy_to_host"));
      CHECK(contains(msg, "outputs of graph #2"));
      CHECK(contains(msg, "graph #1"));
      CHECK(contains(msg, "capture order"));
      // Writing the whole buffer from the host makes its contents fresh: it reads again.
      const std::vector<float> fresh = random_floats(kN, 5);
      out_b.copy_from_host(fresh);
      CHECK(out_b.to_host() == fresh);
      a.replay();  // overwrites it once more
      CHECK_THROWS_AS(out_b.to_host(), cugraphs::Error);
    } else {
      CHECK(out_b.to_host() == std::vector<float>(kN, 7.0f));  // unchecked: silently wrong
    }
    // Replaying b makes its outputs valid again, and the buffer reads normally.
    b.replay();
    CHECK(out_b.to_host() == expected_fill(1.5f));
    CHECK(out_a.to_host() == std::vector<float>(kN, 7.0f));
  }
}

TEST_CASE("Checked pools: a graphed callable refuses an input that a later out-of-order call "
          "overwrote, and accepts it once its producer has run again",
          "[checked][gpu]") {
  using Span = cugraphs::DeviceSpan<float>;
  using CSpan = cugraphs::DeviceSpan<const float>;
  cugraphs::GraphedOptions opts;
  opts.pool = checked_pool();
  opts.warmup_iters = 1;
  DeviceBuffer<float> sample(kN);
  sample.copy_from_host(random_floats(kN, 11));

  // First: doubles its input through a temporary of the same size.
  auto doubler = cugraphs::make_graphed_callable(
      opts,
      [](CSpan in) {
        const cudaStream_t s = cugraphs::current_stream();
        DeviceBuffer<float> tmp(kN, s);
        copy_kernel<<<blocks_for(kN), kThreads, 0, s>>>(tmp.data(), in.data(), kN);
        DeviceBuffer<float> out(kN, s);
        copy_kernel<<<blocks_for(kN), kThreads, 0, s>>>(out.data(), tmp.data(), kN);
        affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(out.data(), kN, 2.0f, 0.0f);
        return out;
      },
      CSpan(sample.span()));
  // Second, captured later: produces a vector; its output block is the first one's temporary.
  auto producer = cugraphs::make_graphed_callable(opts, [] {
    const cudaStream_t s = cugraphs::current_stream();
    DeviceBuffer<float> out(kN, s);
    fill_kernel<<<blocks_for(kN), kThreads, 0, s>>>(out.data(), kN, 0.25f);
    return out;
  });

  const Span produced = producer();
  const std::vector<float> want = expected_fill(0.25f);
  std::vector<float> doubled_want(kN);
  for (std::size_t i = 0; i < kN; ++i) doubled_want[i] = want[i] * 2.0f;

  // In order: produce, then use.
  Span d = doubler(CSpan(produced));
  CHECK(host(d) == doubled_want);

  // That call ran the doubler after the producer: the produced vector, if it shares the
  // doubler's temporary, is gone, and passing it again is refused before anything runs.
  const auto calls_before = doubler.calls();
  bool shares = false;
  try {
    (void)doubler(CSpan(produced));
  } catch (const cugraphs::Error& e) {
    shares = true;
    CHECK(contains(e.what(), "GraphedCallable"));
    CHECK(contains(e.what(), "capture order"));
  }
  REQUIRE(shares);  // the pool placed the producer's output in the doubler's temporary
  CHECK(doubler.calls() == calls_before);

  // Produce again, then the same call goes through with the right values.
  (void)producer();
  d = doubler(CSpan(produced));
  CHECK(host(d) == doubled_want);
}
