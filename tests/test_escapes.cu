// No silent escapes (issue 26): work that would leave a capture silently is an Error, leaves
// in pinned-host and managed memory are copied from where they lie, and kernel nodes take
// per-step scalars. The conditional cases (work on the enclosing stream of a body, conditions
// made before their node) are in test_conditional.cu. Each trap case says what the
// code before this change did.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cuda/std/span>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::ConditionalScope;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Graph;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
constexpr std::size_t kN = 3000;  // not a multiple of the block size

__global__ void twice_plus(float* out, const float* a, const float* b, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = 2.0f * a[i] + b[i];
}


// AdamW on one tensor; bc1 and bc2 (1 - beta^step) change every step.
__global__ void adamw(float* w, float* m, float* v, const float* g, std::size_t n, float lr, float beta1, float beta2,
                      float eps, float weight_decay, float bc1, float bc2) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
  v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
  const float m_hat = m[i] / bc1, v_hat = v[i] / bc2;
  w[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * w[i]);
}

// out[i] = from[i] * shape.y + tag % 7 for from.data() + i < end: a span, an end pointer, a
// pair of ints and a 64-bit integer among a kernel's arguments, none of them memory to refuse.
__global__ void spread(float* out, cuda::std::span<const float> from, const float* end, int2 shape, long long tag) {
  const auto i = static_cast<std::ptrdiff_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (from.data() + i < end) out[i] = from.data()[i] * static_cast<float>(shape.y) + static_cast<float>(tag % 7);
}

// out[i] = a[i] + b[i] for `a` handed indexed from `first` (a pointer `first` elements before
// its start: 1 as code ported from Fortran or Numerical Recipes has it).
__global__ void from_one(float* out, const float* a_first, std::size_t first, const float* b, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a_first[i + first] + b[i];
}

// y = w * x; the backward writes dw = dy * x and dx = dy * w.
__global__ void scale_forward(float* y, const float* x, const float* w, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = w[i] * x[i];
}
__global__ void scale_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  dx[i] = dy[i] * w[i];
  dw[i] = dy[i] * x[i];
}

// A pair's forward: y = w * x, on the current stream.
DeviceBuffer<float> scaled(In x, In w) {
  DeviceBuffer<float> y(x.size());
  scale_forward<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(y.data(), x.data(), w.data(),
                                                                                   x.size());
  return y;
}

// Its backward, returning dx, then w = 0.5 w + 1 (an optimizer's step in miniature) on `w`.
DeviceBuffer<float> scaled_backward_stepping(In x, float* w, In dy) {
  DeviceBuffer<float> dx(x.size()), dw(x.size());
  const cudaStream_t s = cugraphs::current_stream();
  scale_backward<<<blocks_for(x.size()), kThreads, 0, s>>>(dx.data(), dw.data(), dy.data(), x.data(), w, x.size());
  affine_kernel<<<blocks_for(x.size()), kThreads, 0, s>>>(w, x.size(), 0.5f, 1.0f);
  return dx;
}

std::size_t node_count(const Graph& g) {
  std::size_t n = 0;
  cugraphs::check(cudaGraphGetNodes(g.native_graph(), nullptr, &n), "cudaGraphGetNodes");
  return n;
}

// The contract's conversion, checked where nvcc compiles: DeviceSpan<T> -> cuda::std::span<T>.
static_assert(std::is_convertible_v<DeviceSpan<float>, cuda::std::span<float>>);
static_assert(std::is_convertible_v<DeviceSpan<const float>, cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<DeviceSpan<float>, cuda::std::span<int>>);

[[maybe_unused]] __device__ float sum_through_cuda_span(DeviceSpan<const float> in) {
  const cuda::std::span<const float> s = in;  // in device code, as kernels would
  float total = 0.0f;
  for (const float v : s) total += v;
  return total;
}

// An event for forking and joining streams inside a capture, destroyed at scope exit.
struct Event {
  cudaEvent_t e = nullptr;
  Event() { cugraphs::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags"); }
  ~Event() { (void)cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// A frame counter as an engine's readback callback records it (the callback reads the value
// where its data points, when it runs).
int g_frame_seen = -1;
void CUDART_CB record_frame(void* data) { g_frame_seen = *static_cast<const int*>(data); }

// An engine's helper that queues its callback with the frame number it was passed: the data is
// its own parameter, in its frame, which is gone once it returns. Out of line, as a helper in
// another translation unit would be.
[[gnu::noinline]] void queue_frame_callback(cudaStream_t s, int frame) {
  cugraphs::check(cudaLaunchHostFunc(s, record_frame, &frame), "cudaLaunchHostFunc");
}

// The same helper given state that outlives it.
[[gnu::noinline]] void queue_state_callback(cudaStream_t s, const int* state) {
  cugraphs::check(cudaLaunchHostFunc(s, record_frame, const_cast<int*>(state)), "cudaLaunchHostFunc");
}

// Queues the callback with a local of its own, ends the capture and replays while that local
// is alive: the frame outlives every replay, which is right.
[[gnu::noinline]] void end_and_replay_here(Graph& g, cudaStream_t replay_on) {
  int frame = 41;
  cugraphs::check(cudaLaunchHostFunc(cugraphs::current_stream(), record_frame, &frame), "cudaLaunchHostFunc");
  g.capture_end();
  for (const int v : {42, 43}) {
    frame = v;
    g.replay(replay_on);
    cugraphs::check(cudaStreamSynchronize(replay_on), "cudaStreamSynchronize");
    CHECK(g_frame_seen == v);
  }
}

bool per_thread_stream_capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cugraphs::check(cudaStreamIsCapturing(cudaStreamPerThread, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

// Before: the kernel ran once, eagerly, at capture time, every replay lacked it, and nothing
// was reported.
TEST_CASE("Escapes: a kernel launched on the legacy default stream during a Global capture is refused at the "
          "launch and at the end, naming the legacy default stream; it never runs, and the graph is reusable",
          "[escapes][gpu]") {
  auto x = filled(kN, 1);
  const auto original = host(x.span());
  Graph g;
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 3.0f, 0.5f);
    fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);  // no stream: the legacy default stream
    auto e = expect_error([] { cugraphs::check_launch("the escaped fill_kernel"); });
    CHECK(e.code() == cudaErrorStreamCaptureImplicit);
    CHECK(contains(e.what(), "legacy default stream"));
    CHECK(contains(e.what(), "current_stream()"));
    e = expect_error([&] { scope.end(); });
    CHECK(e.code() == cudaErrorStreamCaptureInvalidated);
    CHECK(contains(e.what(), "legacy default stream"));
  }
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(g.is_instantiated());
  CHECK_FALSE(per_thread_stream_capturing());  // forked in by the check, released with the capture
  CHECK(bitwise_equal(host(x.span()), original));  // neither kernel ran
  CHECK(cudaGetLastError() == cudaSuccess);
  capture_and_check_affine(g, x);  // the same graph captures again
}

// Before: the escaped kernel went unnoticed when the user never checked the launch.
TEST_CASE("Escapes: an unchecked legacy-stream launch, a synchronous cudaMemset, and a capture on the user's own "
          "non-blocking stream are all caught at the end", "[escapes][gpu]") {
  auto x = filled(kN, 2);
  const auto original = host(x.span());
  SECTION("unchecked launch") {
    Graph g;
    CaptureScope scope(g);
    fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);
    const auto e = expect_error([&] { scope.end(); });
    CHECK(e.code() == cudaErrorStreamCaptureInvalidated);
    CHECK(contains(e.what(), "legacy default stream"));
    CHECK(contains(e.what(), "missing from every replay"));
    // Where the driver keeps a log (CUDA 12.9+), its own words come along, without prefixes.
    if (contains(e.what(), "The driver said")) {
      CHECK(contains(e.what(), "CU_STREAM_LEGACY"));
      CHECK_FALSE(contains(e.what(), "[CUDA]"));
    }
    std::printf("escapes: capture_end after an unchecked legacy-stream launch says: %s\n", e.what());
  }
  SECTION("synchronous cudaMemset") {
    Graph g;
    CaptureScope scope(g);
    CHECK(cudaMemset(x.data(), 0, x.bytes()) != cudaSuccess);
    const auto e = expect_error([&] { scope.end(); });
    CHECK(e.code() != cudaSuccess);
  }
  SECTION("the user's own non-blocking stream") {
    cugraphs::Stream mine;
    CHECK_FALSE(mine.blocking());
    CaptureOptions o;
    o.stream = mine;
    Graph g;
    CaptureScope scope(g, o);
    fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);
    const auto e = expect_error([&] { scope.end(); });
    CHECK(contains(e.what(), "legacy default stream"));
  }
  SECTION("ThreadLocal with EscapeCheck::On") {
    CaptureOptions o;
    o.mode = cugraphs::CaptureMode::ThreadLocal;
    o.escapes = cugraphs::EscapeCheck::On;
    Graph g;
    CaptureScope scope(g, o);
    fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);
    const auto e = expect_error([&] { scope.end(); });
    CHECK(contains(e.what(), "legacy default stream"));
  }
  (void)cudaGetLastError();
  CHECK(bitwise_equal(host(x.span()), original));
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
}

TEST_CASE("Escapes: EscapeCheck::Off (and Auto in ThreadLocal mode) lets legacy-stream work run once, eagerly, as "
          "documented; the capture itself succeeds", "[escapes][gpu]") {
  for (const bool thread_local_auto : {false, true}) {
    auto x = filled(kN, 3);
    DeviceBuffer<float> y(kN);
    CaptureOptions o;
    if (thread_local_auto) {
      o.mode = cugraphs::CaptureMode::ThreadLocal;
    } else {
      o.escapes = cugraphs::EscapeCheck::Off;
    }
    Graph g;
    {
      CaptureScope scope(g, o);
      copy_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), x.data(), kN);
      fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);  // runs now, eagerly
      cugraphs::check_launch("the eager fill_kernel");
    }
    CHECK(host(x.span())[5] == 9.0f + 0.005f);
    g.replay();
    CHECK(host(y.span())[5] == 9.0f + 0.005f);  // the replay copies; the fill is not in it
  }
}

