// Where a graphed call's host time goes (issue 29): the CUDA calls that a 16-input
// GraphedCallable call makes under PerLaunch::Parameters, timed one by one in raw CUDA, and
// the call itself beside them. A graph of two kernels (a staging copy that takes the 16
// input addresses as arguments, then a kernel summing the 16 staged inputs) is launched
//   launch          cudaGraphLaunch alone
//   launch+event    and cudaEventRecord after it
//   set+launch      cudaGraphExecKernelNodeSetParams on the staging node (fresh addresses),
//                   then cudaGraphLaunch
//   set+launch+event  all three: what a call cost CUDA until the event became a node of the
//                   graph (now set+launch is)
//   dset+launch     the driver's cuGraphExecKernelNodeSetParams (the kernel's CUfunction found
//                   once), then cudaGraphLaunch: what the library's node update calls now
//   dset+launch+node  the same on the graph with an event record node at its end (how a
//                   staging graph marks a launch's end): what the call asks of CUDA now
//   call            GraphedCallable::operator() with 16 inputs (cugraphs, header-only)
//   call/same       the same with the same inputs at every call (no node update)
// each in batches of 16 calls queued behind a kernel that spins on the GPU timer (so that
// no call waits for the device), median of 40 batches, microseconds a call. With "idle" as
// the argument the spin kernel is left out: the calls then run as they are queued.
// Then whether an event record node inside a graph stands for the launch that queued it:
// a graph [20 ms spin, event record node] is launched, and the event is queried at once and
// waited for (if the launch counts as the record, the query says "not ready" and the wait
// takes the spin's time; a launch could then tell its end without a cudaEventRecord).
//   nvcc -std=c++20 -O2 -arch=sm_90 -Iinclude tools/diagnostics/call_cost.cu -lcuda -o call_cost
#include "staging_kernels.cuh"

