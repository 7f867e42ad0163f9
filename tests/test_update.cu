// Graph::update and Graph::set_kernel_args on the GPU: a new capture applied to the
// executable in place (or refused with its reason and blocking node, or instantiated
// instead), random numbers after an update, one kernel node's arguments changed without a
// capture, and the misuse of each.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <algorithm>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::PerLaunch;

namespace {

constexpr std::size_t kN = 3000;  // not a multiple of the block size

// `steps` dependent steps on x, then x = a x + b: what the graphs below capture.
void chain(float* x, int steps, float a, float b, cudaStream_t s) {
  for (int k = 0; k < steps; ++k) launch_step(x, kN, k, s);
  affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x, kN, a, b);
  cugraphs::check_launch("affine_kernel");
}

// The same work run eagerly on a copy of `from`: what a replay must give.
std::vector<float> eager_chain(const DeviceBuffer<float>& from, int steps, float a, float b) {
  DeviceBuffer<float> x(kN);
  copy_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), from.data(), kN);
  chain(x.data(), steps, a, b, cugraphs::current_stream());
  return x.to_host();
}

__global__ void add_kernel(float* x, std::size_t n, float c) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += c;
}

}  // namespace

TEST_CASE("Graph::update: a capture of the same topology updates the executable in place, and launches already "
          "queued keep the old parameters", "[update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto a = filled(kN, 1), b = filled(kN, 2);
  cugraphs::Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) { chain(a.data(), 5, 2.0f, 1.0f, s); });
  auto expect_a = eager_chain(a, 5, 2.0f, 1.0f);
  g.replay();
  REQUIRE(bitwise_equal(a.to_host(), expect_a));
  const cudaGraphExec_t exec = g.native_exec();

  // The same five steps and an affine of other constants, on b.
  const auto r = g.update([&](cudaStream_t s) { chain(b.data(), 5, 3.0f, -1.0f, s); });
  CHECK(r.updated);
  CHECK(r.applied());
  CHECK_FALSE(r.reinstantiated);
  CHECK(r.failure == cugraphs::UpdateFailure::None);
  CHECK(r.message.empty());
  CHECK(g.native_exec() == exec);  // the same executable, updated

  const auto a_before = a.to_host();
  const auto expect_b = eager_chain(b, 5, 3.0f, -1.0f);
  g.replay();
  CHECK(bitwise_equal(a.to_host(), a_before));  // no longer touched
  CHECK(bitwise_equal(b.to_host(), expect_b));

  // A replay queued behind 50 ms of work runs b's parameters; the update made meanwhile
  // (back to a) changes only the replay after it.
  DeviceBuffer<float> busy(256);
  const auto expect_b2 = eager_chain(b, 5, 3.0f, -1.0f);
  const auto expect_a2 = eager_chain(a, 5, 0.5f, 2.0f);
  slow_fill_kernel<<<1, 256, 0, stream>>>(busy.data(), busy.size(), 1.0f, 50'000'000ull);
  g.replay();
  const auto back = g.update([&](cudaStream_t s) { chain(a.data(), 5, 0.5f, 2.0f, s); });
  REQUIRE(back.updated);
  g.replay();
  stream.synchronize();
  CHECK(bitwise_equal(b.to_host(), expect_b2));
  CHECK(bitwise_equal(a.to_host(), expect_a2));
}