TEST_CASE("Escapes: a nested capture is guarded too, and guards leave nothing behind across many captures",
          "[escapes][gpu]") {
  auto x = filled(kN, 4);
  Graph outer, inner;
  cugraphs::Stream other;
  {
    CaptureScope o(outer);
    affine_kernel<<<blocks_for(kN), kThreads, 0, o.stream()>>>(x.data(), kN, 1.0f, 1.0f);
    CaptureOptions io;
    io.stream = other;
    {
      CaptureScope i(inner, io);
      fill_kernel<<<blocks_for(kN), kThreads>>>(x.data(), kN, 9.0f);
      const auto e = expect_error([&] { i.end(); });
      CHECK(contains(e.what(), "legacy default stream"));
    }
    (void)cudaGetLastError();
    // The escape may also have reached the outer capture's guard; either way it ends cleanly.
    try {
      o.end();
    } catch (const cugraphs::Error&) {
    }
  }
  CHECK_FALSE(outer.is_capturing());
  CHECK_FALSE(inner.is_capturing());
  (void)cudaGetLastError();
  for (int round = 0; round < 50; ++round) {
    Graph g;
    capture_and_check_affine(g, x);
  }
  // A capture is one node per kernel: the guard adds none.
  Graph g;
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 1.0f, 0.0f);
  }
  CHECK(node_count(g) == 1);
}

// Before: the kernel on the per-thread default stream ran once, eagerly, at capture time,
// every replay lacked it, and nothing was reported (the legacy stream's guard cannot see that
// stream, which does not synchronize with blocking streams). Units built with
// --default-stream per-thread send <<<grid, block>>> there: test_per_thread.cu.
TEST_CASE("Escapes: work on this thread's per-thread default stream that the capture stream never waits for is "
          "refused at the end, naming the stream and the kernel; it never runs, and the graph captures again",
          "[escapes][gpu]") {
  auto x = filled(kN, 5);
  const auto original = host(x.span());
  Graph g;
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 3.0f, 0.5f);
    fill_kernel<<<blocks_for(kN), kThreads, 0, cudaStreamPerThread>>>(x.data(), kN, 9.0f);
    cugraphs::check_launch("fill_kernel on the per-thread default stream");  // CUDA itself says nothing
    CHECK(per_thread_stream_capturing());  // forked in: the kernel was captured, not run
    const auto e = expect_error([&] { scope.end(); });
    CHECK(e.code() == cudaErrorStreamCaptureUnjoined);
    CHECK(contains(e.what(), "per-thread default stream"));
    CHECK(contains(e.what(), "1 node(s)"));
    CHECK(contains(e.what(), "fill_kernel"));
    CHECK(contains(e.what(), "missing from every replay"));
    std::printf("escapes: capture_end after a launch on the per-thread default stream says: %s\n", e.what());
  }
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(g.is_instantiated());
  CHECK_FALSE(per_thread_stream_capturing());
  cugraphs::check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
  CHECK(bitwise_equal(host(x.span()), original));  // neither kernel ran
  CHECK(cudaGetLastError() == cudaSuccess);
  capture_and_check_affine(g, x);  // the same graph captures again
}

TEST_CASE("Escapes: a branch the program forks onto the per-thread default stream and joins back is captured and "
          "runs at every replay; a capture on that stream itself is not watched", "[escapes][gpu]") {
  auto x = filled(kN, 6);
  DeviceBuffer<float> y(kN);
  const auto x0 = host(x.span());
  SECTION("forked and joined by the program") {
    Event fork, join;
    Graph g;
    {
      CaptureScope scope(g);
      affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 2.0f, 1.0f);
      cugraphs::check(cudaEventRecord(fork.e, scope.stream()), "cudaEventRecord");
      cugraphs::check(cudaStreamWaitEvent(cudaStreamPerThread, fork.e, 0), "cudaStreamWaitEvent");
      copy_kernel<<<blocks_for(kN), kThreads, 0, cudaStreamPerThread>>>(y.data(), x.data(), kN);
      cugraphs::check(cudaEventRecord(join.e, cudaStreamPerThread), "cudaEventRecord");
      cugraphs::check(cudaStreamWaitEvent(scope.stream(), join.e, 0), "cudaStreamWaitEvent");
      affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), kN, 1.0f, 0.25f);
    }
    CHECK(node_count(g) == 3);
    std::vector<float> want_x = x0, want_y(kN);
    for (int r = 0; r < 3; ++r) {
      g.replay();
      for (std::size_t i = 0; i < kN; ++i) {
        want_x[i] = 2.0f * want_x[i] + 1.0f;
        want_y[i] = want_x[i] + 0.25f;
      }
      REQUIRE(host(x.span()) == want_x);
      REQUIRE(host(y.span()) == want_y);
    }
  }
  SECTION("forked by the program, nothing issued there") {
    Event fork;
    Graph g;
    {
      CaptureScope scope(g);
      affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 2.0f, 1.0f);
      cugraphs::check(cudaEventRecord(fork.e, scope.stream()), "cudaEventRecord");
      cugraphs::check(cudaStreamWaitEvent(cudaStreamPerThread, fork.e, 0), "cudaStreamWaitEvent");
    }
    CHECK(node_count(g) == 1);
    g.replay();
    CHECK(host(x.span())[7] == 2.0f * x0[7] + 1.0f);
  }
  SECTION("the capture's own stream") {
    CaptureOptions o;
    o.stream = cudaStreamPerThread;
    Graph g;
    {
      CaptureScope scope(g, o);
      CHECK(scope.stream() == cudaStreamPerThread);
      affine_kernel<<<blocks_for(kN), kThreads, 0, cudaStreamPerThread>>>(x.data(), kN, 2.0f, 1.0f);
    }
    CHECK(node_count(g) == 1);
    g.replay(cudaStreamPerThread);
    g.replay(cudaStreamPerThread);
    CHECK(host(x.span())[7] == 2.0f * (2.0f * x0[7] + 1.0f) + 1.0f);
  }
  CHECK_FALSE(per_thread_stream_capturing());
}

TEST_CASE("Escapes: per-thread default stream work in a nested capture is refused by the enclosing capture, which "
          "holds that stream; EscapeCheck::Off lets it run eagerly", "[escapes][gpu]") {
  auto x = filled(kN, 7);
  const auto x0 = host(x.span());
  SECTION("nested") {
    Graph outer, inner;
    cugraphs::Stream other;
    {
      CaptureScope o(outer);
      affine_kernel<<<blocks_for(kN), kThreads, 0, o.stream()>>>(x.data(), kN, 1.0f, 1.0f);
      CaptureOptions io;
      io.stream = other;
      {
        CaptureScope i(inner, io);
        affine_kernel<<<blocks_for(kN), kThreads, 0, i.stream()>>>(x.data(), kN, 1.0f, 2.0f);
        fill_kernel<<<blocks_for(kN), kThreads, 0, cudaStreamPerThread>>>(x.data(), kN, 9.0f);
      }
      CHECK(node_count(inner) == 1);
      const auto e = expect_error([&] { o.end(); });
      CHECK(e.code() == cudaErrorStreamCaptureUnjoined);
      CHECK(contains(e.what(), "fill_kernel"));
    }
    CHECK_FALSE(per_thread_stream_capturing());
    CHECK(bitwise_equal(host(x.span()), x0));  // nothing ran
  }
  SECTION("EscapeCheck::Off") {
    CaptureOptions o;
    o.escapes = cugraphs::EscapeCheck::Off;
    Graph g;
    {
      CaptureScope scope(g, o);
      affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 1.0f, 1.0f);
      CHECK_FALSE(per_thread_stream_capturing());
      fill_kernel<<<blocks_for(kN), kThreads, 0, cudaStreamPerThread>>>(x.data(), kN, 9.0f);  // runs now
    }
    cugraphs::check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
    const float filled_value = host(x.span())[5];
    CHECK(filled_value == 9.0f + 0.005f);
    g.replay();
    CHECK(host(x.span())[5] == filled_value + 1.0f);  // the replay adds one; the fill is not in it
  }
}

// Before: the copies were captured as they were: every replay read the address of `lr` (a
// stack variable, gone or reused by then) and wrote into `loss`'s, silently.
TEST_CASE("Escapes: a copy from or to plain pageable host memory in a capture is refused at the end, naming the "
          "node; pinned memory is copied at every replay; EscapeCheck::Off (and Auto in ThreadLocal mode) lets "
          "pageable copies through",
          "[escapes][gpu]") {
  DeviceBuffer<float> d(1);
  put(d, 1.5f);
  SECTION("host to device, from a stack variable") {
    Graph g;
    {
      CaptureScope scope(g);
      const float lr = 0.25f;
      cugraphs::check(cudaMemcpyAsync(d.data(), &lr, sizeof lr, cudaMemcpyHostToDevice, scope.stream()),
                      "cudaMemcpyAsync");
      const auto e = expect_error([&] { scope.end(); });
      CHECK(e.code() == cudaErrorInvalidValue);
      CHECK(contains(e.what(), "memcpy node 0"));
      CHECK(contains(e.what(), "4 bytes from host address"));
      CHECK(contains(e.what(), "pageable"));
      CHECK(contains(e.what(), "set_kernel_arg"));
      std::printf("escapes: capture_end after a copy from a stack variable says: %s\n", e.what());
    }
    CHECK_FALSE(g.is_capturing());
    CHECK_FALSE(g.is_instantiated());
    CHECK(get(d) == 1.5f);  // it never ran
  }
  SECTION("device to host, into a vector, after a kernel") {
    std::vector<float> loss(4, -1.0f);
    auto x = filled(kN, 8);
    Graph g;
    {
      CaptureScope scope(g);
      affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 2.0f, 1.0f);
      cugraphs::check(cudaMemcpyAsync(loss.data(), x.data(), loss.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                      scope.stream()),
                      "cudaMemcpyAsync");
      const auto e = expect_error([&] { scope.end(); });
      CHECK(e.code() == cudaErrorInvalidValue);
      CHECK(contains(e.what(), "memcpy node 1"));
      CHECK(contains(e.what(), "16 bytes to host address"));
    }
    CHECK(loss == std::vector<float>(4, -1.0f));
    capture_and_check_affine(g, x);  // the graph captures again
  }
  SECTION("pinned memory, written between replays") {
    float* pinned = nullptr;
    cugraphs::check(cudaMallocHost(&pinned, sizeof(float)), "cudaMallocHost");
    Graph g;
    {
      CaptureScope scope(g);
      cugraphs::check(cudaMemcpyAsync(d.data(), pinned, sizeof(float), cudaMemcpyHostToDevice, scope.stream()),
                      "cudaMemcpyAsync");
    }
    for (const float v : {3.0f, 4.5f}) {
      *pinned = v;
      g.replay();
      cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      CHECK(get(d) == v);
    }
    cugraphs::check(cudaFreeHost(pinned), "cudaFreeHost");
  }
  SECTION("EscapeCheck::Off, and Auto in ThreadLocal mode") {
    for (const bool thread_local_auto : {false, true}) {
      std::vector<float> source(1, thread_local_auto ? 7.0f : 6.0f);  // outlives the graph
      CaptureOptions o;
      if (thread_local_auto)
        o.mode = cugraphs::CaptureMode::ThreadLocal;
      else
        o.escapes = cugraphs::EscapeCheck::Off;
      Graph g;
      {
        CaptureScope scope(g, o);
        cugraphs::check(
            cudaMemcpyAsync(d.data(), source.data(), sizeof(float), cudaMemcpyHostToDevice, scope.stream()),
            "cudaMemcpyAsync");
      }
      REQUIRE(g.is_instantiated());
      g.replay();
      cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      CHECK(get(d) == source[0]);
    }
  }
  SECTION("capture_or_update keeps the first capture's EscapeCheck::Off") {
    std::vector<float> source(2, 8.0f);
    CaptureOptions o;
    o.escapes = cugraphs::EscapeCheck::Off;
    Graph g;
    for (const std::size_t at : {0u, 1u}) {
      source[at] = 8.0f + static_cast<float>(at);
      const auto r = g.capture_or_update(
          [&](cudaStream_t s) {
            cugraphs::check(cudaMemcpyAsync(d.data(), source.data() + at, sizeof(float), cudaMemcpyHostToDevice, s),
                            "cudaMemcpyAsync");
          },
          o);
      CHECK(r.applied());
      g.replay();
      cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      CHECK(get(d) == source[at]);
    }
  }
}

