// Graph capture and replay on the GPU: results, stream ordering, misuse, debug output.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;

namespace {

constexpr std::size_t kN = 1 << 16;
constexpr int kSteps = 64;


}  // namespace

TEST_CASE("Graph: 64 dependent kernels replayed 100 times with fresh inputs match eager bitwise",
          "[graph][gpu]") {
  cugraphs::Stream stream;
  DeviceBuffer<float> input(kN, stream);
  DeviceBuffer<float> work(kN, stream);
  DeviceBuffer<float> eager(kN, stream);

  Graph graph;
  {
    CaptureScope scope(graph);
    CHECK(cugraphs::current_stream() == scope.stream());
    cugraphs::check(cudaMemcpyAsync(work.data(), input.data(), input.bytes(),
                                    cudaMemcpyDeviceToDevice, scope.stream()),
                    "copy the input in");
    for (int k = 0; k < kSteps; ++k) launch_step(work.data(), kN, k, scope.stream());
  }
  REQUIRE(graph.is_instantiated());
  std::size_t nodes = 0;
  cugraphs::check(cudaGraphGetNodes(graph.native_graph(), nullptr, &nodes), "count nodes");
  CHECK(nodes == kSteps + 1);

  std::vector<float> poison(kN, -1234.5f);
  for (int replay = 0; replay < 100; ++replay) {
    const auto fresh = random_floats(kN, 1000 + replay);
    input.copy_from_host(fresh, stream);
    work.copy_from_host(poison, stream);
    graph.replay(stream);
    const auto from_graph = work.to_host(stream);

    eager.copy_from_host(fresh, stream);
    for (int k = 0; k < kSteps; ++k) launch_step(eager.data(), kN, k, stream);
    const auto from_eager = eager.to_host(stream);
    REQUIRE(from_graph != poison);
    REQUIRE(bitwise_equal(from_graph, from_eager));
  }
}

TEST_CASE("Graph: replay orders after earlier and before later work on its stream", "[graph][gpu]") {
  constexpr std::size_t n = 4096;
  cugraphs::Stream stream;
  DeviceBuffer<float> x(n, stream);
  Graph graph;
  cugraphs::capture(graph, [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.data(), n, 2.0f, 1.0f);
  });

  auto run = [&](auto&& replay_it, cudaStream_t s, float start) {
    // A slow writer before the replay and an affine step after: only the right order gives
    // ((start * 2 + 1) * 3 - 4).
    slow_fill_kernel<<<1, kThreads, 0, s>>>(x.data(), n, start, 2'000'000);
    replay_it();
    affine_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.data(), n, 3.0f, -4.0f);
    cugraphs::check_launch("surrounding kernels");
    const auto out = x.to_host(s);
    for (float v : out) REQUIRE(v == (start * 2.0f + 1.0f) * 3.0f - 4.0f);
  };

  SECTION("replay(stream) on an explicit stream") {
    run([&] { graph.replay(stream); }, stream, 5.0f);
  }
  SECTION("replay() on the current stream") {
    cugraphs::StreamGuard guard(stream);
    run([&] { graph.replay(); }, stream, 7.0f);
  }
  SECTION("replay() on the legacy default stream, the initial current stream") {
    REQUIRE(cugraphs::current_stream() == nullptr);
    run([&] { graph.replay(); }, nullptr, 9.0f);
  }
}

TEST_CASE("Graph: is_current_stream_capturing is true inside a scope and false outside",
          "[graph][gpu]") {
  Graph graph;
  CHECK_FALSE(cugraphs::is_current_stream_capturing());
  {
    CaptureScope scope(graph);
    CHECK(cugraphs::is_current_stream_capturing());
    CHECK(cugraphs::is_capturing(scope.stream()));
    CHECK(graph.is_capturing());
    DeviceBuffer<float> x(16);
    fill_kernel<<<1, 32, 0, scope.stream()>>>(x.data(), 16, 1.0f);
  }
  CHECK_FALSE(cugraphs::is_current_stream_capturing());
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
}

TEST_CASE("Graph: buffers made inside a capture come from its pool and outlive the graph",
          "[graph][pool][gpu]") {
  constexpr std::size_t n = 1000;
  Graph graph;
  DeviceBuffer<float> made_inside;
  {
    CaptureScope scope(graph);
    made_inside = DeviceBuffer<float>(n);
    fill_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(made_inside.data(), n, 3.0f);
  }
  REQUIRE(made_inside.pool().has_value());
  CHECK(made_inside.pool()->id() == graph.pool_id());
  CHECK(graph.pool().allocated_bytes() >= n * sizeof(float));
  graph.replay();
  const auto first = made_inside.to_host();
  CHECK(first[999] == 3.0f + 0.999f);
  graph.reset();
  // The memory stays valid after the graph is gone: the buffer holds the pool.
  fill_kernel<<<blocks_for(n), kThreads>>>(made_inside.data(), n, -1.0f);
  cugraphs::check_launch("fill after reset");
  CHECK(made_inside.to_host()[10] == -1.0f + 0.010f);
}