TEST_CASE("Graph::update: another topology is refused with its reason and the blocking node, the graph keeping "
          "its executable; reinstantiate_on_failure instantiates the capture instead", "[update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto a = filled(kN, 3);
  cugraphs::Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) { chain(a.data(), 3, 2.0f, 1.0f, s); });
  const cudaGraphExec_t exec = g.native_exec();

  // One step more: another number of nodes.
  auto r = g.update([&](cudaStream_t s) { chain(a.data(), 4, 2.0f, 1.0f, s); });
  CHECK_FALSE(r.applied());
  CHECK_FALSE(r);
  CHECK(r.failure == cugraphs::UpdateFailure::TopologyChanged);
  CHECK(contains(r.message, "Graph::update: the executable cannot take the new capture in place: the topology "
                            "changed"));
  CHECK(g.native_exec() == exec);
  const auto expect_old = eager_chain(a, 3, 2.0f, 1.0f);
  g.replay();
  CHECK(bitwise_equal(a.to_host(), expect_old));  // still the first capture

  // A memset where a kernel was: the node's type changed, and the node is named.
  r = g.update([&](cudaStream_t s) {
    launch_step(a.data(), kN, 0, s);
    cugraphs::check(cudaMemsetAsync(a.data(), 0, 16, s), "memset");
    launch_step(a.data(), kN, 2, s);
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(a.data(), kN, 2.0f, 1.0f);
  });
  CHECK_FALSE(r.applied());
  CHECK(r.failure == cugraphs::UpdateFailure::NodeTypeChanged);
  REQUIRE(r.node_type.has_value());
  CHECK(*r.node_type == cudaGraphNodeTypeMemset);
  REQUIRE(r.node_index.has_value());
  CHECK(*r.node_index == 1);
  CHECK(contains(r.message, "a node's type changed; the blocking node is a memset node, node 1 of the new capture"));
  CHECK(g.native_exec() == exec);

  // Asked to, the capture is instantiated instead: the graph runs it either way.
  cugraphs::UpdateOptions fallback;
  fallback.reinstantiate_on_failure = true;
  r = g.update([&](cudaStream_t s) { chain(a.data(), 6, 0.5f, 0.25f, s); }, fallback);
  CHECK(r.applied());
  CHECK(r.reinstantiated);
  CHECK_FALSE(r.updated);
  CHECK(r.failure == cugraphs::UpdateFailure::TopologyChanged);
  CHECK(g.native_exec() != exec);
  const auto expect_new = eager_chain(a, 6, 0.5f, 0.25f);
  g.replay();
  CHECK(bitwise_equal(a.to_host(), expect_new));
  // And the new executable takes in-place updates of its own topology.
  r = g.update([&](cudaStream_t s) { chain(a.data(), 6, 1.5f, 0.0f, s); });
  CHECK(r.updated);
}

TEST_CASE("Graph::update: a reinstantiated executable runs after the replaced one's launches queued on another "
          "stream", "[update][gpu]") {
  // CUDA orders the launches of one executable only. Before, the new executable's first replay,
  // on another stream, ran while the old one's replay was still queued behind 50 ms of work, and
  // the old replay's write landed last. A frame loop's capture_or_update, each frame on the
  // stream it runs on.
  cugraphs::Stream first, second;
  DeviceBuffer<float> x(kN);
  cugraphs::Graph g;
  cugraphs::CaptureOptions on_first, on_second;
  on_first.stream = first;
  on_second.stream = second;
  (void)g.capture_or_update([&](cudaStream_t s) {
    slow_fill_kernel<<<1, kThreads, 0, s>>>(x.data(), kN, 1.0f, 50'000'000ull);
  }, on_first);
  const cudaGraphExec_t exec = g.native_exec();
  g.replay(first);  // 50 ms, then x = 1
  const auto r = g.capture_or_update([&](cudaStream_t s) {
    ramp_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 2.0f);
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 3.0f, 1.0f);
  }, on_second);
  REQUIRE(r.reinstantiated);
  CHECK(g.native_exec() != exec);
  g.replay(second);  // x = a ramp from 2, then x = 3 x + 1
  second.synchronize();
  first.synchronize();
  std::vector<float> expect(kN);
  for (std::size_t i = 0; i < kN; ++i) expect[i] = 3.0f * ramp_value(i, 2.0f) + 1.0f;  // exact in float
  const auto got = x.to_host();
  INFO("x[0] = " << got[0] << " (the old replay's write alone: 1)");
  CHECK(bitwise_equal(got, expect));
}

