// The specification of conditional nodes: If, While, IfElse and Switch scopes, nesting,
// conditions set by kernels (from the scope, or made before their node), work launched on
// the wrong stream inside a body, misuse, debug output and pools. Elsewhere, by design:
// the bad-input rows of docs/reliability.md's table in test_reliability_conditional.cu (the
// table's home, one program per component), and an exception thrown inside each kind of
// body in test_faults.cu (which measures the device's free memory, so it runs alone).
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <optional>

#include <algorithm>
#include <fstream>
#include <sstream>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::ConditionalScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;

// Defined in conditional_host.cpp, compiled by the host compiler.
bool host_compiled_if_node_works(const bool* flag, int* counter, void (*launch_increment)(int*, cudaStream_t));

namespace {

__global__ void increment(int* x) { *x += 1; }

// Counts `*counter` down to zero, one per iteration, and says whether to go on.
__global__ void count_down(int* counter, int* iterations, bool* go_on) {
  if (*counter > 0) {
    *counter -= 1;
    *iterations += 1;
  }
  *go_on = *counter > 0;
}

__global__ void bump_until(int* x, int limit, cugraphs::Condition c) {
  *x += 1;
  if (*x >= limit) c.set(false);
}

__global__ void count_and_flag(int* count, bool* flag_a, bool* flag_b) {
  *count += 1;
  *flag_a = *count < 100;
  *flag_b = *count < 5;
}

__global__ void copy_flag(const bool* from, bool* to) { *to = *from; }

__global__ void decide(cugraphs::Condition c, const int* value, int threshold) { c.set(*value > threshold); }
__global__ void decide_from_char(cugraphs::Condition c, const char* value) { c.set(*value); }
__global__ void pick_case(cugraphs::Condition c, const int* value) { c.set(*value % 3); }
__global__ void write_flag(bool* flag, bool value) { *flag = value; }

void launch_increment(int* x, cudaStream_t s) { increment<<<1, 1, 0, s>>>(x); }

// Counts and stops: the If around it runs once a launch when nothing resets its condition.
__global__ void hit_and_stop(int* hits, cugraphs::Condition c) {
  *hits += 1;
  c.set(false);
}

// One iteration of an inner loop that runs `per_outer` times per entry: counts, and ends the
// loop (and starts the next entry's count) at the last.
__global__ void inner_step(int* runs, int* this_entry, int per_outer, cugraphs::Condition c) {
  *runs += 1;
  *this_entry += 1;
  if (*this_entry >= per_outer) {
    *this_entry = 0;
    c.set(false);
  }
}

// Goes on while fewer than `limit` iterations ran, saying so with a 64-bit value whose low 32
// bits are 0 (a count of bytes left, 2^32): the condition is 32 bits wide.
__global__ void bump_while_wide(int* x, int limit, cugraphs::Condition c) {
  *x += 1;
  c.set(*x < limit ? std::uint64_t{1} << 32 : std::uint64_t{0});
}

// State of the nested-loop test: a While inside an If inside a While.
struct Nest {
  int o, i, a, b, c;
  bool outer_flag, if_flag, inner_flag;
};
__global__ void outer_head(Nest* s) {
  s->a += 1;
  s->if_flag = s->o % 2 == 0;
  s->i = s->o;
  s->inner_flag = s->i > 0;
}
__global__ void inner_body(Nest* s) {
  s->c += s->o * 10 + s->i;
  s->i -= 1;
  s->inner_flag = s->i > 0;
}
__global__ void outer_tail(Nest* s) {
  s->b += s->c % 7;
  s->o -= 1;
  s->outer_flag = s->o > 0;
}
}  // namespace

TEST_CASE("If: the body runs exactly on replays where the flag is true", "[conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> counter(1);
  put(counter, 0);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::If> when(scope, flag.data());
    CHECK(cugraphs::current_stream() == when.stream());
    CHECK(scope.stream() == when.stream());
    increment<<<1, 1, 0, cugraphs::current_stream()>>>(counter.data());
  }
  const bool pattern[] = {true, false, false, true, true, false, true};
  int expected = 0;
  for (bool on : pattern) {
    put(flag, on);
    g.replay();
    expected += on ? 1 : 0;
    REQUIRE(get(counter) == expected);
  }
  CHECK(expected == 4);
}