TEST_CASE("Graph: misuse is an Error and leaves the graph usable", "[graph][gpu]") {
  constexpr std::size_t n = 256;
  DeviceBuffer<float> x(n);

  SECTION("replay before capture") {
    Graph g;
    const auto e = expect_error([&] { g.replay(); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "nothing has been captured"));
  }
  SECTION("capture_begin twice, then the first capture still completes") {
    Graph g;
    g.capture_begin();
    const auto e = expect_error([&] { g.capture_begin(); });
    CHECK(contains(e.what(), "already capturing"));
    fill_kernel<<<1, n, 0, g.stream()>>>(x.data(), n, 4.0f);
    g.capture_end();
    g.replay();
    CHECK(x.to_host()[0] == 4.0f);
    const auto again = expect_error([&] { g.capture_begin(); });
    CHECK(contains(again.what(), "call reset()"));
  }
  SECTION("capture on the legacy default stream") {
    Graph g;
    CaptureOptions opts;
    opts.stream = cudaStreamLegacy;
    const auto e = expect_error([&] { g.capture_begin(opts); });
    CHECK(contains(e.what(), "legacy default stream cannot capture"));
    CHECK_FALSE(g.is_capturing());
    cugraphs::capture(g, [&](cudaStream_t s) { fill_kernel<<<1, n, 0, s>>>(x.data(), n, 6.0f); });
    g.replay();
    CHECK(x.to_host()[1] == 6.0f + 0.001f);
  }
  SECTION("a stream that is already capturing cannot begin another capture") {
    Graph outer, inner;
    cugraphs::Stream s;
    CaptureOptions opts;
    opts.stream = s;
    CaptureScope scope(outer, opts);
    const auto e = expect_error([&] { inner.capture_begin(opts); });
    CHECK(contains(e.what(), "already capturing"));
    fill_kernel<<<1, n, 0, s>>>(x.data(), n, 1.0f);
  }
  SECTION("a moved-from graph") {
    Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) { fill_kernel<<<1, n, 0, s>>>(x.data(), n, 2.0f); });
    Graph h = std::move(g);
    const auto e = expect_error([&] { g.replay(); });  // NOLINT(bugprone-use-after-move)
    CHECK(contains(e.what(), "moved from"));
    h.replay();
    CHECK(x.to_host()[0] == 2.0f);
  }
  SECTION("debug_dump without debug mode, then with it") {
    Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) { fill_kernel<<<1, n, 0, s>>>(x.data(), n, 2.0f); });
    const auto e = expect_error([&] { g.debug_dump("graph.dot"); });
    CHECK(contains(e.what(), "enable_debug_mode"));
    g.enable_debug_mode();
    g.debug_dump("cugraphs_test_graph.dot");
    const std::string dot = read_file("cugraphs_test_graph.dot");
    CHECK(contains(dot, "digraph"));
    CHECK(contains(dot, "fill_kernel"));
    std::remove("cugraphs_test_graph.dot");
  }
}

TEST_CASE("CaptureScope: an exception inside aborts the capture cleanly", "[graph][gpu]") {
  constexpr std::size_t n = 512;
  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  Graph g;
  DeviceBuffer<float> x(n);
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions opts;
  opts.pool = pool;
  try {
    CaptureScope scope(g, opts);
    DeviceBuffer<float> temp(n);
    fill_kernel<<<1, n, 0, scope.stream()>>>(temp.data(), n, 1.0f);
    throw Boom("user code failed mid-capture");
  } catch (const Boom& e) {
    CHECK(std::string(e.what()) == "user code failed mid-capture");
  }
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(g.is_instantiated());
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
  CHECK(cugraphs::current_stream() == nullptr);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(pool.allocated_bytes() == 0);  // the temporary went back to the pool
  const auto e = expect_error([&] { (void)g.pool_id(); });  // and the graph let go of it
  CHECK(contains(e.what(), "nothing has been captured"));

  // The same graph captures fine next time.
  cugraphs::capture(g, [&](cudaStream_t s) { fill_kernel<<<1, n, 0, s>>>(x.data(), n, 8.0f); });
  g.replay();
  CHECK(x.to_host()[2] == 8.0f + 0.002f);
}