// Before: accepted; every replay called the callback with the address of a frame gone since the
// capture (the helper's parameter), which the next calls' frames overwrite: the callback read
// whatever lay there, silently.
TEST_CASE("Escapes: a host function handed an address in the frame of a function that returned during the capture "
          "is refused at the end, naming the node; data in the capturing function's own frame, on the heap, or "
          "in a frame alive at capture_end is captured; EscapeCheck::Off keeps the address",
          "[escapes][gpu]") {
  cugraphs::Stream stream;
  SECTION("a helper's parameter, through a CaptureScope") {
    Graph g;
    {
      CaptureScope scope(g);
      queue_frame_callback(scope.stream(), 7);
      // Ended here, in this frame, as the scope's end would (a lambda around the call would be a
      // frame of its own below this one, where the helper's frame was).
      bool refused = false;
      try {
        scope.end();
      } catch (const cugraphs::Error& e) {
        refused = true;
        CHECK(e.code() == cudaSuccess);
        CHECK(contains(e.what(), "host function node 0 (a cudaLaunchHostFunc) is handed 0x"));
        CHECK(contains(e.what(), "in the frame of a function that returned while the capture was open"));
        CHECK(contains(e.what(), "outlives the graph"));
        std::printf("escapes: capture_end after a callback given a helper's parameter says: %s\n", e.what());
      }
      CHECK(refused);
    }
    CHECK_FALSE(g.is_capturing());
    CHECK_FALSE(g.is_instantiated());
    int frame = 3;  // the same graph captures again with state that outlives it
    {
      CaptureScope scope(g);
      queue_state_callback(scope.stream(), &frame);
    }
    for (const int v : {4, 5}) {
      frame = v;
      g.replay(stream);
      stream.synchronize();
      CHECK(g_frame_seen == v);
    }
  }
  SECTION("a step's own local, through capture_or_update and capture_begin/capture_end") {
    Graph g;
    const auto step = [](cudaStream_t s) { queue_frame_callback(s, 9); };
    const auto e = expect_error([&] { (void)g.capture_or_update(step); });
    CHECK(contains(e.what(), "host function node 0"));
    CHECK_FALSE(g.is_instantiated());
    g.capture_begin();
    queue_frame_callback(cugraphs::current_stream(), 10);
    bool refused = false;
    try {
      g.capture_end();
    } catch (const cugraphs::Error& e2) {
      refused = true;
      CHECK(contains(e2.what(), "returned while the capture was open"));
    }
    CHECK(refused);
    CHECK_FALSE(g.is_capturing());
  }
  SECTION("the capturing function's frame, the heap, a frame alive at capture_end") {
    int frame = 0;  // this function's frame: alive while it replays
    auto heap = std::make_unique<int>(0);
    Graph g;
    {
      CaptureScope scope(g);
      cugraphs::check(cudaLaunchHostFunc(scope.stream(), record_frame, &frame), "cudaLaunchHostFunc");
      queue_state_callback(scope.stream(), heap.get());
    }
    REQUIRE(g.is_instantiated());
    frame = 11;
    *heap = 12;
    g.replay(stream);
    stream.synchronize();
    CHECK(g_frame_seen == 12);  // the second callback ran last
    Graph h;
    h.capture_begin();
    end_and_replay_here(h, stream);
    CHECK(h.is_instantiated());
  }
  SECTION("EscapeCheck::Off") {
    CaptureOptions o;
    o.escapes = cugraphs::EscapeCheck::Off;
    Graph g;
    {
      CaptureScope scope(g, o);
      queue_frame_callback(scope.stream(), 13);
    }
    CHECK(g.is_instantiated());  // not replayed: its callback would read a dead frame
  }
  cugraphs::check(cudaGetLastError(), "cudaGetLastError");
}

// Before: samples and staged inputs were copied as device-to-device copies whatever they were.
TEST_CASE("Escapes: leaves in pinned host and managed memory are copied from where they lie, as samples of a "
          "graphed callable, as its call inputs, and by Graph::stage_and_launch", "[escapes][graphed][gpu]") {
  const auto a_values = random_floats(kN, 6), b_values = random_floats(kN, 7);
  float* pinned = nullptr;
  float* managed = nullptr;
  cugraphs::check(cudaMallocHost(&pinned, kN * sizeof(float)), "cudaMallocHost");
  cugraphs::check(cudaMallocManaged(&managed, kN * sizeof(float)), "cudaMallocManaged");
  std::memcpy(pinned, a_values.data(), kN * sizeof(float));
  std::memcpy(managed, b_values.data(), kN * sizeof(float));
  const auto expect_sum = [&](const std::vector<float>& got, const std::vector<float>& a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < kN; ++i)
      if (got[i] != 2.0f * a[i] + b[i]) return false;
    return true;
  };
  {
    auto f = cugraphs::make_graphed_callable(
        [](In a, In b) {
          DeviceBuffer<float> out(a.size());
          twice_plus<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), a.data(), b.data(),
                                                                                        a.size());
          return out;
        },
        In(pinned, kN), In(managed, kN));
    // The samples' values were copied into the static inputs.
    CHECK(bitwise_equal(host(std::get<0>(f.static_inputs())), a_values));
    CHECK(bitwise_equal(host(std::get<1>(f.static_inputs())), b_values));
    const auto d = filled(kN, 8);
    const auto d_values = host(d.span());
    cugraphs::Stream s;
    cugraphs::StreamGuard on(s);
    CHECK(expect_sum(host(f(In(pinned, kN), In(managed, kN))), a_values, b_values));
    CHECK(expect_sum(host(f(d.span(), In(pinned, kN))), d_values, a_values));
    CHECK(expect_sum(host(f(In(managed, kN), d.span())), b_values, d_values));
  }
  {
    DeviceBuffer<float> sa(kN), sb(kN), out(kN);
    Graph g;
    {
      CaptureScope scope(g);
      twice_plus<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(out.data(), sa.data(), sb.data(), kN);
    }
    const auto statics = std::tuple{In(sa.span()), In(sb.span())};
    g.stage_and_launch(statics, std::tuple{In(pinned, kN), In(managed, kN)});
    CHECK(expect_sum(host(out.span()), a_values, b_values));
    g.stage_and_launch(statics, std::tuple{In(managed, kN), In(pinned, kN)});
    CHECK(expect_sum(host(out.span()), b_values, a_values));
  }
  cugraphs::check(cudaFreeHost(pinned), "cudaFreeHost");
  cugraphs::check(cudaFree(managed), "cudaFree");
}

TEST_CASE("KernelNodes: set_kernel_arg<I> changes one argument and keeps the rest; nodes may be declared with auto "
          "before the capture and taken on a forked stream", "[escapes][update][gpu]") {
  auto x = filled(kN, 9);
  DeviceBuffer<float> y(kN);
  auto node = cugraphs::kernel_node_for(affine_kernel);
  auto forked_node = cugraphs::kernel_node_for(copy_kernel);
  CHECK(node.empty());
  Graph g;
  cugraphs::Stream side;
  cudaEvent_t fork = nullptr, join = nullptr;
  cugraphs::check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  cugraphs::check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "event");
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 2.0f, 1.0f);
    node = cugraphs::captured_kernel_node(affine_kernel);
    cugraphs::check(cudaEventRecord(fork, scope.stream()), "fork");
    cugraphs::check(cudaStreamWaitEvent(side, fork, 0), "fork");
    copy_kernel<<<blocks_for(kN), kThreads, 0, side>>>(y.data(), x.data(), kN);
    forked_node = cugraphs::captured_kernel_node(copy_kernel, side);
    cugraphs::check(cudaEventRecord(join, side), "join");
    cugraphs::check(cudaStreamWaitEvent(scope.stream(), join, 0), "join");
  }
  cugraphs::check(cudaEventDestroy(fork), "event");
  cugraphs::check(cudaEventDestroy(join), "event");
  CHECK_FALSE(node.empty());
  CHECK(std::get<2>(node.arguments()) == 2.0f);
  CHECK(std::get<3>(node.arguments()) == 1.0f);
  const auto x0 = host(x.span());
  g.set_kernel_arg<3>(node, -4.0f);  // b only: a stays 2
  g.replay();
  auto x1 = host(x.span());
  for (std::size_t i = 0; i < kN; i += 31) REQUIRE(x1[i] == 2.0f * x0[i] - 4.0f);
  g.set_kernel_arg<2>(node, 0.5f);  // a now; b stays -4
  CHECK(std::get<3>(node.arguments()) == -4.0f);
  g.replay();
  const auto x2 = host(x.span());
  for (std::size_t i = 0; i < kN; i += 31) REQUIRE(x2[i] == 0.5f * x1[i] - 4.0f);
  DeviceBuffer<float> z(kN);
  g.set_kernel_arg<0>(forked_node, z.data());  // the forked copy now writes z
  g.replay();
  CHECK(bitwise_equal(host(z.span()), host(x.span())));
  CHECK(g.holds(node));
  Graph other;
  CHECK_FALSE(other.holds(node));
}