TEST_CASE("While: a count-down body runs exactly N times across replays of one executable",
          "[conditional][gpu]") {
  DeviceBuffer<int> counter(1), iterations(1);
  DeviceBuffer<bool> go_on(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::While> loop(scope, go_on.data());
    count_down<<<1, 1, 0, scope.stream()>>>(counter.data(), iterations.data(), go_on.data());
  }
  for (int n : {0, 1, 7, 1000, 3}) {
    put(counter, n);
    put(iterations, -5);  // poisoned offset: the result must be -5 + n
    put(go_on, n > 0);
    g.replay();
    INFO("N = " << n);
    REQUIRE(get(iterations) == n - 5);
    REQUIRE(get(counter) == 0);
  }
}

TEST_CASE("IfElse: each branch runs exactly when it should", "[conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> then_hits(1), else_hits(1);
  put(then_hits, 0);
  put(else_hits, 0);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::IfElse> branch(scope, flag.data());
    add_to<<<1, 1, 0, scope.stream()>>>(then_hits.data(), 1);
    branch.otherwise();
    add_to<<<1, 1, 0, scope.stream()>>>(else_hits.data(), 10);
    const auto e = expect_error([&] { branch.otherwise(); });
    CHECK(contains(e.what(), "otherwise() was already called"));
  }
  int t = 0, f = 0;
  for (bool on : {true, true, false, true, false, false, false}) {
    put(flag, on);
    g.replay();
    (on ? t : f) += 1;
    REQUIRE(get(then_hits) == t);
    REQUIRE(get(else_hits) == 10 * f);
  }
}

TEST_CASE("Switch: exactly the selected case runs, and none for an out-of-range index",
          "[conditional][gpu]") {
  DeviceBuffer<unsigned> index(1);
  DeviceBuffer<int> hits(4);
  hits.copy_from_host(std::vector<int>{0, 0, 0, 0});
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 4);
    for (unsigned c : {2u, 0u, 3u, 1u}) {  // any order
      sw.case_(c);
      add_to<<<1, 1, 0, scope.stream()>>>(hits.data() + c, static_cast<int>(c) + 1);
    }
    auto e = expect_error([&] { sw.case_(4); });
    CHECK(contains(e.what(), "out of range"));
    e = expect_error([&] { sw.case_(2); });
    CHECK(contains(e.what(), "already captured"));
  }
  std::vector<int> expected(4, 0);
  for (unsigned i : {0u, 3u, 3u, 1u, 4u, 100u, 2u}) {
    put(index, i);
    g.replay();
    if (i < 4) expected[i] += static_cast<int>(i) + 1;
    INFO("index " << i);
    REQUIRE(hits.to_host() == expected);
  }
}

TEST_CASE("Nesting: a While inside an If inside a While matches host-driven loops", "[conditional][gpu]") {
  DeviceBuffer<Nest> state(1);
  const Nest start{6, 0, 0, 0, 0, true, false, false};

  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::While> outer(scope, &state.data()->outer_flag);
    outer_head<<<1, 1, 0, scope.stream()>>>(state.data());
    {
      ConditionalScope<cugraphs::If> when(scope, &state.data()->if_flag);
      ConditionalScope<cugraphs::While> inner(scope, &state.data()->inner_flag);
      inner_body<<<1, 1, 0, scope.stream()>>>(state.data());
    }
    outer_tail<<<1, 1, 0, scope.stream()>>>(state.data());
  }
  put(state, start);
  g.replay();
  const Nest from_graph = get(state);

  // The same loops driven from the host, reading each flag back.
  put(state, start);
  auto host = [&] { return get(state); };
  while (host().outer_flag) {
    outer_head<<<1, 1>>>(state.data());
    if (host().if_flag) {
      while (host().inner_flag) inner_body<<<1, 1>>>(state.data());
    }
    outer_tail<<<1, 1>>>(state.data());
  }
  const Nest eager = host();
  CHECK(from_graph.a == 6);  // six outer iterations
  CHECK(from_graph.a == eager.a);
  CHECK(from_graph.b == eager.b);
  CHECK(from_graph.c == eager.c);
  // Inner loops run for o = 6, 4, 2, adding o * 10 + i for i = o .. 1.
  CHECK(from_graph.c == (6 * 60 + 21) + (4 * 40 + 10) + (2 * 20 + 3));
  CHECK(from_graph.o == 0);
}

