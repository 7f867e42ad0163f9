// The bad-input table of docs/reliability.md, rows for staging (Graph::stage_and_launch, graphed callables) and generators. Every public operation
// called in the wrong state or with wrong arguments throws a cugraphs::Error whose message
// names the cause, and every object involved stays usable: graphs capture and replay
// afterwards (values read back and compared), no stream is left capturing, pools' figures
// add up, and no CUDA error is left behind. Rows that need two GPUs say so and are skipped,
// with a warning, on one.
#include "reliability.cuh"

#include <cugraphs/detail/launch_ring.hpp>  // kMaxGeneratorsPerGraph

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

using namespace cugraphs_reliability;
using cugraphs::CaptureScope;
using cugraphs::Generator;


// ---------------------------------------------------------------------------------------
// Staging: Graph::stage_and_launch, GraphedCallable, make_graphed_callable(s)
// ---------------------------------------------------------------------------------------

TEST_CASE("Graph::stage_and_launch: before capture, with an input of the wrong size, or a null input, it is "
          "an Error that stages nothing; the graph stages afterwards", "[reliability][gpu]") {
  const auto first = random_floats(kN, 400), second = random_floats(kN, 401);
  DeviceBuffer<float> statics(kN), input(kN), out(kN);
  statics.copy_from_host(first);
  input.copy_from_host(second);
  const Out to = statics.span();
  Graph g;
  auto e = expect_error([&] { g.stage_and_launch(to, In(input)); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::stage_and_launch"));
  CHECK(contains(e.what(), "nothing has been captured"));
  CHECK(statics.to_host() == first);

  cugraphs::capture(g, [&](cudaStream_t s) {
    axpb<<<blocks_for(kN), kThreads, 0, s>>>(out.data(), statics.data(), kN, 2.0f, 1.0f);
  });
  const std::vector<float> poison(kN, -5.0f);
  out.copy_from_host(poison);
  e = expect_error([&] { g.stage_and_launch(to, In(input.data(), kN - 1)); });
  CHECK(contains(e.what(), "input leaf 0 has 2999 elements but its static leaf has 3000; nothing was staged"));
  e = expect_error([&] { g.stage_and_launch(to, In(nullptr, kN)); });
  CHECK(contains(e.what(), "input leaf 0 is a null pointer with 3000 elements; nothing was staged"));
  CHECK(statics.to_host() == first);
  CHECK(out.to_host() == poison);  // nothing launched either

  g.stage_and_launch(to, In(input));
  check_two_x_plus_one(out.span(), second);
  check_clean();
}

TEST_CASE("GraphedCallable: a null input leaf is an Error; nothing is staged or launched and the callable "
          "works afterwards", "[reliability][gpu]") {
  const auto a = random_floats(kN, 500), b = random_floats(kN, 501);
  DeviceBuffer<float> x(kN), y(kN);
  x.copy_from_host(a);
  y.copy_from_host(b);
  int calls = 0;
  auto g = cugraphs::make_graphed_callable(TwoXPlusOne{&calls}, In(x));
  const Out out = g(In(x));
  check_two_x_plus_one(out, a);
  const auto e = expect_error([&] { (void)g(In(nullptr, kN)); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "GraphedCallable"));
  CHECK(contains(e.what(), "input leaf 0 is a null pointer with 3000 elements; nothing was staged or launched"));
  CHECK(g.calls() == 1);
  check_two_x_plus_one(g.static_outputs(), a);  // no launch overwrote the outputs
  check_two_x_plus_one(g(In(y)), b);
  CHECK(g.calls() == 2);
  check_clean();
}

TEST_CASE("GraphedCallable: a moved-from callable is an Error naming the move; the callable it moved to "
          "works", "[reliability][gpu]") {
  const auto a = random_floats(kN, 510);
  DeviceBuffer<float> x(kN);
  x.copy_from_host(a);
  int calls = 0;
  auto g = cugraphs::make_graphed_callable(TwoXPlusOne{&calls}, In(x));
  auto h = std::move(g);
  // NOLINTNEXTLINE(bugprone-use-after-move): using the moved-from callable is the point
  const auto e = expect_error([&] { (void)g(In(x)); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "this GraphedCallable was moved from"));
  check_two_x_plus_one(h(In(x)), a);
  CHECK(h.calls() == 1);
  check_clean();
}

TEST_CASE("make_graphed_callable: a null sample, or a sample in host memory, is an Error before f runs; "
          "callables made afterwards work", "[reliability][gpu]") {
  int calls = 0;
  auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(TwoXPlusOne{&calls}, In(nullptr, kN)); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "make_graphed_callable"));
  CHECK(contains(e.what(), "sample leaf 0 is a null pointer with 3000 elements"));
  CHECK(calls == 0);
  if (device_reads_pageable_memory()) {
    std::printf("this device reads pageable host memory: the host-sample row is skipped\n");
    WARN("this device reads pageable host memory (HMM/ATS): a host sample is valid here: skipped");
  } else {
    const std::vector<float> on_host(kN, 1.0f);
    e = expect_error([&] { (void)cugraphs::make_graphed_callable(TwoXPlusOne{&calls}, In(on_host.data(), kN)); });
    CHECK(contains(e.what(), "sample leaf 0"));
    CHECK(contains(e.what(), "is not device memory: it is host memory"));
    CHECK(calls == 0);
  }
  check_clean();
  const auto a = random_floats(kN, 520);
  DeviceBuffer<float> x(kN);
  x.copy_from_host(a);
  auto g = cugraphs::make_graphed_callable(TwoXPlusOne{&calls}, In(x));
  CHECK(calls == 4);  // three warm-up calls and the capture
  check_two_x_plus_one(g(In(x)), a);
  check_clean();
}