TEST_CASE("KernelNodes: AdamW inside a GraphedPair's backward takes its bias corrections per step through "
          "set_kernel_arg: one forward and one backward launch per step, bitwise the eager loop",
          "[escapes][training][gpu]") {
  constexpr int kSteps = 12;
  constexpr float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  auto w = filled(kN, 10), w_eager = filled(kN, 10);
  DeviceBuffer<float> dw(kN), m(kN), v(kN), dw_eager(kN), m_eager(kN), v_eager(kN);
  for (auto* b : {&m, &v, &m_eager, &v_eager}) cugraphs::check(cudaMemset(b->data(), 0, b->bytes()), "zero");
  const auto x0 = filled(kN, 11);
  auto opt_node = cugraphs::kernel_node_for(adamw);
  Out dw_span = dw.span();
  float* m_ptr = m.data();
  float* v_ptr = v.data();
  auto forward = [](In x, In wt) { return scaled(x, wt); };
  auto backward = [&](In x, In wt, Out, In dy) {
    DeviceBuffer<float> dx(x.size());
    const cudaStream_t s = cugraphs::current_stream();
    scale_backward<<<blocks_for(x.size()), kThreads, 0, s>>>(dx.data(), dw_span.data(), dy.data(), x.data(), wt.data(),
                                                              x.size());
    adamw<<<blocks_for(x.size()), kThreads, 0, s>>>(const_cast<float*>(wt.data()), m_ptr, v_ptr, dw_span.data(),
                                                     x.size(), lr, beta1, beta2, eps, wd, 1.0f - beta1, 1.0f - beta2);
    opt_node = cugraphs::captured_kernel_node(adamw);
    return dx;
  };
  cugraphs::GraphedOptions opts;
  opts.warmup_iters = 0;  // the backward steps the optimizer: no eager warm-up steps
  auto pair = cugraphs::make_graphed_pair(opts, forward, backward, cugraphs::requires_grad(In(x0)),
                                          cugraphs::param(In(w)));
  CHECK(node_count(pair.backward_graph()) >= 2);
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> y_eager(kN), dx_eager(kN);
  for (int step = 1; step <= kSteps; ++step) {
    const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    const auto x = filled(kN, 100 + static_cast<std::uint32_t>(step));
    const auto dy = filled(kN, 200 + static_cast<std::uint32_t>(step));
    pair.set_kernel_arg<10, 11>(opt_node, bc1, bc2);  // one cudaGraphExecKernelNodeSetParams
    (void)pair.forward(In(x));
    (void)pair.backward(In(dy));

    scale_forward<<<blocks_for(kN), kThreads, 0, stream>>>(y_eager.data(), x.data(), w_eager.data(), kN);
    scale_backward<<<blocks_for(kN), kThreads, 0, stream>>>(dx_eager.data(), dw_eager.data(), dy.data(), x.data(),
                                                            w_eager.data(), kN);
    adamw<<<blocks_for(kN), kThreads, 0, stream>>>(w_eager.data(), m_eager.data(), v_eager.data(), dw_eager.data(), kN,
                                                   lr, beta1, beta2, eps, wd, bc1, bc2);
    cugraphs::check_launch("eager step");
    REQUIRE(bitwise_equal(host(w.span()), host(w_eager.span())));
  }
  CHECK(pair.backward_calls() == kSteps);
  const auto e = expect_error([&] { pair.set_kernel_arg<10>(cugraphs::kernel_node_for(adamw), 0.5f); });
  CHECK(contains(e.what(), "not taken in this pair"));
}

TEST_CASE("Graph: capture_or_update captures on the first call and updates in place after; node_count; a graphed "
          "callable warmed up and captured on GraphedOptions::stream", "[escapes][update][gpu]") {
  auto x = filled(kN, 12);
  Graph g;
  CHECK(g.node_count() == 0);
  for (int step = 0; step < 4; ++step) {
    const float a = 1.0f + static_cast<float>(step), b = 0.25f * static_cast<float>(step);
    const auto r = g.capture_or_update(
        [&](cudaStream_t s) { affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, a, b); });
    CHECK(r.applied());
    CHECK(r.updated == (step > 0));
    const auto before = host(x.span());
    g.replay();
    const auto after = host(x.span());
    for (std::size_t i = 0; i < kN; i += 53) REQUIRE(after[i] == a * before[i] + b);
  }
  CHECK(g.node_count() == 1);

  cugraphs::Stream mine;
  cugraphs::GraphedOptions o;
  o.stream = mine;
  int calls = 0;
  auto f = cugraphs::make_graphed_callable(
      o,
      [&](In in) {
        ++calls;
        CHECK(cugraphs::current_stream() == mine.get());
        DeviceBuffer<float> out(in.size());
        twice_plus<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(),
                                                                                       in.data(), in.size());
        return out;
      },
      In(x.span()));
  CHECK(calls == 4);  // three warm-up calls and the capture
  const auto y = filled(kN, 13);
  const auto got = host(f(y.span())), want = host(y.span());
  for (std::size_t i = 0; i < kN; ++i) REQUIRE(got[i] == 3.0f * want[i]);
}

TEST_CASE("CurrentStreamListener: sees every change of the current stream (StreamGuard, CaptureScope, conditional "
          "bodies) in order, until it goes", "[escapes][conditional][gpu]") {
  std::vector<cudaStream_t> seen;
  auto record = [](void* context, cudaStream_t s) { static_cast<std::vector<cudaStream_t>*>(context)->push_back(s); };
  cugraphs::Stream mine;
  DeviceBuffer<bool> go(1);
  put(go, false);
  Graph g;
  cudaStream_t capture = nullptr, body = nullptr;
  {
    cugraphs::CurrentStreamListener listener(record, &seen);
    cugraphs::StreamGuard on(mine);
    {
      CaptureScope scope(g);
      capture = scope.stream();
      {
        ConditionalScope<cugraphs::While> loop(scope, go.data());
        body = loop.stream();
      }
    }
  }
  cugraphs::StreamGuard after(mine);  // the listener is gone: not recorded
  const std::vector<cudaStream_t> expected{mine.get(), capture, body, capture, mine.get(), nullptr};
  CHECK(seen == expected);
  CHECK(body != capture);
}

// Before: the guarded kernel ran once, eagerly, while the graph was captured (on a stream
// that did not capture), and no replay ran it.
TEST_CASE("Escapes: a StreamGuard on a stream of the program's inside a capture forks it into the capture: its "
          "work replays every time, in order with the work around it; outside a capture it changes nothing",
          "[escapes][stream][gpu]") {
  auto x = filled(kN, 1);
  put_all(x, 1.0f);
  cugraphs::Stream side;
  Graph g;
  {
    CaptureScope scope(g);
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 2.0f, 0.0f);
    {
      cugraphs::StreamGuard on(side);  // a subsystem switching to its own stream
      CHECK(cugraphs::is_capturing(side));
      affine_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), kN, 1.0f, 1.0f);
    }
    CHECK(cugraphs::current_stream() == scope.stream());
    affine_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 3.0f, 0.0f);
  }
  CHECK(host(x.span())[0] == 1.0f);  // the capture ran nothing
  float want = 1.0f;
  for (int r = 0; r < 3; ++r) {
    g.replay();
    want = (want * 2.0f + 1.0f) * 3.0f;
    const auto got = host(x.span());
    for (std::size_t i = 0; i < kN; i += 37) REQUIRE(got[i] == want);
  }
  CHECK(g.node_count() == 3);
  // Outside a capture the guard only sets the current stream.
  {
    cugraphs::StreamGuard on(side);
    CHECK_FALSE(cugraphs::is_capturing(side));
    affine_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), kN, 1.0f, 1.0f);
    side.synchronize();
  }
  CHECK(host(x.span())[0] == want + 1.0f);
  // A guard outside a capture leaves the thread's pending error alone.
  {
    cugraphs::Stream other;
    cugraphs::StreamGuard first(other);
    affine_kernel<<<1, 2048, 0, other>>>(x.data(), kN, 1.0f, 0.0f);  // too many threads: an error pends
    const cudaError_t pending = cudaPeekAtLastError();
    REQUIRE(pending != cudaSuccess);
    { cugraphs::StreamGuard second(side); }
    CHECK(cudaGetLastError() == pending);
  }
}