TEST_CASE("Condition: a kernel sets the condition through the handle; set_predicate switches the "
          "flag", "[conditional][gpu]") {
  SECTION("kernel-driven While") {
    DeviceBuffer<int> x(1);
    Graph g;
    {
      CaptureScope scope(g);
      ConditionalScope<cugraphs::While> loop(scope, cugraphs::SetByKernels{1});
      bump_until<<<1, 1, 0, scope.stream()>>>(x.data(), 37, loop.condition());
    }
    for (int start : {0, 30, 36}) {
      put(x, start);
      g.replay();
      REQUIRE(get(x) == 37);
    }
  }
  SECTION("set_predicate") {
    DeviceBuffer<int> count(1);
    DeviceBuffer<bool> flag_a(1), flag_b(1);
    for (bool switched : {false, true}) {
      Graph g;
      {
        CaptureScope scope(g);
        ConditionalScope<cugraphs::While> loop(scope, flag_a.data());
        count_and_flag<<<1, 1, 0, scope.stream()>>>(count.data(), flag_a.data(), flag_b.data());
        if (switched) loop.set_predicate(flag_b.data());
      }
      put(count, 0);
      put(flag_a, true);
      g.replay();
      CHECK(get(count) == (switched ? 5 : 100));
    }
  }
}

TEST_CASE("Conditional misuse is an Error and leaves everything usable", "[conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> counter(1);
  put(flag, true);

  SECTION("a conditional scope with no capture open") {
    Graph g;
    cugraphs::CaptureOptions empty;
    empty.allow_empty = true;  // the capture records nothing on purpose
    CaptureScope scope(g, empty);
    scope.end();
    const auto e = expect_error([&] { ConditionalScope<cugraphs::If> c(scope, flag.data()); });
    CHECK(contains(e.what(), "no capture is open"));
    const auto low = expect_error([&] { g.begin_capture_to_if_node(flag.data()); });
    CHECK(contains(low.what(), "no capture is open"));
    const auto end = expect_error([&] { g.end_capture_to_conditional_node(); });
    CHECK(contains(end.what(), "no capture is open"));
  }
  SECTION("closing scopes out of order") {
    put(counter, 0);
    Graph g;
    {
      CaptureScope scope(g);
      ConditionalScope<cugraphs::If> outer(scope, flag.data());
      ConditionalScope<cugraphs::If> inner(scope, flag.data());
      increment<<<1, 1, 0, scope.stream()>>>(counter.data());
      const auto e = expect_error([&] { outer.end(); });
      CHECK(contains(e.what(), "innermost first"));
      const auto cap = expect_error([&] { g.capture_end(); });
      CHECK(contains(cap.what(), "still open"));
      inner.end();
      outer.end();
    }
    g.replay();
    CHECK(get(counter) == 1);
  }
  SECTION("an exception thrown inside a body aborts the capture cleanly") {
    auto pool = cugraphs::graph_pool_handle();
    CaptureOptions opts;
    opts.pool = pool;
    Graph g;
    try {
      CaptureScope scope(g, opts);
      ConditionalScope<cugraphs::While> loop(scope, flag.data());
      DeviceBuffer<int> temp(1000);
      ConditionalScope<cugraphs::If> inner(scope, flag.data());
      increment<<<1, 1, 0, scope.stream()>>>(temp.data());
      throw std::runtime_error("body failed");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "body failed");
    }
    CHECK_FALSE(g.is_capturing());
    CHECK(cugraphs::current_stream() == nullptr);
    CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
    CHECK(pool.allocated_bytes() == 0);
    CHECK(cudaGetLastError() == cudaSuccess);
    put(counter, 0);
    {
      CaptureScope scope(g, opts);
      ConditionalScope<cugraphs::If> when(scope, flag.data());
      increment<<<1, 1, 0, scope.stream()>>>(counter.data());
    }
    g.replay();
    CHECK(get(counter) == 1);
  }
  SECTION("a predicate span of the wrong size, and a null flag") {
    DeviceBuffer<bool> two(2);
    Graph g;
    CaptureScope scope(g);
    auto e = expect_error([&] {
      ConditionalScope<cugraphs::If> c(scope, cugraphs::DeviceSpan<const bool>(two.data(), 2));
    });
    CHECK(contains(e.what(), "exactly one flag"));
    e = expect_error([&] { ConditionalScope<cugraphs::While> c(scope, static_cast<const bool*>(nullptr)); });
    CHECK(contains(e.what(), "null"));
    CHECK(g.is_capturing());  // refused before anything was captured
    increment<<<1, 1, 0, scope.stream()>>>(counter.data());
  }
}

