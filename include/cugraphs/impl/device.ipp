// The bodies of the functions <cugraphs/detail/device.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/config.hpp>

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace cugraphs::detail {

CUGRAPHS_INLINE int current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

CUGRAPHS_INLINE cudaError_t try_wait_for_stream(cudaStream_t waiter, cudaStream_t producer) noexcept {
  if (waiter == producer) return cudaSuccess;
  cudaEvent_t e = nullptr;
  cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (r != cudaSuccess) return r;
  r = cudaEventRecord(e, producer);
  if (r == cudaSuccess) r = cudaStreamWaitEvent(waiter, e, 0);
  report_in_destructor(cudaEventDestroy(e), "cudaEventDestroy");
  return r;
}

CUGRAPHS_INLINE void wait_for_stream(cudaStream_t waiter, cudaStream_t producer, std::string_view op) {
  check(try_wait_for_stream(waiter, producer), "{}: ordering a stream after another (cudaEventRecord, "
                                               "cudaStreamWaitEvent)", op);
}

CUGRAPHS_INLINE int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no stale error behind on machines without a GPU
    return 0;
  }
  return n;
}

CUGRAPHS_INLINE void* driver_entry_point(const char* name, unsigned version) noexcept {
#if CUGRAPHS_CTK_AT_LEAST(12, 5)
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return fn;
#else
  (void)name;
  (void)version;
  return nullptr;
#endif
}

CUGRAPHS_INLINE void* quiet_driver_entry_point(const char* name, unsigned version) noexcept {
  const bool pending = cudaPeekAtLastError() != cudaSuccess;
  void* fn = driver_entry_point(name, version);
  if (fn == nullptr && !pending) (void)cudaGetLastError();
  return fn;
}

// The driver's cuStreamWaitValue32 (null where it cannot be had), and the switch tests use.
using StreamWaitValue32 = int (*)(void* stream, unsigned long long word, unsigned value, unsigned flags);
CUGRAPHS_INLINE StreamWaitValue32 stream_wait_value_entry() noexcept {
  static const auto wait = reinterpret_cast<StreamWaitValue32>(quiet_driver_entry_point("cuStreamWaitValue32", 12000));
  return wait;
}
CUGRAPHS_INLINE std::atomic<bool>& stream_waits_switch() noexcept {
  static std::atomic<bool> enabled{true};
  return enabled;
}

CUGRAPHS_INLINE bool stream_waits() noexcept {
  return stream_waits_switch().load(std::memory_order_relaxed) && stream_wait_value_entry() != nullptr;
}

CUGRAPHS_INLINE void set_stream_waits(bool enabled) noexcept {
  stream_waits_switch().store(enabled, std::memory_order_relaxed);
}

CUGRAPHS_INLINE cudaError_t stream_wait_at_least(cudaStream_t stream, const unsigned* word, unsigned value) noexcept {
  // Not the switch: a graph that chose the count when it was captured keeps waiting for it.
  if (stream_wait_value_entry() == nullptr) return cudaErrorNotSupported;
  // The driver reads stream 0 as the legacy default stream: name the one 0 means here.
  if (stream == nullptr) {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
    stream = cudaStreamPerThread;
#else
    stream = cudaStreamLegacy;
#endif
  }
  constexpr unsigned kGeq = 0;  // CU_STREAM_WAIT_VALUE_GEQ
  const int r = stream_wait_value_entry()(stream, reinterpret_cast<std::uintptr_t>(word), value, kGeq);
  return r == 0 ? cudaSuccess : static_cast<cudaError_t>(r);  // the driver's codes are the runtime's
}

// Runs `work()` (returning a cudaError_t) with `device` current, in relaxed capture mode,
// leaving the current device as it was; the first error.
template <class Work>
cudaError_t on_device_relaxed(int device, Work&& work) noexcept {
  RelaxedCaptureMode relaxed;
  int current = device;
  cudaError_t e = cudaGetDevice(&current);
  const bool switched = e == cudaSuccess && current != device;
  if (switched) e = cudaSetDevice(device);
  if (e == cudaSuccess) e = work();
  if (switched) (void)cudaSetDevice(current);
  return e;
}

CUGRAPHS_INLINE cudaError_t wait_at_least(int device, const unsigned* word, unsigned value) noexcept {
  return on_device_relaxed(device, [&] {
    cudaStream_t s = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return e;
    e = stream_wait_at_least(s, word, value);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (const cudaError_t d = cudaStreamDestroy(s); e == cudaSuccess) e = d;
    return e;
  });
}

CUGRAPHS_INLINE bool thread_has_context() noexcept {
  using CtxGetCurrent = int (*)(void**);
  static const auto get = [] {
    void* fn = driver_entry_point("cuCtxGetCurrent", 4000);
    if (fn == nullptr) (void)cudaGetLastError();
    return reinterpret_cast<CtxGetCurrent>(fn);
  }();
  void* ctx = nullptr;
  return get != nullptr && get(&ctx) == 0 && ctx != nullptr;
}

CUGRAPHS_INLINE DeviceGuard::DeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    switched_ = true;
  }
}

CUGRAPHS_INLINE int stream_device(cudaStream_t stream, std::string_view op) {
  if (is_default_stream(stream)) return current_device();
  int device = 0;
  RelaxedCaptureMode relaxed;
  check(cudaStreamGetDevice(stream, &device), "{}: cudaStreamGetDevice (is the stream alive?)", op);
  return device;
}

CUGRAPHS_INLINE cudaError_t synchronize_device(int device) noexcept {
  return on_device_relaxed(device, [] { return cudaDeviceSynchronize(); });
}

CUGRAPHS_INLINE std::shared_ptr<void> private_device_memory(std::size_t bytes, std::string_view what) {
  RelaxedCaptureMode relaxed;
  const int device = current_device();
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "{}: cudaMalloc of {} bytes", what, bytes);
  return std::shared_ptr<void>(p, [device](void* q) {
    CUGRAPHS_TRY {
      DeviceGuard on(device);
      RelaxedCaptureMode relaxed_free;
      report_in_destructor(cudaFree(q), "cudaFree (library state)");
    } CUGRAPHS_CATCH_ALL {  // a deleter must not throw (formatting the message could)
      report_in_destructor(caught_code(), "freeing library state");
    }
  });
}

CUGRAPHS_INLINE int kernel_ptx_version(const void* kernel, std::string_view op) {
  thread_local std::vector<std::pair<const void*, int>> seen;
  for (const auto& [k, v] : seen)
    if (k == kernel) return v;
  RelaxedCaptureMode relaxed;  // a query, but one that must not risk a capture
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, kernel), "{}: cudaFuncGetAttributes", op);
  seen.emplace_back(kernel, attributes.ptxVersion);
  return attributes.ptxVersion;
}

}  // namespace cugraphs::detail
