// Small RAII guards around per-thread CUDA state: the current device and the thread's
// stream-capture mode.
#pragma once

#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

namespace cugraphs::detail {

[[nodiscard]] inline int current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

[[nodiscard]] inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no stale error behind on machines without a GPU
    return 0;
  }
  return n;
}

// True when this thread has a current CUDA context. Asks the driver (cuCtxGetCurrent)
// through the runtime's entry-point query, which creates no context.
[[nodiscard]] inline bool thread_has_context() noexcept {
  using CtxGetCurrent = int (*)(void**);
  static const CtxGetCurrent get = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 4000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<CtxGetCurrent>(fn);
  }();
  void* ctx = nullptr;
  return get != nullptr && get(&ctx) == 0 && ctx != nullptr;
}

// Makes `device` current for a scope and restores the previous one.
class DeviceGuard {
public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_)
      report_in_destructor(cudaSetDevice(previous_), "cudaSetDevice (restoring the device)");
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
  int previous_ = 0;
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

}  // namespace cugraphs::detail
