// Streams: an owning Stream, the per-thread current stream, the per-device capture
// streams, and capture-status queries.
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs {

/// How a Stream is made: `blocking` streams synchronize with the legacy default stream
/// (cudaStreamDefault), others do not (cudaStreamNonBlocking, the default); a lower
/// `priority` number runs first (see cudaDeviceGetStreamPriorityRange).
struct StreamOptions {
  bool blocking = false;
  int priority = 0;
};

/// An owning CUDA stream on one device, non-blocking unless asked otherwise. Move-only;
/// destroying it releases the stream once its queued work is done.
class Stream {
public:
  /// A new non-blocking stream on the current device.
  Stream() : Stream(detail::current_device()) {}

  /// A new stream on the current device, made as `opts` says.
  explicit Stream(StreamOptions opts) : Stream(detail::current_device(), opts) {}

  /// A new non-blocking stream on `device`; a lower `priority` number runs first.
  explicit Stream(int device, int priority = 0) : Stream(device, StreamOptions{false, priority}) {}

  /// A new stream on `device`, made as `opts` says.
  Stream(int device, StreamOptions opts);

  ~Stream() {
    if (stream_ != nullptr) detail::report_in_destructor(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }

  Stream(Stream&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_), blocking_(other.blocking_) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// The stream. A moved-from Stream has none and throws an Error rather than hand out
  /// nullptr, which CUDA would take for the legacy default stream.
  [[nodiscard]] cudaStream_t get() const;
  operator cudaStream_t() const { return get(); }  // NOLINT: implicit by design
  [[nodiscard]] int device() const noexcept { return device_; }
  /// Whether the stream synchronizes with the legacy default stream.
  [[nodiscard]] bool blocking() const noexcept { return blocking_; }

  /// Blocks until all work queued on the stream has finished.
  void synchronize() const { detail::check(cudaStreamSynchronize(get()), "Stream::synchronize"); }

private:
  [[noreturn]] static void moved_from(std::string_view op);

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  bool blocking_ = false;
};

/// Called on a thread after cugraphs changed that thread's current stream (see
/// CurrentStreamListener), with the listener's context and the new current stream.
using CurrentStreamFn = void (*)(void* context, cudaStream_t stream);

namespace detail {
inline thread_local cudaStream_t tls_current_stream = nullptr;  // the legacy default stream

struct StreamListenerEntry {
  const void* key;
  CurrentStreamFn fn;
  void* context;
};
inline thread_local std::vector<StreamListenerEntry> tls_stream_listeners;

// Every change of the current stream goes through here, so listeners see each one.
void set_current_stream(cudaStream_t stream) noexcept;

// Where `from` is capturing and `to` is a stream of the program's (neither the legacy nor the
// per-thread default stream) that is not, or is in the same capture (the stream current when
// the capture began, which the escape check forks in), makes `to` wait for `from` in the
// capture, so that what is launched on `to` from here on is captured into the same graph
// after `from`'s work, and returns true. Otherwise does nothing and returns false. Throws an
// Error where CUDA refuses the fork.
[[nodiscard]] bool fork_into_capture(cudaStream_t from, cudaStream_t to);
// Makes `from` wait for what `to` captured since fork_into_capture, where both still capture
// (an unjoined stream fails the capture's end loudly otherwise).
void join_capture(cudaStream_t from, cudaStream_t to) noexcept;
// Whether some thread has a capture open whose escape check is on: its blocking guard stream
// then makes CUDA refuse any legacy-default-stream work (an event recorded there included)
// and invalidate that capture.
[[nodiscard]] bool escape_guards_open() noexcept;
}  // namespace detail

/// This thread's current stream: where Graph::replay() and GraphedCallable launch by
/// default, and the capture stream inside a CaptureScope (a conditional body's stream
/// inside a ConditionalScope). Initially the legacy default stream (nullptr).
[[nodiscard]] inline cudaStream_t current_stream() noexcept { return detail::tls_current_stream; }

/// Makes `stream` this thread's current stream for a scope, then restores the previous one.
///
/// Inside a capture (the current stream captures) a stream that does not capture is forked
/// into it: `stream` waits for the current stream, so the work launched on it under the guard
/// is captured into the same graph, after what came before; when the guard ends the current
/// stream waits for it again. Without the fork that work would run once, while the graph is
/// captured, and never in a replay (an engine's subsystem that switches to its own stream).
class StreamGuard {
public:
  explicit StreamGuard(cudaStream_t stream)
      : previous_(detail::tls_current_stream), stream_(stream),
        forked_(detail::fork_into_capture(previous_, stream)) {
    detail::set_current_stream(stream);
  }
  ~StreamGuard() {
    detail::set_current_stream(previous_);
    if (forked_) detail::join_capture(previous_, stream_);
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

private:
  cudaStream_t previous_;
  cudaStream_t stream_;
  bool forked_;
};

/// While it lives, calls `fn(context, stream)` on the thread that made it each time cugraphs
/// changes that thread's current stream: a StreamGuard, a CaptureScope opening or ending, a
/// conditional body beginning or ending. For handles of other libraries that are bound to a
/// stream (cuBLAS, cuDNN, cuSPARSE, ...) and must follow the capture into conditional
/// bodies; cugraphs/cublas.hpp uses it. `fn` must not throw. Destroy it on the same thread.
class CurrentStreamListener {
public:
  CurrentStreamListener(CurrentStreamFn fn, void* context) {
    detail::tls_stream_listeners.push_back({this, fn, context});
  }
  ~CurrentStreamListener() {
    std::erase_if(detail::tls_stream_listeners, [this](const auto& l) { return l.key == this; });
  }
  CurrentStreamListener(const CurrentStreamListener&) = delete;
  CurrentStreamListener& operator=(const CurrentStreamListener&) = delete;
};

namespace detail {

// The current streams a capture has set on its thread, as one stack: a CaptureScope pushes
// the capture stream, each conditional body its body stream; popping restores what the push
// found, and restore() what the first push found.
class CurrentStreamStack {
public:
  void push(cudaStream_t s);
  void pop() noexcept;
  void restore() noexcept;

private:
  std::vector<cudaStream_t> saved_;  // current streams before each push, oldest first
};

// The streams cugraphs keeps per thread: the capture stream of each device, a stream per
// conditional nesting depth for bodies, a blocking escape guard per capture depth, and a
// non-blocking one for cugraphs' own small copies of its state words (status words,
// tables), so that they never touch the legacy default stream.
enum class ThreadStream : unsigned char { Capture, Body, EscapeGuard, Words };

// This thread's stream of `role` on `device` at nesting `depth`, made on first use and kept
// for the thread's life. Escape guards are blocking streams (see CaptureSession's escape guard:
// while one captures, CUDA refuses legacy-stream work), the others non-blocking.
[[nodiscard]] cudaStream_t thread_stream(ThreadStream role, int device, std::size_t depth = 0);

// Reads `count` status words of cugraphs' (device memory of `device`) into `host`, and zeroes
// them when the first is set, through this thread's Words stream: never the legacy default
// stream, whose use would break a capture open meanwhile. Orders nothing with other streams:
// call it once the work that writes the words has been waited for.
void take_words(int* words, int* host, std::size_t count, int device, std::string_view op);

}  // namespace detail

/// The side stream captures use by default on `device` (the legacy default stream cannot
/// capture). Each thread has its own, so threads capturing concurrently never share one.
[[nodiscard]] cudaStream_t capture_stream(int device);

/// The capture stream of the current device.
[[nodiscard]] inline cudaStream_t capture_stream() { return capture_stream(detail::current_device()); }

/// True while `stream` is capturing (also when the capture has been invalidated and not
/// yet ended).
[[nodiscard]] bool is_capturing(cudaStream_t stream);

/// True while this thread's current stream is capturing. Never creates a CUDA context:
/// the legacy default stream cannot capture, and any other stream implies a context.
[[nodiscard]] bool is_current_stream_capturing();

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/stream.ipp>
#endif
