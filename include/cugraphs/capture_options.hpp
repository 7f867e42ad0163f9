// How a capture begins: CaptureMode, EscapeCheck and CaptureOptions.
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/per_launch.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <optional>
#include <string_view>

namespace cugraphs {

/// Which CUDA calls a capture forbids, and on which threads (cudaStreamCaptureMode).
/// Global: unsafe calls (cudaMalloc, synchronous copies, synchronizes) are refused on every
/// thread; ThreadLocal: only on the capturing thread; Relaxed: nowhere.
enum class CaptureMode { Global, ThreadLocal, Relaxed };

/// Whether a capture refuses work that escapes it through the legacy default stream (a
/// kernel launched with <<<grid, block>>> and no stream, a synchronous cudaMemcpy or
/// cudaMemset, a library call on stream 0) while it is open. Such work would run once,
/// eagerly, at capture time and be missing from every replay. On: a blocking stream joins
/// the capture, so CUDA refuses the work (cudaErrorStreamCaptureImplicit) and the capture
/// fails with an Error that names the legacy default stream; this also refuses legacy-stream
/// work of other threads while the capture is open. On also forks the capturing thread's
/// per-thread default stream (stream 0 in units built with nvcc --default-stream per-thread)
/// into the capture, where no capture holds it yet: work issued there is captured instead of
/// run, and capture_end refuses it (cudaErrorStreamCaptureUnjoined, naming the stream and the
/// kernel) unless the capture stream waited for it afterwards, which makes it a branch of the
/// graph. Auto: On in CaptureMode::Global, Off in ThreadLocal and Relaxed (whose point is to
/// let other threads go on). Where the check is on, capture_end also refuses a copy of plain
/// pageable host memory (cudaErrorInvalidValue, naming the memcpy node): every replay would
/// copy from or into that address when it runs, when a stack variable is long gone; and a
/// kernel of cuRAND's host API (curandGenerate* called inside the capture) of a generator
/// that does not advance on the device (quasi-random Sobol, MT19937), which would draw the
/// same numbers at every replay.
enum class EscapeCheck { Auto, On, Off };

/// How a capture begins. The defaults capture on this thread's capture_stream() of the
/// current device, into a fresh private pool, in Global mode, refusing work that escapes to
/// the legacy default stream.
struct CaptureOptions {
  std::optional<PoolHandle> pool;  ///< none: a fresh private pool
  CaptureMode mode = CaptureMode::Global;
  cudaStream_t stream = nullptr;  ///< nullptr: capture_stream(current device)
  /// false: capture_end leaves the graph captured but not instantiated, for instantiate()
  /// later or for Graph::update, which applies it to another graph's executable.
  bool instantiate = true;
  /// true: the graph is instantiated for launch from the device too (Graph::device_graph(),
  /// device_launch.hpp). Such a graph holds kernel, memcpy, memset and child-graph nodes only,
  /// and cannot draw random numbers through a Generator or stage a graphed callable's inputs
  /// (its device-side launches would receive no fresh values): each is an Error.
  bool device_launch = false;
  /// Whether work that would escape the capture (legacy and per-thread default streams,
  /// copies of pageable host memory) is refused (see EscapeCheck).
  EscapeCheck escapes = EscapeCheck::Auto;
  /// How each launch gets its fresh random-number offsets and staged input addresses
  /// (see PerLaunch): the results are the same, the costs differ.
  PerLaunch per_launch = PerLaunch::Auto;
  /// false: capture_end refuses a capture that recorded no work (an Error, the graph left
  /// empty and reusable): its work went to some other stream, ran once, now, and would be
  /// missing from every replay. true: an empty graph is kept (its replays do nothing).
  bool allow_empty = false;
  /// true: every launch from the host refuses a graph that names a DeviceBuffer freed since
  /// its capture (an Error naming the buffer and the node; nothing launched): its replays
  /// would read and write whatever the allocator put there after. A node names a buffer
  /// that was alive at the capture's end, made outside any capture, with an address from its
  /// first byte to one past its last in a kernel's arguments, or as a copy's or memset's
  /// pointer. false: nothing is watched (for a kernel handed a buffer's one-past-the-end
  /// address where another, unrelated buffer begins).
  bool watch_buffers = true;
};

namespace detail {

[[nodiscard]] constexpr cudaStreamCaptureMode to_cuda(CaptureMode m) noexcept {
  switch (m) {
    case CaptureMode::ThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed: return cudaStreamCaptureModeRelaxed;
    default: return cudaStreamCaptureModeGlobal;
  }
}

[[nodiscard]] constexpr std::string_view name(CaptureMode m) noexcept {
  switch (m) {
    case CaptureMode::ThreadLocal: return "ThreadLocal";
    case CaptureMode::Relaxed: return "Relaxed";
    default: return "Global";
  }
}

// The stream and device a capture with `opts` begins on, once checked: the pool and the
// stream belong to the current device, and the stream can capture and is not capturing.
struct CaptureTarget {
  cudaStream_t stream;
  int device;
};
[[nodiscard]] CaptureTarget capture_target(const CaptureOptions& opts, std::string_view op);

}  // namespace detail

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/capture_options.ipp>
#endif
