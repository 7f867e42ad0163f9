// The bodies of the functions <cugraphs/stream.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/stream.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs {

CUGRAPHS_INLINE Stream::Stream(int device, StreamOptions opts)
    : device_(device), blocking_(opts.blocking) {
  detail::DeviceGuard on(device);
  detail::check(cudaStreamCreateWithPriority(&stream_, opts.blocking ? cudaStreamDefault : cudaStreamNonBlocking,
                                             opts.priority),
                "Stream: cudaStreamCreateWithPriority");
}

CUGRAPHS_INLINE Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream old(std::move(*this));
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
    blocking_ = other.blocking_;
  }
  return *this;
}

CUGRAPHS_INLINE cudaStream_t Stream::get() const {
  if (stream_ == nullptr) [[unlikely]]
    moved_from("Stream::get");
  return stream_;
}

CUGRAPHS_INLINE void Stream::moved_from(std::string_view op) {
  detail::throw_misuse(op, "this Stream was moved from and owns no CUDA stream (using it would "
                           "silently mean the legacy default stream); use the Stream it was moved to");
}

}  // namespace cugraphs

namespace cugraphs::detail {

CUGRAPHS_INLINE void set_current_stream(cudaStream_t stream) noexcept {
  tls_current_stream = stream;
  for (const auto& l : tls_stream_listeners) l.fn(l.context, stream);
}

CUGRAPHS_INLINE bool fork_into_capture(cudaStream_t from, cudaStream_t to) {
  const auto plain = [](cudaStream_t s) { return s != nullptr && s != cudaStreamLegacy && s != cudaStreamPerThread; };
  if (from == to || !plain(from) || !plain(to)) return false;
  cudaStreamCaptureStatus outer = cudaStreamCaptureStatusNone, inner = cudaStreamCaptureStatusNone;
  unsigned long long outer_id = 0, inner_id = 0;
  if (cudaStreamGetCaptureInfo(from, &outer, &outer_id) != cudaSuccess) {
    (void)cudaGetLastError();  // the query's own error: a stream CUDA cannot say (its launches will)
    return false;
  }
  if (outer != cudaStreamCaptureStatusActive) return false;  // the usual case: no capture
  if (cudaStreamGetCaptureInfo(to, &inner, &inner_id) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Already in a capture: in `from`'s own (the stream current when the capture began, which
  // its escape check forked in, made current again), it is ordered after `from` all the same
  // and joined at the guard's end; another capture's stream is left alone.
  if (inner != cudaStreamCaptureStatusNone && (inner != cudaStreamCaptureStatusActive || inner_id != outer_id))
    return false;
  wait_for_stream(to, from,
                  format("StreamGuard: forking stream {} into the capture of the current stream {} (so that work "
                         "launched on it is captured rather than run once)",
                         static_cast<const void*>(to), static_cast<const void*>(from)));
  return true;
}

CUGRAPHS_INLINE void join_capture(cudaStream_t from, cudaStream_t to) noexcept {
  cudaStreamCaptureStatus outer = cudaStreamCaptureStatusNone, inner = cudaStreamCaptureStatusNone;
  const cudaError_t asked = cudaStreamIsCapturing(from, &outer);
  const cudaError_t asked_too = asked == cudaSuccess ? cudaStreamIsCapturing(to, &inner) : cudaSuccess;
  if (asked != cudaSuccess || asked_too != cudaSuccess) {
    (void)cudaGetLastError();  // the queries' own error; an ended capture is the capture's to report
  } else if (outer == cudaStreamCaptureStatusActive && inner == cudaStreamCaptureStatusActive) {
    const cudaError_t r = try_wait_for_stream(from, to);
    if (r != cudaSuccess) (void)cudaGetLastError();
    report_in_destructor(r, "StreamGuard: joining its stream back into the capture");
  }
}

CUGRAPHS_INLINE void CurrentStreamStack::push(cudaStream_t s) {
  saved_.push_back(tls_current_stream);
  set_current_stream(s);
}

CUGRAPHS_INLINE void CurrentStreamStack::pop() noexcept {
  if (saved_.empty()) return;
  set_current_stream(saved_.back());
  saved_.pop_back();
}

CUGRAPHS_INLINE void CurrentStreamStack::restore() noexcept {
  if (!saved_.empty()) set_current_stream(saved_.front());
  saved_.clear();
}

CUGRAPHS_INLINE cudaStream_t thread_stream(ThreadStream role, int device, std::size_t depth) {
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

CUGRAPHS_INLINE void take_words(int* words, int* host, std::size_t count, int device, std::string_view op) {
  DeviceGuard on(device);
  RelaxedCaptureMode relaxed;
  const cudaStream_t s = thread_stream(ThreadStream::Words, device);
  check(cudaMemcpyAsync(host, words, count * sizeof(int), cudaMemcpyDeviceToHost, s), "{}: reading status words", op);
  check(cudaStreamSynchronize(s), "{}: reading status words", op);
  if (host[0] == 0) return;
  check(cudaMemsetAsync(words, 0, count * sizeof(int), s), "{}: clearing status words", op);
  check(cudaStreamSynchronize(s), "{}: clearing status words", op);
}

}  // namespace cugraphs::detail

namespace cugraphs {

CUGRAPHS_INLINE cudaStream_t capture_stream(int device) {
  if (device < 0 || device >= detail::device_count())
    detail::throw_cuda(cudaErrorInvalidDevice,
                       detail::format("capture_stream({}): no such device", device));
  return detail::thread_stream(detail::ThreadStream::Capture, device);
}

CUGRAPHS_INLINE bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  detail::check(cudaStreamIsCapturing(stream, &status), "is_capturing (cudaStreamIsCapturing)");
  return status != cudaStreamCaptureStatusNone;
}

CUGRAPHS_INLINE bool is_current_stream_capturing() {
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
