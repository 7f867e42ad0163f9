// The bad-input table of docs/reliability.md, rows for Graph and CaptureScope, streams and debug output. Every public operation
// called in the wrong state or with wrong arguments throws a cugraphs::Error whose message
// names the cause, and every object involved stays usable: graphs capture and replay
// afterwards (values read back and compared), no stream is left capturing, pools' figures
// add up, and no CUDA error is left behind. Rows that need two GPUs say so and are skipped,
// with a warning, on one.
#include "reliability.cuh"

#include <cugraphs/detail/native_graph.hpp>  // LastCapture, emptied and restored by a test

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
// Graph and CaptureScope
// ---------------------------------------------------------------------------------------

TEST_CASE("Graph: replay before capture is an Error naming capture_begin, and the graph captures afterwards",
          "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f};
  Graph g;
  cugraphs::Stream s;
  for (const auto& e : {expect_error([&] { g.replay(); }), expect_error([&] { g.replay(s); })}) {
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "Graph::replay"));
    CHECK(contains(e.what(), "nothing has been captured"));
    CHECK(contains(e.what(), "capture_begin"));
  }
  f.capture(g);
  f.check_replays(g, 10);
  f.check_replays(g, 20, s);
  check_clean();
}

TEST_CASE("Graph: instantiate and pool before capture are Errors naming the cause, and the graph captures "
          "afterwards", "[reliability][gpu]") {
  Affine f{4.0f, 1.0f};
  Graph g;
  auto e = expect_error([&] { g.instantiate(); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::instantiate"));
  CHECK(contains(e.what(), "nothing has been captured"));
  e = expect_error([&] { (void)g.pool(); });
  CHECK(contains(e.what(), "Graph::pool"));
  CHECK(contains(e.what(), "nothing has been captured"));
  e = expect_error([&] { (void)g.pool_id(); });
  CHECK(contains(e.what(), "nothing has been captured"));
  CHECK_FALSE(g.is_instantiated());
  f.capture(g);
  const cudaGraphExec_t exec = g.native_exec();
  g.instantiate();  // a no-op once instantiated
  CHECK(g.native_exec() == exec);
  CHECK(g.pool().id() == g.pool_id());
  f.check_replays(g, 30);
  check_clean();
}

TEST_CASE("Graph: replay and instantiate while capturing are Errors naming capture_end, and the capture "
          "still completes", "[reliability][gpu]") {
  Affine f{2.0f, -0.75f};
  Graph g;
  g.capture_begin();
  f.launch(g.stream());
  for (const auto& e : {expect_error([&] { g.replay(); }), expect_error([&] { g.instantiate(); })}) {
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "still capturing"));
    CHECK(contains(e.what(), "capture_end()"));
  }
  CHECK(capture_active(g.stream()));
  g.capture_end();
  f.check_replays(g, 40);
  check_clean();
}

TEST_CASE("Graph: a moved-from graph is an Error naming the move; it captures again, and the graph it "
          "moved to replays", "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f}, f2{4.0f, 1.0f};
  Graph g;
  f.capture(g);
  Graph h = std::move(g);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from graph is the point
  for (const auto& e : {expect_error([&] { g.replay(); }), expect_error([&] { g.instantiate(); }),
                        expect_error([&] { (void)g.pool(); })}) {
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "moved from"));
  }
  f.check_replays(h, 50);
  f2.capture(g);  // the moved-from graph captures again
  // NOLINTEND(bugprone-use-after-move)
  f2.check_replays(g, 60);
  f.check_replays(h, 70);
  check_clean();
}