TEST_CASE("Graph::update(Graph&&): a source captured without instantiation is applied and left empty and "
          "reusable; misuse is an Error that changes nothing", "[update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto a = filled(kN, 4), b = filled(kN, 5);
  cugraphs::Graph g, source, empty;
  cugraphs::capture(g, [&](cudaStream_t s) { chain(a.data(), 2, 2.0f, 1.0f, s); });
  const cudaGraphExec_t exec = g.native_exec();

  cugraphs::CaptureOptions later;
  later.instantiate = false;
  later.pool = g.pool();
  cugraphs::capture(source, [&](cudaStream_t s) { chain(b.data(), 2, 3.0f, 1.0f, s); }, later);
  CHECK_FALSE(source.is_instantiated());
  CHECK(source.native_graph() != nullptr);
  auto e = expect_error([&] { source.replay(); });
  CHECK(contains(e.what(), "the graph was captured but is not instantiated (CaptureOptions::instantiate was false"));

  e = expect_error([&] { (void)g.update(std::move(g)); });
  CHECK(contains(e.what(), "Graph::update: a graph cannot be updated from itself"));
  e = expect_error([&] { (void)empty.update(std::move(source)); });
  CHECK(contains(e.what(), "Graph::update: nothing has been captured into this graph"));
  e = expect_error([&] { (void)g.update(std::move(empty)); });
  CHECK(contains(e.what(), "Graph::update: the source graph holds no capture"));
  cugraphs::Graph capturing;
  {
    cugraphs::CaptureScope scope(capturing);
    add_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(b.data(), kN, 1.0f);
    e = expect_error([&] { (void)g.update(std::move(capturing)); });
    CHECK(contains(e.what(), "Graph::update: the source graph is still capturing"));
  }
  CHECK(source.native_graph() != nullptr);  // the refused calls left it alone

  const auto r = g.update(std::move(source));
  CHECK(r.updated);
  CHECK(g.native_exec() == exec);
  CHECK(source.native_graph() == nullptr);  // NOLINT(bugprone-use-after-move): left empty
  CHECK_FALSE(source.is_instantiated());
  const auto expect_b = eager_chain(b, 2, 3.0f, 1.0f);
  g.replay();
  CHECK(bitwise_equal(b.to_host(), expect_b));
  CHECK(g.pool_id() == later.pool->id());

  // The emptied source captures again, and instantiate() completes a deferred capture.
  cugraphs::capture(source, [&](cudaStream_t s) { chain(a.data(), 1, 1.0f, 2.0f, s); }, later);
  source.instantiate();
  const auto expect_a = eager_chain(a, 1, 1.0f, 2.0f);
  source.replay();
  CHECK(bitwise_equal(a.to_host(), expect_a));
}

TEST_CASE("Graph::update: a graph that draws random numbers draws, after an update, exactly what eager calls draw, "
          "whichever way its launches get their offsets",
          "[update][rng][gpu]") {
  for (const auto per_launch : {PerLaunch::Parameters, PerLaunch::Ring, PerLaunch::Advance}) {
  INFO("per launch: " << static_cast<int>(per_launch));
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  cugraphs::Generator gen(5), twin(5);
  DeviceBuffer<float> x(kN), y(kN), expect(kN);
  cugraphs::Graph g;
  cugraphs::CaptureOptions opts;
  opts.per_launch = per_launch;
  cugraphs::capture(g, [&](cudaStream_t s) { draw(gen, x, 4, s); }, opts);
  REQUIRE(g.per_launch() == per_launch);
  g.replay();
  draw(twin, expect, 4, stream);
  REQUIRE(bitwise_equal(x.to_host(), expect.to_host()));

  const auto r = g.update([&](cudaStream_t s) { draw(gen, y, 4, s); });
  REQUIRE(r.updated);
  std::vector<float> previous;
  for (int i = 0; i < 5; ++i) {
    g.replay();
    draw(twin, expect, 4, stream);
    const auto got = y.to_host();
    CHECK(bitwise_equal(got, expect.to_host()));
    CHECK_FALSE(bitwise_equal(got, previous));  // fresh numbers every replay
    previous = got;
  }
  CHECK(g.per_launch() == per_launch);  // the update recaptured the same way
  CHECK(gen.offset() == twin.offset());
  }
}

