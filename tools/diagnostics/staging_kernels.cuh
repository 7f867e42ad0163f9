// The kernels and helpers the staging diagnostics share (call_cost.cu, slot_read_cost.cu):
// 16 inputs of 4 KiB, as bench_suite's graphed section, a kernel that spins on the GPU timer
// so that calls queue behind it, and the sums that stand for a graphed callable's f. For one
// translation unit per program (the kernels are not inline).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace staging_diag {

constexpr int kInputs = 16;
constexpr std::size_t kFloats = 1024;  // 4 KiB an input

struct Sources {
  const float* p[kInputs];
};

__global__ void spin(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// The 16 inputs copied one after another into `dst`, addresses as arguments.
__global__ void stage(Sources src, float* dst) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < kFloats * kInputs) dst[i] = src.p[i / kFloats][i % kFloats];
}

// f on the staged copy, and f on the inputs where they are.
__global__ void sum_staged(const float* staged, float* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= kFloats) return;
  float s = 0.0f;
  for (int k = 0; k < kInputs; ++k) s += staged[k * kFloats + i];
  out[i] = s;
}

__global__ void sum_inputs(Sources src, float* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= kFloats) return;
  float s = 0.0f;
  for (int k = 0; k < kInputs; ++k) s += src.p[k][i];
  out[i] = s;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace staging_diag