// Before: set_kernel_arg<1> merged the value into the first capture's arguments and so
// brought back its buffer (released since), silently.
TEST_CASE("KernelNodes: set_kernel_arg<I> with a node of a capture that update() replaced is an Error; the node "
          "taken in the capture applied works", "[escapes][update][gpu]") {
  auto a = filled(kN, 1), b = filled(kN, 2);
  put_all(a, 1.0f);
  put_all(b, 2.0f);
  Graph g;
  auto node = cugraphs::kernel_node_for(affine_kernel);
  auto first = cugraphs::kernel_node_for(affine_kernel);
  float* target = a.data();
  const auto step = [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(target, kN, 2.0f, 1.0f);
    node = cugraphs::captured_kernel_node(affine_kernel, s);
  };
  (void)g.capture_or_update(step);
  first = node;
  target = b.data();
  CHECK(g.capture_or_update(step).updated);
  const auto e = expect_error([&] { g.set_kernel_arg<3>(first, 0.0f); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::set_kernel_arg"));
  CHECK(contains(e.what(), "which update() has replaced since"));
  CHECK(contains(e.what(), "captured_kernel_node()"));
  g.set_kernel_arg<3>(node, 0.0f);  // the node of the capture applied: b = 2 * b
  g.replay();
  CHECK(host(b.span())[0] == 4.0f);
  CHECK(host(a.span())[0] == 1.0f);
  g.set_kernel_args(first, b.data(), kN, 1.0f, 1.0f);  // every argument: still allowed
  g.replay();
  CHECK(host(b.span())[0] == 5.0f);
}

// Before: made without a word; every call returned what f computed once, while captured.
TEST_CASE("Graphed callables: an f whose work goes to a stream of its own (no node reads an input) is an Error "
          "naming current_stream(); allow_unused_input lets an f ignore an input on purpose",
          "[escapes][graphed][gpu]") {
  const auto x = filled(kN, 3);
  cugraphs::Stream own;
  auto on_own_stream = [&own](In in) {
    DeviceBuffer<float> out(in.size());
    twice_plus<<<blocks_for(in.size()), kThreads, 0, own>>>(out.data(), in.data(), in.data(), in.size());
    cugraphs::check(cudaStreamSynchronize(own), "cudaStreamSynchronize");
    return out;
  };
  for (const auto mode : {cugraphs::InputMode::Copy, cugraphs::InputMode::InPlace}) {
    cugraphs::GraphedOptions o;
    o.inputs = mode;
    o.mode = cugraphs::CaptureMode::Relaxed;  // lets the synchronize through, as a port's
    const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(o, on_own_stream, In(x.span())); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "f's graph never reads input leaf 0 (12000 bytes)"));
    CHECK(contains(e.what(), "current_stream()"));
    CHECK(contains(e.what(), "allow_unused_input"));
  }
  // An f that reads its first input and ignores its second.
  auto first_only = [](In a, In) {
    DeviceBuffer<float> out(a.size());
    twice_plus<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), a.data(), a.data(),
                                                                                  a.size());
    return out;
  };
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(first_only, In(x.span()), In(x.span())); });
  CHECK(contains(e.what(), "never reads input leaf 1"));
  cugraphs::GraphedOptions o;
  o.allow_unused_input = true;
  auto g = cugraphs::make_graphed_callable(o, first_only, In(x.span()), In(x.span()));
  const auto y = filled(kN, 4);
  const auto got = host(g(In(y.span()), In(x.span())));
  const auto want = host(y.span());
  for (std::size_t i = 0; i < kN; i += 29) REQUIRE(got[i] == 3.0f * want[i]);
}

// Before: the callable was made, each call's step (x = 0.5 x + 1, an optimizer's update in
// miniature) landed on the static copy of `w`, and the caller's `w` never changed: a port
// that hands its optimizer the weights as an input trained nothing, silently. A pair whose
// backward updates weights handed in as a staged argument (not param()) likewise.
TEST_CASE("Escapes: an f that writes an input it is handed by copy (InputMode::Copy) is an Error at "
          "make_graphed_callable naming the leaf; a pair's staged argument likewise; reading a writable span is "
          "not refused",
          "[escapes][graphed][training][gpu]") {
  auto w = filled(kN, 5);
  const auto g = filled(kN, 6);
  const auto w_before = host(w.span());
  auto step = [](In grad, Out weights) {
    affine_kernel<<<blocks_for(weights.size()), kThreads, 0, cugraphs::current_stream()>>>(weights.data(),
                                                                                         weights.size(), 0.5f, 1.0f);
    twice_plus<<<blocks_for(weights.size()), kThreads, 0, cugraphs::current_stream()>>>(weights.data(), weights.data(),
                                                                                      grad.data(), weights.size());
  };
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(step, In(g.span()), Out(w.span())); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "f wrote input leaf 1 (12000 bytes at"));
  CHECK(contains(e.what(), "InputMode::InPlace"));
  CHECK(contains(e.what(), "allow_written_input"));
  CHECK(host(w.span()) != w_before);  // the warm-up ran f on the sample, as documented

  // Reading a writable span is not a write: no Error, and the call computes from it.
  auto reads = [](Out a, In b) {
    DeviceBuffer<float> out(a.size());
    twice_plus<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), a.data(), b.data(),
                                                                                  a.size());
    return out;
  };
  auto r = cugraphs::make_graphed_callable(reads, Out(w.span()), In(g.span()));
  const auto y = filled(kN, 7);
  const auto got = host(r(Out(y.span()), In(g.span())));
  const auto ys = host(y.span()), gs = host(g.span());
  for (std::size_t i = 0; i < kN; i += 31) REQUIRE(got[i] == 2.0f * ys[i] + gs[i]);

  // A pair: y = w * x, and the backward updates w, handed in as a staged argument.
  const auto x0 = filled(kN, 8);
  auto w2 = filled(kN, 9);
  auto forward = [](In x, Out wt) { return scaled(x, wt); };
  auto backward = [](In x, Out wt, Out, In dy) { return scaled_backward_stepping(x, wt.data(), dy); };
  const auto pe = expect_error(
      [&] { (void)cugraphs::make_graphed_pair(forward, backward, cugraphs::requires_grad(In(x0)), Out(w2.span())); });
  CHECK(contains(pe.what(), "the forward or the backward wrote input leaf 1"));
  CHECK(contains(pe.what(), "param(w)"));

  // The same step with the weights as param(): written in place, as meant, and not watched;
  // a writable staged argument the halves only read is not refused either.
  auto forward_p = [](Out x, In wt) { return scaled(x, wt); };
  auto backward_p = [](In x, In wt, Out, In dy) {
    return scaled_backward_stepping(x, const_cast<float*>(wt.data()), dy);  // param(): written in place
  };
  auto x1 = filled(kN, 10);
  auto w3 = filled(kN, 11);
  auto pair = cugraphs::make_graphed_pair(forward_p, backward_p, cugraphs::requires_grad(Out(x1.span())),
                                          cugraphs::param(In(w3.span())));
  const auto w3_before = host(w3.span());
  (void)pair.forward(Out(x1.span()));
  (void)pair.backward(In(g.span()));
  const auto w3_after = host(w3.span());
  for (std::size_t i = 0; i < kN; i += 37) REQUIRE(w3_after[i] == 0.5f * w3_before[i] + 1.0f);
}

// Before: capture_begin left the current stream as it was, so a kernel queued on
// current_stream() (a stream of the program's that a StreamGuard had made current, as an
// engine's subsystem would) ran once, eagerly, and the graph was empty: every replay did
// nothing, silently. An empty capture was accepted too.
TEST_CASE("Escapes: capture_begin makes the capture stream current until capture_end or capture_abort; a "
          "capture that recorded no work is an Error naming allow_empty, and the graph captures again",
          "[escapes][stream][gpu]") {
  auto x = filled(kN, 1);
  put_all(x, 1.0f);
  cugraphs::Stream mine, other;
  cugraphs::StreamGuard on(mine);
  Graph g;
  g.capture_begin();
  CHECK(cugraphs::current_stream() == g.stream());
  affine_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), kN, 2.0f, 1.0f);
  g.capture_end();
  CHECK(cugraphs::current_stream() == mine.get());
  mine.synchronize();
  CHECK(host(x.span())[0] == 1.0f);  // captured, not run
  float want = 1.0f;
  for (int r = 0; r < 3; ++r) {
    g.replay();
    want = want * 2.0f + 1.0f;
    REQUIRE(host(x.span())[0] == want);
  }
  {
    Graph a;
    a.capture_begin();
    CHECK(cugraphs::current_stream() == a.stream());
    a.capture_abort();
    CHECK(cugraphs::current_stream() == mine.get());
  }
  // The capture's work went to another stream of the program's: it ran once, now.
  Graph e;
  e.capture_begin();
  affine_kernel<<<blocks_for(kN), kThreads, 0, other>>>(x.data(), kN, 1.0f, 1.0f);
  const auto err = expect_error([&] { e.capture_end(); });
  CHECK(err.code() == cudaSuccess);
  CHECK(contains(err.what(), "Graph::capture_end"));
  CHECK(contains(err.what(), "recorded no work"));
  CHECK(contains(err.what(), "allow_empty"));
  CHECK_FALSE(e.is_capturing());
  CHECK_FALSE(e.is_instantiated());
  CHECK(cugraphs::current_stream() == mine.get());
  other.synchronize();
  want += 1.0f;
  CHECK(host(x.span())[0] == want);
  e.capture_begin();
  affine_kernel<<<blocks_for(kN), kThreads, 0, e.stream()>>>(x.data(), kN, 1.0f, 1.0f);
  e.capture_end();
  e.replay();
  want += 1.0f;
  CHECK(host(x.span())[0] == want);
  // The function form and the scope refuse it too; allow_empty keeps an empty graph.
  Graph f;
  const auto scoped = expect_error([&] { cugraphs::capture(f, [](cudaStream_t) {}); });
  CHECK(contains(scoped.what(), "recorded no work"));
  CHECK_FALSE(f.is_capturing());
  CaptureOptions allow;
  allow.allow_empty = true;
  cugraphs::capture(f, [](cudaStream_t) {}, allow);
  CHECK(f.is_instantiated());
  CHECK(node_count(f) == 0);
  f.replay();
  mine.synchronize();
  CHECK(host(x.span())[0] == want);
}

// Before: capture_or_update's later captures, and update(fn)'s, were made on capture_stream()
// rather than the stream the first capture used, so the step's work queued there (where an
// engine's subsystems launch) ran once, eagerly, and the graph fell back to one without it,
// silently.
TEST_CASE("Graph: capture_or_update and update(fn) capture again on the stream the first capture used, so a step's "
          "work queued there is captured every time", "[escapes][update][gpu]") {
  auto x = filled(kN, 1);
  put_all(x, 1.0f);
  cugraphs::Stream engine;
  CaptureOptions o;
  o.stream = engine;
  float factor = 2.0f;
  const auto step = [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f, 1.0f);
    affine_kernel<<<blocks_for(kN), kThreads, 0, engine>>>(x.data(), kN, factor, 0.0f);  // a subsystem's stream
  };
  Graph g;
  (void)g.capture_or_update(step, o);
  CHECK(g.node_count() == 2);
  float want = 1.0f;
  const auto replay_and_check = [&] {
    g.replay(engine);
    engine.synchronize();
    want = (want + 1.0f) * factor;
    REQUIRE(host(x.span())[0] == want);
  };
  replay_and_check();
  factor = 3.0f;
  (void)g.capture_or_update(step, o);
  CHECK(g.node_count() == 2);
  engine.synchronize();
  CHECK(host(x.span())[0] == want);  // the capture ran nothing
  replay_and_check();
  factor = 0.5f;
  (void)g.update(step);  // no options: the first capture's stream again
  CHECK(g.node_count() == 2);
  replay_and_check();
  factor = 2.0f;
  (void)g.capture_or_update(step);  // no stream given: the last one's
  CHECK(g.node_count() == 2);
  replay_and_check();
}