TEST_CASE("Graph: capture_end without capture_begin is an Error naming capture_begin, and the graph "
          "captures afterwards", "[reliability][gpu]") {
  Affine f{2.0f, -0.75f};
  Graph g;
  auto e = expect_error([&] { g.capture_end(); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::capture_end"));
  CHECK(contains(e.what(), "no capture is open on this graph"));
  CHECK(contains(e.what(), "capture_begin()"));
  f.capture(g);
  e = expect_error([&] { g.capture_end(); });  // once more, after a completed capture
  CHECK(contains(e.what(), "no capture is open on this graph"));
  f.check_replays(g, 80);
  check_clean();
}

TEST_CASE("Graph: ending an outer capture while an inner one is open on the thread is an Error, and both "
          "complete innermost first", "[reliability][gpu]") {
  Affine fo{-0.5f, 0.25f}, fi{4.0f, 1.0f};
  cugraphs::Stream so, si;
  CaptureOptions oo, oi;
  oo.stream = so;
  oi.stream = si;
  Graph outer, inner;
  outer.capture_begin(oo);
  fo.launch(so);
  inner.capture_begin(oi);
  fi.launch(si);
  const auto e = expect_error([&] { outer.capture_end(); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "not the innermost capture"));
  CHECK(outer.is_capturing());
  CHECK(capture_active(so));
  CHECK(capture_active(si));
  inner.capture_end();
  outer.capture_end();
  fo.check_replays(outer, 90);
  fi.check_replays(inner, 100);
  check_clean();
}

TEST_CASE("Graph: a second graph capturing on the capture stream that is already capturing is an Error, "
          "and the first capture completes", "[reliability][gpu]") {
  // The test_capture.cu case "a stream that is already capturing cannot begin another capture"
  // does this with an explicit stream; here both use the default, capture_stream().
  Affine f1{-0.5f, 0.25f}, f2{4.0f, 1.0f};
  Graph first, second;
  {
    CaptureScope scope(first);
    f1.launch(scope.stream());
    const auto e = expect_error([&] { CaptureScope nested(second); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "Graph::capture_begin"));
    CHECK(contains(e.what(), "already capturing"));
    CHECK(contains(e.what(), "captures cannot nest on one stream"));
    CHECK_FALSE(second.is_capturing());
    CHECK(cugraphs::current_stream() == scope.stream());
    CHECK(capture_active(scope.stream()));
  }
  f1.check_replays(first, 110);
  f2.capture(second);
  f2.check_replays(second, 120);
  check_clean();
}

TEST_CASE("Graph: capture on the legacy default stream is an Error with code cudaErrorStreamCaptureImplicit; "
          "a null stream means capture_stream()", "[reliability][gpu]") {
  Affine f{2.0f, -0.75f};
  Graph g;
  CaptureOptions legacy;
  legacy.stream = cudaStreamLegacy;
  const auto e = expect_error([&] { CaptureScope scope(g, legacy); });
  CHECK(e.code() == cudaErrorStreamCaptureImplicit);
  CHECK(contains(e.what(), "legacy default stream cannot capture"));
  CHECK(contains(e.what(), "Remedy"));
  CHECK_FALSE(g.is_capturing());
  CaptureOptions zero;
  zero.stream = nullptr;
  {
    CaptureScope scope(g, zero);
    CHECK(scope.stream() == cugraphs::capture_stream());
    f.launch(scope.stream());
  }
  f.check_replays(g, 130);
  check_clean();
}

TEST_CASE("CaptureScope: end() twice, and end() after the capture was aborted, are Errors; the graph "
          "captures afterwards", "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f};
  Graph g;
  SECTION("end() twice") {
    CaptureScope scope(g);
    f.launch(scope.stream());
    scope.end();
    const auto e = expect_error([&] { scope.end(); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "already ended"));
    f.check_replays(g, 140);
  }
  SECTION("end() after capture_abort()") {
    CaptureScope scope(g);
    f.launch(scope.stream());
    g.capture_abort();
    const auto e = expect_error([&] { scope.end(); });
    CHECK(contains(e.what(), "the capture was aborted"));
    CHECK(cugraphs::current_stream() == nullptr);  // restored all the same
    CHECK_FALSE(g.is_capturing());
    f.capture(g);
    f.check_replays(g, 150);
  }
  check_clean();
}

// ---------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------

TEST_CASE("Stream: a moved-from Stream is an Error wherever it is used, never the legacy default stream; "
          "the Stream it moved to works", "[reliability][gpu]") {
  Affine f{4.0f, 1.0f};
  Graph g;
  f.capture(g);
  cugraphs::Stream s;
  cugraphs::Stream t = std::move(s);
  const std::vector<float> poison(kN, -77.0f);
  f.x.copy_from_host(poison);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from stream is the point
  const std::vector<cugraphs::Error> errors = {
      expect_error([&] { (void)s.get(); }),
      expect_error([&] {
        const cudaStream_t raw = s;
        (void)raw;
      }),
      expect_error([&] { s.synchronize(); }),
      expect_error([&] { g.replay(s); }),
      expect_error([&] { cugraphs::StreamGuard on(s); }),
      expect_error([&] { DeviceBuffer<float> b(16, s); }),
      expect_error([&] { (void)cugraphs::is_capturing(s); }),
      expect_error([&] {
        CaptureOptions o;
        o.stream = s;
      }),
  };
  for (const auto& e : errors) {
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "this Stream was moved from"));
    CHECK(contains(e.what(), "legacy default stream"));
  }
  CHECK(f.x.to_host() == poison);  // the replay did not run, on any stream
  CHECK(cugraphs::current_stream() == nullptr);
  f.check_replays(g, 160, t);
  s = cugraphs::Stream();  // a moved-from Stream takes a new one
  f.check_replays(g, 170, s);
  // NOLINTEND(bugprone-use-after-move)
  check_clean();
}

