// The bad-input table of docs/reliability.md. Every public operation called in the wrong
// state or with wrong arguments throws a cugraphs::Error whose message names the cause, and
// every object involved stays usable: graphs capture and replay afterwards (values read back
// and compared), no stream is left capturing, pools' figures add up, and no CUDA error is
// left behind. Rows that need two GPUs say so and are skipped, with a warning, on one.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Generator;
using cugraphs::Graph;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
constexpr std::size_t kN = 3000;  // not a multiple of the block size
constexpr const char* kUnwritable = "/nonexistent-cugraphs-directory/graph.dot";

__global__ void axpb(float* out, const float* in, std::size_t n, float a, float b) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}
__global__ void add_to(int* x, int v) { *x += v; }
__global__ void countdown(int* n, int* iterations, bool* go) {
  if (*n > 0) {
    *n -= 1;
    *iterations += 1;
  }
  *go = *n > 0;
}
__global__ void record_philox(cugraphs::PhiloxArgs args, unsigned long long* out) {
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  out[0] = seed;
  out[1] = offset;
}

// After an Error: no capture open on this thread, the capture stream not capturing, the
// current stream as expected, no CUDA error left behind, and the device healthy.
void check_clean(cudaStream_t expected_current = nullptr) {
  CHECK(cugraphs::detail::innermost_capture() == nullptr);
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
  CHECK(cugraphs::current_stream() == expected_current);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

// Whether the capture on `s` is active (not merely open and invalidated).
bool capture_active(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cugraphs::check(cudaStreamIsCapturing(s, &st), "cudaStreamIsCapturing");
  return st == cudaStreamCaptureStatusActive;
}

// x = a * x + b over non-trivial data. `a` is a power of two, so a * x is exact and the
// device's result (fused or not) equals the host's bitwise; a * x + b == x has no float
// solution for the (a, b) used here, so a replay that did not run cannot pass.
struct Affine {
  float a, b;
  DeviceBuffer<float> x{kN};

  void launch(cudaStream_t s) const {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, a, b);
    cugraphs::check_launch("affine_kernel");
  }
  void capture(Graph& g, const CaptureOptions& opts = {}) const {
    cugraphs::capture(g, [&](cudaStream_t s) { launch(s); }, opts);
  }
  // Two replays of `g` on `s`, each on fresh inputs, every element checked.
  void check_replays(Graph& g, std::uint32_t seed, cudaStream_t s = nullptr) {
    for (std::uint32_t r = 0; r < 2; ++r) {
      const auto in = random_floats(kN, seed + r);
      x.copy_from_host(in, s);
      g.replay(s);
      const auto out = x.to_host(s);
      for (std::size_t i = 0; i < kN; ++i) REQUIRE(out[i] == a * in[i] + b);
    }
  }
};

std::vector<float> host(In s) {
  cugraphs::check(cudaDeviceSynchronize(), "wait for every stream");
  std::vector<float> v(s.size());
  cugraphs::check(cudaMemcpy(v.data(), s.data(), s.size_bytes(), cudaMemcpyDeviceToHost), "read back");
  return v;
}

int current_device() {
  int d = 0;
  cugraphs::check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

// Another device than the current one, or -1 (with a warning) on a machine with one GPU.
int other_device(const char* row) {
  int n = 0;
  cugraphs::check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (n < 2) {
    std::printf("needs 2 GPUs: skipped (%s)\n", row);
    WARN("needs 2 GPUs: skipped (" << row << ")");
    return -1;
  }
  return (current_device() + 1) % n;
}

// Whether kernels read plain malloc'd memory here (HMM or ATS): then it is not foreign.
bool device_reads_pageable_memory() {
  int v = 0;
  cugraphs::check(cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, current_device()),
                  "cudaDeviceGetAttribute");
  return v != 0;
}

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <class T>
std::unique_ptr<T, FreeDeleter> malloc_one(T value) {
  std::unique_ptr<T, FreeDeleter> p(static_cast<T*>(std::malloc(sizeof(T))));
  REQUIRE(p != nullptr);
  *p = value;
  return p;
}

// f(x) = 2 x + 1, into a buffer f allocates (from the graph's pool while capturing).
struct TwoXPlusOne {
  int* calls;
  DeviceBuffer<float> operator()(In x) const {
    ++*calls;
    DeviceBuffer<float> out(x.size());
    axpb<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), x.data(), x.size(), 2.0f, 1.0f);
    cugraphs::check_launch("axpb");
    return out;
  }
};