// Before: work given the stream that was current before the capture (a library handle bound
// to it with cublasSetStream once at start-up, a launch naming a saved stream variable) ran
// once, eagerly, while the graph was captured; the capture held the rest of the step, so it
// was not empty, and every replay lacked that work, silently.
TEST_CASE("Escapes: work on the stream current when the capture began is refused unless the capture stream waits "
          "for it; a StreamGuard of that stream inside the capture makes a branch",
          "[escapes][stream][gpu]") {
  auto x = filled(kN, 1);
  put_all(x, 1.0f);
  cugraphs::Stream mine;
  cugraphs::StreamGuard on(mine);
  const cudaStream_t bound = cugraphs::current_stream();  // as a handle bound at start-up holds it
  Graph g;
  const auto e = expect_error([&] {
    cugraphs::capture(g, [&](cudaStream_t s) {
      affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 2.0f, 1.0f);
      affine_kernel<<<blocks_for(kN), kThreads, 0, bound>>>(x.data(), kN, 1.0f, 1.0f);  // the "library's" work
    });
  });
  CHECK(e.code() == cudaErrorStreamCaptureUnjoined);
  CHECK(contains(e.what(), "current_stream() when the capture began"));
  CHECK(contains(e.what(), "cublasSetStream"));
  CHECK(contains(e.what(), "1 node(s) at its end"));
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(cugraphs::is_capturing(mine));
  CHECK(cugraphs::current_stream() == mine.get());
  mine.synchronize();
  CHECK(host(x.span())[0] == 1.0f);  // captured, refused: nothing ran
  // The same through capture_begin / capture_end, and in a graphed callable's capture.
  g.capture_begin();
  affine_kernel<<<blocks_for(kN), kThreads, 0, g.stream()>>>(x.data(), kN, 2.0f, 1.0f);
  affine_kernel<<<blocks_for(kN), kThreads, 0, bound>>>(x.data(), kN, 1.0f, 1.0f);
  const auto e2 = expect_error([&] { g.capture_end(); });
  CHECK(contains(e2.what(), "current_stream() when the capture began"));
  const auto e3 = expect_error([&] {
    (void)cugraphs::make_graphed_callable(
        [&](In in) {
          copy_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), in.data(), kN);
          affine_kernel<<<blocks_for(kN), kThreads, 0, bound>>>(x.data(), kN, 1.0f, 1.0f);
        },
        In(x.span()));
  });
  CHECK(contains(e3.what(), "current_stream() when the capture began"));
  put_all(x, 1.0f);

  // Made current again inside the capture (an engine's subsystem), the stream is a branch of
  // the graph: ordered after the capture stream's work so far and joined back at the guard's end.
  cugraphs::capture(g, [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 2.0f, 1.0f);
    {
      cugraphs::StreamGuard subsystem(mine);
      affine_kernel<<<blocks_for(kN), kThreads, 0, cugraphs::current_stream()>>>(x.data(), kN, 1.0f, 1.0f);
    }
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 3.0f, 0.0f);
  });
  mine.synchronize();
  CHECK(host(x.span())[0] == 1.0f);
  float want = 1.0f;
  for (int r = 0; r < 2; ++r) {
    g.replay();
    want = (want * 2.0f + 1.0f + 1.0f) * 3.0f;
    REQUIRE(host(x.span())[0] == want);
  }

  // EscapeCheck::Off leaves the stream alone: the work runs once, eagerly, as before.
  Graph off;
  CaptureOptions o;
  o.escapes = cugraphs::EscapeCheck::Off;
  cugraphs::capture(off, [&](cudaStream_t s) {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f, 0.0f);
    affine_kernel<<<blocks_for(kN), kThreads, 0, bound>>>(x.data(), kN, 1.0f, 1.0f);
  }, o);
  mine.synchronize();
  CHECK(host(x.span())[0] == want + 1.0f);
}

// Before: replays went on with the freed buffer's address, reading whatever the allocator had
// put there since (here, as often, the reloaded weights by chance, or another buffer), and
// nothing was reported.
TEST_CASE("Escapes: a DeviceBuffer a graph names that is freed after the capture (weights reloaded into a new "
          "buffer) is an Error at every replay until mended by set_kernel_arg or a new capture; buffers the graph "
          "does not name come and go freely; a graphed callable and a conditional body are watched too",
          "[escapes][update][graphed][conditional][gpu]") {
  auto x = filled(kN, 1);
  auto w = filled(kN, 2);
  DeviceBuffer<float> y(kN);
  Graph g;
  auto node = cugraphs::kernel_node_for(scale_forward);
  const auto step = [&](cudaStream_t s) {
    scale_forward<<<blocks_for(kN), kThreads, 0, s>>>(y.data(), x.data(), w.data(), kN);
    node = cugraphs::captured_kernel_node(scale_forward, s);
  };
  // y = weights * x, as the last replay left it.
  const auto expect_product = [&](const DeviceBuffer<float>& weights, const char* what) {
    INFO(what);
    const auto xs = host(x.span()), ws = host(weights.span()), ys = host(y.span());
    for (std::size_t i = 0; i < kN; i += 29) REQUIRE(ys[i] == ws[i] * xs[i]);
  };
  CHECK(g.capture_or_update(step).reinstantiated);  // the first call captures
  g.replay();
  expect_product(w, "captured");

  // Buffers the graph does not name: a scratch buffer, and another graph's weights.
  { DeviceBuffer<float> scratch(kN); }
  {
    auto other_w = filled(kN, 3);
    Graph other;
    {
      CaptureScope scope(other);
      scale_forward<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), x.data(), other_w.data(), kN);
    }
    other.replay();
  }  // other_w, named by a graph, is freed: g asks, and finds its own alive
  g.replay();
  expect_product(w, "others' buffers freed");

  // A checkpoint reloaded into a new buffer: refused, nothing launched, every time.
  w = filled(kN, 4);
  put_all(y, 0.0f);
  const auto e = expect_error([&] { g.replay(); });
  CHECK(contains(e.what(), "Graph::replay: the graph names a DeviceBuffer that has been freed since its capture "
                           "(12000 bytes at"));
  CHECK(contains(e.what(), "named by node 0 (kernel "));
  CHECK(contains(e.what(), "scale_forward"));
  CHECK(contains(e.what(), "set_kernel_args"));
  CHECK_THROWS_AS(g.replay(), cugraphs::Error);
  cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "sync");
  CHECK(host(y.span()) == std::vector<float>(kN, 0.0f));

  // Mended by pointing the node at the new buffer.
  g.set_kernel_arg<2>(node, static_cast<const float*>(w.data()));
  g.replay();
  expect_product(w, "set_kernel_arg");
  g.set_kernel_arg<3>(node, kN);  // a scalar: the same buffers named
  g.replay();

  // Reloaded again, and mended by capturing again (updated in place).
  w = filled(kN, 5);
  CHECK_THROWS_AS(g.replay(), cugraphs::Error);
  CHECK(g.capture_or_update(step).updated);
  g.replay();
  expect_product(w, "capture_or_update");

  // A graphed callable whose f reads weights it refers to.
  auto fw = filled(kN, 6);
  auto f = cugraphs::make_graphed_callable(
      [&fw](In in) {
        DeviceBuffer<float> out(in.size());
        scale_forward<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(),
                                                                                       fw.data(), in.size());
        return out;
      },
      In(x.span()));
  (void)f(In(x.span()));
  fw = filled(kN, 7);
  const auto fe = expect_error([&] { (void)f(In(x.span())); });
  CHECK(contains(fe.what(), "freed since its capture"));

  // A buffer only a conditional body names.
  DeviceBuffer<bool> flag(1);
  put(flag, true);
  auto bw = filled(kN, 8);
  Graph c;
  {
    CaptureScope scope(c);
    ConditionalScope<cugraphs::If> when(scope, flag.data());
    scale_forward<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), x.data(), bw.data(), kN);
  }
  c.replay();
  bw = filled(kN, 9);
  const auto ce = expect_error([&] { c.replay(); });
  CHECK(contains(ce.what(), "named by a node inside a child graph or a conditional body"));

  // CaptureOptions::watch_buffers = false: nothing watched. (The kernels touch no element, so
  // that the replays of the freed address read nothing.)
  auto kept = filled(kN, 10);
  Graph watched, unwatched;
  CaptureOptions off;
  off.watch_buffers = false;
  for (Graph* graph : {&watched, &unwatched}) {
    CaptureScope scope(*graph, graph == &unwatched ? off : CaptureOptions{});
    scale_forward<<<1, kThreads, 0, scope.stream()>>>(y.data(), x.data(), kept.data(), 0);
  }
  kept = filled(kN, 11);
  CHECK_THROWS_AS(watched.replay(), cugraphs::Error);
  unwatched.replay();
  CHECK(unwatched.capture_or_update([&](cudaStream_t s) {
    scale_forward<<<1, kThreads, 0, s>>>(y.data(), x.data(), kept.data(), 0);
  }).updated);
  kept = filled(kN, 12);
  unwatched.replay();  // the recapture asked the same: still unwatched
  cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "sync");

  // A copy's source; and a kernel after a conditional node, pointed at a new buffer before
  // its old one goes: the node's buffers are found again, by its index, and nothing is refused.
  auto src = filled(kN, 13), w1 = filled(kN, 14), w2 = filled(kN, 15);
  Graph mixed;
  auto late = cugraphs::kernel_node_for(scale_forward);
  {
    CaptureScope scope(mixed);
    cugraphs::check(cudaMemcpyAsync(y.data(), src.data(), y.bytes(), cudaMemcpyDeviceToDevice, scope.stream()),
                    "cudaMemcpyAsync");
    {
      ConditionalScope<cugraphs::If> when(scope, flag.data());
      scale_forward<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), x.data(), w1.data(), kN);
    }
    scale_forward<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(y.data(), x.data(), w2.data(), kN);
    late = cugraphs::captured_kernel_node(scale_forward, scope.stream());
  }
  const auto w3 = filled(kN, 16);
  mixed.set_kernel_arg<2>(late, static_cast<const float*>(w3.data()));
  w2 = filled(kN, 17);  // the old buffer goes, after the node left it
  mixed.replay();
  expect_product(w3, "a kernel after a conditional, re-pointed");
  src = filled(kN, 18);
  const auto me = expect_error([&] { mixed.replay(); });
  CHECK(contains(me.what(), "named by node 0 (memcpy"));
}