TEST_CASE("Stream: a stream of another device is refused by capture_begin, naming both devices (needs 2 GPUs)",
          "[reliability][gpu]") {
  const int other = other_device("a stream of another device");
  if (other < 0) return;
  const int here = current_device();
  Affine f{-0.5f, 0.25f};
  cugraphs::Stream foreign(other);
  CaptureOptions o;
  o.stream = foreign;
  Graph g;
  const auto e = expect_error([&] { g.capture_begin(o); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), fmt::format("the stream belongs to device {} but device {} is current", other, here)));
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(cugraphs::is_capturing(foreign));
  CHECK(current_device() == here);
  foreign.synchronize();
  f.capture(g);
  f.check_replays(g, 180);
  check_clean();
}

// ---------------------------------------------------------------------------------------
// Debug output
// ---------------------------------------------------------------------------------------

TEST_CASE("debug_dump: with nothing captured, and to an unwritable path, is an Error naming the cause; the "
          "graph dumps and replays afterwards", "[reliability][gpu]") {
  Affine f{4.0f, 1.0f};
  Graph g;
  g.enable_debug_mode();
  auto e = expect_error([&] { g.debug_dump("cugraphs_reliability_never.dot"); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::debug_dump"));
  CHECK(contains(e.what(), "nothing has been captured"));
  f.capture(g);
  e = expect_error([&] { g.debug_dump(kUnwritable); });
  CHECK(e.code() != cudaSuccess);
  CHECK(contains(e.what(), "Graph::debug_dump"));
  CHECK(contains(e.what(), std::string("cudaGraphDebugDotPrint to '") + kUnwritable + "' (is the path writable?)"));
  CHECK(cudaGetLastError() == cudaSuccess);
  g.debug_dump("cugraphs_reliability_graph.dot");
  const std::string dot = read_file("cugraphs_reliability_graph.dot");
  CHECK(contains(dot, "digraph"));
  CHECK(contains(dot, "affine_kernel"));
  std::remove("cugraphs_reliability_graph.dot");
  f.check_replays(g, 600);
  check_clean();
}

TEST_CASE("export_dot: before any capture completed, and to an unwritable path, is an Error naming the cause; "
          "it writes the last capture afterwards", "[reliability][gpu]") {
  auto& last = cugraphs::detail::LastCapture::instance();
  const auto earlier = last.get();
  last.set(nullptr);  // as in a process where no capture has completed yet
  auto e = expect_error([] { cugraphs::export_dot("cugraphs_reliability_never.dot"); });
  last.set(earlier);
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "export_dot: no capture has completed yet"));

  Affine f{-0.5f, 0.25f};
  Graph g;
  f.capture(g);
  e = expect_error([] { cugraphs::export_dot(kUnwritable); });
  CHECK(e.code() != cudaSuccess);
  CHECK(contains(e.what(), "export_dot"));
  CHECK(contains(e.what(), std::string("cudaGraphDebugDotPrint to '") + kUnwritable + "' (is the path writable?)"));
  CHECK(cudaGetLastError() == cudaSuccess);
  cugraphs::export_dot("cugraphs_reliability_last.dot");
  CHECK(contains(read_file("cugraphs_reliability_last.dot"), "affine_kernel"));
  std::remove("cugraphs_reliability_last.dot");
  f.check_replays(g, 610);
  check_clean();
}