TEST_CASE("debug_dump shows conditional nodes and their bodies", "[conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> counter(1);
  Graph g;
  g.enable_debug_mode();
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::If> when(scope, flag.data());
    increment<<<1, 1, 0, scope.stream()>>>(counter.data());
  }
  g.debug_dump("cugraphs_conditional.dot");
  std::string dot = read_file("cugraphs_conditional.dot");
  std::transform(dot.begin(), dot.end(), dot.begin(), [](unsigned char ch) { return std::tolower(ch); });
  CHECK(contains(dot, "conditional"));
  CHECK(contains(dot, "increment"));
  CHECK(contains(dot, "set_condition_kernel"));
  std::remove("cugraphs_conditional.dot");
}

TEST_CASE("Conditionals compose with pools: memory allocated inside a body comes from the graph's "
          "pool", "[conditional][pool][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> out(1);
  put(flag, true);
  put(out, 0);
  Graph g;
  DeviceBuffer<int> inside;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::If> when(scope, flag.data());
    inside = DeviceBuffer<int>(256);
    cugraphs::check(cudaMemsetAsync(inside.data(), 0, inside.bytes(), scope.stream()), "memset in body");
    add_to<<<1, 1, 0, scope.stream()>>>(inside.data(), 5);
    add_to<<<1, 1, 0, scope.stream()>>>(out.data(), 2);
  }
  REQUIRE(inside.pool().has_value());
  CHECK(inside.pool()->id() == g.pool_id());
  CHECK(g.pool().allocated_bytes() >= 256 * sizeof(int));
  g.replay();
  g.replay();
  CHECK(inside.to_host()[0] == 5);
  CHECK(get(out) == 4);
}

TEST_CASE("If: a flag allocated with raw cudaMallocAsync inside the capture (a graph memory "
          "node) is accepted and read on every replay", "[conditional][pool][gpu]") {
  DeviceBuffer<bool> source(1);
  DeviceBuffer<int> counter(1);
  put(counter, 3);
  Graph g;
  {
    CaptureScope scope(g);
    bool* flag = nullptr;
    cugraphs::check(cudaMallocAsync(reinterpret_cast<void**>(&flag), sizeof(bool), scope.stream()),
                    "cudaMallocAsync of the flag in the capture");
    copy_flag<<<1, 1, 0, scope.stream()>>>(source.data(), flag);
    {
      ConditionalScope<cugraphs::If> when(scope, flag);
      increment<<<1, 1, 0, scope.stream()>>>(counter.data());
    }
    cugraphs::check(cudaFreeAsync(flag, scope.stream()), "cudaFreeAsync of the flag in the capture");
  }
  int expected = 3;
  for (bool on : {true, false, true, true, false}) {
    put(source, on);
    g.replay();
    expected += on ? 1 : 0;
    REQUIRE(get(counter) == expected);
  }
  CHECK(expected == 6);
}

TEST_CASE("The low-level Graph members work from code compiled by the host compiler",
          "[conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> counter(1);
  CHECK(host_compiled_if_node_works(flag.data(), counter.data(), &launch_increment));
}

TEST_CASE("ConditionalScope: condition() on a scope with a flag, and end() twice on a nested scope, are "
          "Errors naming the cause; the capture goes on", "[conditional][gpu]") {
  DeviceBuffer<bool> flag(1), loop_flag(1), inner_flag(1);
  DeviceBuffer<int> hits(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::If> outer(scope, flag.data());
    // The flag sets the condition before the node: a kernel's set() would be overwritten
    // (for a While, the loop would never end), so the handle is refused.
    const auto e = expect_error([&] { (void)outer.condition(); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "ConditionalScope<If>"));
    CHECK(contains(e.what(), "open the scope with SetByKernels{} to set the condition from kernels"));
    {
      ConditionalScope<cugraphs::While> loop(scope, loop_flag.data());
      const auto w = expect_error([&] { (void)loop.condition(); });
      CHECK(contains(w.what(), "and at the end of every iteration"));
      loop.end();
    }
    {
      ConditionalScope<cugraphs::If> inner(scope, inner_flag.data());
      add_to<<<1, 1, 0, scope.stream()>>>(hits.data(), 10);
      inner.end();
      const auto twice = expect_error([&] { inner.end(); });
      CHECK(twice.code() == cudaSuccess);
      CHECK(contains(twice.what(), "this conditional scope has already ended"));
      CHECK(g.open_conditionals() == 1);  // the outer scope is untouched
      CHECK(cugraphs::current_stream() == outer.stream());
    }
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data(), 1);
  }
  REQUIRE(g.is_instantiated());
  put(hits, 0);
  put(loop_flag, false);  // the While runs no iteration
  for (const bool on : {true, false, true}) {
    put(flag, on);
    put(inner_flag, false);
    g.replay();
  }
  CHECK(get(hits) == 2);
  put(flag, true);
  put(inner_flag, true);
  g.replay();
  CHECK(get(hits) == 13);
}

