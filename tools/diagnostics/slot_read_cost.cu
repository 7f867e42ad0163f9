// What a staging copy that reads its own ring slot would cost (issue 29, an idea not yet
// built): raw CUDA, no cugraphs. A graph [stage, sum] stages 16 inputs of 4 KiB and sums
// them. Its per-launch input addresses reach the staging copy
//   args       as its kernel arguments: cudaGraphExecKernelNodeSetParams, then the launch
//              (PerLaunch::Parameters today: the host pays a node update a call)
//   slot       from a slot of pinned, mapped host memory that the host writes before the
//              launch; the copy's blocks read the slot a device counter names (one read over
//              the bus each, in parallel) and the last block advances the counter (no head
//              or tail kernel: what the ring costs the device today, 6 to 7 us, would be
//              this one read)
// beside `bare` (the launch alone, the addresses fixed) and `f alone` (a graph of the sum
// reading the inputs where they are). For each way: the host's cost a call (batches of 16
// calls queued behind a kernel that spins on the GPU timer, so that no call waits for the
// device) and the time to completion (launch, then synchronize; median of 200). Every way's
// last result is checked against the host's sum.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/slot_read_cost.cu -o slot_read_cost
#include "staging_kernels.cuh"

#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using namespace staging_diag;
using diag::capture;
using diag::check;
using diag::measure;

constexpr const char* kProgram = "slot_read_cost";

constexpr unsigned kSlots = 64;
constexpr unsigned kStageBlocks = (kInputs * kFloats + 255) / 256;

struct Ring {
  const Sources* slots;         // kSlots, pinned and mapped (written by the host)
  unsigned long long* counter;  // [0] launches taken, [1] blocks done in this launch (device)
};

// Each block reads the one address it copies from the slot of this launch, over the bus.
__global__ void stage_slot(Ring r, float* dst) {
  __shared__ const float* src;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x);
  if (threadIdx.x == 0) {
    const unsigned long long launch = *static_cast<volatile unsigned long long*>(r.counter);
    src = static_cast<const volatile Sources*>(r.slots)[launch % kSlots].p[first / kFloats];
  }
  __syncthreads();
  const std::size_t i = first + threadIdx.x;
  if (i < kFloats * kInputs) dst[i] = src[i % kFloats];
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&r.counter[1], 1ull) == gridDim.x - 1) {
    r.counter[1] = 0;  // the last block: the next launch takes the next slot
    __threadfence();
    r.counter[0] += 1;
  }
}

}  // namespace

int main() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<float*> inputs(2 * kInputs);
  std::vector<float> host_in(kFloats);
  std::vector<double> want[2];
  for (int set = 0; set < 2; ++set) want[set].assign(kFloats, 0.0);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    for (std::size_t i = 0; i < kFloats; ++i) host_in[i] = static_cast<float>((k * 31 + i * 7) % 97) * 0.125f;
    for (std::size_t i = 0; i < kFloats; ++i) want[k / kInputs][i] += host_in[i];
    check(cudaMalloc(&inputs[k], kFloats * sizeof(float)), "cudaMalloc");
    check(cudaMemcpy(inputs[k], host_in.data(), kFloats * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Sources sets[2]{};
  for (int set = 0; set < 2; ++set)
    for (int k = 0; k < kInputs; ++k) sets[set].p[k] = inputs[set * kInputs + k];
  float *staged = nullptr, *out = nullptr;
  check(cudaMalloc(&staged, kInputs * kFloats * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&out, kFloats * sizeof(float)), "cudaMalloc");
  Sources* slots = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&slots), kSlots * sizeof(Sources), cudaHostAllocMapped), "cudaHostAlloc");
  Sources* slots_dev = nullptr;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slots_dev), slots, 0), "cudaHostGetDevicePointer");
  unsigned long long* counter = nullptr;
  check(cudaMalloc(&counter, 2 * sizeof(unsigned long long)), "cudaMalloc");
  check(cudaMemset(counter, 0, 2 * sizeof(unsigned long long)), "cudaMemset");

  cudaGraph_t g_args = nullptr, g_slot = nullptr, g_f = nullptr;
  cudaGraphExec_t args = capture(s, [&] {
    stage<<<kStageBlocks, 256, 0, s>>>(sets[0], staged);
    sum_staged<<<(kFloats + 255) / 256, 256, 0, s>>>(staged, out);
  }, &g_args);
  cudaGraphExec_t slot = capture(s, [&] {
    stage_slot<<<kStageBlocks, 256, 0, s>>>(Ring{slots_dev, counter}, staged);
    sum_staged<<<(kFloats + 255) / 256, 256, 0, s>>>(staged, out);
  }, &g_slot);
  cudaGraphExec_t f_alone = capture(s, [&] { sum_inputs<<<(kFloats + 255) / 256, 256, 0, s>>>(sets[0], out); }, &g_f);

  cudaKernelNodeParams params{};
  const cudaGraphNode_t stage_node = find_stage_node(g_args, &params);

  int failures = 0;
  const auto verify = [&](const char* name, int set) {
    std::vector<float> got(kFloats);
    check(cudaMemcpy(got.data(), out, kFloats * sizeof(float), cudaMemcpyDeviceToHost), "read back");
    for (std::size_t i = 0; i < kFloats; ++i)
      if (std::fabs(got[i] - want[set][i]) > 1e-3 * std::fabs(want[set][i]) + 1e-3) {
        std::printf("slot_read_cost %s: wrong sum at %zu: %f, want %f\n", name, i, got[i], want[set][i]);
        ++failures;
        return;
      }
  };

  measure(kProgram, "bare", s, [&](int) { check(cudaGraphLaunch(args, s), "cudaGraphLaunch"); });
  measure(kProgram, "f alone", s, [&](int) { check(cudaGraphLaunch(f_alone, s), "cudaGraphLaunch"); });
  int last = 0;
  measure(kProgram, "args", s, [&](int turn) {
    launch_with_args(args, stage_node, params, sets[turn % 2], staged, s);
    last = turn % 2;
  });
  check(cudaStreamSynchronize(s), "sync");
  verify("args", last);
  unsigned long long launches = 0;  // the slot the next launch reads: the device counter, mirrored
  measure(kProgram, "slot", s, [&](int turn) {
    // A batch of 16 queued calls never laps the 64 slots: each batch ends with a synchronize.
    slots[launches % kSlots] = sets[turn % 2];
    std::atomic_thread_fence(std::memory_order_release);  // the slot before the launch's doorbell
    check(cudaGraphLaunch(slot, s), "cudaGraphLaunch");
    ++launches;
    last = turn % 2;
  });
  check(cudaStreamSynchronize(s), "sync");
  verify("slot", last);
  std::printf("slot_read_cost: results %s\n", failures == 0 ? "match the host's" : "WRONG");
  return failures == 0 ? 0 : 1;
}