TEST_CASE("make_graphed_callable: called while a capture is open on the thread, it is an Error, and the "
          "open capture completes", "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f};
  DeviceBuffer<float> x(kN);
  int calls = 0;
  Graph g;
  {
    CaptureScope scope(g);
    f.launch(scope.stream());
    const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(TwoXPlusOne{&calls}, In(x)); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "a capture is open on this thread"));
    const auto several = expect_error([&] {
      (void)cugraphs::make_graphed_callables(std::tuple{TwoXPlusOne{&calls}},
                                               std::tuple<std::tuple<In>>{std::tuple<In>{In(x)}});
    });
    CHECK(contains(several.what(), "a capture is open on this thread"));
    CHECK(calls == 0);
    CHECK(capture_active(scope.stream()));
  }
  f.check_replays(g, 530);
  check_clean();
}

TEST_CASE("make_graphed_callable: a callable that makes an unsafe call during capture gives an Error naming "
          "the cause; the pool is left empty and callables made afterwards work", "[reliability][gpu]") {
  const auto a = random_floats(kN, 540);
  DeviceBuffer<float> x(kN);
  x.copy_from_host(a);
  int calls = 0;
  auto unsafe = [&calls](In in) {
    ++calls;
    void* p = nullptr;
    if (cudaMalloc(&p, 1 << 16) == cudaSuccess) (void)cudaFree(p);  // refused while capturing (Global)
    DeviceBuffer<float> out(in.size());
    axpb<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(), in.size(), 2.0f, 1.0f);
    return out;
  };
  auto pool = cugraphs::graph_pool_handle();
  cugraphs::GraphedOptions opts;
  opts.pool = pool;
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(opts, unsafe, In(x)); });
  CHECK((e.code() == cudaErrorStreamCaptureInvalidated || e.code() == cudaErrorStreamCaptureUnsupported));
  CHECK(contains(e.what(), "unsafe call"));
  CHECK(contains(e.what(), "cudaMalloc"));
  CHECK(contains(e.what(), "CaptureMode::Relaxed"));
  CHECK(calls == 4);
  CHECK(pool.allocated_bytes() == 0);
  check_clean();
  auto g = cugraphs::make_graphed_callable(opts, TwoXPlusOne{&calls}, In(x));
  CHECK(g.graph().pool_id() == pool.id());
  check_two_x_plus_one(g(In(x)), a);
  check_clean();
}

// ---------------------------------------------------------------------------------------
// Generator
// ---------------------------------------------------------------------------------------

