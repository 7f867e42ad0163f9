// verify_replay: a replay checked against the step run eagerly from the same state. A faithful
// step passes and leaves exactly one step taken; a host value the capture froze (a scalar
// changed since, not rebound with set_kernel_arg) is named with both values; a step that draws
// passes bitwise under each way a graph gets its offsets, and the generator then goes on as
// the eager program's would; misuse is refused before anything runs and leaves every object
// usable.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cmath>
#include <string>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Generator;
using cugraphs::Graph;
using cugraphs::PerLaunch;
using cugraphs::VerifyOptions;

namespace {

constexpr std::size_t kN = 4096;

// A ramp (base 1) in a new buffer, and its values on the host.
DeviceBuffer<float> ramp(std::vector<float>& values) {
  DeviceBuffer<float> x(kN);
  values.resize(kN);
  for (std::size_t i = 0; i < kN; ++i) values[i] = ramp_value(i, 1.0f);
  x.copy_from_host(values);
  return x;
}

// The affine step's results from `x0`, with the kernel's own single-precision arithmetic.
std::vector<float> affine(const std::vector<float>& x0, float a, float b) {
  DeviceBuffer<float> x(x0.size());
  x.copy_from_host(x0);
  affine_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), kN, a, b);
  cugraphs::check_launch("affine_kernel");
  return host(x);
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// A solver's pieces: a tolerance written to device memory, the loop's decision (from a
// tolerance by value, or from device memory), and one iteration.
__global__ void set_value(float* dst, float value) { *dst = value; }
__global__ void above(cugraphs::Condition c, const float* v, float tol) { c.set(*v > tol); }
__global__ void above_stored(cugraphs::Condition c, const float* v, const float* tol) { c.set(*v > *tol); }
__global__ void halve(float* v, int* iterations) {
  *v *= 0.5f;
  ++*iterations;
}
__global__ void nonzero(cugraphs::Condition c, const int* flag) { c.set(*flag != 0); }
#endif

}  // namespace

TEST_CASE("verify_replay: a faithful step passes, and the state is one step on, not two", "[verify][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<float> x0;
  auto x = ramp(x0);
  DeviceBuffer<int> steps(1);
  put(steps, 0);
  const auto step = [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 0.5f, 1.0f);
    add_to<<<1, 1, 0, s>>>(steps.data(), 1);
  };
  Graph g;
  cugraphs::capture(g, step);
  REQUIRE(get(steps) == 0);  // the capture ran nothing

  cugraphs::verify_replay(g, step, x, steps.span());
  CHECK(get(steps) == 1);
  CHECK(bitwise_equal(host(x), affine(x0, 0.5f, 1.0f)));
  // The step and the graph called with nothing, on an explicit stream other than the current one.
  cugraphs::Stream other;
  VerifyOptions opts;
  opts.stream = other;
  const auto no_args = [&] { step(cugraphs::current_stream()); };
  cugraphs::verify_replay(opts, g, no_args, x, steps);
  CHECK(get(steps) == 2);
  CHECK(bitwise_equal(host(x), affine(affine(x0, 0.5f, 1.0f), 0.5f, 1.0f)));
}

TEST_CASE("verify_replay: a host scalar the capture froze is named with both values; rebound, it passes",
          "[verify][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<float> x0;
  auto x = ramp(x0);
  float a = 0.5f;  // a per-step scalar on the host, passed by value: the capture keeps 0.5
  cugraphs::KernelNode<float*, std::size_t, float, float> node;
  const auto step = [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, a, 1.0f);
    if (cugraphs::is_current_stream_capturing()) node = cugraphs::captured_kernel_node(affine_kernel, s);
  };
  Graph g;
  cugraphs::capture(g, step);
  cugraphs::verify_replay(g, step, x);

  a = 0.25f;  // the next step's value, which the graph does not see
  const auto before = host(x);
  const auto e = expect_error([&] { cugraphs::verify_replay(g, step, x); });
  INFO(e.what());
  CHECK(e.code() == cudaSuccess);
  const std::string text = e.what();
  CHECK(contains(text, "state 0 (4096 x float at "));
  CHECK(contains(text, "4096 of 4096 differ bitwise"));
  // x[0] is 1.5 after the first step: the replay computes 0.5 * 1.5 + 1, the step 0.25 * 1.5 + 1.
  CHECK(contains(text, "the first, element 0: replay 1.75, eager 1.375"));
  CHECK(contains(text, "set_kernel_arg"));
  // The state is the replay's: the frozen 0.5.
  CHECK(bitwise_equal(host(x), affine(before, 0.5f, 1.0f)));

  g.set_kernel_arg<2>(node, a);
  const auto rebound = host(x);
  cugraphs::verify_replay(g, step, x);
  CHECK(bitwise_equal(host(x), affine(rebound, 0.25f, 1.0f)));

  // A few units in the last place: refused bitwise, passed within a relative tolerance.
  a = 0.25f * 1.000001f;
  CHECK(contains(expect_error([&] { cugraphs::verify_replay(g, step, x); }).what(), "differ bitwise"));
  VerifyOptions loose;
  loose.rtol = 1e-5;
  cugraphs::verify_replay(loose, g, step, x);
  loose.rtol = 1e-9;
  CHECK(contains(expect_error([&] { cugraphs::verify_replay(loose, g, step, x); }).what(),
                 "beyond atol 0 + rtol 1e-09 x |eager|"));
}

