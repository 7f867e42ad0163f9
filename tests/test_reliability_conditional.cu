// The bad-input table of docs/reliability.md, rows for conditional scopes. Every public operation
// called in the wrong state or with wrong arguments throws a cugraphs::Error whose message
// names the cause, and every object involved stays usable: graphs capture and replay
// afterwards (values read back and compared), no stream is left capturing, pools' figures
// add up, and no CUDA error is left behind. Rows that need two GPUs say so and are skipped,
// with a warning, on one.
#include "reliability.cuh"

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
// Conditional scopes
// ---------------------------------------------------------------------------------------

#if CUGRAPHS_HAS_CONDITIONAL_ELSE_SWITCH

TEST_CASE("ConditionalScope: a flag in host (malloc'd) memory is an Error naming host memory, for every kind "
          "and set_predicate; the capture continues", "[reliability][gpu]") {
  if (device_reads_pageable_memory()) {
    std::printf("this device reads pageable host memory: a malloc'd flag is valid here: skipped\n");
    WARN("this device reads pageable host memory (HMM/ATS): a malloc'd flag is valid here: skipped");
    return;
  }
  auto host_flag = malloc_one<bool>(true);
  auto host_index = malloc_one<unsigned>(1);
  DeviceBuffer<int> n(1), iterations(1), hits(1);
  DeviceBuffer<bool> go(1), when(1);
  Graph g;
  {
    CaptureScope scope(g);
    const std::vector<cugraphs::Error> errors = {
        expect_error([&] { cugraphs::ConditionalScope<cugraphs::If> c(scope, host_flag.get()); }),
        expect_error([&] { cugraphs::ConditionalScope<cugraphs::While> c(scope, host_flag.get()); }),
        expect_error([&] { cugraphs::ConditionalScope<cugraphs::IfElse> c(scope, host_flag.get()); }),
        expect_error([&] { cugraphs::ConditionalScope<cugraphs::Switch> c(scope, host_index.get(), 2); }),
        expect_error([&] { g.begin_capture_to_if_node(host_flag.get()); }),
    };
    for (const auto& e : errors) {
      CHECK(e.code() == cudaSuccess);
      CHECK(contains(e.what(), "the flag pointer"));
      CHECK(contains(e.what(), "is not device memory: it is host memory"));
    }
    CHECK(g.open_conditionals() == 0);
    CHECK(cugraphs::current_stream() == scope.stream());
    CHECK(capture_active(scope.stream()));
    {
      cugraphs::ConditionalScope<cugraphs::While> loop(scope, go.data());
      countdown<<<1, 1, 0, scope.stream()>>>(n.data(), iterations.data(), go.data());
      const auto e = expect_error([&] { loop.set_predicate(host_flag.get()); });
      CHECK(contains(e.what(), "is not device memory"));
      loop.end();
    }
    cugraphs::ConditionalScope<cugraphs::If> branch(scope, when.data());
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data(), 3);
  }
  put(hits, 0);
  for (const int count : {5, 2}) {
    put(n, count);
    put(iterations, 100);
    put(go, true);
    put(when, count == 5);
    g.replay();
    CHECK(get(iterations) == 100 + count);  // the While re-read its own flag
    CHECK(get(n) == 0);
  }
  CHECK(get(hits) == 3);
  check_clean();
}

TEST_CASE("ConditionalScope: a Switch index that is not 4-byte aligned is an Error naming the alignment, "
          "and the capture continues", "[reliability][gpu]") {
  DeviceBuffer<unsigned> index(2);
  DeviceBuffer<int> hits(2);
  const auto* misaligned = reinterpret_cast<const unsigned*>(reinterpret_cast<const char*>(index.data()) + 1);
  Graph g;
  {
    CaptureScope scope(g);
    const auto e = expect_error([&] { cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, misaligned, 2); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "ConditionalScope<Switch>"));
    CHECK(contains(e.what(), "not aligned to 4 bytes"));
    CHECK(capture_active(scope.stream()));
    cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 2);
    sw.case_(0);
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data(), 1);
    sw.case_(1);
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data() + 1, 10);
  }
  hits.copy_from_host(std::vector<int>{0, 0});
  for (const unsigned i : {1u, 1u, 0u, 7u}) {
    index.copy_from_host(std::vector<unsigned>{i, 0});
    g.replay();
  }
  CHECK(hits.to_host() == std::vector<int>{1, 20});
  check_clean();
}