TEST_CASE("Graph::set_kernel_args: one kernel node's arguments change in the executable without a capture, and "
          "its KernelNode stays valid across updates", "[update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  constexpr int kNodes = 100;
  DeviceBuffer<float> x(kN), y(kN);
  auto zero = [&] {
    put_all(x, 0.0f);
    put_all(y, 0.0f);
  };
  // x += k for k = 0..99 (sums of small integers: exact in floats); node 50 is marked.
  cugraphs::KernelNode<float*, std::size_t, float> node;
  cugraphs::Graph g;
  {
    cugraphs::CaptureScope scope(g);
    for (int k = 0; k < kNodes; ++k) {
      add_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, static_cast<float>(k));
      if (k == 50) node = cugraphs::captured_kernel_node(add_kernel, scope.stream());
    }
  }
  CHECK(node.index() == 50);
  zero();
  g.replay();
  CHECK(x.to_host()[7] == 4950.0f);

  // Node 50 now adds 1000 to y.
  g.set_kernel_args(node, y.data(), kN, 1000.0f);
  zero();
  g.replay();
  auto hx = x.to_host(), hy = y.to_host();
  CHECK(std::all_of(hx.begin(), hx.end(), [](float v) { return v == 4900.0f; }));
  CHECK(std::all_of(hy.begin(), hy.end(), [](float v) { return v == 1000.0f; }));

  // After an update, the node from the instantiated capture and the node taken in the
  // capture applied both name node 50 of the executable.
  cugraphs::KernelNode<float*, std::size_t, float> later;
  const auto r = g.update([&](cudaStream_t s) {
    for (int k = 0; k < kNodes; ++k) {
      add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 2.0f * static_cast<float>(k));
      if (k == 50) later = cugraphs::captured_kernel_node(add_kernel, s);
    }
  });
  REQUIRE(r.updated);
  zero();
  g.replay();
  CHECK(x.to_host()[11] == 9900.0f);  // the update replaced every argument, node 50's too
  g.set_kernel_args(later, y.data(), kN, 7.0f);
  zero();
  g.replay();
  CHECK(x.to_host()[11] == 9800.0f);
  CHECK(y.to_host()[11] == 7.0f);
  g.set_kernel_args(node, x.data(), kN, -100.0f);
  zero();
  g.replay();
  CHECK(x.to_host()[11] == 9700.0f);
  CHECK(y.to_host()[11] == 0.0f);
}

TEST_CASE("Graph::set_kernel_args: a node of the instantiated capture still works after many updates from "
          "captures made apart on the caller's stream", "[update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> x(kN), y(kN);
  cugraphs::Graph g;
  cugraphs::KernelNode<float*, std::size_t, float> node;
  cugraphs::CaptureOptions co;
  co.stream = stream;
  {
    cugraphs::CaptureScope scope(g, co);
    for (int k = 0; k < 10; ++k) {
      add_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 1.0f);
      if (k == 5) node = cugraphs::captured_kernel_node(add_kernel, scope.stream());
    }
  }
  cugraphs::CaptureOptions later = co;
  later.instantiate = false;
  later.pool = g.pool();
  for (int round = 0; round < 8; ++round) {
    cugraphs::Graph next;
    float* target = round % 2 == 0 ? y.data() : x.data();
    cugraphs::capture(next, [&](cudaStream_t s) {
      for (int k = 0; k < 10; ++k) add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(target, kN, 1.0f);
    }, later);
    const auto r = g.update(std::move(next));
    REQUIRE(r.updated);
  }
  // The last update targets x; node 5 now adds 100 to y instead.
  g.set_kernel_args(node, y.data(), kN, 100.0f);
  put_all(x, 0.0f);
  put_all(y, 0.0f);
  g.replay();
  CHECK(x.to_host()[3] == 9.0f);
  CHECK(y.to_host()[3] == 100.0f);
}

