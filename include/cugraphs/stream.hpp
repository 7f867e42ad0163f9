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
  Stream(int device, StreamOptions opts) : device_(device), blocking_(opts.blocking) {
    detail::DeviceGuard on(device);
    detail::check(cudaStreamCreateWithPriority(&stream_, opts.blocking ? cudaStreamDefault : cudaStreamNonBlocking,
                                               opts.priority),
                  "Stream: cudaStreamCreateWithPriority");
  }

  ~Stream() {
    if (stream_ != nullptr) detail::report_in_destructor(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }

  Stream(Stream&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_), blocking_(other.blocking_) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      Stream old(std::move(*this));
      stream_ = std::exchange(other.stream_, nullptr);
      device_ = other.device_;
      blocking_ = other.blocking_;
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// The stream. A moved-from Stream has none and throws an Error rather than hand out
  /// nullptr, which CUDA would take for the legacy default stream.
  [[nodiscard]] cudaStream_t get() const {
    if (stream_ == nullptr) [[unlikely]]
      moved_from("Stream::get");
    return stream_;
  }
  operator cudaStream_t() const { return get(); }  // NOLINT: implicit by design
  [[nodiscard]] int device() const noexcept { return device_; }
  /// Whether the stream synchronizes with the legacy default stream.
  [[nodiscard]] bool blocking() const noexcept { return blocking_; }

  /// Blocks until all work queued on the stream has finished.
  void synchronize() const { detail::check(cudaStreamSynchronize(get()), "Stream::synchronize"); }

private:
  [[noreturn]] static void moved_from(std::string_view op) {
    detail::throw_misuse(op, "this Stream was moved from and owns no CUDA stream (using it would "
                             "silently mean the legacy default stream); use the Stream it was moved to");
  }

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
inline void set_current_stream(cudaStream_t stream) noexcept {
  tls_current_stream = stream;
  for (const auto& l : tls_stream_listeners) l.fn(l.context, stream);
}
}  // namespace detail

/// This thread's current stream: where Graph::replay() and GraphedCallable launch by
/// default, and the capture stream inside a CaptureScope (a conditional body's stream
/// inside a ConditionalScope). Initially the legacy default stream (nullptr).
[[nodiscard]] inline cudaStream_t current_stream() noexcept { return detail::tls_current_stream; }

/// Makes `stream` this thread's current stream for a scope, then restores the previous one.
class StreamGuard {
public:
  explicit StreamGuard(cudaStream_t stream) noexcept : previous_(detail::tls_current_stream) {
    detail::set_current_stream(stream);
  }
  ~StreamGuard() { detail::set_current_stream(previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

private:
  cudaStream_t previous_;
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
  void push(cudaStream_t s) {
    saved_.push_back(tls_current_stream);
    set_current_stream(s);
  }
  void pop() noexcept {
    if (saved_.empty()) return;
    set_current_stream(saved_.back());
    saved_.pop_back();
  }
  void restore() noexcept {
    if (!saved_.empty()) set_current_stream(saved_.front());
    saved_.clear();
  }

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
[[nodiscard]] inline cudaStream_t thread_stream(ThreadStream role, int device, std::size_t depth = 0) {
  struct Entry {
    ThreadStream role;
    int device;
    std::size_t depth;
    std::unique_ptr<Stream> stream;
  };
  thread_local std::vector<Entry> streams;
  for (const Entry& e : streams)
    if (e.role == role && e.device == device && e.depth == depth) return e.stream->get();
  auto made = std::make_unique<Stream>(device, StreamOptions{role == ThreadStream::EscapeGuard, 0});
  streams.push_back({role, device, depth, std::move(made)});
  return streams.back().stream->get();
}

// Reads `count` status words of cugraphs' (device memory of `device`) into `host`, and zeroes
// them when the first is set, through this thread's Words stream: never the legacy default
// stream, whose use would break a capture open meanwhile. Orders nothing with other streams:
// call it once the work that writes the words has been waited for.
inline void take_words(int* words, int* host, std::size_t count, int device, std::string_view op) {
  DeviceGuard on(device);
  RelaxedCaptureMode relaxed;
  const cudaStream_t s = thread_stream(ThreadStream::Words, device);
  check(cudaMemcpyAsync(host, words, count * sizeof(int), cudaMemcpyDeviceToHost, s), "{}: reading status words", op);
  check(cudaStreamSynchronize(s), "{}: reading status words", op);
  if (host[0] == 0) return;
  check(cudaMemsetAsync(words, 0, count * sizeof(int), s), "{}: clearing status words", op);
  check(cudaStreamSynchronize(s), "{}: clearing status words", op);
}

}  // namespace detail

/// The side stream captures use by default on `device` (the legacy default stream cannot
/// capture). Each thread has its own, so threads capturing concurrently never share one.
[[nodiscard]] inline cudaStream_t capture_stream(int device) {
  if (device < 0 || device >= detail::device_count())
    detail::throw_cuda(cudaErrorInvalidDevice,
                       detail::format("capture_stream({}): no such device", device));
  return detail::thread_stream(detail::ThreadStream::Capture, device);
}

/// The capture stream of the current device.
[[nodiscard]] inline cudaStream_t capture_stream() { return capture_stream(detail::current_device()); }

/// True while `stream` is capturing (also when the capture has been invalidated and not
/// yet ended).
[[nodiscard]] inline bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  detail::check(cudaStreamIsCapturing(stream, &status), "is_capturing (cudaStreamIsCapturing)");
  return status != cudaStreamCaptureStatusNone;
}

/// True while this thread's current stream is capturing. Never creates a CUDA context:
/// the legacy default stream cannot capture, and any other stream implies a context.
[[nodiscard]] inline bool is_current_stream_capturing() {
  cudaStream_t s = current_stream();
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  // Here stream 0 is the per-thread default stream, which can capture; it cannot be
  // capturing unless this thread has a current context, which the driver tells us.
  if (s == nullptr) {
    if (!detail::thread_has_context()) return false;
    s = cudaStreamPerThread;
  }
#endif
  if (s == nullptr || s == cudaStreamLegacy) return false;
  return is_capturing(s);
}

}  // namespace cugraphs