void check_two_x_plus_one(Out out, const std::vector<float>& in) {
  const auto got = host(out);
  REQUIRE(got.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) REQUIRE(got[i] == 2.0f * in[i] + 1.0f);
}

}  // namespace

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
  f.launch(g.capturing_stream());
  for (const auto& e : {expect_error([&] { g.replay(); }), expect_error([&] { g.instantiate(); })}) {
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "still capturing"));
    CHECK(contains(e.what(), "capture_end()"));
  }
  CHECK(capture_active(g.capturing_stream()));
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
// Pools
// ---------------------------------------------------------------------------------------

TEST_CASE("PoolHandle: a pool of another device is refused by capture_begin and make_graphed_callable; the "
          "pool stays empty and captures on its own device (needs 2 GPUs)", "[reliability][gpu]") {
  const int other = other_device("a pool of another device");
  if (other < 0) return;
  const int here = current_device();
  auto pool = cugraphs::graph_pool_handle(other);
  const std::string why = fmt::format("the pool (id {}) belongs to device {} but device {} is current",
                                      pool.id(), other, here);
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  auto e = expect_error([&] { CaptureScope scope(g, o); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), why));
  CHECK_FALSE(g.is_capturing());

  int calls = 0;
  DeviceBuffer<float> x(kN);
  cugraphs::GraphedOptions go;
  go.pool = pool;
  e = expect_error([&] { (void)cugraphs::make_graphed_callable(go, TwoXPlusOne{&calls}, In(x)); });
  CHECK(contains(e.what(), why));
  CHECK(pool.allocated_bytes() == 0);
  CHECK(pool.reserved_bytes() == 0);
  check_clean();

  // On its own device the pool works.
  {
    cugraphs::detail::DeviceGuard on(other);
    Graph h;
    DeviceBuffer<float> kept;
    {
      CaptureScope scope(h, o);
      kept = DeviceBuffer<float>(kN);
      fill_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(kept.data(), kN, 3.0f);
    }
    CHECK(pool.allocated_bytes() == 12288);  // 12000 bytes, in 512-byte blocks
    h.replay();
    CHECK(kept.to_host()[7] == 3.0f + 0.007f);
  }
  CHECK(current_device() == here);
}

TEST_CASE("PoolHandle: a moved-from handle still refers to its pool (moves copy); a missing device is an "
          "Error", "[reliability][gpu]") {
  Affine f{2.0f, -0.75f};
  auto pool = cugraphs::graph_pool_handle();
  auto moved_to = std::move(pool);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from handle is the point
  CHECK(pool == moved_to);
  CHECK(pool.id() == moved_to.id());
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  {
    CaptureScope scope(g, o);
    DeviceBuffer<float> temp(kN);
    f.launch(scope.stream());
    CHECK(pool.allocated_bytes() == 12288);
  }
  CHECK(g.pool_id() == moved_to.id());
  CHECK(moved_to.allocated_bytes() == 0);
  CHECK(moved_to.reserved_bytes() == std::size_t{2} << 20);  // one 2 MiB segment
  // NOLINTEND(bugprone-use-after-move)
  f.check_replays(g, 190);
  for (const int bad : {-1, 1 << 20}) {
    const auto e = expect_error([&] { (void)cugraphs::graph_pool_handle(bad); });
    CHECK(e.code() == cudaErrorInvalidDevice);
    CHECK(contains(e.what(), fmt::format("graph_pool_handle({}): no such device", bad)));
  }
  check_clean();
}

// ---------------------------------------------------------------------------------------
// DeviceBuffer
// ---------------------------------------------------------------------------------------

TEST_CASE("DeviceBuffer: host copies of the wrong size are Errors that copy nothing", "[reliability][gpu]") {
  const auto data = random_floats(kN, 200);
  DeviceBuffer<float> b(kN);
  b.copy_from_host(data);
  const std::vector<float> shorter(kN - 1, 5.0f);
  auto e = expect_error([&] { b.copy_from_host(shorter); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "DeviceBuffer::copy_from_host"));
  CHECK(contains(e.what(), "the host range has 2999 elements but the buffer has 3000"));
  std::vector<float> longer(kN + 1, -9.0f);
  e = expect_error([&] { b.copy_to_host(longer); });
  CHECK(contains(e.what(), "DeviceBuffer::copy_to_host"));
  CHECK(contains(e.what(), "the host range has 3001 elements but the buffer has 3000"));
  CHECK(longer == std::vector<float>(kN + 1, -9.0f));  // nothing copied out
  CHECK(b.to_host() == data);                           // nothing copied in
  const auto fresh = random_floats(kN, 201);
  b.copy_from_host(fresh);
  CHECK(b.to_host() == fresh);
  check_clean();
}

