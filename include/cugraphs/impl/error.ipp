// The bodies of the functions <cugraphs/error.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/error.hpp>
#include <cugraphs/config.hpp>

#include <atomic>

namespace cugraphs::detail {

CUGRAPHS_INLINE void default_error_handler(const Error& e) noexcept {
  std::fputs(e.what(), stderr);
  std::fputs("\ncugraphs: aborting (built without exceptions)\n", stderr);
  std::fflush(stderr);
}

// The handler in force (set_error_handler); constant-initialized, so usable from the start.
CUGRAPHS_INLINE std::atomic<ErrorHandler>& error_handler() noexcept {
  static std::atomic<ErrorHandler> handler{&default_error_handler};
  return handler;
}

CUGRAPHS_INLINE void raise(Error e) {
#if CUGRAPHS_EXCEPTIONS
  throw e;
#else
  error_handler().load(std::memory_order_acquire)(e);
  std::abort();
#endif
}

CUGRAPHS_INLINE cudaError_t caught_code() noexcept {
#if CUGRAPHS_EXCEPTIONS
  try {
    throw;
  } catch (const Error& e) {
    return e.code();
  } catch (...) {
    return cudaErrorUnknown;
  }
#else
  return cudaErrorUnknown;
#endif
}

}  // namespace cugraphs::detail

namespace cugraphs {

CUGRAPHS_INLINE ErrorHandler set_error_handler(ErrorHandler handler) noexcept {
  return detail::error_handler().exchange(handler != nullptr ? handler : &detail::default_error_handler,
                                        std::memory_order_acq_rel);
}

}  // namespace cugraphs

