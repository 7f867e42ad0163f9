// What a kernel node update costs the host by each call CUDA offers (issue 29: PerLaunch::
// Parameters pays one update a drawing node a launch): raw CUDA, no cugraphs. A graph whose one
// kernel draws at the offset it takes as an argument; before each launch the offset is set by
//   kernelParams  cudaGraphExecKernelNodeSetParams with an array of pointers to the arguments
//                 (what cugraphs does)
//   extra         the same call with the arguments packed in one buffer
//                 (CU_LAUNCH_PARAM_BUFFER_POINTER), no pointer array
//   node v2       cudaGraphExecNodeSetParams (the generic node call)
//   driver        cuGraphExecKernelNodeSetParams (the driver API, kernelParams)
// against the launch alone ("fixed"). For each: the host's cost a call and the time to
// completion (launch_timing.cuh); the offsets the last launches drew at are checked.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/node_update_cost.cu -lcuda -o node_update_cost
#include "offset_kernels.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

using diag::capture;
using diag::check;
using diag::check_driver;
using diag::draw_args;
using diag::kBlocks;
using diag::kIncrement;
using diag::kThreads;
using diag::measure;

constexpr const char* kProgram = "node_update_cost";

}  // namespace

int main() {
  const unsigned long long seed = 42, start = 1000;
  const auto [s, out, words] = diag::offset_setup(seed, start);
  (void)words;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = capture(s, [&] { draw_args<<<kBlocks, kThreads, 0, s>>>(seed, start, out); }, &g);
  cudaGraphNode_t node = nullptr;
  std::size_t n = 1;
  check(cudaGraphGetNodes(g, &node, &n), "cudaGraphGetNodes");
  cudaKernelNodeParams params{};
  check(cudaGraphKernelNodeGetParams(node, &params), "cudaGraphKernelNodeGetParams");
  cudaFunction_t function = nullptr;
  check(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(draw_args)), "cudaGetFuncBySymbol");

  diag::OffsetCheck offsets(kProgram, out);
  unsigned long long next = start;  // the offset the next launch draws at
  // The arguments, as a pointer array and packed (seed, offset, out: 8-byte aligned, 24 bytes).
  unsigned long long a_seed = seed, a_offset = start;
  unsigned long long* a_out = out;
  void* pointers[] = {&a_seed, &a_offset, &a_out};
  unsigned char packed[24];
  std::size_t packed_size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  const auto way = [&](const char* name, auto&& set) {
    const int calls = measure(kProgram, name, s, [&](int) {
      a_offset = next;
      next += kIncrement;
      set();
      check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    });
    (void)calls;
    check(cudaStreamSynchronize(s), "sync");
    offsets.expect(name, next - kIncrement);
  };
  (void)measure(kProgram, "fixed", s, [&](int) { check(cudaGraphLaunch(exec, s), "cudaGraphLaunch"); });
  way("kernelParams", [&] {
    params.kernelParams = pointers;
    params.extra = nullptr;
    check(cudaGraphExecKernelNodeSetParams(exec, node, &params), "cudaGraphExecKernelNodeSetParams");
  });
  way("extra", [&] {
    std::memcpy(packed, &a_seed, 8);
    std::memcpy(packed + 8, &a_offset, 8);
    std::memcpy(packed + 16, &a_out, 8);
    params.kernelParams = nullptr;
    params.extra = extra;
    check(cudaGraphExecKernelNodeSetParams(exec, node, &params), "cudaGraphExecKernelNodeSetParams (extra)");
  });
  way("node v2", [&] {
    cudaGraphNodeParams p{};
    p.type = cudaGraphNodeTypeKernel;
    p.kernel.func = params.func;
    p.kernel.gridDim = params.gridDim;
    p.kernel.blockDim = params.blockDim;
    p.kernel.sharedMemBytes = params.sharedMemBytes;
    p.kernel.kernelParams = pointers;
    check(cudaGraphExecNodeSetParams(exec, node, &p), "cudaGraphExecNodeSetParams");
  });
  way("driver", [&] {
    cudaKernelNodeParams with = params;
    with.kernelParams = pointers;
    const CUDA_KERNEL_NODE_PARAMS p = diag::driver_params(with, function);
    check_driver(cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUgraphNode>(node), &p),
                 "cuGraphExecKernelNodeSetParams");
  });
  (void)measure(kProgram, "fixed", s, [&](int) { check(cudaGraphLaunch(exec, s), "cudaGraphLaunch"); });
  return offsets.finish();
}
