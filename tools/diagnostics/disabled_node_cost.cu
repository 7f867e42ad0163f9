// What a disabled kernel node costs a launch (the next step for PerLaunch::Advance in
// docs/performance.md): raw CUDA, no cugraphs. A graph draws from (seed, offset) words that a
// kernel after the draw advances (Advance without its end's event record node); the words
// would be set by a set-words kernel node before the draw, disabled in the executable
// (cudaGraphNodeSetEnabled) except for the one launch after the generator moved otherwise:
//   advance     draw, then advance (the floor of this design)
//   +record     the same with an event record node after the advance (Advance today)
//   +disabled   a set-words node before the draw, disabled
//   +enabled    the same node enabled (what the launch after a move pays on the device)
//   toggle      each call enables the node with new words (cudaGraphExecKernelNodeSetParams,
//               cudaGraphNodeSetEnabled) and launches, the next disables it and launches: the
//               host's cost of the path after a move, averaged with the launch after it
// For each: the host's cost a call and the time to completion (launch_timing.cuh). The
// offsets the last launches drew at are checked.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/disabled_node_cost.cu -o disabled_node_cost
#include "offset_kernels.cuh"

#include <cuda_runtime.h>

#include <cstdio>

namespace {

using diag::advance;
using diag::capture;
using diag::check;
using diag::draw_words;
using diag::kBlocks;
using diag::kIncrement;
using diag::kThreads;
using diag::measure;

constexpr const char* kProgram = "disabled_node_cost";

__global__ void set_words(unsigned long long* words, unsigned long long seed, unsigned long long offset) {
  words[0] = seed;
  words[1] = offset;
}

}  // namespace

int main() {
  const unsigned long long seed = 42;
  unsigned long long expected = 1000;  // the offset the next launch draws at
  const auto [s, out, words] = diag::offset_setup(seed, expected);
  cudaEvent_t end = nullptr;
  check(cudaEventCreateWithFlags(&end, cudaEventDisableTiming), "cudaEventCreateWithFlags");

  cudaGraph_t g_adv = nullptr, g_rec = nullptr, g_set = nullptr;
  cudaGraphExec_t adv = capture(s, [&] { diag::queue_draw_and_advance(s, words, out); }, &g_adv);
  cudaGraphExec_t rec = capture(s, [&] { diag::queue_draw_and_advance(s, words, out, end); }, &g_rec);
  // The set-words node before the draw, added to a capture of draw and advance.
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  diag::queue_draw_and_advance(s, words, out);
  check(cudaStreamEndCapture(s, &g_set), "cudaStreamEndCapture");
  cudaGraphNode_t root = nullptr;
  std::size_t roots = 1;
  check(cudaGraphGetRootNodes(g_set, &root, &roots), "cudaGraphGetRootNodes");
  unsigned long long set_seed = seed, set_offset = 0;
  unsigned long long* set_target = words;
  void* set_args[] = {&set_target, &set_seed, &set_offset};
  cudaKernelNodeParams sp{};
  sp.func = reinterpret_cast<void*>(set_words);
  sp.gridDim = dim3(1);
  sp.blockDim = dim3(1);
  sp.kernelParams = set_args;
  cudaGraphNode_t setter = nullptr;
  check(cudaGraphAddKernelNode(&setter, g_set, nullptr, 0, &sp), "cudaGraphAddKernelNode (set words)");
  check(cudaGraphAddDependencies(g_set, &setter, &root, nullptr, 1), "cudaGraphAddDependencies");
  cudaGraphExec_t with_set = nullptr;
  check(cudaGraphInstantiate(&with_set, g_set, 0), "cudaGraphInstantiate");
  check(cudaGraphNodeSetEnabled(with_set, setter, 0), "cudaGraphNodeSetEnabled (off)");

  diag::OffsetCheck offsets(kProgram, out);
  const auto expect_offset = [&](const char* name, unsigned long long want) { offsets.expect(name, want); };
  const auto advancing = [&](const char* name, cudaGraphExec_t exec) {
    const int n = measure(kProgram, name, s, [&](int) { check(cudaGraphLaunch(exec, s), "cudaGraphLaunch"); });
    check(cudaStreamSynchronize(s), "sync");
    expected += kIncrement * static_cast<unsigned long long>(n);
    expect_offset(name, expected - kIncrement);
  };
  advancing("advance", adv);
  advancing("+record", rec);
  advancing("+disabled", with_set);
  // Enabled: every launch sets the words to (seed, 5000), draws there, and advances.
  set_offset = 5000;
  check(cudaGraphExecKernelNodeSetParams(with_set, setter, &sp), "cudaGraphExecKernelNodeSetParams");
  check(cudaGraphNodeSetEnabled(with_set, setter, 1), "cudaGraphNodeSetEnabled (on)");
  (void)measure(kProgram, "+enabled", s, [&](int) { check(cudaGraphLaunch(with_set, s), "cudaGraphLaunch"); });
  check(cudaStreamSynchronize(s), "sync");
  expect_offset("+enabled", 5000);
  // Toggling: even calls move the words to a new place (as after eager draws), odd calls run
  // with the node disabled again and draw one increment further.
  const int toggled = measure(kProgram, "toggle", s, [&](int turn) {
    if (turn % 2 == 0) {
      set_offset = 10000 + 100 * static_cast<unsigned long long>(turn);
      check(cudaGraphExecKernelNodeSetParams(with_set, setter, &sp), "cudaGraphExecKernelNodeSetParams");
      check(cudaGraphNodeSetEnabled(with_set, setter, 1), "cudaGraphNodeSetEnabled (on)");
    } else {
      check(cudaGraphNodeSetEnabled(with_set, setter, 0), "cudaGraphNodeSetEnabled (off)");
    }
    check(cudaGraphLaunch(with_set, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  const unsigned long long last = static_cast<unsigned long long>(toggled - 1);
  expect_offset("toggle", last % 2 == 0 ? 10000 + 100 * last : 10000 + 100 * (last - 1) + kIncrement);
  check(cudaMemcpy(&expected, words + 1, sizeof expected, cudaMemcpyDeviceToHost), "read the words");
  advancing("advance", adv);  // once more at the end: the first way measured also pays the warm-up
  return offsets.finish();
}