TEST_CASE("ConditionalScope: a Switch of 0 cases is an Error, and the capture continues", "[reliability][gpu]") {
  DeviceBuffer<unsigned> index(1);
  DeviceBuffer<int> hits(2);
  Graph g;
  {
    CaptureScope scope(g);
    for (const auto& e :
         {expect_error([&] { cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 0); }),
          expect_error([&] { cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, cugraphs::SetByKernels{}, 0); })}) {
      CHECK(e.code() == cudaSuccess);
      CHECK(contains(e.what(), "a Switch needs at least one case"));
    }
    CHECK(capture_active(scope.stream()));
    cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 2);
    sw.case_(1);
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data() + 1, 4);
  }
  hits.copy_from_host(std::vector<int>{0, 0});
  for (const unsigned i : {1u, 0u, 1u, 2u}) {
    put(index, i);
    g.replay();
  }
  CHECK(hits.to_host() == std::vector<int>{0, 8});
  check_clean();
}

TEST_CASE("ConditionalScope: a scope opened in a Switch before case_() is an Error naming case_, and the "
          "Switch carries on", "[reliability][gpu]") {
  DeviceBuffer<unsigned> index(1);
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> hits(2);
  Graph g;
  {
    CaptureScope scope(g);
    cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 2);
    const auto e = expect_error([&] { cugraphs::ConditionalScope<cugraphs::If> c(scope, flag.data()); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "no open case; call case_(i) first"));
    CHECK(g.open_conditionals() == 1);
    sw.case_(0);
    {
      cugraphs::ConditionalScope<cugraphs::If> inner(scope, flag.data());  // now it nests
      add_to<<<1, 1, 0, scope.stream()>>>(hits.data(), 1);
    }
    sw.case_(1);
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data() + 1, 10);
  }
  hits.copy_from_host(std::vector<int>{0, 0});
  put(flag, true);
  for (const unsigned i : {0u, 1u, 0u}) {
    put(index, i);
    g.replay();
  }
  put(flag, false);
  put(index, 0u);
  g.replay();
  CHECK(hits.to_host() == std::vector<int>{2, 10});
  check_clean();
}

TEST_CASE("ConditionalScope: given the CaptureScope of an ended capture while another capture is open, it "
          "is an Error and the open capture is untouched", "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f};
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> hits(1);
  Graph ended_graph, g;
  CaptureScope ended(ended_graph);
  f.launch(ended.stream());
  ended.end();
  {
    CaptureScope scope(g);
    const auto e = expect_error([&] { cugraphs::ConditionalScope<cugraphs::If> c(ended, flag.data()); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "no capture is open"));
    CHECK(capture_active(scope.stream()));
    CHECK(g.is_capturing());
    cugraphs::ConditionalScope<cugraphs::If> c(scope, flag.data());
    add_to<<<1, 1, 0, scope.stream()>>>(hits.data(), 5);
  }
  put(hits, 0);
  for (const bool on : {true, false, true}) {
    put(flag, on);
    g.replay();
  }
  CHECK(get(hits) == 10);
  f.check_replays(ended_graph, 300);
  check_clean();
}

TEST_CASE("ConditionalScope: opened on an outer capture while an inner capture is open on the thread, it is "
          "an Error; both captures complete", "[reliability][gpu]") {
  Affine fi{4.0f, 1.0f};
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> hits(1);
  cugraphs::Stream so, si;
  CaptureOptions oo, oi;
  oo.stream = so;
  oi.stream = si;
  Graph outer, inner;
  CaptureScope outer_scope(outer, oo);
  CaptureScope inner_scope(inner, oi);
  fi.launch(inner_scope.stream());
  const auto e = expect_error([&] { cugraphs::ConditionalScope<cugraphs::If> c(outer_scope, flag.data()); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "not the innermost capture open on this thread"));
  CHECK(outer.open_conditionals() == 0);
  CHECK(capture_active(so));
  CHECK(capture_active(si));
  CHECK(cugraphs::current_stream() == si.get());
  inner_scope.end();
  CHECK(cugraphs::current_stream() == so.get());
  {
    cugraphs::ConditionalScope<cugraphs::If> c(outer_scope, flag.data());  // innermost now
    add_to<<<1, 1, 0, outer_scope.stream()>>>(hits.data(), 7);
  }
  outer_scope.end();
  put(hits, 0);
  put(flag, true);
  outer.replay();
  outer.replay();
  CHECK(get(hits) == 14);
  fi.check_replays(inner, 310);
  check_clean();
}