TEST_CASE("verify_replay: a step that draws passes bitwise under each way of getting offsets, and the "
          "generator goes on as the eager program's",
          "[verify][rng][gpu]") {
  for (const PerLaunch way : {PerLaunch::Auto, PerLaunch::Parameters, PerLaunch::Advance, PerLaunch::Ring}) {
    INFO("per_launch " << static_cast<int>(way));
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    Generator gen(1234), twin(1234);
    DeviceBuffer<float> out(kN), ref(kN);
    DeviceBuffer<int> steps(1);
    put(steps, 0);
    const auto step = [&](cudaStream_t s) {
      draw(gen, out, 4, s);
      add_to<<<1, 1, 0, s>>>(steps.data(), 1);
    };
    Graph g;
    CaptureOptions co;
    co.per_launch = way;
    cugraphs::capture(g, step, co);
    REQUIRE(gen.offset() == 0);

    // Eager draws before: the graph must start where they left the generator.
    draw(gen, out, 4, stream);
    draw(twin, ref, 4, stream);
    for (int round = 0; round < 2; ++round) {
      cugraphs::verify_replay(g, step, out, steps);
      draw(twin, ref, 4, stream);
      INFO("round " << round);
      CHECK(gen.offset() == twin.offset());
      CHECK(bitwise_equal(host(out), host(ref)));
    }
    // Replays after it, and an eager draw between them, go on with the same sequence.
    g.replay(stream);
    draw(twin, ref, 4, stream);
    CHECK(bitwise_equal(host(out), host(ref)));
    draw(gen, out, 4, stream);
    draw(twin, ref, 4, stream);
    CHECK(bitwise_equal(host(out), host(ref)));
    g.replay(stream);
    draw(twin, ref, 4, stream);
    CHECK(bitwise_equal(host(out), host(ref)));
    CHECK(gen.offset() == twin.offset());
    CHECK(get(steps) == 4);  // two verified steps and two replays
  }
}

TEST_CASE("verify_replay: a buffer the graph names that the state leaves out is put back too, so the check leaves "
          "it one step on, not two",
          "[verify][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<float> x0;
  auto x = ramp(x0);
  DeviceBuffer<int> count(1);  // an optimizer's step count, left out of the state
  put(count, 0);
  const auto step = [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 0.5f, 1.0f);
    add_to<<<1, 1, 0, s>>>(count.data(), 1);
  };
  Graph g;
  cugraphs::capture(g, step);
  cugraphs::verify_replay(g, step, x);
  CHECK(get(count) == 1);
  CHECK(bitwise_equal(host(x), affine(x0, 0.5f, 1.0f)));
  g.replay(stream);
  cugraphs::verify_replay(g, step, x);
  CHECK(get(count) == 3);
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // The same for a step checked against a fresh capture: the count, bumped under an If.
  DeviceBuffer<int> flag(1);
  put(flag, 1);
  const auto guarded = [&](CaptureScope& scope) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 0.5f, 1.0f);
    auto cond = scope.make_condition();
    nonzero<<<1, 1, 0, scope.stream()>>>(cond, flag.data());
    cugraphs::ConditionalScope<cugraphs::If> body(scope, cond);
    add_to<<<1, 1, 0, cugraphs::current_stream()>>>(count.data(), 1);
  };
  Graph h;
  cugraphs::capture(h, guarded);
  put(count, 0);
  cugraphs::verify_replay(h, guarded, x);
  CHECK(get(count) == 1);
