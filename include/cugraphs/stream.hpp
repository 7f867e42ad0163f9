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

/// An owning, non-blocking CUDA stream on one device. Move-only; destroying it releases the
/// stream once its queued work is done.
class Stream {
public:
  /// A new non-blocking stream on the current device.
  Stream() : Stream(detail::current_device()) {}

  /// A new non-blocking stream on `device`; a lower `priority` number runs first.
  explicit Stream(int device, int priority = 0) : device_(device) {
    detail::DeviceGuard on(device);
    detail::check(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority),
                  "Stream: cudaStreamCreateWithPriority");
  }

  ~Stream() {
    if (stream_ != nullptr) detail::report_in_destructor(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }

  Stream(Stream&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      Stream old(std::move(*this));
      stream_ = std::exchange(other.stream_, nullptr);
      device_ = other.device_;
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

  /// Blocks until all work queued on the stream has finished.
  void synchronize() const { detail::check(cudaStreamSynchronize(get()), "Stream::synchronize"); }

private:
  [[noreturn]] static void moved_from(std::string_view op) {
    detail::throw_misuse(op, "this Stream was moved from and owns no CUDA stream (using it would "
                             "silently mean the legacy default stream); use the Stream it was moved to");
  }

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

namespace detail {
inline thread_local cudaStream_t tls_current_stream = nullptr;  // the legacy default stream
}  // namespace detail

/// This thread's current stream: where Graph::replay() and GraphedCallable launch by
/// default, and the capture stream inside a CaptureScope. Initially the legacy default
/// stream (nullptr).
[[nodiscard]] inline cudaStream_t current_stream() noexcept { return detail::tls_current_stream; }

/// Makes `stream` this thread's current stream for a scope, then restores the previous one.
class StreamGuard {
public:
  explicit StreamGuard(cudaStream_t stream) noexcept
      : previous_(std::exchange(detail::tls_current_stream, stream)) {}
  ~StreamGuard() { detail::tls_current_stream = previous_; }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

private:
  cudaStream_t previous_;
};

/// The side stream captures use by default on `device` (the legacy default stream cannot
/// capture). Each thread has its own, so threads capturing concurrently never share one.
[[nodiscard]] inline cudaStream_t capture_stream(int device) {
  thread_local std::vector<std::unique_ptr<Stream>> streams;
  if (device < 0 || device >= detail::device_count())
    detail::throw_cuda(cudaErrorInvalidDevice,
                       detail::format("capture_stream({}): no such device", device));
  const auto index = static_cast<std::size_t>(device);
  if (streams.size() <= index) streams.resize(index + 1);
  auto& s = streams[index];
  if (!s) s = std::make_unique<Stream>(device);
  return s->get();
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
