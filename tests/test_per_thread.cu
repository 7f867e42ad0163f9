// cugraphs in a program built with nvcc --default-stream per-thread (header-only, as such
// programs use it): stream 0, <<<grid, block>>> without a stream and the synchronous copies
// then mean the calling thread's per-thread default stream, which does not synchronize with
// blocking streams, so the legacy stream's escape guard cannot see work left there. Each trap
// case says what the code before this change did.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"
#include "threads.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <string>
#include <vector>

#if !defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#  error "test_per_thread.cu is built with nvcc --default-stream per-thread (tests/meson.build)"
#endif

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Generator;
using cugraphs::Graph;
using cugraphs::PerLaunch;

namespace {

constexpr std::size_t kN = 5000;  // not a multiple of the block size

// Options for a capture on stream 0 as this unit means it: the per-thread default stream.
CaptureOptions on_stream_zero() {
  CaptureOptions o;
  o.stream = cudaStreamPerThread;
  return o;
}

}  // namespace

// Before: the kernel ran once, eagerly, at capture time; the graph replayed without it and
// nothing was reported.
TEST_CASE("Per-thread default stream: a kernel launched with <<<grid, block>>> and no stream during a capture on "
          "another stream is refused at the end, naming the kernel; it never runs", "[per_thread][escapes][gpu]") {
  auto x = filled(kN, 11);
  const auto original = host(x.span());
  Graph g;
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 3.0f, 0.5f);
    fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);  // stream 0: this thread's per-thread stream
    cugraphs::check_launch("fill_kernel on stream 0");
    const auto e = expect_error([&] { scope.end(); });
    CHECK(e.code() == cudaErrorStreamCaptureUnjoined);
    CHECK(contains(e.what(), "per-thread default stream"));
    CHECK(contains(e.what(), "fill_kernel"));
    std::printf("per_thread: capture_end after <<<grid, block>>> without a stream says: %s\n", e.what());
  }
  CHECK_FALSE(g.is_capturing());
  CHECK(bitwise_equal(host(x.span()), original));  // neither kernel ran
  capture_and_check_affine(g, x);                  // the graph captures again
}

// Before: the memset ran at capture time (x zeroed) and the graph replayed without it.
TEST_CASE("Per-thread default stream: a synchronous cudaMemset during a capture never runs and the capture fails",
          "[per_thread][escapes][gpu]") {
  auto x = filled(kN, 12);
  const auto original = host(x.span());
  Graph g;
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 3.0f, 0.5f);
    // Refused or captured, depending on the runtime; neither way does it run now.
    (void)cudaMemset(x.data(), 0, x.bytes());
    const auto e = expect_error([&] { scope.end(); });
    CHECK(e.code() != cudaSuccess);
  }
  (void)cudaGetLastError();
  CHECK_FALSE(g.is_capturing());
  CHECK(bitwise_equal(host(x.span()), original));
  capture_and_check_affine(g, x);
}

TEST_CASE("Per-thread default stream: a capture on stream 0 takes <<<grid, block>>> launches without a stream, and "
          "replays on stream 0 give the eager results", "[per_thread][gpu]") {
  auto x = filled(kN, 13);
  DeviceBuffer<float> eager(kN);
  cugraphs::check(cudaMemcpy(eager.data(), x.data(), x.bytes(), cudaMemcpyDeviceToDevice), "cudaMemcpy");
  const auto step = [](float* p) {
    affine_kernel<<<blocks_for(kN), kThreads>>>(p, kN, 2.0f, 1.0f);
    step_kernel<<<blocks_for(kN), kThreads>>>(p, kN, 3);
  };
  Graph g;
  {
    CaptureScope scope(g, on_stream_zero());
    CHECK(scope.stream() == cudaStreamPerThread);
    step(x.data());
    cugraphs::check_launch("the step's kernels");
  }
  CHECK(g.node_count() == 2);
  for (int r = 0; r < 3; ++r) {
    g.replay(nullptr);  // stream 0, this unit's per-thread stream
    step(eager.data());
  }
  CHECK(bitwise_equal(host(x.span()), host(eager.span())));
}

TEST_CASE("Per-thread default stream: threads capturing on their own stream 0 at once each get their own work",
          "[per_thread][threads][gpu]") {
  constexpr int kWorkers = 4;
  std::vector<DeviceBuffer<float>> xs;
  for (int t = 0; t < kWorkers; ++t) xs.push_back(filled(kN, 20 + static_cast<std::uint32_t>(t)));
  std::vector<std::vector<float>> before;
  for (const auto& x : xs) before.push_back(host(x.span()));
  Barrier barrier(kWorkers);
  require_no_failures(run_workers(barrier, [&](int t) {
    auto& x = xs[static_cast<std::size_t>(t)];
    Graph g;
    {
      CaptureScope scope(g, on_stream_zero());
      barrier.arrive_and_wait();  // every thread's capture is open
      affine_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 1.0f, static_cast<float>(t + 1));
      cugraphs::check_launch("affine_kernel");
      barrier.arrive_and_wait();
    }
    barrier.arrive_and_wait();  // every capture has ended: host() below synchronizes the device
    g.replay(nullptr);
    g.replay(nullptr);
    const auto after = host(x.span());
    const auto& b = before[static_cast<std::size_t>(t)];
    for (std::size_t i = 0; i < kN; i += 101) {
      const float once = b[i] + static_cast<float>(t + 1);
      expect(after[i] == once + static_cast<float>(t + 1), "x[{}] = {} after two replays", i, after[i]);
    }
  }));
}

// Stream 0 reaches the library's own waits as the per-thread stream (stream_wait_at_least,
// the set-words kernel of PerLaunch::Advance), not as the legacy stream.
TEST_CASE("Per-thread default stream: a graph that advances its offsets, replayed on stream 0 between eager draws "
          "on stream 0, draws the eager numbers bitwise", "[per_thread][rng][gpu]") {
  constexpr std::size_t n = 1 << 16;
  Generator a(5), b(5);
  DeviceBuffer<float> out(n), ref(n);
  Graph g;
  CaptureOptions opts;
  opts.per_launch = PerLaunch::Advance;
  {
    CaptureScope scope(g, opts);
    draw(a, out, 2, scope.stream());
  }
  REQUIRE(g.per_launch() == PerLaunch::Advance);
  for (const char step : std::string("RERRER")) {
    if (step == 'E') {
      draw(a, out, 2, nullptr);
    } else {
      g.replay(nullptr);
    }
    draw(b, ref, 2, nullptr);
    REQUIRE(bitwise_equal(host(out.span()), host(ref.span())));
  }
  CHECK(a.offset() == b.offset());
}
