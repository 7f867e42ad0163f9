// cugraphs::Error and the one path that checks CUDA results and words their messages.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/format.hpp>

#include <cuda_runtime_api.h>

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

void default_error_handler(const Error& e) noexcept;

// Reports `e`: throws it, or, without exceptions, hands it to the handler and aborts.
[[noreturn]] void raise(Error e);

// The CUDA error of the exception being handled (inside a catch-all), for reports.
[[nodiscard]] cudaError_t caught_code() noexcept;

}  // namespace detail

/// Sets the handler for failures in builds without exceptions and returns the previous
/// one; nullptr restores the default. Has no effect on builds with exceptions.
ErrorHandler set_error_handler(ErrorHandler handler) noexcept;

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
[[nodiscard]] std::string escape_message();

// Why work issued to the capturing thread's per-thread default stream, and never waited for
// by the capture stream, was refused: `found` says how many nodes end it and what they are.
[[nodiscard]] std::string per_thread_escape_message(std::string_view found);
// The same for work on `stream`, the thread's current stream when the capture began.
[[nodiscard]] std::string watched_escape_message(cudaStream_t stream, std::string_view found);

// Why a captured copy of plain pageable host memory was refused: `found` names the copy.
[[nodiscard]] std::string pageable_copy_message(std::string_view found);
// Why a captured copy of device memory that nothing backs (freed) was refused: `found` names it.
[[nodiscard]] std::string unbacked_copy_message(std::string_view found);
// Why a kernel of a Relaxed capture handed device memory that nothing backs (freed) was
// refused: `found` names the kernel, the argument and the address.
[[nodiscard]] std::string unbacked_kernel_message(std::string_view found);

// Cause and remedy for a CUDA error. `mode` names the capture mode in force, when known.
[[nodiscard]] std::string error_hint(cudaError_t e, std::string_view mode = {});

// The message for a failed CUDA call: the cause and remedy are error_hint's, or `hint`
// where the caller knows better (the escape check names the legacy default stream).
[[nodiscard]] std::string cuda_message(cudaError_t e, std::string_view operation, std::string_view mode = {},
                                              std::string_view hint = {});

// Reports a failed CUDA call. The error is also taken off the thread's last-error slot
// (cudaGetLastError), so that it does not resurface in the next unrelated check.
[[noreturn]] void throw_cuda(cudaError_t e, std::string_view operation,
                                    std::string_view mode = {});

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

void check(cudaError_t e, std::string_view operation);

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
void report_in_destructor(cudaError_t e, std::string_view operation) noexcept;

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

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/error.ipp>
#endif
