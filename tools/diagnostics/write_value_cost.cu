// What per-launch values cost when stream memory operations carry them (issue 29): raw CUDA,
// no cugraphs. A graph [stage, sum] stages 16 inputs of 4 KiB and sums them, as in
// slot_read_cost.cu. Its per-launch input addresses reach the staging copy
//   args        as kernel arguments: cudaGraphExecKernelNodeSetParams, then the launch
//   write1      one word (what an RNG offset needs) by cuStreamWriteValue64 into device memory
//               that the copy reads, then the launch; the other 15 addresses stay
//   batch16     all 16 words by one cuStreamBatchMemOp, then the launch
//   memcpy      the 16 words by cudaMemcpyAsync from a pinned slot, then the launch
// beside `bare` (the launch alone, the addresses fixed). Stream memory operations run in the
// GPU's front end, in stream order, so a value written before a launch is the value that launch
// reads, with no ring and no kernel of our own. For each way: the host's cost a call (batches
// of 16 calls queued behind a kernel that spins on the GPU timer) and the time to completion
// (launch, then synchronize; median of 200). Every way's last result is checked.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/write_value_cost.cu -o write_value_cost
#include "staging_kernels.cuh"

#include <cuda.h>  // types only: the driver is reached through the runtime's entry points
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using namespace staging_diag;
using diag::capture;
using diag::check;
using diag::measure;

constexpr const char* kProgram = "write_value_cost";

constexpr unsigned kStageBlocks = (kInputs * kFloats + 255) / 256;
constexpr unsigned kSlots = 64;

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::printf("write_value_cost: %s: CUresult %d\n", what, static_cast<int>(r));
  std::exit(1);
}

void* entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    std::printf("write_value_cost: no driver entry point %s\n", name);
    std::exit(1);
  }
  return fn;
}

using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
using BatchMemOp = CUresult (*)(CUstream, unsigned, CUstreamBatchMemOpParams*, unsigned);

// The addresses read from device memory (written by the stream before the launch).
__global__ void stage_dev(const Sources* src, float* dst) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < kFloats * kInputs) dst[i] = src->p[i / kFloats][i % kFloats];
}

}  // namespace

