// The bodies of the functions <cugraphs/capture_options.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/capture_options.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE CaptureTarget capture_target(const CaptureOptions& opts, std::string_view op) {
  const int device = current_device();
  if (opts.pool && opts.pool->device() != device)
    throw_misuse(op, "the pool (id {}) belongs to device {} but device {} is current; make the pool's device "
                     "current, or use a pool of this device",
                 opts.pool->id(), opts.pool->device(), device);
  if (opts.stream == cudaStreamLegacy)
    throw_error(cudaErrorStreamCaptureImplicit, op, "the legacy default stream cannot capture. Remedy: leave "
                "CaptureOptions::stream null to capture on capture_stream(), or pass a Stream you created");
  const cudaStream_t stream = opts.stream != nullptr ? opts.stream : capture_stream(device);
  if (cugraphs::is_capturing(stream))
    throw_misuse(op, "the stream is already capturing (captures cannot nest on one stream); end that capture "
                     "first, or capture on another stream{}",
                 stream == cudaStreamPerThread
                     ? ". This thread's per-thread default stream is also held by an enclosing capture's escape "
                       "check (CaptureOptions::escapes) until that capture ends; begin the enclosing capture with "
                       "EscapeCheck::Off to capture on it inside"
                     : "");
  // Another capture may be open on this thread; the query does not invalidate it.
  if (const int d = stream_device(stream, op); d != device)
    throw_misuse(op, "the stream belongs to device {} but device {} is current; make the stream's device current "
                     "before capturing",
                 d, device);
  return {stream, device};
}

}  // namespace cugraphs::detail