TEST_CASE("Generator: a moved-from generator is an Error naming the move; the generator it moved to "
          "continues the sequence", "[reliability][gpu]") {
  Generator a(11), reference(11);
  (void)a.philox(5);
  (void)reference.philox(5);
  Generator b = std::move(a);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from generator is the point
  const std::vector<cugraphs::Error> errors = {
      expect_error([&] { (void)a.philox(1); }), expect_error([&] { a.manual_seed(3); }),
      expect_error([&] { (void)a.seed(); }), expect_error([&] { (void)a.offset(); })};
  for (const auto& e : errors) {
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "this Generator was moved from"));
  }
  const auto next = b.philox(3), expected = reference.philox(3);
  CHECK(next.seed == expected.seed);
  CHECK(next.offset == expected.offset);
  CHECK(next.offset == 8);
  a = Generator(12);  // the moved-from generator takes a new state
  CHECK(a.seed() == 12);
  CHECK(a.offset() == 0);
  // NOLINTEND(bugprone-use-after-move)
  check_clean();
}

TEST_CASE("Generator: an increment that overflows the 64-bit Philox offset is an Error and the offset does "
          "not move, eagerly and in a capture", "[reliability][gpu]") {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  Generator gen(3);
  auto e = expect_error([&] { (void)gen.philox(max); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Generator::philox"));
  CHECK(contains(e.what(), "cannot be rounded up"));
  CHECK(gen.offset() == 0);
  CHECK(gen.philox(max - 7).offset == 0);
  CHECK(gen.offset() == max - 7);
  e = expect_error([&] { (void)gen.philox(16); });
  CHECK(contains(e.what(), "would overflow the 64-bit Philox offset"));
  CHECK(gen.offset() == max - 7);
  CHECK(gen.philox(4).offset == max - 7);  // what still fits is handed out
  gen.manual_seed(3);
  CHECK(gen.offset() == 0);

  DeviceBuffer<unsigned long long> rec(2);
  Graph g;
  {
    CaptureScope scope(g);
    record_philox<<<1, 1, 0, scope.stream()>>>(gen.philox(4), rec.data());
    e = expect_error([&] { (void)gen.philox(max - 3); });
    CHECK(contains(e.what(), "the 64-bit Philox offset would overflow"));
  }
  rec.copy_from_host(std::vector<unsigned long long>{0xDEAD, 0xBEEF});
  g.replay();
  CHECK(rec.to_host() == std::vector<unsigned long long>{3, 0});
  g.replay();
  CHECK(rec.to_host() == std::vector<unsigned long long>{3, 4});
  CHECK(gen.offset() == 8);  // 4 per replay: the refused draw added nothing
  check_clean();
}

TEST_CASE("Generator: a graph drawing from more generators than it holds is an Error naming the limit; the "
          "capture completes with the others", "[reliability][gpu]") {
  constexpr unsigned kMax = cugraphs::detail::kMaxGeneratorsPerGraph;
  std::vector<Generator> gens;
  for (unsigned i = 0; i <= kMax; ++i) gens.emplace_back(100 + i);
  DeviceBuffer<unsigned long long> rec(2 * (kMax + 1));
  Graph g;
  {
    CaptureScope scope(g);
    for (unsigned i = 0; i < kMax; ++i)
      record_philox<<<1, 1, 0, scope.stream()>>>(gens[i].philox(4), rec.data() + 2 * i);
    const auto e = expect_error([&] { (void)gens[kMax].philox(4); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), fmt::format("at most {} generators", kMax)));
    CHECK_NOTHROW(gens[kMax].manual_seed(7));  // the refused generator was not recorded
    CHECK(capture_active(scope.stream()));
  }
  const std::vector<unsigned long long> poison(2 * (kMax + 1), 0xDEADull);
  rec.copy_from_host(poison);
  for (unsigned long long r = 0; r < 2; ++r) {
    g.replay();
    const auto got = rec.to_host();
    for (unsigned i = 0; i < kMax; ++i) {
      CHECK(got[2 * i] == 100 + i);
      CHECK(got[2 * i + 1] == 4 * r);
    }
    CHECK(got[2 * kMax] == 0xDEADull);
  }
  for (unsigned i = 0; i < kMax; ++i) CHECK(gens[i].offset() == 8);
  CHECK(gens[kMax].offset() == 0);
  check_clean();
}