#endif

  // A named buffer freed since the capture is refused, as replay refuses it, before any copy.
  count = DeviceBuffer<int>(1);
  const auto before = host(x);
  const auto e = expect_error([&] { cugraphs::verify_replay(g, step, x); });
  INFO(e.what());
  CHECK(contains(e.what(), "verify_replay: the graph names a DeviceBuffer that has been freed since its capture"));
  CHECK(bitwise_equal(host(x), before));
}

TEST_CASE("verify_replay: misuse is refused before anything runs; a step that throws leaves the state and "
          "the generator as they were",
          "[verify][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<float> x0;
  auto x = ramp(x0);
  const auto step = [&](cudaStream_t s) { affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 0.5f, 1.0f); };

  Graph empty;
  CHECK(contains(expect_error([&] { cugraphs::verify_replay(empty, step, x); }).what(), "no executable to replay"));

  Graph g;
  cugraphs::capture(g, step);
  DeviceBuffer<int> counter(1);
  {
    Graph other;
    CaptureScope scope(other);
    const auto e = expect_error([&] { cugraphs::verify_replay(g, step, x); });
    CHECK(contains(e.what(), "a capture is open on this thread"));
    add_to<<<1, 1, 0, scope.stream()>>>(counter.data(), 1);  // the enclosing capture goes on
  }
  CHECK(contains(expect_error([&] {
                   cugraphs::verify_replay(g, step, x, cugraphs::DeviceSpan<float>(nullptr, 4));
                 }).what(),
                 "state 1 is a null pointer with 16 bytes"));
  VerifyOptions bad;
  bad.atol = -1;
  CHECK(contains(expect_error([&] { cugraphs::verify_replay(bad, g, step, x); }).what(), "tolerances"));
  bad.atol = 0;
  bad.rtol = std::nan("");
  CHECK(contains(expect_error([&] { cugraphs::verify_replay(bad, g, step, x); }).what(), "tolerances"));
  CHECK(bitwise_equal(host(x), x0));  // nothing ran

  // A step that writes, draws, then throws: the state and the generator are put back.
  Generator gen(7);
  const auto throwing = [&](cudaStream_t s) {
    step(s);
    (void)gen.philox(4);
    throw std::runtime_error("the step failed");
  };
  CHECK_THROWS_WITH(cugraphs::verify_replay(g, throwing, x), "the step failed");
  CHECK(bitwise_equal(host(x), x0));
  CHECK(gen.offset() == 0);

  // A node taken where the step runs eagerly: the message says where the call came from.
  const auto taking = [&](cudaStream_t s) {
    step(s);
    (void)cugraphs::captured_kernel_node(affine_kernel, s);
  };
  const auto e = expect_error([&] { cugraphs::verify_replay(g, taking, x); });
  CHECK(contains(e.what(), "verify_replay's eager run of the step"));
  CHECK(bitwise_equal(host(x), x0));

  // Every object still works.
  cugraphs::verify_replay(g, step, x);
  CHECK(bitwise_equal(host(x), affine(x0, 0.5f, 1.0f)));
}