TEST_CASE("Conditions: a condition made before its node is set by a kernel captured before the node, with no extra "
          "node; Switch and char values work; a condition of another graph is an Error", "[conditional][gpu]") {
  DeviceBuffer<int> value(1), hits(1), cases(3);
  DeviceBuffer<char> flag(1);
  Graph g;
  {
    CaptureScope scope(g);
    auto cond = scope.make_condition();
    decide<<<1, 1, 0, scope.stream()>>>(cond, value.data(), 10);
    {
      ConditionalScope<cugraphs::If> body(scope, cond);
      add_to<<<1, 1, 0, cugraphs::current_stream()>>>(hits.data(), 1);
    }
  }
  CHECK(g.node_count() == 2);  // the deciding kernel and the conditional node
  put(hits, 0);
  for (const int v : {5, 20, 11, 10, 40}) {
    put(value, v);
    g.replay();
  }
  CHECK(get(hits) == 3);

  Graph sw;
  {
    CaptureScope scope(sw);
    auto cond = scope.make_condition();
    pick_case<<<1, 1, 0, scope.stream()>>>(cond, value.data());
    ConditionalScope<cugraphs::Switch> s(scope, cond, 3);
    for (unsigned c = 0; c < 3; ++c) {
      s.case_(c);
      add_to<<<1, 1, 0, cugraphs::current_stream()>>>(cases.data() + c, 1);
    }
  }
  cugraphs::check(cudaMemset(cases.data(), 0, cases.bytes()), "cudaMemset");
  for (const int v : {0, 1, 2, 4, 5, 8, 3}) {  // cases 0 1 2 1 2 2 0
    put(value, v);
    sw.replay();
  }
  CHECK(host(cases) == std::vector<int>{2, 2, 3});

  Graph c;
  {
    CaptureScope scope(c);
    auto cond = scope.make_condition();
    decide_from_char<<<1, 1, 0, scope.stream()>>>(cond, flag.data());
    ConditionalScope<cugraphs::If> body(scope, cond);
    add_to<<<1, 1, 0, cugraphs::current_stream()>>>(hits.data(), 100);
  }
  put(hits, 0);
  for (const char v : {'\0', 'x', '\0', '\1'}) {
    put(flag, v);
    c.replay();
  }
  CHECK(get(hits) == 200);

  Graph bad;
  DeviceBuffer<bool> go(1);
  put(go, false);
  {
    CaptureScope scope(bad);
    auto top_level = scope.make_condition();
    ConditionalScope<cugraphs::While> loop(scope, go.data());
    auto e = expect_error([&] { ConditionalScope<cugraphs::If> inner(scope, top_level); });
    CHECK(contains(e.what(), "another graph"));
    scope.abort();
  }
  {
    CaptureScope scope(bad);
    const auto e = expect_error([&] { ConditionalScope<cugraphs::If> inner(scope, cugraphs::Condition{}); });
    CHECK(contains(e.what(), "the Condition is empty"));
    scope.abort();
  }
  CHECK_FALSE(bad.is_capturing());
}

