// Capture modes: which unsafe calls each mode refuses, and on which threads.
#include "kernels.cuh"
#include "testing.hpp"
#include "threads.hpp"

#include <cugraphs/graph.hpp>

#include <thread>

using namespace cugraphs_test;
using cugraphs::CaptureMode;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;

namespace {

CaptureOptions with_mode(CaptureMode m) {
  CaptureOptions o;
  o.mode = m;
  return o;
}

// cudaMalloc + cudaFree of 1 MiB on this thread; returns the first error.
cudaError_t unsafe_malloc_free() {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, 1 << 20);
  if (e == cudaSuccess) e = cudaFree(p);
  (void)cudaGetLastError();
  return e;
}

}  // namespace

TEST_CASE("Modes: an unsafe call under Global invalidates the capture with an Error naming the "
          "call's nature and the mode", "[modes][gpu]") {
  DeviceBuffer<float> x(256);
  Graph g;
  cudaError_t inside = cudaSuccess;
  const auto e = expect_error([&] {
    CaptureScope scope(g, with_mode(CaptureMode::Global));
    fill_kernel<<<1, 256, 0, scope.stream()>>>(x.data(), 256, 1.0f);
    void* p = nullptr;
    inside = cudaMalloc(&p, 1 << 20);  // unsafe while capturing
    scope.end();
  });
  CHECK(inside == cudaErrorStreamCaptureUnsupported);
  CHECK(e.code() == cudaErrorStreamCaptureInvalidated);
  const std::string w = e.what();
  CHECK(contains(w, "unsafe call"));
  CHECK(contains(w, "cudaMalloc"));
  CHECK(contains(w, "CaptureMode::Global"));
  CHECK(contains(w, "Remedy"));
  // The graph and the stream are usable again.
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
  CHECK(cudaGetLastError() == cudaSuccess);
  cugraphs::capture(g, [&](cudaStream_t s) { fill_kernel<<<1, 256, 0, s>>>(x.data(), 256, 2.0f); });
  g.replay();
  CHECK(x.to_host()[0] == 2.0f);
}

TEST_CASE("Modes: the same unsafe call is allowed under Relaxed", "[modes][gpu]") {
  DeviceBuffer<float> x(256);
  Graph g;
  void* p = nullptr;
  {
    CaptureScope scope(g, with_mode(CaptureMode::Relaxed));
    fill_kernel<<<1, 256, 0, scope.stream()>>>(x.data(), 256, 3.0f);
    CHECK(cudaMalloc(&p, 1 << 20) == cudaSuccess);
  }
  REQUIRE(g.is_instantiated());
  CHECK(g.mode() == CaptureMode::Relaxed);
  g.replay();
  CHECK(x.to_host()[5] == 3.0f + 0.005f);
  CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("Modes: under ThreadLocal another thread's unsafe call does not break the capture, "
          "under Global it is refused", "[modes][gpu]") {
  DeviceBuffer<float> x(256);
  cugraphs::check(cudaDeviceSynchronize(), "sync");
  for (const auto mode : {CaptureMode::ThreadLocal, CaptureMode::Global}) {
    INFO("mode " << cugraphs::detail::name(mode));
    Graph g;
    cudaError_t other = cudaErrorUnknown;
    {
      CaptureScope scope(g, with_mode(mode));
      fill_kernel<<<1, 256, 0, scope.stream()>>>(x.data(), 256, 4.0f);
      std::thread t([&] { other = unsafe_malloc_free(); });
      t.join();
      affine_kernel<<<1, 256, 0, scope.stream()>>>(x.data(), 256, 2.0f, 0.0f);
      if (mode == CaptureMode::Global) {
        // Refused on the other thread; end the capture here and report, whatever it says.
        CHECK(other == cudaErrorStreamCaptureUnsupported);
        scope.abort();
        continue;
      }
    }
    CHECK(other == cudaSuccess);
    REQUIRE(g.is_instantiated());
    g.replay();
    CHECK(x.to_host()[0] == 8.0f);
  }
}

TEST_CASE("Modes: ending a capture on another thread is an Error", "[modes][gpu]") {
  Graph g;
  DeviceBuffer<float> x(64);
  g.capture_begin(with_mode(CaptureMode::Relaxed));
  fill_kernel<<<1, 64, 0, g.stream()>>>(x.data(), 64, 1.0f);
  const std::string message = error_on_another_thread([&] { g.capture_end(); });
  CHECK(contains(message, "thread that began"));
  CHECK(g.is_capturing());
  g.capture_end();
  g.replay();
  CHECK(x.to_host()[0] == 1.0f);
}