TEST_CASE("GraphedCallable::verify: a call checked against f run eagerly; a scalar f reads on the host, changed "
          "since, is named; rebound, and with draws, it passes bitwise",
          "[verify][graphed][gpu]") {
  using In = cugraphs::DeviceSpan<const float>;
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<float> x0;
  auto x = ramp(x0);
  Generator gen(99), twin(99);
  float scale = 2.0f;  // read on the host when f runs: the capture keeps 2
  int eager_runs = 0;
  cugraphs::KernelNode<float*, std::size_t, float, float> node;
  auto f = [&](In in) {
    if (!cugraphs::is_current_stream_capturing()) ++eager_runs;
    const cudaStream_t s = cugraphs::current_stream();
    DeviceBuffer<float> scaled(in.size()), noise(in.size());
    copy_kernel<<<blocks_for(in.size()), kThreads, 0, s>>>(scaled.data(), in.data(), in.size());
    affine_kernel<<<blocks_for(in.size()), kThreads, 0, s>>>(scaled.data(), in.size(), scale, 0.5f);
    if (cugraphs::is_current_stream_capturing()) node = cugraphs::captured_kernel_node(affine_kernel, s);
    draw(gen, noise, 4, s);
    return std::tuple{std::move(scaled), std::move(noise)};
  };
  auto call = cugraphs::make_graphed_callable(f, In(x.span()));
  const long start = static_cast<long>(gen.offset());
  REQUIRE(start == 0);  // the warm-up's draws were taken back
  DeviceBuffer<float> ref(kN);

  const auto& out = call.verify(In(x.span()));
  draw(twin, ref, 4, stream);
  CHECK(bitwise_equal(host(std::get<0>(out)), affine(x0, 2.0f, 0.5f)));
  CHECK(bitwise_equal(host(std::get<1>(out)), host(ref)));
  CHECK(gen.offset() == twin.offset());

  scale = 3.0f;
  const auto e = expect_error([&] { (void)call.verify(In(x.span())); });
  INFO(e.what());
  CHECK(contains(e.what(), "GraphedCallable::verify: the call and f run eagerly on the same inputs differ: output "
                           "leaf 0 (4096 x float at "));
  CHECK(contains(e.what(), "the first, element 0: replay 2.5, eager 3.5"));  // x[0] = 1
  CHECK(contains(e.what(), "set_kernel_arg on the callable"));
  CHECK_FALSE(contains(e.what(), "output leaf 1"));  // the draws agree
  draw(twin, ref, 4, stream);
  CHECK(bitwise_equal(host(std::get<1>(out)), host(ref)));  // the call drew the next numbers

  call.set_kernel_arg<2>(node, scale);
  (void)call.verify(In(x.span()));
  draw(twin, ref, 4, stream);
  CHECK(bitwise_equal(host(std::get<0>(out)), affine(x0, 3.0f, 0.5f)));
  CHECK(gen.offset() == twin.offset());

  // An input of the wrong size is refused before f runs.
  const int runs = eager_runs;
  DeviceBuffer<float> small(kN / 2);
  CHECK(contains(expect_error([&] { (void)call.verify(In(small.span())); }).what(), "input leaf 0"));
  CHECK(eager_runs == runs);
  VerifyOptions bad;
  bad.rtol = -1;
  CHECK(contains(expect_error([&] { (void)call.verify(bad, In(x.span())); }).what(), "tolerances"));
  CHECK(eager_runs == runs);
  // Still callable.
  (void)call(In(x.span()));
  draw(twin, ref, 4, stream);
  CHECK(bitwise_equal(host(std::get<1>(call.static_outputs())), host(ref)));
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
TEST_CASE("verify_replay of a step with a conditional scope: a tolerance the capture froze inside a While body is "
          "found by a fresh capture; kept in device memory and set each solve, it passes and the node stays the "
          "graph's",
          "[verify][conditional][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> v(1), tol_stored(1);
  DeviceBuffer<int> iterations(1);
  const auto start = [&] {
    put(v, 1.0f);
    put(iterations, 0);
  };
  float tol = 0.1f;  // the solve's tolerance, on the host

  // The port's first try: the tolerance passed by value, in the body too.
  const auto frozen = [&](CaptureScope& scope) {
    auto cond = scope.make_condition();
    above<<<1, 1, 0, scope.stream()>>>(cond, v.data(), tol);
    cugraphs::ConditionalScope<cugraphs::While> loop(scope, cond);
    halve<<<1, 1, 0, cugraphs::current_stream()>>>(v.data(), iterations.data());
    above<<<1, 1, 0, cugraphs::current_stream()>>>(loop.condition(), v.data(), tol);
  };
  Graph g;
  cugraphs::capture(g, frozen);
  start();
  cugraphs::verify_replay(g, frozen, v, iterations);
  CHECK(get(v) == 0.0625f);  // one solve: 1, 0.5, 0.25, 0.125, 0.0625
  CHECK(get(iterations) == 4);

  tol = 0.01f;  // the next solve's
  start();
  const auto e = expect_error([&] { cugraphs::verify_replay(g, frozen, v, iterations); });
  INFO(e.what());
  const std::string text = e.what();
  CHECK(contains(text, "the replay and a fresh capture of the step, replayed from the same state, differ"));
  CHECK(contains(text, "state 0 (1 x float at "));
  CHECK(contains(text, "replay 0.0625, eager 0.0078125"));  // 4 halvings against 7
  CHECK(contains(text, "state 1"));                         // the iteration counts differ too
  CHECK(contains(text, "in a conditional body too"));
  CHECK(get(v) == 0.0625f);  // the state is the replay's
  CHECK(get(iterations) == 4);

  // The mend: the tolerance in device memory, written by a top-level kernel whose argument
  // is set before each solve.
  cugraphs::KernelNode<float*, float> set_tol;
  const auto stored = [&](CaptureScope& scope) {
    set_value<<<1, 1, 0, scope.stream()>>>(tol_stored.data(), tol);
    set_tol = cugraphs::captured_kernel_node(set_value, scope.stream());
    auto cond = scope.make_condition();
    above_stored<<<1, 1, 0, scope.stream()>>>(cond, v.data(), tol_stored.data());
    cugraphs::ConditionalScope<cugraphs::While> loop(scope, cond);
    halve<<<1, 1, 0, cugraphs::current_stream()>>>(v.data(), iterations.data());
    above_stored<<<1, 1, 0, cugraphs::current_stream()>>>(loop.condition(), v.data(), tol_stored.data());
  };
  tol = 0.1f;
  Graph solver;
  cugraphs::capture(solver, stored);
  const std::size_t index = set_tol.index();
  const cudaGraphNode_t native = set_tol.native();
  for (const float next : {0.01f, 0.3f}) {
    tol = next;
    solver.set_kernel_arg<1>(set_tol, tol);
    start();
    cugraphs::verify_replay(solver, stored, v, iterations);
    CHECK(get(v) <= next);
    CHECK(get(v) > next / 2);
  }
  CHECK(get(iterations) == 2);  // 1, 0.5, 0.25 for 0.3
  // The handle the step stored during the fresh captures is still the solver's own.
  CHECK(set_tol.index() == index);
  CHECK(set_tol.native() == native);
  CHECK(std::get<1>(set_tol.arguments()) == 0.3f);
  solver.set_kernel_arg<1>(set_tol, 0.5f);
  start();
  solver.replay(stream);
  CHECK(get(v) == 0.5f);
  CHECK(get(iterations) == 1);

  // A step that takes other nodes when captured again is refused before anything runs.
  bool take_more = false;
  cugraphs::KernelNode<float*, float> extra;
  const auto shifting = [&](CaptureScope& scope) {
    stored(scope);
    if (!take_more) return;
    set_value<<<1, 1, 0, scope.stream()>>>(tol_stored.data(), tol);
    extra = cugraphs::captured_kernel_node(set_value, scope.stream());
  };
  Graph shifty;
  cugraphs::capture(shifty, shifting);
  take_more = true;
  start();
  CHECK(contains(expect_error([&] { cugraphs::verify_replay(shifty, shifting, v, iterations); }).what(),
                 "took 2 kernel nodes there where the graph's capture took 1"));
  CHECK(get(v) == 1.0f);  // untouched
  CHECK(extra.empty());
  shifty.replay(stream);  // still usable
  CHECK(get(iterations) > 0);
}

TEST_CASE("verify_replay of a step with a conditional scope that draws: bitwise under each way of getting offsets, "
          "and the generator goes on as the eager program's",
          "[verify][conditional][rng][gpu]") {
  for (const PerLaunch way : {PerLaunch::Auto, PerLaunch::Parameters, PerLaunch::Advance, PerLaunch::Ring}) {
    INFO("per_launch " << static_cast<int>(way));
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    Generator gen(99), twin(99);
    DeviceBuffer<float> out(kN), ref(kN);
    DeviceBuffer<int> steps(1), flag(1);
    put(steps, 0);
    put(flag, 1);
    // A skipped step's pattern: the draw at the top level, the update under an If.
    const auto step = [&](CaptureScope& scope) {
      draw(gen, out, 4, scope.stream());
      auto cond = scope.make_condition();
      nonzero<<<1, 1, 0, scope.stream()>>>(cond, flag.data());
      cugraphs::ConditionalScope<cugraphs::If> body(scope, cond);
      add_to<<<1, 1, 0, cugraphs::current_stream()>>>(steps.data(), 1);
    };
    Graph g;
    CaptureOptions co;
    co.per_launch = way;
    cugraphs::capture(g, step, co);
    draw(gen, out, 4, stream);
    draw(twin, ref, 4, stream);
    for (int round = 0; round < 2; ++round) {
      INFO("round " << round);
      cugraphs::verify_replay(g, step, out, steps);
      draw(twin, ref, 4, stream);
      CHECK(gen.offset() == twin.offset());
      CHECK(bitwise_equal(host(out), host(ref)));
    }
    g.replay(stream);
    draw(twin, ref, 4, stream);
    CHECK(bitwise_equal(host(out), host(ref)));
    CHECK(gen.offset() == twin.offset());
    CHECK(get(steps) == 3);  // two verified steps and one replay
  }
}
#endif