TEST_CASE("DeviceBuffer: a moved-from buffer is empty, a host copy into it names that, and the buffer it "
          "moved to keeps the data", "[reliability][gpu]") {
  const auto data = random_floats(kN, 210);
  DeviceBuffer<float> a(kN);
  a.copy_from_host(data);
  DeviceBuffer<float> b = std::move(a);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from buffer is the point
  CHECK(a.data() == nullptr);
  CHECK(a.size() == 0);
  const auto e = expect_error([&] { a.copy_from_host(data); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "the host range has 3000 elements but the buffer has 0"));
  CHECK(contains(e.what(), "moved from"));
  CHECK(a.to_host().empty());  // an empty buffer reads back as empty, consistently
  CHECK(b.to_host() == data);
  a = DeviceBuffer<float>(kN);  // and takes new memory
  a.copy_from_host(data);
  CHECK(a.to_host() == data);
  // NOLINTEND(bugprone-use-after-move)
  check_clean();
}

TEST_CASE("DeviceBuffer: a host copy on a capturing stream is an Error, and the capture is not invalidated",
          "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f};
  const auto data = random_floats(kN, 220);
  Graph g;
  {
    CaptureScope scope(g);
    f.launch(scope.stream());
    for (const auto& e : {expect_error([&] { f.x.copy_from_host(data, scope.stream()); }),
                          expect_error([&] { (void)f.x.to_host(scope.stream()); })}) {
      CHECK(e.code() == cudaSuccess);
      CHECK(contains(e.what(), "the stream is capturing"));
      CHECK(contains(e.what(), "copy before capture_begin, or after capture_end"));
    }
    CHECK(capture_active(scope.stream()));
  }
  f.check_replays(g, 230);
  check_clean();
}

TEST_CASE("DeviceBuffer: a count whose byte size overflows, and one larger than the device, are Errors; "
          "a capture survives the failed allocation", "[reliability][gpu]") {
  constexpr std::size_t overflowing = std::numeric_limits<std::size_t>::max() / 2;
  constexpr std::size_t too_large = std::size_t{1} << 60;  // 4 EiB of floats
  auto e = expect_error([&] { DeviceBuffer<float> b(overflowing); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "overflow"));
  e = expect_error([&] { (void)cugraphs::allocate<float>(too_large); });
  CHECK(e.code() == cudaErrorMemoryAllocation);
  CHECK(contains(e.what(), "cudaMallocAsync"));
  CHECK(contains(e.what(), "out of memory"));
  CHECK(cudaGetLastError() == cudaSuccess);

  Affine f{4.0f, 1.0f};
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  {
    CaptureScope scope(g, o);
    e = expect_error([&] { DeviceBuffer<float> huge(too_large); });
    CHECK(e.code() == cudaErrorMemoryAllocation);
    CHECK(contains(e.what(), fmt::format("graph pool {}", pool.id())));
    e = expect_error([&] { DeviceBuffer<float> huge(overflowing); });
    CHECK(contains(e.what(), "overflow"));
    CHECK(pool.reserved_bytes() == 0);
    CHECK(capture_active(scope.stream()));
    DeviceBuffer<float> temp(kN);  // the pool still allocates
    CHECK(pool.allocated_bytes() == 12288);
    f.launch(scope.stream());
  }
  CHECK(pool.allocated_bytes() == 0);
  f.check_replays(g, 240);
  DeviceBuffer<float> fine(kN);
  CHECK(fine.data() != nullptr);
  check_clean();
}

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
    const auto end = expect_error([&] { scope.end(); });
    CHECK(contains(end.what(), "the capture was aborted"));
  }
  CHECK(pool.allocated_bytes() == 0);
  check_clean();
  f.capture(g, o);
  f.check_replays(g, 320);
  check_clean();
}

#endif  // CUGRAPHS_HAS_CONDITIONAL_ELSE_SWITCH

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
