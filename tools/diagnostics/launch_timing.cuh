// What the launch-cost diagnostics share (slot_read_cost.cu, write_value_cost.cu,
// rng_advance_cost.cu, and through staging_kernels.cuh call_cost.cu): a checked CUDA call
// (runtime or driver), a kernel node's parameters in the driver's form, a programmatic launch,
// a kernel that spins on the GPU timer, a capture into an executable, and the two figures each
// way of launching is judged by: the host's cost a call (batches of 16 calls queued behind a
// 200 us spin, so that no call waits for the device; median of 40 batches) and the time to
// completion (one call, then synchronize; median of 200). For one translation unit per
// program (the kernel is not inline).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace diag {

inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// A driver call's result (programs that make driver calls link -lcuda).
inline void check_driver(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  (void)cuGetErrorName(r, &name);
  std::printf("%s: %s\n", what, name != nullptr ? name : "unknown error");
  std::exit(1);
}

// `p` (a kernel node's runtime parameters, `function` its kernel's) in the driver's form.
inline CUDA_KERNEL_NODE_PARAMS driver_params(const cudaKernelNodeParams& p, cudaFunction_t function) {
  CUDA_KERNEL_NODE_PARAMS d{};
  d.func = reinterpret_cast<CUfunction>(function);
  d.gridDimX = p.gridDim.x;
  d.gridDimY = p.gridDim.y;
  d.gridDimZ = p.gridDim.z;
  d.blockDimX = p.blockDim.x;
  d.blockDimY = p.blockDim.y;
  d.blockDimZ = p.blockDim.z;
  d.sharedMemBytes = p.sharedMemBytes;
  d.kernelParams = p.kernelParams;
  return d;
}

// Launches `kernel` on `s` with one launch attribute, which CUDA may write back (a
// device-updatable node's handle); `what` names the launch in an error.
template <class... P, class... A>
void launch_with(cudaLaunchAttribute& attribute, const char* what, void (*kernel)(P...), dim3 grid, dim3 block,
                 cudaStream_t s, A... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = s;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, kernel, static_cast<P>(args)...), what);
}

// Launches `kernel` on `s` with a programmatic dependency on the work before it.
template <class... P, class... A>
void launch_programmatic(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t s, A... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  launch_with(attribute, "cudaLaunchKernelEx (programmatic)", kernel, grid, block, s, args...);
}

__global__ void spin(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What `launch` queues on `s`, captured and instantiated; the graph in *graph.
template <class Launch>
cudaGraphExec_t capture(cudaStream_t s, Launch&& launch, cudaGraph_t* graph) {
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  launch();
  check(cudaStreamEndCapture(s, graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, *graph, 0), "cudaGraphInstantiate");
  return exec;
}

// Times `call(turn)` (turn counts every call made, from 0) both ways and prints
// "<program> <name> host X us a call, to completion Y us"; returns how many calls it made.
template <class Call>
int measure(const char* program, const char* name, cudaStream_t s, Call&& call) {
  using Clock = std::chrono::steady_clock;
  constexpr int kBatch = 16;
  int turn = 0;
  for (int i = 0; i < 20; ++i) call(turn++);  // warm
  check(cudaStreamSynchronize(s), "warm-up");
  std::vector<double> host, done;
  for (int batch = 0; batch < 40; ++batch) {
    spin<<<1, 1, 0, s>>>(200'000);  // 200 us: the calls queue behind it
    const auto t0 = Clock::now();
    for (int k = 0; k < kBatch; ++k) call(turn++);
    host.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kBatch);
    check(cudaStreamSynchronize(s), "batch");
  }
  for (int k = 0; k < 200; ++k) {
    const auto t0 = Clock::now();
    call(turn++);
    check(cudaStreamSynchronize(s), "call");
    done.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::printf("%s %-10s host %6.2f us a call, to completion %6.2f us\n", program, name, median(host), median(done));
  return turn;
}

}  // namespace diag
