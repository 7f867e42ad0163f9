// The device side of the host API: device and stream queries, RAII guards around per-thread
// CUDA state (the current device, the thread's stream-capture mode), the check that kernels
// can read a pointer, and device memory kept outside every pool (private_device_memory,
// PrivateArray).
#pragma once

#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string_view>

namespace cugraphs::detail {

[[nodiscard]] int current_device();

[[nodiscard]] int device_count() noexcept;

// True when this thread has a current CUDA context. Asks the driver (cuCtxGetCurrent)
// through the runtime's entry-point query, which creates no context.
[[nodiscard]] bool thread_has_context() noexcept;

// The driver's entry point `name` in its ABI of CUDA `version` (12000 for 12.0), reached
// through the runtime (no link to libcuda); null where the driver lacks it or CUDA is older
// than 12.5 at build time. A failed query's error is left for the caller to clear.
[[nodiscard]] void* driver_entry_point(const char* name, unsigned version) noexcept;
// The same, leaving behind no error of its own (an error pending before stays pending).
[[nodiscard]] void* quiet_driver_entry_point(const char* name, unsigned version) noexcept;

// Queues on `stream` a wait until the 32-bit word at `word` (device memory of the stream's
// device) has reached `value`, compared cyclically ((int)(*word - value) >= 0, so a count may
// wrap): the driver's cuStreamWaitValue32, a wait of the stream's front end that holds no SM.
// cudaErrorNotSupported, leaving no error behind, where it cannot be had (CUDA before 12.5 at
// build time, a driver without it); else the call's own error.
[[nodiscard]] cudaError_t stream_wait_at_least(cudaStream_t stream, const unsigned* word, unsigned value) noexcept;

// Makes `waiter` wait for the work queued on `producer` so far (an event recorded there, and
// destroyed: in a capture the wait is an edge of the graph). The same returning CUDA's error
// (left on the thread) instead of throwing.
void wait_for_stream(cudaStream_t waiter, cudaStream_t producer, std::string_view op);
[[nodiscard]] cudaError_t try_wait_for_stream(cudaStream_t waiter, cudaStream_t producer) noexcept;

// Whether new graphs should rely on stream_wait_at_least: CUDA 12.5+ at build time, a driver
// that has the call, and not switched off by set_stream_waits (tests take the fallbacks that
// way; graphs made before a switch keep what they chose).
[[nodiscard]] bool stream_waits() noexcept;
void set_stream_waits(bool enabled) noexcept;

// Blocks until the word at `word` (device memory of `device`) has reached `value`, through
// stream_wait_at_least on a stream of its own, in relaxed capture mode (a capture open on this
// thread goes on), leaving the current device as it was. Returns the first error.
[[nodiscard]] cudaError_t wait_at_least(int device, const unsigned* word, unsigned value) noexcept;

// Makes `device` current for a scope and restores the previous one.
class DeviceGuard {
public:
  explicit DeviceGuard(int device);
  ~DeviceGuard() {
    if (switched_) report_in_destructor(cudaSetDevice(previous_), "cudaSetDevice (restoring the device)");
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
  int previous_ = 0;
  bool switched_ = false;  // only then is there a device to restore
};

// Puts this thread in relaxed capture mode for a scope, so the pool may call cudaMalloc
// and cudaFree while a capture is open (those calls never enter the graph).
class RelaxedCaptureMode {
public:
  RelaxedCaptureMode() noexcept { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Whether `stream` is one of the per-device default streams, which belong to whichever
// device is current when they are used.
[[nodiscard]] inline bool is_default_stream(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

// The device `stream` belongs to: the current device for a default stream. The query runs
// in relaxed capture mode, so an open capture on this thread goes on.
[[nodiscard]] int stream_device(cudaStream_t stream, std::string_view op);

// Refuses a pointer that kernels on `device` cannot read because it is plain (pageable,
// unregistered) host memory, or no allocation at all: a kernel reading it would fault and
// lose the CUDA context. Pinned, managed and device memory pass, and so does pageable
// memory on a device that reads it (cudaDevAttrPageableMemoryAccess). An address that the
// driver does not know yet passes when `in_graph_memory()` says a graph being captured
// allocates it (cudaMallocAsync in the capture). The queries run in relaxed capture mode,
// so they cannot invalidate a capture open on this thread.
template <class InGraphMemory>
inline void check_device_readable(const void* p, int device, std::string_view op, std::string_view what,
                                  InGraphMemory&& in_graph_memory) {
  cudaPointerAttributes attr{};
  int pageable = 0;
  {
    RelaxedCaptureMode relaxed;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e == cudaSuccess && attr.type == cudaMemoryTypeUnregistered)
      e = cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device);
    check(e, "{}: cudaPointerGetAttributes of {}", op, what);
    if (attr.type != cudaMemoryTypeUnregistered || pageable != 0 || in_graph_memory()) return;
  }
  throw_misuse(op, "{} ({}) is not device memory: it is host memory that device {} cannot read (a "
                   "kernel reading it would fault). Pass memory from DeviceBuffer, cudaMalloc, "
                   "cudaMallocManaged or cudaMallocAsync",
               what, p, device);
}

inline void check_device_readable(const void* p, int device, std::string_view op, std::string_view what) {
  check_device_readable(p, device, op, what, [] { return false; });
}

// Waits until `device` has finished all its work, in relaxed capture mode (a capture open on
// this thread goes on), leaving the current device as it was. Returns the wait's error.
[[nodiscard]] cudaError_t synchronize_device(int device) noexcept;

// `bytes` of device memory of the current device owned by the library itself (state a
// graph keeps across replays). Not from a graph pool on purpose: a pool hands blocks that
// earlier graphs use as temporaries to later captures, and replaying those graphs would
// overwrite the state. Safe to call while a capture is open on this thread.
[[nodiscard]] std::shared_ptr<void> private_device_memory(std::size_t bytes, std::string_view what);

// The PTX version `kernel` was compiled from for this device (90 for sm_90 code), asked of
// CUDA once per kernel and thread: below 90, pdl::wait() and griddepcontrol.wait are compiled
// out of it.
[[nodiscard]] int kernel_ptx_version(const void* kernel, std::string_view op);

// `count` T of library-owned device memory (see private_device_memory).
template <class T>
class PrivateArray {
public:
  PrivateArray() = default;
  PrivateArray(std::size_t count, std::string_view what)
      : memory_(private_device_memory(count * sizeof(T), what)), count_(count) {}
  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(memory_.get()); }
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }

private:
  std::shared_ptr<void> memory_;
  std::size_t count_ = 0;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/device.ipp>
#endif