namespace cugraphs::detail {

CUGRAPHS_INLINE std::string escape_message() {
  return "Work was issued to the legacy default stream while a capture was open (a kernel launched with "
         "<<<grid, block>>> and no stream, a synchronous cudaMemcpy or cudaMemset, or a library call left on "
         "stream 0). It would have run once, eagerly, at capture time and been missing from every replay, so "
         "the capture's escape check (CaptureOptions::escapes) refused it and the capture is lost. Remedy: "
         "launch on the capture stream (CaptureScope::stream() or current_stream()), give libraries that "
         "stream (cugraphs/cublas.hpp does it for cuBLAS), and make synchronous copies before the capture or "
         "as cudaMemcpyAsync on the capture stream; EscapeCheck::Off lets such work run eagerly.";
}

CUGRAPHS_INLINE std::string per_thread_escape_message(std::string_view found) {
  return detail::format(
      "Work was issued to this thread's per-thread default stream while the capture was open (stream 0 in a "
      "unit built with nvcc --default-stream per-thread: a kernel launched with <<<grid, block>>> and no "
      "stream, a library call left on stream 0; or cudaStreamPerThread), and the capture stream never waited "
      "for it ({}). Without the escape check (CaptureOptions::escapes) it would have run once, eagerly, at "
      "capture time and been missing from every replay; so the check captured it instead and refuses the "
      "capture, which is lost. Remedy: launch on the capture stream (CaptureScope::stream() or "
      "current_stream()) and give libraries that stream. Work there that the capture stream waits for "
      "(an event recorded after it and waited on by the capture stream) is captured as a branch, as on any "
      "forked stream; EscapeCheck::Off lets such work run eagerly.",
      found);
}

CUGRAPHS_INLINE std::string watched_escape_message(cudaStream_t stream, std::string_view found) {
  return detail::format(
      "Work was issued to stream {} while the capture was open, and the capture stream never waited for it "
      "({}). That stream was this thread's current_stream() when the capture began (a GraphCache call's "
      "stream is, while the call captures its bucket), so the escape check "
      "(CaptureOptions::escapes) forked it into the capture: without the check the work would have run once, "
      "eagerly, at capture time and been missing from every replay. The check captured it instead and "
      "refuses the capture, which is lost. Usual causes: a library handle bound to that stream before the "
      "capture (cublasSetStream, cufftSetStream, curandSetStream, cusparseSetStream: bind the handle to "
      "current_stream() inside the step, or use cugraphs::cublas::Handle or Follow, or a CurrentStreamListener "
      "for other libraries), a kernel or copy given the stream saved before the capture, or a "
      "StreamGuard of that stream inside a conditional body (which cannot fork it into the body). Remedy: "
      "queue the work on current_stream() (CaptureScope::stream()). Work there that the capture stream waits "
      "for (an event recorded after it and waited on by current_stream()) is captured as a branch; "
      "EscapeCheck::Off lets such work run eagerly.",
      static_cast<const void*>(stream), found);
}

CUGRAPHS_INLINE std::string pageable_copy_message(std::string_view found) {
  return detail::format(
      "A copy in the capture ({}). Eagerly, cudaMemcpyAsync stages pageable memory before it returns, so the "
      "program may reuse it at once; in a graph every replay copies from (or into) that address when it runs, "
      "long after a stack variable or temporary is gone or holds another value, so the graph would read "
      "whatever lies there (or write into it). The capture's escape check (CaptureOptions::escapes) refused "
      "it and the capture is lost. Remedy: a per-step scalar goes to its kernel as an argument, changed with "
      "set_kernel_arg; per-call data goes in as a graphed callable's input; a result goes to device memory "
      "read after the replay; or copy from pinned memory (cudaMallocHost, cudaHostRegister) that outlives the "
      "graph and is written only while no replay runs; EscapeCheck::Off lets such copies through.",
      found);
}

CUGRAPHS_INLINE std::string unbacked_copy_message(std::string_view found) {
  return detail::format(
      "A copy in the capture ({}): the memory was freed since the copy was captured, or before. A scratch "
      "container made and destroyed inside the captured step (a thrust::device_vector, a cudaMalloc and "
      "cudaFree pair: CaptureMode::Relaxed lets them through, other modes refuse the cudaMalloc) is gone "
      "before the first replay, and CUDA crashes the process instantiating a copy of it; the capture is lost. "
      "Remedy: allocate "
      "scratch before the capture and keep it as long as the graph, or make it inside the step as a "
      "cugraphs::DeviceBuffer (drawn from the graph's pool, which keeps it for the graph) or with "
      "cudaMallocAsync on the capture stream (graph memory). An allocation of a graph captured outside "
      "cugraphs that has not run yet reads the same to CUDA; EscapeCheck::Off lets such copies through.",
      found);
}

CUGRAPHS_INLINE std::string unbacked_kernel_message(std::string_view found) {
  return detail::format(
      "A kernel in the capture ({}): the memory was freed since the kernel was captured. A scratch container "
      "made and destroyed inside the captured step (a thrust::device_vector, a cudaMalloc and cudaFree pair, "
      "which CaptureMode::Relaxed lets through) is gone before the first replay, and every replay would write "
      "memory that is no longer the step's, with no error: whatever the allocator puts there next, often another "
      "buffer of the program. The capture is lost. Remedy: allocate scratch before the capture and keep it as "
      "long as the graph, or make it inside the step as a cugraphs::DeviceBuffer (drawn from the graph's pool, "
      "which keeps it for the graph) or with cudaMallocAsync on the capture stream (graph memory). Judged in "
      "Relaxed captures from the kernels' 8-byte arguments, where the address lies among live cudaMalloc memory "
      "that the graph names: a 64-bit value that is not an address, or an address outside its allocation (other "
      "than one past its end or just before its start), can read the same; EscapeCheck::Off lets it through.",
      found);
}

CUGRAPHS_INLINE std::string error_hint(cudaError_t e, std::string_view mode) {
  const std::string in_mode =
      mode.empty() ? std::string{} : detail::format(" (the capture ran in CaptureMode::{})", mode);
  // Failures of a capture that no mode allows, named by more than one hint below.
  constexpr std::string_view thrust =
      "a Thrust algorithm on thrust::cuda::par synchronizes (use "
      "thrust::cuda::par_nosync.on(cugraphs::current_stream())), and one that returns a value to "
      "the host (reduce, count_if) fails on any policy (use CUB's algorithms that write results "
      "to device memory)";
  constexpr std::string_view uncapturable =
      "a call that cannot be captured in any mode (cudaStreamAddCallback: use cudaLaunchHostFunc)";
  constexpr std::string_view outside_event =
      "a wait on an event recorded outside the capture (cudaErrorStreamCaptureIsolation: wait on "
      "the replay's stream before each replay(), or capture the wait with cudaEventWaitExternal)";
  switch (e) {
    case cudaErrorStreamCaptureUnsupported:
      return detail::format(
          " Likely cause: a call that is not allowed while a stream is capturing (an unsafe call "
          "such as cudaMalloc, cudaFree, a synchronous cudaMemcpy/cudaMemset, "
          "cudaStreamSynchronize, cudaDeviceSynchronize or cudaEventQuery){}; CaptureMode::Global "
          "forbids these on every thread, CaptureMode::ThreadLocal on the capturing thread. "
          "Remedy: make the call before capture_begin (allocate with DeviceBuffer, which draws "
          "from the capture's pool). CaptureMode::Relaxed allows cudaMalloc only for memory that "
          "outlives the graph: memory allocated and freed inside the step (a scratch "
          "thrust::device_vector, a container made in the step) is gone before the first replay, "
          "which would write into freed memory. Also, {}. cudaStreamAddCallback cannot be "
          "captured: use cudaLaunchHostFunc.",
          in_mode, thrust);
    case cudaErrorStreamCaptureInvalidated:
      if (mode == "Relaxed")  // unsafe calls are allowed: advising Relaxed would be no help
        return detail::format(
            " Likely cause: an earlier call during the capture failed and invalidated it{}. "
            "Relaxed allows unsafe calls such as cudaMalloc, so most often a synchronize or query of "
            "a capturing stream or event (cudaStreamSynchronize, cudaStreamQuery, "
            "cudaDeviceSynchronize, cudaEventSynchronize) or work issued to the legacy default "
            "stream while a blocking stream captures; also {} or {}. Remedy: find the failing call "
            "(check every CUDA result inside the capture), wait for or query the stream only after "
            "capture_end, and launch on the capture stream.",
            in_mode, uncapturable, outside_event);
      return detail::format(
          " Likely cause: an earlier call during the capture failed and invalidated it, most "
          "often an unsafe call (cudaMalloc, a synchronous copy, a synchronize){} or work issued "
          "to the legacy default stream. Also: {}; {}; {}. Remedy: find the failing call (check "
          "every CUDA result inside the capture), move unsafe calls before capture_begin (or, for "
          "allocations that outlive the graph, capture with CaptureMode::Relaxed), and launch on the "
          "capture stream.",
          in_mode, uncapturable, thrust, outside_event);
    case cudaErrorStreamCaptureMerge:
      return " Likely cause: two independent captures were joined (a stream of one capture "
             "waited on an event recorded in another). Remedy: keep each capture's streams and "
             "events to itself.";
    case cudaErrorStreamCaptureUnmatched:
      return " Likely cause: the capture was ended on a stream that did not begin it. Remedy: "
             "end the capture on the stream passed to capture_begin.";
    case cudaErrorStreamCaptureUnjoined:
      return " Likely cause: work forked from the capture stream onto another stream (an event "
             "recorded on the capture stream and waited on elsewhere) was not joined back. "
             "Remedy: record an event on every forked stream after its last captured work and "
             "make the capture stream wait on it before the capture ends.";
    case cudaErrorStreamCaptureIsolation:
      return " Likely cause: a capturing stream waited on an event recorded outside the "
             "capture. Remedy: record the event inside the capture. For an event that work "
             "outside the graph records every step (a producer on another stream), wait on it on "
             "the replay's stream before each replay() (cudaStreamWaitEvent), or capture the wait "
             "as a node with cudaStreamWaitEvent(s, e, cudaEventWaitExternal); waiting before "
             "capture_begin would order only the capture, not the replays.";
    case cudaErrorStreamCaptureImplicit:
      return " Likely cause: work issued to the legacy default stream while a blocking stream "
             "captures (a kernel launched with <<<grid, block>>> and no stream, a synchronous "
             "cudaMemcpy/cudaMemset, or a library call on stream 0). " + escape_message();
    case cudaErrorCapturedEvent:
      return " Likely cause: an event recorded in a capturing stream was queried or "
             "synchronized inside the capture (after it, CUDA answers such a query or wait with "
             "cudaErrorInvalidValue): the capture recorded no event there, the record became part "
             "of the graph's order, not a fence the host can wait on. "
             "Remedy: record the event after replay() on the replay's stream, or capture the "
             "record as a node with cudaEventRecordWithFlags(e, s, cudaEventRecordExternal).";
    case cudaErrorStreamCaptureWrongThread:
      return " Likely cause: the capture was ended on another thread than the one that began "
             "it. Remedy: end it on the same thread, or capture with CaptureMode::Relaxed.";
    case cudaErrorInvalidDevice:
      return " Likely cause: a device index that does not exist, or an object used while "
             "another device is current. Remedy: make the object's device current "
             "(cudaSetDevice) before using it.";
    case cudaErrorInvalidResourceHandle:
      return " Likely cause: a stream, event or graph handle that was destroyed, or that "
             "belongs to a device other than the current one. Remedy: use live handles of the "
             "current device.";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return " Likely cause: no usable CUDA device or driver on this machine.";
    case cudaErrorMemoryAllocation:
      return " Likely cause: the device is out of memory. Remedy: free buffers, reset graphs "
             "you no longer replay, or share one pool between graphs.";
    default:
      if (is_sticky(e))
        return " The CUDA context is lost: a kernel faulted, and every later CUDA call in this "
               "process will fail the same way. Remedy: run the failing kernel under "
               "compute-sanitizer to find the fault, and restart the process.";
      return {};
  }
}

CUGRAPHS_INLINE std::string cuda_message(cudaError_t e, std::string_view operation, std::string_view mode,
    std::string_view hint) {
  return detail::format("cugraphs: {} failed: {} ({}).{}{}", operation, cudaGetErrorName(e), cudaGetErrorString(e),
                        hint.empty() ? error_hint(e, mode) : std::string(" "), hint);
}

CUGRAPHS_INLINE void throw_cuda(cudaError_t e, std::string_view operation, std::string_view mode) {
  (void)cudaGetLastError();
  raise(Error(e, cuda_message(e, operation, mode)));
}

CUGRAPHS_INLINE void check(cudaError_t e, std::string_view operation) {
  if (e != cudaSuccess) [[unlikely]]
    throw_cuda(e, operation);
}

CUGRAPHS_INLINE void report_in_destructor(cudaError_t e, std::string_view operation) noexcept {
  if (e == cudaSuccess || e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed)
    return;
  CUGRAPHS_TRY {
    std::fputs(detail::format("{} (in a destructor, which cannot throw)\n", cuda_message(e, operation)).c_str(), stderr);
  } CUGRAPHS_CATCH_ALL {
    std::fputs("cugraphs: a CUDA call failed in a destructor\n", stderr);
  }
}

}  // namespace cugraphs::detail
