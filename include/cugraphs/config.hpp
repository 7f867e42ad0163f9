// cugraphs configuration: the version, the CUDA toolkit gates and the macros every header
// relies on. Every toolkit-version test in the library goes through CUGRAPHS_CTK_AT_LEAST.
#pragma once

#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#  error "cugraphs needs C++20: compile with -std=c++20 (nvcc and host compilers alike; CMake: CXX_STANDARD 20 and CUDA_STANDARD 20, or -std=c++20 for CUDA where CMake does not know the nvcc version)"
#endif

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>

/// 1 when cugraphs reports failures by throwing cugraphs::Error (the default), 0 in builds
/// without exceptions (-fno-exceptions), where failures go to the error handler
/// (set_error_handler, error.hpp). Define it to 0 or 1 to choose; every translation unit of
/// a program must agree.
#if !defined(CUGRAPHS_EXCEPTIONS)
#  if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#    define CUGRAPHS_EXCEPTIONS 1
#  else
#    define CUGRAPHS_EXCEPTIONS 0
#  endif
#endif

// Cleanup on the way out of a failure: a try block and its catch-all when exceptions are on;
// without them the block simply runs (a failure inside it never returns) and the handler
// part is never taken.
#if CUGRAPHS_EXCEPTIONS
#  define CUGRAPHS_TRY try
#  define CUGRAPHS_CATCH_ALL catch (...)
#  define CUGRAPHS_RETHROW throw
#else
#  define CUGRAPHS_TRY if (true)
#  define CUGRAPHS_CATCH_ALL else
#  define CUGRAPHS_RETHROW ::std::abort()
#endif

/// cugraphs is header-only unless CUGRAPHS_SEPARATE_COMPILATION is defined (the Meson
/// dependency defines it): then the bodies of its non-template host functions are compiled
/// once, into the cugraphs library (src/cugraphs.cpp), instead of in every translation unit
/// that includes a header. Every translation unit of a program must agree.
#if defined(CUGRAPHS_SEPARATE_COMPILATION)
#  define CUGRAPHS_INLINE
#else
#  define CUGRAPHS_INLINE inline
#endif

/// The stack pointer of the function that called the one this is written in (the call's
/// canonical frame address), where cugraphs can read it (g++ and clang on Linux, x86-64 and
/// AArch64; 0 elsewhere). The entry points of a capture (CaptureScope, Graph::capture_begin
/// and capture_end) are kept out of line and read it, so that a capture's end can tell the
/// frames of functions that returned during the capture (capture_session.ipp).
#if defined(__GNUC__) && defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#  define CUGRAPHS_NOINLINE __attribute__((noinline))
#  define CUGRAPHS_CALLER_STACK() reinterpret_cast<::std::uintptr_t>(__builtin_dwarf_cfa())
#else
#  define CUGRAPHS_NOINLINE
#  define CUGRAPHS_CALLER_STACK() ::std::uintptr_t{0}
#endif

#if defined(CUGRAPHS_SEPARATE_COMPILATION)
// The compiled library defines the tags of the settings it was built with (src/cugraphs.cpp):
// a translation unit built with another exception setting, or with another meaning of
// stream 0 (nvcc --default-stream per-thread), fails to link, naming the tag, instead of
// having errors thrown through code built without exceptions or its work sent to the legacy
// default stream. Such units use the header-only form.
#  if CUGRAPHS_EXCEPTIONS
#    define CUGRAPHS_DETAIL_EXCEPTIONS_TAG separate_compilation_with_exceptions
#  else
#    define CUGRAPHS_DETAIL_EXCEPTIONS_TAG separate_compilation_without_exceptions
#  endif
#  if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#    define CUGRAPHS_DETAIL_STREAM_TAG separate_compilation_per_thread_default_stream
#  else
#    define CUGRAPHS_DETAIL_STREAM_TAG separate_compilation_legacy_default_stream
#  endif
namespace cugraphs::detail {
extern const int CUGRAPHS_DETAIL_EXCEPTIONS_TAG;
extern const int CUGRAPHS_DETAIL_STREAM_TAG;
[[maybe_unused, gnu::used]] static const int* const separate_compilation_tags[] = {&CUGRAPHS_DETAIL_EXCEPTIONS_TAG,
                                                                                   &CUGRAPHS_DETAIL_STREAM_TAG};
}  // namespace cugraphs::detail
#endif

#define CUGRAPHS_VERSION_MAJOR 0
#define CUGRAPHS_VERSION_MINOR 1
#define CUGRAPHS_VERSION_PATCH 0

/// True when the CUDA runtime headers in use are at least version major.minor.
#define CUGRAPHS_CTK_AT_LEAST(major, minor) (CUDART_VERSION >= ((major) * 1000 + (minor) * 10))

#if !CUGRAPHS_CTK_AT_LEAST(12, 3)
#  error "cugraphs needs the CUDA toolkit 12.3 or newer (graph edge data and capture-to-graph APIs)"
#endif

/// Conditional graph nodes: If and While since 12.4, IfElse and Switch since 12.8.
#define CUGRAPHS_HAS_CONDITIONAL_NODES CUGRAPHS_CTK_AT_LEAST(12, 4)
#define CUGRAPHS_HAS_CONDITIONAL_ELSE_SWITCH CUGRAPHS_CTK_AT_LEAST(12, 8)

/// Device-updatable kernel nodes (launch_updatable, DeviceKernelNode): CUDA 12.4.
#define CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES CUGRAPHS_CTK_AT_LEAST(12, 4)

// CUDA 13 added an edge-data parameter to the capture-info functions.
#define CUGRAPHS_CAPTURE_INFO_HAS_EDGES CUGRAPHS_CTK_AT_LEAST(13, 0)

/// Define CUGRAPHS_CHECKED to 1 (a debug build) to make every pool from graph_pool_handle()
/// a checked pool: graphs sharing it are checked for concurrent and out-of-order replays.
#if !defined(CUGRAPHS_CHECKED)
#  define CUGRAPHS_CHECKED 0
#endif

#if defined(__CUDACC__)
#  define CUGRAPHS_HOST_DEVICE __host__ __device__
#else
#  define CUGRAPHS_HOST_DEVICE
#endif