// A graph captured outside cugraphs (raw CUDA) whose memory-allocation node hands out `n`
// floats, which `write(made, stream)` writes: to CUDA and to cugraphs, nothing backs them until
// launch() runs it. Freed, once launched, by release() (each call checked) or when it goes.
class RawAllocatingGraph {
public:
  template <class Write>
  RawAllocatingGraph(std::size_t n, Write write) {
    cugraphs::check(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal), "begin");
    const cudaError_t made = cudaMallocAsync(reinterpret_cast<void**>(&made_), n * sizeof(float), stream_.get());
    if (made == cudaSuccess) write(made_, stream_.get());
    const cudaError_t ended = cudaStreamEndCapture(stream_.get(), &graph_);  // the capture ends whatever failed
    cugraphs::check(made, "cudaMallocAsync");
    cugraphs::check(ended, "end");
    if (const cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0); e != cudaSuccess) {
      (void)cudaGraphDestroy(graph_);
      cugraphs::check(e, "instantiate");
    }
  }
  RawAllocatingGraph(const RawAllocatingGraph&) = delete;
  RawAllocatingGraph& operator=(const RawAllocatingGraph&) = delete;
  ~RawAllocatingGraph() {
    if (graph_ == nullptr) return;  // released
    if (launched_) (void)cudaFreeAsync(made_, cugraphs::current_stream());
    (void)cudaDeviceSynchronize();
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
  }
  // Frees the allocation (once launched) and destroys the graph, checking each call.
  void release() {
    if (std::exchange(launched_, false))
      cugraphs::check(cudaFreeAsync(made_, cugraphs::current_stream()), "cudaFreeAsync of a graph allocation");
    cugraphs::check(cudaDeviceSynchronize(), "sync");
    cugraphs::check(cudaGraphExecDestroy(std::exchange(exec_, nullptr)), "cudaGraphExecDestroy");
    cugraphs::check(cudaGraphDestroy(std::exchange(graph_, nullptr)), "cudaGraphDestroy");
  }
  [[nodiscard]] float* made() const noexcept { return made_; }
  void launch() {
    cugraphs::check(cudaGraphLaunch(exec_, cugraphs::current_stream()), "cudaGraphLaunch");
    launched_ = true;
  }

private:
  cugraphs::Stream stream_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  float* made_ = nullptr;
  bool launched_ = false;
};