TEST_CASE("Graph: work forked onto another stream and joined back is captured", "[graph][gpu]") {
  constexpr std::size_t n = 8192;
  DeviceBuffer<float> a(n), b(n);
  cugraphs::Stream side;
  cudaEvent_t fork = nullptr, join = nullptr;
  cugraphs::check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  cugraphs::check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "event");

  Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) {
    fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(a.data(), n, 1.0f);
    cugraphs::check(cudaEventRecord(fork, s), "fork");
    cugraphs::check(cudaStreamWaitEvent(side, fork), "fork wait");
    fill_kernel<<<blocks_for(n), kThreads, 0, side>>>(b.data(), n, 2.0f);
    affine_kernel<<<blocks_for(n), kThreads, 0, side>>>(b.data(), n, 10.0f, 0.0f);
    affine_kernel<<<blocks_for(n), kThreads, 0, s>>>(a.data(), n, -1.0f, 0.0f);
    cugraphs::check(cudaEventRecord(join, side), "join");
    cugraphs::check(cudaStreamWaitEvent(s, join), "join wait");
  });
  std::size_t nodes = 0;
  cugraphs::check(cudaGraphGetNodes(g.native_graph(), nullptr, &nodes), "count nodes");
  CHECK(nodes == 4);
  for (int i = 0; i < 3; ++i) {
    g.replay();
    const auto ha = a.to_host();
    const auto hb = b.to_host();
    CHECK(ha[7] == -(1.0f + 0.007f));
    CHECK(hb[7] == 10.0f * (2.0f + 0.007f));
  }

  SECTION("unjoined work is a clear Error and the graph stays reusable") {
    Graph u;
    const auto e = expect_error([&] {
      cugraphs::capture(u, [&](cudaStream_t s) {
        cugraphs::check(cudaEventRecord(fork, s), "fork");
        cugraphs::check(cudaStreamWaitEvent(side, fork), "fork wait");
        fill_kernel<<<blocks_for(n), kThreads, 0, side>>>(b.data(), n, 3.0f);
      });
    });
    CHECK(e.code() == cudaErrorStreamCaptureUnjoined);
    CHECK(contains(e.what(), "not joined back"));
    CHECK_FALSE(u.is_capturing());
    CHECK_FALSE(cugraphs::is_capturing(side));
    cugraphs::capture(u, [&](cudaStream_t s) { fill_kernel<<<1, 64, 0, s>>>(a.data(), 64, 5.0f); });
    u.replay();
    CHECK(a.to_host()[0] == 5.0f);
  }
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

TEST_CASE("export_dot writes the most recently completed capture", "[graph][gpu]") {
  DeviceBuffer<float> x(64);
  Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) { copy_kernel<<<1, 64, 0, s>>>(x.data(), x.data(), 64); });
  cugraphs::export_dot("cugraphs_test_last.dot");
  const std::string dot = read_file("cugraphs_test_last.dot");
  CHECK(contains(dot, "copy_kernel"));
  std::remove("cugraphs_test_last.dot");
}

TEST_CASE("CaptureScope: a graph moved while its scope is open goes on capturing, and the scope follows it",
          "[capture][gpu]") {
  constexpr std::size_t n = 777;
  DeviceBuffer<float> x(n);
  Graph first, moved;
  {
    CaptureScope scope(first);
    const cudaStream_t s = scope.stream();
    CHECK(cugraphs::current_stream() == s);
    fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.data(), n, 1.0f);
    moved = std::move(first);  // the capture, and the scope with it, now belong to `moved`
    CHECK(&scope.graph() == &moved);
    CHECK(moved.is_capturing());
    CHECK_FALSE(first.is_capturing());
    CHECK(scope.stream() == s);
    affine_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(x.data(), n, 2.0f, 1.0f);
    std::vector<Graph> holder;
    holder.push_back(std::move(moved));  // and again, into a container
    CHECK(&scope.graph() == &holder.back());
    moved = std::move(holder.back());
    CHECK(&scope.graph() == &moved);
  }  // ends the capture of `moved`
  CHECK(cugraphs::current_stream() == nullptr);
  REQUIRE(moved.is_instantiated());
  const auto e = expect_error([&] { first.replay(); });
  CHECK(contains(e.what(), "moved from"));
  x.copy_from_host(std::vector<float>(n, -9.0f));
  moved.replay();
  cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "sync");
  const auto values = x.to_host();
  bool all = true;  // fill: 1 + 0.001 (i % 1000), then 2 x + 1
  for (std::size_t i = 0; i < n; ++i)
    all = all && std::abs(values[i] - (3.0f + 0.002f * static_cast<float>(i % 1000))) < 1e-4f;
  CHECK(all);
}
