// Error text: every message names the operation and the CUDA error; capture errors also
// carry the likely cause and the remedy. Host-only: cudaGetErrorName needs no device.
#include "testing.hpp"

#include <cugraphs/error.hpp>

using cugraphs_test::contains;

TEST_CASE("Error: misuse carries cudaSuccess and the message", "[error]") {
  const cugraphs::Error e("cugraphs: Graph::replay: nothing captured");
  CHECK(e.code() == cudaSuccess);
  CHECK(std::string(e.what()) == "cugraphs: Graph::replay: nothing captured");
  const auto m = cugraphs_test::expect_error([] {
    cugraphs::detail::throw_misuse("Graph::replay", "size {} is not {}", 3, 4);
  });
  CHECK(m.code() == cudaSuccess);
  CHECK(std::string(m.what()) == "cugraphs: Graph::replay: size 3 is not 4");
}

TEST_CASE("Error: a failed call names the operation, the error's name and its text", "[error]") {
  const auto e = cugraphs_test::expect_error(
      [] { cugraphs::check(cudaErrorInvalidValue, "fill the histogram"); });
  CHECK(e.code() == cudaErrorInvalidValue);
  const std::string w = e.what();
  CHECK(contains(w, "fill the histogram"));
  CHECK(contains(w, "cudaErrorInvalidValue"));
  CHECK(contains(w, cudaGetErrorString(cudaErrorInvalidValue)));
  CHECK_NOTHROW(cugraphs::check(cudaSuccess, "nothing"));
}

TEST_CASE("Error: an unsafe call during capture names its nature, the mode and the remedy", "[error]") {
  const std::string w = cugraphs::detail::cuda_message(cudaErrorStreamCaptureUnsupported,
                                                       "cudaMalloc", "Global");
  CHECK(contains(w, "cudaErrorStreamCaptureUnsupported"));
  CHECK(contains(w, "not allowed while a stream is capturing"));
  CHECK(contains(w, "CaptureMode::Global"));
  CHECK(contains(w, "Remedy"));
  CHECK(contains(w, "CaptureMode::Relaxed"));
  // Relaxed is offered only for memory that outlives the graph (a scratch container made and
  // freed in the step would be gone before the first replay); Thrust's and the callback's ways.
  CHECK(contains(w, "outlives the graph"));
  CHECK(contains(w, "thrust::cuda::par_nosync.on(cugraphs::current_stream())"));
  CHECK(contains(w, "fails on any policy"));
  CHECK(contains(w, "cudaStreamAddCallback cannot be captured: use cudaLaunchHostFunc"));

  const std::string inv = cugraphs::detail::cuda_message(cudaErrorStreamCaptureInvalidated,
                                                         "Graph::capture_end", "ThreadLocal");
  CHECK(contains(inv, "invalidated"));
  CHECK(contains(inv, "unsafe call"));
  CHECK(contains(inv, "CaptureMode::ThreadLocal"));
  CHECK(contains(inv, "for allocations that outlive the graph"));
  CHECK(contains(inv, "cudaStreamAddCallback: use cudaLaunchHostFunc"));
  CHECK(contains(inv, "par_nosync.on(cugraphs::current_stream())"));
  CHECK(contains(inv, "cudaEventWaitExternal"));
  // Relaxed allows unsafe calls, not these: its hint names them too.
  const std::string relaxed = cugraphs::detail::cuda_message(cudaErrorStreamCaptureInvalidated,
                                                             "Graph::capture_end", "Relaxed");
  CHECK(contains(relaxed, "cudaStreamAddCallback: use cudaLaunchHostFunc"));
  CHECK(contains(relaxed, "cudaEventWaitExternal"));
}

TEST_CASE("Error: a wait on an event recorded outside the capture names the ways that order every replay, not "
          "only the capture",
          "[error]") {
  const std::string w = cugraphs::detail::cuda_message(cudaErrorStreamCaptureIsolation, "Graph::capture_end");
  CHECK(contains(w, "before each replay() (cudaStreamWaitEvent)"));
  CHECK(contains(w, "cudaEventWaitExternal"));
  CHECK(contains(w, "would order only the capture, not the replays"));
}

TEST_CASE("Error: the other capture errors each explain cause and remedy", "[error]") {
  struct Row {
    cudaError_t code;
    const char* cause;
  };
  const Row rows[] = {
      {cudaErrorStreamCaptureUnjoined, "not joined back"},
      {cudaErrorStreamCaptureImplicit, "legacy default stream"},
      {cudaErrorStreamCaptureWrongThread, "another thread"},
      {cudaErrorStreamCaptureIsolation, "outside the capture"},
      {cudaErrorStreamCaptureMerge, "two independent captures"},
      {cudaErrorStreamCaptureUnmatched, "did not begin it"},
      {cudaErrorCapturedEvent, "capturing stream"},
      {cudaErrorInvalidDevice, "cudaSetDevice"},
  };
  for (const auto& r : rows) {
    INFO(cudaGetErrorName(r.code));
    const std::string w = cugraphs::detail::cuda_message(r.code, "op");
    CHECK(contains(w, r.cause));
    CHECK(contains(w, "Remedy"));
  }
}

TEST_CASE("Error: a sticky error says the context is lost", "[error]") {
  for (cudaError_t code : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorAssert}) {
    INFO(cudaGetErrorName(code));
    CHECK(cugraphs::detail::is_sticky(code));
    CHECK(contains(cugraphs::detail::cuda_message(code, "Graph::replay"), "context is lost"));
  }
  CHECK_FALSE(cugraphs::detail::is_sticky(cudaErrorInvalidValue));
  CHECK_FALSE(contains(cugraphs::detail::cuda_message(cudaErrorInvalidValue, "x"), "context is lost"));
}

TEST_CASE("Error: memory freed inside the capture: the copy's and the kernel's messages name what was found, the "
          "cause, the remedies and the way out",
          "[error][escapes]") {
  const std::string copy = cugraphs::detail::unbacked_copy_message("memcpy node 1: 256 bytes from device address 0x7f00");
  const std::string kernel = cugraphs::detail::unbacked_kernel_message(
      "node 0, kernel copy_kernel(float*, float const*, unsigned long): its argument 0 holds device address 0x7f00");
  for (const std::string* w : {&copy, &kernel}) {
    INFO(*w);
    CHECK(contains(*w, "thrust::device_vector"));
    CHECK(contains(*w, "cugraphs::DeviceBuffer"));
    CHECK(contains(*w, "cudaMallocAsync on the capture stream"));
    CHECK(contains(*w, "EscapeCheck::Off"));
    CHECK(contains(*w, "the capture is lost") != contains(*w, "The capture is lost"));
  }
  CHECK(contains(copy, "(memcpy node 1: 256 bytes from device address 0x7f00)"));
  CHECK(contains(copy, "crashes the process instantiating"));
  // A kernel handed such memory is the kernel message's to describe: Relaxed captures refuse it.
  CHECK_FALSE(contains(copy, "kernel"));
  CHECK(contains(kernel, "its argument 0 holds device address 0x7f00)"));
  CHECK(contains(kernel, "every replay would write memory that is no longer the step's"));
  // What can read as freed though right, so that a user refused wrongly knows why.
  CHECK(contains(kernel, "a 64-bit value that is not an address"));
  CHECK(contains(kernel, "one past its end or just before its start"));
}