// Before: the stray kernel landed after the conditional node, silently.
TEST_CASE("Escapes: work launched on the enclosing stream while a conditional body is open is an Error naming "
          "the stream to use; the capture is aborted and the graph reusable", "[conditional][escapes][gpu]") {
  DeviceBuffer<int> counter(1), stray(1);
  DeviceBuffer<bool> go(1);
  put(counter, 3);
  put(stray, 0);
  put(go, true);
  Graph g;
  SECTION("While body, the capture stream") {
    CaptureScope scope(g);
    const cudaStream_t top = scope.stream();
    ConditionalScope<cugraphs::While> loop(scope, go.data());
    CHECK(cugraphs::current_stream() != top);
    add_to<<<1, 1, 0, cugraphs::current_stream()>>>(counter.data(), -1);
    add_to<<<1, 1, 0, top>>>(stray.data(), 1);  // the enclosing stream
    const auto e = expect_error([&] { loop.end(); });
    CHECK(contains(e.what(), "enclosing stream"));
    CHECK(contains(e.what(), "the capture stream"));
    CHECK(contains(e.what(), "current_stream()"));
    CHECK_FALSE(g.is_capturing());
    scope.abort();
  }
  SECTION("IfElse then-body, switching to the else-body") {
    CaptureScope scope(g);
    const cudaStream_t top = scope.stream();
    ConditionalScope<cugraphs::IfElse> branch(scope, go.data());
    add_to<<<1, 1, 0, top>>>(stray.data(), 1);
    const auto e = expect_error([&] { branch.otherwise(); });
    CHECK(contains(e.what(), "enclosing stream"));
    scope.abort();
  }
  SECTION("a nested body, its enclosing body's stream") {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::If> outer(scope, go.data());
    const cudaStream_t outer_body = cugraphs::current_stream();
    ConditionalScope<cugraphs::If> inner(scope, go.data());
    add_to<<<1, 1, 0, outer_body>>>(stray.data(), 1);
    const auto e = expect_error([&] { inner.end(); });
    CHECK(contains(e.what(), "the stream of the enclosing conditional body"));
    scope.abort();
  }
  CHECK_FALSE(g.is_capturing());
  CHECK(cugraphs::current_stream() == nullptr);
  CHECK(get(stray) == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
  auto x = filled(3000, 5);
  capture_and_check_affine(g, x);
}

// Before: the value's low 32 bits were taken, so 2^32 read as false and the loop stopped
// after one iteration.
TEST_CASE("Condition: a 64-bit value set from a kernel counts as true where its low 32 bits are 0",
          "[conditional][gpu]") {
  DeviceBuffer<int> x(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::While> loop(scope, cugraphs::SetByKernels{1});
    bump_while_wide<<<1, 1, 0, scope.stream()>>>(x.data(), 5, loop.condition());
  }
  put(x, 0);
  g.replay();
  CHECK(get(x) == 5);
}

// Before: accepted; the If, IfElse and Switch always took `initial` (only kernels in their
// bodies could set the condition, after the node had decided) and the While never ran.
TEST_CASE("SetByKernels: an If, IfElse or Switch outside any While, and a While starting at 0, are Errors naming "
          "make_condition; inside a While body an If set by kernels is accepted; the capture goes on",
          "[conditional][gpu]") {
  DeviceBuffer<int> x(1);
  Graph g;
  {
    CaptureScope scope(g);
    auto e = expect_error([&] { ConditionalScope<cugraphs::If> s(scope, cugraphs::SetByKernels{1}); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "decides before any kernel can set it"));
    CHECK(contains(e.what(), "every replay would take the then-body"));
    CHECK(contains(e.what(), "make_condition(1)"));
    e = expect_error([&] { ConditionalScope<cugraphs::IfElse> s(scope, cugraphs::SetByKernels{0}); });
    CHECK(contains(e.what(), "every replay would take the else-body"));
    e = expect_error([&] { ConditionalScope<cugraphs::Switch> s(scope, cugraphs::SetByKernels{2}, 3); });
    CHECK(contains(e.what(), "every replay would take case 2"));
    e = expect_error([&] { ConditionalScope<cugraphs::While> s(scope, cugraphs::SetByKernels{0}); });
    CHECK(contains(e.what(), "never runs its body"));
    CHECK(scope.graph().open_conditionals() == 0);
    // The capture goes on: a do-while set by kernels, with an If inside it.
    ConditionalScope<cugraphs::While> loop(scope, cugraphs::SetByKernels{1});
    bump_until<<<1, 1, 0, scope.stream()>>>(x.data(), 4, loop.condition());
    { ConditionalScope<cugraphs::If> inner(scope, cugraphs::SetByKernels{1}); }
  }
  put(x, 0);
  g.replay();
  CHECK(get(x) == 4);
}

// Before: the stray kernel joined the top-level graph beside the loop and ran once a replay.
TEST_CASE("Escapes: work on a stream forked from the capture before a conditional scope, launched while its body "
          "is open, is an Error; the capture is aborted and the graph reusable",
          "[conditional][escapes][gpu]") {
  DeviceBuffer<int> counter(1), stray(1);
  put(stray, 0);
  Graph g;
  cugraphs::Stream side;
  cudaEvent_t fork = nullptr;
  cugraphs::check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  {
    CaptureScope scope(g);
    cugraphs::check(cudaEventRecord(fork, scope.stream()), "fork");
    cugraphs::check(cudaStreamWaitEvent(side, fork, 0), "fork");
    ConditionalScope<cugraphs::While> loop(scope, cugraphs::SetByKernels{1});
    bump_until<<<1, 1, 0, cugraphs::current_stream()>>>(counter.data(), 3, loop.condition());
    add_to<<<1, 1, 0, side>>>(stray.data(), 1);  // a forked stream of the enclosing graph
    const auto e = expect_error([&] { loop.end(); });
    CHECK(contains(e.what(), "1 node(s) were added to the enclosing graph"));
    CHECK(contains(e.what(), "the capture's top-level graph"));
    CHECK(contains(e.what(), "current_stream()"));
    CHECK_FALSE(g.is_capturing());
    scope.abort();
  }
  cugraphs::check(cudaEventDestroy(fork), "event");
  CHECK(cugraphs::current_stream() == nullptr);
  CHECK(get(stray) == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
  auto x = filled(3000, 5);
  capture_and_check_affine(g, x);
}

namespace {

// A time-step loop (4 steps) around a solve of 3 iterations, the solve's condition set by
// kernels (SetByKernels{1}) or made before its node inside the step (make_condition(1)):
// replayed twice, every step must solve again.
// With `side`, the step makes a stream of its own current (a StreamGuard) before the solve.
void check_nested_solve(bool made_before, cudaStream_t side = nullptr) {
  DeviceBuffer<int> left(1), outer(1), runs(1), this_entry(1);
  DeviceBuffer<bool> go(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::While> steps(scope, go.data());
    count_down<<<1, 1, 0, scope.stream()>>>(left.data(), outer.data(), go.data());
    if (made_before) {
      std::optional<cugraphs::StreamGuard> on_side;
      if (side != nullptr) on_side.emplace(side);
      auto more = scope.make_condition(1);
      ConditionalScope<cugraphs::While> solve(scope, more);
      inner_step<<<1, 1, 0, cugraphs::current_stream()>>>(runs.data(), this_entry.data(), 3, more);
    } else {
      ConditionalScope<cugraphs::While> solve(scope, cugraphs::SetByKernels{1});
      inner_step<<<1, 1, 0, scope.stream()>>>(runs.data(), this_entry.data(), 3, solve.condition());
    }
  }
  for (int replay = 0; replay < 2; ++replay) {
    put(left, 4);
    put(outer, 0);
    put(runs, 0);
    put(this_entry, 0);
    put(go, true);
    g.replay();
    INFO("replay " << replay);
    CHECK(get(outer) == 4);
    CHECK(get(runs) == 4 * 3);
  }
}

}  // namespace

// A solver's convergence loop inside a time-step loop: the inner condition, set by kernels,
// starts from its initial value each time the outer body reaches the inner node.
TEST_CASE("SetByKernels: a While set by kernels inside another While starts again from its initial value at every "
          "outer iteration", "[conditional][gpu]") {
  check_nested_solve(false);
}

// The documented contract of a node set by kernels inside a While: the next iteration sees
// what a body set (a reset at each arrival, which a nested While needs, would undo it).
TEST_CASE("SetByKernels: an If set by kernels inside a While keeps what its body set for the next iteration; a "
          "While starting at 0 inside a While is an Error", "[conditional][gpu]") {
  DeviceBuffer<int> left(1), outer(1), hits(1);
  DeviceBuffer<bool> go(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::While> steps(scope, go.data());
    count_down<<<1, 1, 0, scope.stream()>>>(left.data(), outer.data(), go.data());
    const auto e = expect_error([&] { ConditionalScope<cugraphs::While> never(scope, cugraphs::SetByKernels{0}); });
    CHECK(contains(e.what(), "never runs its body"));
    ConditionalScope<cugraphs::If> once(scope, cugraphs::SetByKernels{1});
    hit_and_stop<<<1, 1, 0, scope.stream()>>>(hits.data(), once.condition());
  }
  for (int replay = 0; replay < 2; ++replay) {
    put(left, 4);
    put(outer, 0);
    put(hits, 0);
    put(go, true);
    g.replay();
    INFO("replay " << replay);
    CHECK(get(outer) == 4);
    CHECK(get(hits) == 1);  // the first iteration of each launch: the launch resets it to 1
  }
}

// Before: the node went on the capture stream, unordered with the guarded stream's work: the
// body read x before the slow kernel wrote it.
TEST_CASE("Escapes: a ConditionalScope opened under a StreamGuard in a capture follows the guarded stream's work, "
          "and the work after it follows the node", "[conditional][escapes][gpu]") {
  DeviceBuffer<float> x(1), y(1);
  DeviceBuffer<bool> go(1);
  put(go, true);
  cugraphs::Stream side;
  Graph g;
  {
    CaptureScope scope(g);
    cugraphs::StreamGuard on(side);
    slow_fill_kernel<<<1, 32, 0, cugraphs::current_stream()>>>(x.data(), 1, 7.0f, 20'000'000);  // x = 7 in 20 ms
    {
      ConditionalScope<cugraphs::If> when(scope, go.data());
      copy_kernel<<<1, 32, 0, cugraphs::current_stream()>>>(y.data(), x.data(), 1);  // y = x
    }
    CHECK(cugraphs::current_stream() == side.get());
    slow_fill_kernel<<<1, 32, 0, cugraphs::current_stream()>>>(x.data(), 1, 9.0f, 0);  // after the node
  }
  for (int replay = 0; replay < 2; ++replay) {
    put(x, 0.0f);
    put(y, 0.0f);
    g.replay();
    INFO("replay " << replay);
    CHECK(get(y) == 7.0f);
    CHECK(get(x) == 9.0f);
  }
}

// Before: a condition made inside a body (NVIDIA's samples' handle-first idiom, in a solve
// inside a time-step loop) took its initial value only when the graph was launched, so from
// the second outer iteration on the inner While found the 0 its last run left and never ran.
TEST_CASE("Conditions: a condition made inside a body takes its initial value each time the body runs there",
          "[conditional][gpu]") {
  check_nested_solve(true);
  // Made under a StreamGuard of the step's own stream: the reset goes where the node goes.
  cugraphs::Stream side;
  check_nested_solve(true, side);
}

TEST_CASE("ConditionalScope: a flag written on another stream forked into the capture and not joined back is an "
          "Error before the node is added; joined, the node reads what that stream wrote",
          "[conditional][gpu]") {
  // An engine's subsystem decides on its own stream; the scope opens on the capture stream.
  // Before: the node read the flag before the subsystem's kernel ran, silently.
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> hits(1);
  cugraphs::Stream side;
  cudaEvent_t fork = nullptr, join = nullptr;
  cugraphs::check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
  cugraphs::check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "cudaEventCreate");
  Graph g;
  {
    CaptureScope scope(g);
    cugraphs::check(cudaEventRecord(fork, scope.stream()), "cudaEventRecord");
    cugraphs::check(cudaStreamWaitEvent(side, fork), "cudaStreamWaitEvent");
    write_flag<<<1, 1, 0, side>>>(flag.data(), true);
    const auto e = expect_error([&] { ConditionalScope<cugraphs::If> body(scope, flag.data()); });
    INFO(e.what());
    CHECK(contains(e.what(), "has not waited for"));
    CHECK(contains(e.what(), "write_flag"));
    CHECK(contains(e.what(), "the capture goes on"));
    cugraphs::check(cudaEventRecord(join, side), "cudaEventRecord");
    cugraphs::check(cudaStreamWaitEvent(scope.stream(), join), "cudaStreamWaitEvent");
    ConditionalScope<cugraphs::If> body(scope, flag.data());
    increment<<<1, 1, 0, cugraphs::current_stream()>>>(hits.data());
  }
  put(flag, false);
  put(hits, 0);
  g.replay();
  g.replay();
  CHECK(get(hits) == 2);  // the side stream's true, read after it was written
  cugraphs::check(cudaEventDestroy(fork), "cudaEventDestroy");
  cugraphs::check(cudaEventDestroy(join), "cudaEventDestroy");
}