#include <cugraphs/graph.hpp>

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace staging_diag;

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const bool idle = argc > 1 && std::strcmp(argv[1], "idle") == 0;
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<float*> inputs(2 * kInputs);
  for (auto& p : inputs) {
    check(cudaMalloc(&p, kFloats * sizeof(float)), "cudaMalloc");
    check(cudaMemset(p, 0, kFloats * sizeof(float)), "cudaMemset");
  }
  float *staged = nullptr, *out = nullptr;
  check(cudaMalloc(&staged, kInputs * kFloats * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&out, kFloats * sizeof(float)), "cudaMalloc");
  Sources first{};
  for (int k = 0; k < kInputs; ++k) first.p[k] = inputs[k];

  // The raw graph: the staging copy, then the sum; and the same with an event record node at
  // its end.
  cudaEvent_t end = nullptr;
  check(cudaEventCreateWithFlags(&end, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  const auto capture_staging = [&](cudaEvent_t end_event, cudaGraph_t* graph) {
    return diag::capture(s, [&] {
      stage<<<(kInputs * kFloats + 255) / 256, 256, 0, s>>>(first, staged);
      sum_staged<<<(kFloats + 255) / 256, 256, 0, s>>>(staged, out);
      if (end_event != nullptr)
        check(cudaEventRecordWithFlags(end_event, s, cudaEventRecordExternal), "cudaEventRecordWithFlags (a node)");
    }, graph);
  };
  cudaGraph_t g = nullptr, gn = nullptr;
  cudaGraphExec_t exec = capture_staging(nullptr, &g);
  cudaGraphExec_t exec_node = capture_staging(end, &gn);
  cudaKernelNodeParams params{}, params_node{};
  const cudaGraphNode_t stage_node = find_stage_node(g, &params);
  const cudaGraphNode_t stage_node_n = find_stage_node(gn, &params_node);
  cudaEvent_t done = nullptr;
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaFunction_t stage_fn = nullptr;
  check(cudaGetFuncBySymbol(&stage_fn, reinterpret_cast<const void*>(&stage)), "cudaGetFuncBySymbol");

  // The same computation as a GraphedCallable (16 inputs of 4 KiB).
  using In = cugraphs::DeviceSpan<const float>;
  std::array<std::array<In, kInputs>, 2> sets{};
  for (int set = 0; set < 2; ++set)
    for (int k = 0; k < kInputs; ++k) sets[set][k] = In(inputs[set * kInputs + k], kFloats);
  auto f = [out](const std::array<In, kInputs>& xs) {
    Sources p{};
    for (int k = 0; k < kInputs; ++k) p.p[k] = xs[k].data();
    sum_inputs<<<(kFloats + 255) / 256, 256, 0, cugraphs::current_stream()>>>(p, out);
  };
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  auto callable = cugraphs::make_graphed_callable(f, sets[0]);

  int turn = 0;
  Sources next{};
  void* args[] = {&next, &staged};
  const auto set = [&] {
    const int base = (turn++ % 2) * kInputs;
    for (int k = 0; k < kInputs; ++k) next.p[k] = inputs[base + k];
    params.kernelParams = args;
    check(cudaGraphExecKernelNodeSetParams(exec, stage_node, &params), "cudaGraphExecKernelNodeSetParams");
  };
  const auto dset = [&](cudaGraphExec_t e, cudaGraphNode_t n) {
    const int base = (turn++ % 2) * kInputs;
    for (int k = 0; k < kInputs; ++k) next.p[k] = inputs[base + k];
    cudaKernelNodeParams with = params;
    with.kernelParams = args;
    const CUDA_KERNEL_NODE_PARAMS d = diag::driver_params(with, stage_fn);
    diag::check_driver(
        cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(e), reinterpret_cast<CUgraphNode>(n), &d),
        "cuGraphExecKernelNodeSetParams");
  };
  const auto launch = [&] { check(cudaGraphLaunch(exec, s), "cudaGraphLaunch"); };
  const auto record = [&] { check(cudaEventRecord(done, s), "cudaEventRecord"); };
  const std::vector<std::pair<const char*, std::function<void()>>> ways = {
      {"launch", launch},
      {"launch+event", [&] { launch(), record(); }},
      {"set+launch", [&] { set(), launch(); }},
      {"set+launch+event", [&] { set(), launch(), record(); }},
      {"dset+launch", [&] { dset(exec, stage_node), launch(); }},
      {"dset+launch+node",
       [&] { dset(exec_node, stage_node_n), check(cudaGraphLaunch(exec_node, s), "cudaGraphLaunch"); }},
      {"call", [&] { (void)callable(s, sets[turn++ % 2]); }},
      {"call/same", [&] { (void)callable(s, sets[0]); }},
  };
  constexpr int kBatch = 16, kRounds = 40;
  std::vector<std::vector<double>> us(ways.size());
  for (int round = 0; round < kRounds + 3; ++round) {
    for (std::size_t w = 0; w < ways.size(); ++w) {
      if (!idle) spin<<<1, 1, 0, s>>>(400'000);  // 0.4 ms: every batch queues behind it
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) ways[w].second();
      const double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      if (round >= 3) us[w].push_back(t / kBatch);
    }
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("call_cost on %s, %s, host us a call (median of %d batches of %d), per-launch way %s\n", prop.name,
              idle ? "device idle" : "calls queued behind a spin", kRounds, kBatch,
              callable.graph().per_launch() == cugraphs::PerLaunch::Parameters ? "Parameters" : "Ring");
  const double base = median(us[0]);
  for (std::size_t w = 0; w < ways.size(); ++w)
    std::printf("  %-18s %6.2f us  (%.2fx launch)\n", ways[w].first, median(us[w]), median(us[w]) / base);
  // An event record node: does the launch count as the event's latest record?
  cudaEvent_t marker = nullptr;
  check(cudaEventCreateWithFlags(&marker, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check(cudaEventRecord(marker, s), "cudaEventRecord");  // complete, before any launch
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  cudaGraph_t mg = nullptr;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  spin<<<1, 1, 0, s>>>(20'000'000);
  // External: an event record node (a plain record in a capture only orders streams).
  check(cudaEventRecordWithFlags(marker, s, cudaEventRecordExternal), "cudaEventRecordWithFlags (a record node)");
  check(cudaStreamEndCapture(s, &mg), "cudaStreamEndCapture");
  cudaGraphExec_t mexec = nullptr;
  check(cudaGraphInstantiate(&mexec, mg, 0), "cudaGraphInstantiate");
  check(cudaGraphLaunch(mexec, s), "cudaGraphLaunch");
  const cudaError_t at_once = cudaEventQuery(marker);
  (void)cudaGetLastError();
  const auto w0 = std::chrono::steady_clock::now();
  check(cudaEventSynchronize(marker), "cudaEventSynchronize");
  const double waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaGraphExecDestroy(mexec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(mg), "cudaGraphDestroy");
  check(cudaEventDestroy(marker), "cudaEventDestroy");

  std::printf("  event record node: queried right after the launch: %s; cudaEventSynchronize waited %.2f ms "
              "(the spin: 20 ms): %s\n",
              at_once == cudaErrorNotReady ? "not ready" : cudaGetErrorString(at_once), waited_ms,
              at_once == cudaErrorNotReady && waited_ms > 10.0 ? "the launch counts as the record"
                                                               : "the launch does not count as the record");
  check(cudaEventDestroy(done), "cudaEventDestroy");
  check(cudaGraphExecDestroy(exec_node), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(gn), "cudaGraphDestroy");
  check(cudaEventDestroy(end), "cudaEventDestroy");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(g), "cudaGraphDestroy");
  for (float* p : inputs) check(cudaFree(p), "cudaFree");
  check(cudaFree(staged), "cudaFree");
  check(cudaFree(out), "cudaFree");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  return 0;
}
