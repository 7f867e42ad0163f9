// The kernels the staging diagnostics share (call_cost.cu, slot_read_cost.cu,
// write_value_cost.cu): 16 inputs of 4 KiB, as bench_suite's graphed section, the staging
// copy, and the sums that stand for a graphed callable's f; with launch_timing.cuh's spin and
// median. For one translation unit per program (the kernels are not inline).
#pragma once

#include "launch_timing.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace staging_diag {

using diag::median;
using diag::spin;

constexpr int kInputs = 16;
constexpr std::size_t kFloats = 1024;  // 4 KiB an input

struct Sources {
  const float* p[kInputs];
};

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

// The node of `g` that runs `stage`, with its parameters in *params; exits if there is none.
inline cudaGraphNode_t find_stage_node(cudaGraph_t g, cudaKernelNodeParams* params) {
  std::size_t n = 0;
  diag::check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  diag::check(cudaGraphGetNodes(g, nodes.data(), &n), "cudaGraphGetNodes");
  for (cudaGraphNode_t node : nodes) {
    cudaKernelNodeParams p{};
    if (cudaGraphKernelNodeGetParams(node, &p) == cudaSuccess && p.func == reinterpret_cast<void*>(&stage)) {
      *params = p;
      return node;
    }
  }
  std::printf("no staging node found\n");
  std::exit(1);
}
// The way every staging diagnostic compares against: `node` of `exec` (the staging copy,
// whose other parameters `params` holds) set to copy from `src` into `staged`, then a launch.
inline void launch_with_args(cudaGraphExec_t exec, cudaGraphNode_t node, cudaKernelNodeParams params, Sources src,
                             float* staged, cudaStream_t s) {
  void* kernel_args[] = {&src, &staged};
  params.kernelParams = kernel_args;
  diag::check(cudaGraphExecKernelNodeSetParams(exec, node, &params), "cudaGraphExecKernelNodeSetParams");
  diag::check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
}

}  // namespace staging_diag