// Before: a Relaxed capture let a scratch made and freed inside the step through; CUDA crashed
// the process instantiating the copy of it (a segfault in cuGraphInstantiateWithParams,
// measured on driver 580), and a kernel writing it wrote freed memory at every replay. And a
// cudaMemcpyDefault copy of another graph's allocation, not yet backed, was refused as a copy
// of pageable host memory.
TEST_CASE("Escapes: a copy of device memory freed inside the capture (a scratch made and destroyed in the step) is "
          "an Error at the end in every mode, not a crash at instantiation; another graph's allocation that has "
          "not run yet is copied from freely",
          "[escapes][pool][gpu]") {
  constexpr std::size_t n = 64;
  DeviceBuffer<float> d(n);
  put_all(d, 1.5f);
  // What fill_kernel writes, computed by it, eagerly.
  const auto fill = [&](float v) {
    DeviceBuffer<float> r(n);
    fill_kernel<<<1, kThreads, 0, cugraphs::current_stream()>>>(r.data(), n, v);
    return host(r);
  };
  SECTION("Relaxed: cudaMalloc, a kernel, a copy out of it (by kind or cudaMemcpyDefault), into it, or a memset "
          "of it, cudaFree") {
    enum class Use { copy_from, copy_default, copy_into, memset };
    for (const Use use : {Use::copy_from, Use::copy_default, Use::copy_into, Use::memset}) {
      INFO("use " << static_cast<int>(use));
      CaptureOptions o;
      o.mode = cugraphs::CaptureMode::Relaxed;
      Graph g;
      {
        CaptureScope scope(g, o);
        float* scratch = nullptr;
        cugraphs::check(cudaMalloc(&scratch, n * sizeof(float)), "cudaMalloc in a Relaxed capture");
        fill_kernel<<<1, kThreads, 0, scope.stream()>>>(scratch, n, 9.0f);
        const cudaStream_t s = scope.stream();
        cugraphs::check(use == Use::copy_from ? cudaMemcpyAsync(d.data(), scratch, d.bytes(), cudaMemcpyDeviceToDevice, s)
                        : use == Use::copy_default ? cudaMemcpyAsync(d.data(), scratch, d.bytes(), cudaMemcpyDefault, s)
                        : use == Use::copy_into ? cudaMemcpyAsync(scratch, d.data(), d.bytes(), cudaMemcpyDeviceToDevice, s)
                                                : cudaMemsetAsync(scratch, 0, d.bytes(), s),
                        "cudaMemcpyAsync or cudaMemsetAsync");
        cugraphs::check(cudaFree(scratch), "cudaFree in a Relaxed capture");
        const auto e = expect_error([&] { scope.end(); });
        CHECK(e.code() == cudaErrorInvalidValue);
        if (use == Use::memset) {
          // CUDA refuses the memset at instantiation; the message says why.
          CHECK(contains(e.what(), "Graph::instantiate"));
          CHECK(contains(e.what(), "where no allocation is: memory freed since the memset was captured"));
        } else {
          CHECK(contains(e.what(), "memcpy node 1"));
          CHECK(contains(e.what(), use == Use::copy_into ? "256 bytes to device address" : "256 bytes from device address"));
          CHECK(contains(e.what(), "which no allocation backs"));
          CHECK(contains(e.what(), "thrust::device_vector"));
        }
        CHECK(contains(e.what(), "cugraphs::DeviceBuffer"));
        if (use == Use::copy_from || use == Use::memset) std::printf("escapes: capture_end after a %s of a freed scratch says: %s\n",
                                               use == Use::memset ? "memset" : "copy", e.what());
      }
      CHECK_FALSE(g.is_capturing());
      CHECK_FALSE(g.is_instantiated());
      CHECK(host(d) == std::vector<float>(n, 1.5f));  // nothing ran
      if (use == Use::memset) g.reset();  // a capture whose instantiation failed stays with its graph
      // The remedy the messages give: the scratch as a DeviceBuffer made in the step.
      {
        CaptureScope scope(g, o);
        DeviceBuffer<float> scratch(n);
        fill_kernel<<<1, kThreads, 0, scope.stream()>>>(scratch.data(), n, 9.0f);
        cugraphs::check(cudaMemcpyAsync(d.data(), scratch.data(), d.bytes(), cudaMemcpyDeviceToDevice, scope.stream()),
                        "cudaMemcpyAsync");
      }
      g.replay();
      CHECK(host(d) == fill(9.0f));
      put_all(d, 1.5f);
    }
  }
  SECTION("memory freed before a capture in ThreadLocal mode (the escape check off), copied from") {
    float* gone = nullptr;
    cugraphs::check(cudaMalloc(&gone, n * sizeof(float)), "cudaMalloc");
    cugraphs::check(cudaFree(gone), "cudaFree");
    CaptureOptions o;
    o.mode = cugraphs::CaptureMode::ThreadLocal;
    Graph g;
    const auto e = expect_error([&] {
      cugraphs::capture(g, [&](cudaStream_t s) {
        cugraphs::check(cudaMemcpyAsync(d.data(), gone, d.bytes(), cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
      }, o);
    });
    CHECK(contains(e.what(), "memcpy node 0: 256 bytes from device address"));
    CHECK(contains(e.what(), "which no allocation backs"));
  }
  SECTION("cudaMemcpyDefault from a stack variable is still a copy of pageable host memory") {
    Graph g;
    CaptureScope scope(g);
    const float lr = 0.5f;
    cugraphs::check(cudaMemcpyAsync(d.data(), &lr, sizeof lr, cudaMemcpyDefault, scope.stream()), "cudaMemcpyAsync");
    const auto e = expect_error([&] { scope.end(); });
    CHECK(contains(e.what(), "4 bytes from host address"));
    CHECK(contains(e.what(), "reads plain pageable host memory"));
  }
  SECTION("another graph's allocation, not run yet, copied by kind and by cudaMemcpyDefault") {
    Graph producer;
    float* made = nullptr;
    {
      CaptureScope scope(producer);
      cugraphs::check(cudaMallocAsync(reinterpret_cast<void**>(&made), n * sizeof(float), scope.stream()),
                      "cudaMallocAsync in a capture");
      fill_kernel<<<1, kThreads, 0, scope.stream()>>>(made, n, 4.0f);
    }  // made outlives the producer's launch: freed below
    // Both consumers are captured before the producer first runs, while nothing backs `made`.
    Graph by_kind, by_default;
    for (Graph* g : {&by_kind, &by_default}) {
      CaptureScope scope(*g);
      cugraphs::check(cudaMemcpyAsync(d.data(), made, d.bytes(),
                                      g == &by_kind ? cudaMemcpyDeviceToDevice : cudaMemcpyDefault, scope.stream()),
                      "cudaMemcpyAsync");
    }
    REQUIRE(by_kind.is_instantiated());
    REQUIRE(by_default.is_instantiated());
    producer.replay();  // backs `made`, once
    for (Graph* g : {&by_kind, &by_default}) {
      INFO("cudaMemcpyDefault: " << (g == &by_default));
      g->replay();
      CHECK(host(d) == fill(4.0f));
      put_all(d, 1.5f);
    }
    cugraphs::check(cudaFreeAsync(made, cugraphs::current_stream()), "cudaFreeAsync of a graph allocation");
    cugraphs::check(cudaDeviceSynchronize(), "sync");
  }
  SECTION("an allocation of a graph captured outside cugraphs reads as freed: refused, and EscapeCheck::Off lets "
          "it through") {
    RawAllocatingGraph raw(n, [&](float* made, cudaStream_t s) { fill_kernel<<<1, kThreads, 0, s>>>(made, n, 6.0f); });
    float* const made = raw.made();
    const auto copy = [&](cudaStream_t s) {
      cugraphs::check(cudaMemcpyAsync(d.data(), made, d.bytes(), cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    };
    Graph refused;
    const auto e = expect_error([&] { cugraphs::capture(refused, copy); });
    CHECK(contains(e.what(), "which no allocation backs"));
    CHECK(contains(e.what(), "EscapeCheck::Off"));
    Graph consumer;
    CaptureOptions off;
    off.escapes = cugraphs::EscapeCheck::Off;
    cugraphs::capture(consumer, copy, off);
    raw.launch();
    consumer.replay();
    CHECK(host(d) == fill(6.0f));
    raw.release();
  }
}

// Before: a kernel of a Relaxed capture handed a scratch made and freed inside the step
// (cudaMalloc and cudaFree; a thrust::device_vector) was captured, instantiated and launched
// with no error, and wrote freed memory at every replay (measured on driver 580).
__device__ float twice_of(float x) { return 2.0f * x; }
__device__ float (*twice_of_address)(float) = twice_of;
__device__ float device_table[64];

TEST_CASE("Escapes: a kernel handed device memory freed inside a Relaxed capture (a cudaMalloc scratch made and "
          "freed in the step) is an Error at the end, not a silent write at every replay; end pointers, pointers "
          "indexed from 1, pairs of ints, 64-bit integers, handles, device symbols and graph allocations pass",
          "[escapes][pool][gpu]") {
  constexpr std::size_t n = 64;
  // The program's own data, from cudaMalloc as a ported program has it, and an output drawn
  // from a memory pool (DeviceBuffer).
  float* in = nullptr;
  cugraphs::check(cudaMalloc(&in, n * sizeof(float)), "cudaMalloc");
  const std::unique_ptr<float, decltype(&cudaFree)> own(in, &cudaFree);
  DeviceBuffer<float> out(n);
  ramp_kernel<<<1, kThreads, 0, cugraphs::current_stream()>>>(in, n, 1.0f);
  put_all(out, -1.0f);
  const std::vector<float> ramp = host(in, n);
  CaptureOptions o;
  o.mode = cugraphs::CaptureMode::Relaxed;
  SECTION("a cudaMalloc scratch freed before the capture ends, handed to two kernels") {
    for (const bool off : {false, true}) {
      INFO("EscapeCheck::Off: " << off);
      if (off) o.escapes = cugraphs::EscapeCheck::Off;
      Graph g;
      {
        CaptureScope scope(g, o);
        float* scratch = nullptr;
        cugraphs::check(cudaMalloc(&scratch, n * sizeof(float)), "cudaMalloc in a Relaxed capture");
        copy_kernel<<<1, kThreads, 0, scope.stream()>>>(scratch, in, n);
        copy_kernel<<<1, kThreads, 0, scope.stream()>>>(out.data(), scratch, n);
        cugraphs::check(cudaFree(scratch), "cudaFree in a Relaxed capture");
        if (!off) {
          const auto e = expect_error([&] { scope.end(); });
          CHECK(e.code() == cudaErrorInvalidValue);
          // Node 0, or node 1 where the scratch lies right after `in` (it reads as `in`'s end).
          CHECK(missing(e.what(), {"Graph::capture_end", "copy_kernel(", "holds device address",
                                   "which no allocation backs", "thrust::device_vector", "cugraphs::DeviceBuffer"}) ==
                std::vector<std::string>{});
          std::printf("escapes: capture_end after a kernel wrote a freed scratch says: %s\n", e.what());
        }
      }
      // Off keeps the old behaviour: the graph is made (and not replayed here: it would write
      // freed memory).
      CHECK(g.is_instantiated() == off);
      CHECK_FALSE(g.is_capturing());
    }
    CHECK(host(out) == std::vector<float>(n, -1.0f));  // nothing ran
    // The remedy: the scratch as a DeviceBuffer made in the step, or graph memory.
    o.escapes = cugraphs::EscapeCheck::Auto;
    for (const bool graph_memory : {false, true}) {
      INFO("cudaMallocAsync: " << graph_memory);
      Graph g;
      cugraphs::capture(g, [&](cudaStream_t s) {
        if (graph_memory) {
          float* scratch = nullptr;
          cugraphs::check(cudaMallocAsync(reinterpret_cast<void**>(&scratch), n * sizeof(float), s), "cudaMallocAsync");
          copy_kernel<<<1, kThreads, 0, s>>>(scratch, in, n);
          copy_kernel<<<1, kThreads, 0, s>>>(out.data(), scratch, n);
          cugraphs::check(cudaFreeAsync(scratch, s), "cudaFreeAsync");
        } else {
          DeviceBuffer<float> scratch(n);
          copy_kernel<<<1, kThreads, 0, s>>>(scratch.data(), in, n);
          copy_kernel<<<1, kThreads, 0, s>>>(out.data(), scratch.data(), n);
        }
      }, o);
      g.replay();
      CHECK(host(out) == ramp);
      put_all(out, -1.0f);
    }
  }
  SECTION("a span, an end pointer, a pair of ints, 64-bit integers, a conditional handle, a device function's "
          "address, a device symbol, in a Relaxed capture beside a cudaMalloc and cudaFree") {
    cudaPointerAttributes end_kind{};
    cugraphs::check(cudaPointerGetAttributes(&end_kind, in + n), "cudaPointerGetAttributes");
    std::printf("escapes: one past the end of a %zu-byte cudaMalloc reads as memory type %d\n", n * sizeof(float),
                static_cast<int>(end_kind.type));
    float (*function)(float) = nullptr;
    cugraphs::check(cudaMemcpyFromSymbol(&function, twice_of_address, sizeof function), "cudaMemcpyFromSymbol");
    void* symbol = nullptr;
    cugraphs::check(cudaGetSymbolAddress(&symbol, device_table), "cudaGetSymbolAddress");
    // Values that are not memory to judge: {1024, 5} and 0x400000100 read as addresses in the
    // reservation memory pools draw from (tools/diagnostics/freed_mapping.cu), where `out` lies.
    std::vector<long long> tags = {0x400000100LL, static_cast<long long>(reinterpret_cast<std::uintptr_t>(function)),
                                   static_cast<long long>(reinterpret_cast<std::uintptr_t>(symbol))};
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    cudaGraph_t holder = nullptr;
    cugraphs::check(cudaGraphCreate(&holder, 0), "cudaGraphCreate");
    const std::unique_ptr<CUgraph_st, decltype(&cudaGraphDestroy)> hold(holder, &cudaGraphDestroy);
    cudaGraphConditionalHandle handle{};
    cugraphs::check(cudaGraphConditionalHandleCreate(&handle, holder, 0, 0), "cudaGraphConditionalHandleCreate");
    tags.push_back(static_cast<long long>(handle));
#endif
    for (const long long tag : tags) {
      std::printf("escapes: a kernel argument of 0x%llx passes\n", static_cast<unsigned long long>(tag));
      Graph g;
      cugraphs::capture(g, [&](cudaStream_t s) {
        float* unused = nullptr;  // a cudaMalloc and cudaFree in the step that no node names
        cugraphs::check(cudaMalloc(&unused, 1024), "cudaMalloc in a Relaxed capture");
        cugraphs::check(cudaFree(unused), "cudaFree in a Relaxed capture");
        spread<<<1, kThreads, 0, s>>>(out.data(), cuda::std::span<const float>(in, n), in + n, int2{1024, 5}, tag);
      }, o);
      g.replay();
      std::vector<float> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = ramp[i] * 5.0f + static_cast<float>(tag % 7);
      CHECK(host(out) == want);
    }
  }
  SECTION("pointers indexed from 1 (`a - 1`) into cudaMalloc memory, in a Relaxed capture beside a cudaMalloc and "
          "cudaFree") {
    float* fresh = nullptr;  // 2 MiB: a block of its own, whose bytes before are not another block's
    cugraphs::check(cudaMalloc(&fresh, std::size_t{1} << 21), "cudaMalloc");
    const std::unique_ptr<float, decltype(&cudaFree)> own_fresh(fresh, &cudaFree);
    cugraphs::check(cudaMemcpy(fresh, in, n * sizeof(float), cudaMemcpyDeviceToDevice), "cudaMemcpy");
    // The kernel names `a` too: the live cudaMalloc memory beside which an unknown word is judged.
    const auto step = [&](const float* a, std::size_t first) {
      return [=, &out](cudaStream_t s) {
        float* unused = nullptr;
        cugraphs::check(cudaMalloc(&unused, 1024), "cudaMalloc in a Relaxed capture");
        cugraphs::check(cudaFree(unused), "cudaFree in a Relaxed capture");
        from_one<<<1, kThreads, 0, s>>>(out.data(), a - first, first, a, n);
      };
    };
    const auto unknown = [](const void* p) {
      cudaPointerAttributes k{};
      cugraphs::check(cudaPointerGetAttributes(&k, p), "cudaPointerGetAttributes");
      return k.type == cudaMemoryTypeUnregistered;
    };
    for (const float* a : {static_cast<const float*>(in), static_cast<const float*>(fresh)}) {
      std::printf("escapes: a pointer indexed from 1 (%p) reads as %s\n", static_cast<const void*>(a - 1),
                  unknown(a - 1) ? "no memory" : "memory");
      Graph g;
      cugraphs::capture(g, step(a, 1), o);
      g.replay();
      std::vector<float> want(n);
      for (std::size_t i = 0; i < n; ++i) want[i] = 2.0f * ramp[i];
      CHECK(host(out) == want);
      put_all(out, -1.0f);
      // The control: 128 bytes before the start is past the 64 that pass, and is refused
      // wherever it reads as freed memory beside `a` (no memory, in the no-access reservation
      // that holds `a`).
      const float* far = a - 32;
      const auto room = cugraphs_test::no_access_mapping(a);
      if (unknown(far) && room.second != 0 && cugraphs_test::no_access_mapping(far) == room) {
        Graph refused;
        const auto e = expect_error([&] { cugraphs::capture(refused, step(a, 32), o); });
        CHECK(contains(e.what(), "which no allocation backs"));
        std::printf("escapes: a pointer 128 bytes before its block is refused\n");
      } else {
        std::printf("escapes: 128 bytes before the block is not freed-looking memory here; the control is not run\n");
      }
    }
  }
  SECTION("a graph allocation of a graph captured outside cugraphs, not run yet, handed to a kernel beside "
          "cudaMalloc memory") {
    RawAllocatingGraph raw(n, [&](float* made, cudaStream_t s) { copy_kernel<<<1, kThreads, 0, s>>>(made, in, n); });
    Graph consumer;
    cugraphs::capture(consumer, [&](cudaStream_t s) { twice_plus<<<1, kThreads, 0, s>>>(out.data(), raw.made(), in, n); }, o);
    raw.launch();
    consumer.replay();
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = 3.0f * ramp[i];
    CHECK(host(out) == want);
    raw.release();
  }
}