TEST_CASE("Graph::set_kernel_args and captured_kernel_node: misuse is an Error that leaves the graph usable",
          "[update][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> x(kN);
  cugraphs::KernelNode<float*, std::size_t, float> node;
  cugraphs::Graph g, other;
  DeviceBuffer<bool> flag(1);
  put(flag, false);

  auto e = expect_error([&] { (void)cugraphs::captured_kernel_node(add_kernel, stream); });
  CHECK(contains(e.what(), "captured_kernel_node: the stream is not capturing for a capture open on this thread"));
  CHECK_FALSE(contains(e.what(), "warm-up"));
  // Taken in an f that a graphed callable warms up (eager calls): the Error says so.
  e = expect_error([&] {
    (void)cugraphs::make_graphed_callable(
        [&](cugraphs::DeviceSpan<const float> in) {
          add_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(const_cast<float*>(in.data()), kN, 0.0f);
          node = cugraphs::captured_kernel_node(add_kernel);
        },
        cugraphs::DeviceSpan<const float>(x.span()));
  });
  CHECK(contains(e.what(), "came from a warm-up"));
  CHECK(contains(e.what(), "warmup_iters = 0"));
  e = expect_error([&] { g.set_kernel_args(node, x.data(), kN, 1.0f); });
  CHECK(contains(e.what(), "Graph::set_kernel_args: nothing has been captured into this graph"));
  {
    cugraphs::CaptureScope scope(g);
    e = expect_error([&] { (void)cugraphs::captured_kernel_node(add_kernel, scope.stream()); });
    CHECK(contains(e.what(), "the capture does not end in one node on this stream (it ends in 0"));
    add_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 1.0f);
    e = expect_error([&] { (void)cugraphs::captured_kernel_node(fill_kernel, scope.stream()); });
    CHECK(contains(e.what(), "runs another kernel than the one given"));
    node = cugraphs::captured_kernel_node(add_kernel, scope.stream());
    cugraphs::check(cudaMemsetAsync(x.data(), 0, 16, scope.stream()), "memset");
    e = expect_error([&] { (void)cugraphs::captured_kernel_node(add_kernel, scope.stream()); });
    CHECK(contains(e.what(), "the last node captured on the stream is a memset node, not a kernel launch"));
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    cugraphs::ConditionalScope<cugraphs::If> when(scope, flag.data());
    add_kernel<<<blocks_for(kN), kThreads, 0, when.stream()>>>(x.data(), kN, 1.0f);
    e = expect_error([&] { (void)cugraphs::captured_kernel_node(add_kernel, when.stream()); });
    CHECK(contains(e.what(), "the stream captures a conditional body"));
#endif
  }
  cugraphs::capture(other, [&](cudaStream_t s) {
    add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f);
  });
  e = expect_error([&] { other.set_kernel_args(node, x.data(), kN, 5.0f); });
  CHECK(contains(e.what(), "Graph::set_kernel_args: the KernelNode was not taken in the capture this graph runs"));
  e = expect_error([&] { g.set_kernel_args(cugraphs::KernelNode<float*, std::size_t, float>{}, x.data(), kN, 5.0f); });
  CHECK(contains(e.what(), "the KernelNode was not taken in the capture this graph runs"));

  // The graphs work on, and the node works once the refusals are past.
  put_all(x, 1.0f);
  g.set_kernel_args(node, x.data(), kN, 5.0f);
  g.replay();
  other.replay();
  CHECK(x.to_host()[10] == 7.0f);  // 1, + 5 in g (whose memset clears only x[0..3]), + 1 in other
  // After reset and a new capture, the old node is refused.
  g.reset();
  cugraphs::capture(g, [&](cudaStream_t s) { add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f); });
  e = expect_error([&] { g.set_kernel_args(node, x.data(), kN, 5.0f); });
  CHECK(contains(e.what(), "not taken in the capture this graph runs"));
}
