// cugraphs::Error and the one path that checks CUDA results and words their messages.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/format.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace cugraphs {

/// The one exception type cugraphs throws. code() is the CUDA error behind it, or
/// cudaSuccess when cugraphs itself detected misuse (replay before capture, a size
/// mismatch, ...). The message names the operation and, for the errors people meet
/// while capturing, the likely cause and the remedy.
class Error : public std::runtime_error {
public:
  Error(cudaError_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  explicit Error(const std::string& message) : Error(cudaSuccess, message) {}

  /// The CUDA error that caused this, or cudaSuccess for misuse detected by cugraphs.
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

private:
  cudaError_t code_;
};

/// Where failures go in builds without exceptions (CUGRAPHS_EXCEPTIONS == 0): the handler
/// gets the Error that would have been thrown, and must not return (if it does, cugraphs
/// calls std::abort). The default prints the message to stderr and aborts.
using ErrorHandler = void (*)(const Error&) noexcept;

namespace detail {

inline void default_error_handler(const Error& e) noexcept {
  std::fputs(e.what(), stderr);
  std::fputs("\ncugraphs: aborting (built without exceptions)\n", stderr);
  std::fflush(stderr);
}

inline std::atomic<ErrorHandler> error_handler{&default_error_handler};

// Reports `e`: throws it, or, without exceptions, hands it to the handler and aborts.
[[noreturn]] inline void raise(Error e) {
#if CUGRAPHS_EXCEPTIONS
  throw e;
#else
  error_handler.load(std::memory_order_acquire)(e);
  std::abort();
#endif
}

// The CUDA error of the exception being handled (inside a catch-all), for reports.
[[nodiscard]] inline cudaError_t caught_code() noexcept {
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

}  // namespace detail

/// Sets the handler for failures in builds without exceptions and returns the previous
/// one; nullptr restores the default. Has no effect on builds with exceptions.
inline ErrorHandler set_error_handler(ErrorHandler handler) noexcept {
  return detail::error_handler.exchange(handler != nullptr ? handler : &detail::default_error_handler,
                                        std::memory_order_acq_rel);
}

namespace detail {

// Errors after which the CUDA context is unusable: every later call fails the same way.
[[nodiscard]] constexpr bool is_sticky(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

// Why work issued to the legacy default stream during a capture was refused, and the remedy.
[[nodiscard]] inline std::string escape_message() {
  return "Work was issued to the legacy default stream while a capture was open (a kernel launched with "
         "<<<grid, block>>> and no stream, a synchronous cudaMemcpy or cudaMemset, or a library call left on "
         "stream 0). It would have run once, eagerly, at capture time and been missing from every replay, so "
         "the capture's escape check (CaptureOptions::escapes) refused it and the capture is lost. Remedy: "
         "launch on the capture stream (CaptureScope::stream() or current_stream()), give libraries that "
         "stream (cugraphs/cublas.hpp does it for cuBLAS), and make synchronous copies before the capture or "
         "as cudaMemcpyAsync on the capture stream; EscapeCheck::Off lets such work run eagerly.";
}

// Cause and remedy for a CUDA error. `mode` names the capture mode in force, when known.
[[nodiscard]] inline std::string error_hint(cudaError_t e, std::string_view mode = {}) {
  const std::string in_mode =
      mode.empty() ? std::string{} : detail::format(" (the capture ran in CaptureMode::{})", mode);
  switch (e) {
    case cudaErrorStreamCaptureUnsupported:
      return detail::format(
          " Likely cause: a call that is not allowed while a stream is capturing (an unsafe call "
          "such as cudaMalloc, cudaFree, a synchronous cudaMemcpy/cudaMemset, "
          "cudaStreamSynchronize, cudaDeviceSynchronize or cudaEventQuery){}; CaptureMode::Global "
          "forbids these on every thread, CaptureMode::ThreadLocal on the capturing thread. "
          "Remedy: make the call before capture_begin (allocate with DeviceBuffer, which draws "
          "from the capture's pool), or capture with CaptureMode::Relaxed.",
          in_mode);
    case cudaErrorStreamCaptureInvalidated:
      if (mode == "Relaxed")  // unsafe calls are allowed: advising Relaxed would be no help
        return detail::format(
            " Likely cause: an earlier call during the capture failed and invalidated it{}. "
            "Relaxed allows unsafe calls such as cudaMalloc, so most often a synchronize or query of "
            "a capturing stream or event (cudaStreamSynchronize, cudaStreamQuery, "
            "cudaDeviceSynchronize, cudaEventSynchronize) or work issued to the legacy default "
            "stream while a blocking stream captures. Remedy: find the failing call (check every "
            "CUDA result inside the capture), wait for or query the stream only after capture_end, "
            "and launch on the capture stream.",
            in_mode);
      return detail::format(
          " Likely cause: an earlier call during the capture failed and invalidated it, most "
          "often an unsafe call (cudaMalloc, a synchronous copy, a synchronize){} or work issued "
          "to the legacy default stream. Remedy: find the failing call (check every CUDA result "
          "inside the capture), move unsafe calls before capture_begin or capture with "
          "CaptureMode::Relaxed, and launch on the capture stream.",
          in_mode);
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
             "capture. Remedy: record the event inside the capture, or wait on it before "
             "capture_begin.";
    case cudaErrorStreamCaptureImplicit:
      return " Likely cause: work issued to the legacy default stream while a blocking stream "
             "captures (a kernel launched with <<<grid, block>>> and no stream, a synchronous "
             "cudaMemcpy/cudaMemset, or a library call on stream 0). " + escape_message();
    case cudaErrorCapturedEvent:
      return " Likely cause: an event recorded in a capturing stream was queried or "
             "synchronized. Remedy: query events only outside the capture.";
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

// The message for a failed CUDA call: the cause and remedy are error_hint's, or `hint`
// where the caller knows better (the escape check names the legacy default stream).
[[nodiscard]] inline std::string cuda_message(cudaError_t e, std::string_view operation, std::string_view mode = {},
                                              std::string_view hint = {}) {
  return detail::format("cugraphs: {} failed: {} ({}).{}{}", operation, cudaGetErrorName(e), cudaGetErrorString(e),
                        hint.empty() ? error_hint(e, mode) : std::string(" "), hint);
}

// Reports a failed CUDA call. The error is also taken off the thread's last-error slot
// (cudaGetLastError), so that it does not resurface in the next unrelated check.
[[noreturn]] inline void throw_cuda(cudaError_t e, std::string_view operation,
                                    std::string_view mode = {}) {
  (void)cudaGetLastError();
  raise(Error(e, cuda_message(e, operation, mode)));
}

// An error cugraphs words itself (misuse, or a CUDA refusal it explains better than the
// generic hint): "cugraphs: OPERATION: TEXT", with `code` as Error::code().
template <class... Args>
[[noreturn]] void throw_error(cudaError_t code, std::string_view operation, format_string<Args...> text,
                              const Args&... args) {
  std::string message = detail::format("cugraphs: {}: ", operation);
  detail::format_to(message, text, args...);
  raise(Error(code, message));
}

// The failure of another library's call (NCCL, cuBLAS): its own error name and text; code()
// stays cudaSuccess, since the failure is not a CUDA runtime error.
// `status` names the failure ("NCCL error 3", "CUBLAS_STATUS_NOT_INITIALIZED"), `text`
// says it in words, `more` adds what the library logged.
[[noreturn]] inline void throw_library(std::string_view operation, std::string_view status, std::string_view text,
                                       std::string_view more = {}) {
  raise(Error(detail::format("cugraphs: {} failed: {} ({}){}", operation, status, text, more)));
}

// Misuse detected by cugraphs itself: code() is cudaSuccess.
template <class... Args>
[[noreturn]] void throw_misuse(std::string_view operation, format_string<Args...> text, const Args&... args) {
  throw_error(cudaSuccess, operation, text, args...);
}

inline void check(cudaError_t e, std::string_view operation) {
  if (e != cudaSuccess) [[unlikely]]
    throw_cuda(e, operation);
}

// The same, with the operation's name formatted only on failure: check(e, "{}: cudaMalloc", op).
template <class... Args>
  requires(sizeof...(Args) > 0)
void check(cudaError_t e, format_string<Args...> operation, const Args&... args) {
  if (e != cudaSuccess) [[unlikely]]
    throw_cuda(e, detail::format(operation, args...));
}

// Destructors cannot throw: a failure there is written to stderr, never dropped. Errors
// that only mean the runtime is already torn down (static destruction at exit) are not
// failures of the program and are not reported.
inline void report_in_destructor(cudaError_t e, std::string_view operation) noexcept {
  if (e == cudaSuccess || e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed)
    return;
  CUGRAPHS_TRY {
    std::fputs(detail::format("{} (in a destructor, which cannot throw)\n", cuda_message(e, operation)).c_str(), stderr);
  } CUGRAPHS_CATCH_ALL {
    std::fputs("cugraphs: a CUDA call failed in a destructor\n", stderr);
  }
}

// The same for a failure cugraphs detected itself: `describe()` gives the cause; it is
// called inside the guard, so that building the text cannot throw out of the destructor.
template <class Describe>
void report_in_destructor(std::string_view operation, Describe&& describe) noexcept {
  CUGRAPHS_TRY {
    std::fputs(detail::format("cugraphs: {}: {} (in a destructor, which cannot throw)\n", operation, describe()).c_str(),
               stderr);
  } CUGRAPHS_CATCH_ALL {
    std::fputs("cugraphs: a check failed in a destructor\n", stderr);
  }
}

}  // namespace detail

/// Throws cugraphs::Error (with cause and remedy where known) when `result` is an error.
/// For users' own CUDA calls: `cugraphs::check(cudaMemsetAsync(...), "clear the histogram")`.
inline void check(cudaError_t result, std::string_view what) { detail::check(result, what); }

/// Throws cugraphs::Error when a kernel launch (or any other call) on this thread left an
/// error behind since the last check: cudaGetLastError, which also clears it.
inline void check_launch(std::string_view what) { detail::check(cudaGetLastError(), what); }

}  // namespace cugraphs