TEST_CASE("ConditionalScope: otherwise(), case_(), stream() and condition() after the capture was aborted "
          "are Errors naming the aborted capture; the graph captures afterwards", "[reliability][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<unsigned> index(1);
  DeviceBuffer<int> then_hits(1), else_hits(1);
  Graph g;
  {
    CaptureScope scope(g);
    cugraphs::ConditionalScope<cugraphs::IfElse> branch(scope, flag.data());
    g.capture_abort();
    for (const auto& e : {expect_error([&] { branch.otherwise(); }), expect_error([&] { (void)branch.stream(); }),
                          expect_error([&] { (void)branch.condition(); })}) {
      CHECK(e.code() == cudaSuccess);
      CHECK(contains(e.what(), "this conditional scope is closed (or its capture was aborted)"));
    }
    const auto end = expect_error([&] { scope.end(); });
    CHECK(contains(end.what(), "the capture was aborted"));
  }
  check_clean();
  {
    CaptureScope scope(g);
    cugraphs::ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 2);
    g.capture_abort();
    const auto e = expect_error([&] { sw.case_(0); });
    CHECK(contains(e.what(), "no capture is open on this graph"));
    scope.abort();
  }
  check_clean();
  {
    CaptureScope scope(g);
    cugraphs::ConditionalScope<cugraphs::IfElse> branch(scope, flag.data());
    add_to<<<1, 1, 0, scope.stream()>>>(then_hits.data(), 1);
    branch.otherwise();
    add_to<<<1, 1, 0, scope.stream()>>>(else_hits.data(), 1);
  }
  put(then_hits, 0);
  put(else_hits, 0);
  for (const bool on : {true, false, false}) {
    put(flag, on);
    g.replay();
  }
  CHECK(get(then_hits) == 1);
  CHECK(get(else_hits) == 2);
  check_clean();
}

TEST_CASE("ConditionalScope: opened in an invalidated capture, with a device flag or one the driver does "
          "not know, it is an Error with code cudaErrorStreamCaptureInvalidated; the capture is aborted and "
          "the graph captures afterwards",
          "[reliability][gpu]") {
  Affine f{2.0f, -0.75f};
  DeviceBuffer<bool> flag(1);
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  {
    CaptureScope scope(g, o);
    DeviceBuffer<float> temp(kN);
    f.launch(scope.stream());
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, 1 << 20) == cudaErrorStreamCaptureUnsupported);  // invalidates (Global)
    if (!device_reads_pageable_memory()) {  // else a malloc'd flag is readable memory
      // Only the dead capture's graph could vouch for a flag the driver does not know (memory
      // the capture allocated): the Error names the invalidation, and the capture stays open.
      auto host_flag = malloc_one<bool>(true);
      const auto h = expect_error([&] { g.begin_capture_to_if_node(host_flag.get()); });
      CHECK(h.code() == cudaErrorStreamCaptureInvalidated);
      CHECK(contains(h.what(), "Graph::begin_capture_to_if_node"));
      CHECK(contains(h.what(), "invalidated"));
      CHECK(g.open_conditionals() == 0);
    }
    const auto e = expect_error([&] { cugraphs::ConditionalScope<cugraphs::If> c(scope, flag.data()); });
    CHECK(e.code() == cudaErrorStreamCaptureInvalidated);
    CHECK(contains(e.what(), "ConditionalScope<If>"));
    CHECK(contains(e.what(), "invalidated"));
    CHECK_FALSE(g.is_capturing());
    CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
    // The aborted capture let go of its pool at once, as capture_abort() does.
    const auto no_pool = expect_error([&] { (void)g.pool(); });
    CHECK(contains(no_pool.what(), "nothing has been captured"));
    const auto end = expect_error([&] { scope.end(); });
    CHECK(contains(end.what(), "the capture was aborted"));
  }
  CHECK(pool.allocated_bytes() == 0);
  const std::size_t reserved = pool.reserved_bytes();
  CHECK(pool.trim() == reserved);  // no graph refers to the pool any more
  check_clean();
  f.capture(g, o);
  f.check_replays(g, 320);
  check_clean();
}

#endif  // CUGRAPHS_HAS_CONDITIONAL_ELSE_SWITCH