int main() {
  const auto write_value = reinterpret_cast<WriteValue64>(entry("cuStreamWriteValue64"));
  const auto batch_mem_op = reinterpret_cast<BatchMemOp>(entry("cuStreamBatchMemOp"));
  int device = 0, ops64 = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&ops64, static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS), device), "attribute");
  std::printf("write_value_cost: 64-bit stream memory operations %s\n", ops64 ? "supported" : "NOT supported");

  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<float*> inputs(2 * kInputs);
  std::vector<std::vector<float>> host_in(inputs.size(), std::vector<float>(kFloats));
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    for (std::size_t i = 0; i < kFloats; ++i) host_in[k][i] = static_cast<float>((k * 31 + i * 7) % 97) * 0.125f;
    check(cudaMalloc(&inputs[k], kFloats * sizeof(float)), "cudaMalloc");
    check(cudaMemcpy(inputs[k], host_in[k].data(), kFloats * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Sources sets[2]{};
  for (int set = 0; set < 2; ++set)
    for (int k = 0; k < kInputs; ++k) sets[set].p[k] = inputs[set * kInputs + k];
  float *staged = nullptr, *out = nullptr;
  Sources* dev_src = nullptr;
  check(cudaMalloc(&staged, kInputs * kFloats * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&out, kFloats * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&dev_src, sizeof(Sources)), "cudaMalloc");
  check(cudaMemcpy(dev_src, &sets[0], sizeof(Sources), cudaMemcpyHostToDevice), "cudaMemcpy");
  Sources* pinned = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&pinned), kSlots * sizeof(Sources), cudaHostAllocDefault),
        "cudaHostAlloc");

  cudaGraph_t g_args = nullptr, g_dev = nullptr;
  cudaGraphExec_t args = capture(s, [&] {
    stage<<<kStageBlocks, 256, 0, s>>>(sets[0], staged);
    sum_staged<<<(kFloats + 255) / 256, 256, 0, s>>>(staged, out);
  }, &g_args);
  cudaGraphExec_t dev = capture(s, [&] {
    stage_dev<<<kStageBlocks, 256, 0, s>>>(dev_src, staged);
    sum_staged<<<(kFloats + 255) / 256, 256, 0, s>>>(staged, out);
  }, &g_dev);

  cudaKernelNodeParams params{};
  const cudaGraphNode_t stage_node = find_stage_node(g_args, &params);

  int failures = 0;
  // The sum of the inputs `src` names, against the device's.
  const auto verify = [&](const char* name, const Sources& src) {
    std::vector<double> want(kFloats, 0.0);
    for (int k = 0; k < kInputs; ++k) {
      std::size_t which = 0;
      while (inputs[which] != src.p[k]) ++which;
      for (std::size_t i = 0; i < kFloats; ++i) want[i] += host_in[which][i];
    }
    std::vector<float> got(kFloats);
    check(cudaMemcpy(got.data(), out, kFloats * sizeof(float), cudaMemcpyDeviceToHost), "read back");
    for (std::size_t i = 0; i < kFloats; ++i)
      if (std::fabs(got[i] - want[i]) > 1e-3 * std::fabs(want[i]) + 1e-3) {
        std::printf("write_value_cost %s: wrong sum at %zu: %f, want %f\n", name, i, got[i], want[i]);
        ++failures;
        return;
      }
  };

  measure(kProgram, "bare", s, [&](int) { check(cudaGraphLaunch(args, s), "cudaGraphLaunch"); });
  Sources last = sets[0];
  measure(kProgram, "args", s, [&](int turn) {
    last = sets[turn % 2];
    launch_with_args(args, stage_node, params, last, staged, s);
  });
  check(cudaStreamSynchronize(s), "sync");
  verify("args", last);

  const auto write1 = [&](const char* name, unsigned flags) {
    last = sets[0];
    measure(kProgram, name, s, [&](int turn) {
      last.p[0] = sets[turn % 2].p[0];
      check(write_value(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(&dev_src->p[0]),
                        reinterpret_cast<cuuint64_t>(last.p[0]), flags),
            "cuStreamWriteValue64");
      check(cudaGraphLaunch(dev, s), "cudaGraphLaunch");
    });
    check(cudaStreamSynchronize(s), "sync");
    verify(name, last);
  };
  write1("write1", 0);

  const auto batch16 = [&](const char* name, unsigned flags) {
    measure(kProgram, name, s, [&](int turn) {
      last = sets[turn % 2];
      CUstreamBatchMemOpParams ops[kInputs]{};
      for (int k = 0; k < kInputs; ++k) {
        ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        ops[k].writeValue.address = reinterpret_cast<CUdeviceptr>(&dev_src->p[k]);
        ops[k].writeValue.value64 = reinterpret_cast<cuuint64_t>(last.p[k]);
        ops[k].writeValue.flags = flags;
      }
      check(batch_mem_op(reinterpret_cast<CUstream>(s), kInputs, ops, 0), "cuStreamBatchMemOp");
      check(cudaGraphLaunch(dev, s), "cudaGraphLaunch");
    });
    check(cudaStreamSynchronize(s), "sync");
    verify(name, last);
  };
  batch16("batch16", 0);

  unsigned long long copies = 0;  // a batch of 16 queued calls never laps the 64 pinned slots
  measure(kProgram, "memcpy", s, [&](int turn) {
    last = sets[turn % 2];
    Sources& slot = pinned[copies++ % kSlots];
    slot = last;
    check(cudaMemcpyAsync(dev_src, &slot, sizeof(Sources), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
    check(cudaGraphLaunch(dev, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  verify("memcpy", last);

  std::printf("write_value_cost: results %s\n", failures == 0 ? "match the host's" : "WRONG");
  return failures == 0 ? 0 : 1;
}
