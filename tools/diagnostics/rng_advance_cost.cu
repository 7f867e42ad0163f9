// What a graph that draws random numbers could pay for fresh numbers at every launch (issue
// 29): raw CUDA, no cugraphs. One kernel draws (it reads a Philox (seed, offset) and writes a
// hash of it per thread); its graph gets each launch's offset
//   fixed      never (the same offset every launch: the floor, a bare launch)
//   args       as a kernel argument: cudaGraphExecKernelNodeSetParams, then the launch
//              (PerLaunch::Parameters today)
//   advance    from device words that a second kernel, after the draw, advances by the
//              graph's increment: the host only launches (it would write the words only when
//              something else drew from the generator in between)
//   adv+node   the same with an event record node after the advance kernel (how
//              PerLaunch::Advance marks a launch's end)
//   adv+event  the same with a cudaEventRecord after each launch instead
//   adv+pdl    advance with a programmatic edge from the draw (programmatic dependent launch):
//              the advance kernel waits for the draw with griddepcontrol.wait, so its launch
//              may overlap the draw's end
//   pdl+trig   adv+pdl with a draw that lets its dependents be scheduled at its start
//              (griddepcontrol.launch_dependents, as a trigger in rng::unpack would for a captured draw):
//              the advance kernel is scheduled while the draw runs and waits for its end
//   pdl-first  the advance kernel first (it triggers its dependents at once), the draw after
//              it through a programmatic edge, waiting with griddepcontrol.wait before it
//              reads the words: the words then hold the offset of the launch before
// For each way: the host's cost a call (batches of 16 calls queued behind a kernel that
// spins on the GPU timer) and the time to completion (launch, then synchronize; median of
// 200). The offsets the last launches used are checked.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/rng_advance_cost.cu -o rng_advance_cost
#include "offset_kernels.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using diag::advance;
using diag::capture;
using diag::check;
using diag::draw_args;
using diag::draw_at;
using diag::draw_words;
using diag::kBlocks;
using diag::kIncrement;
using diag::kThreads;
using diag::launch_programmatic;
using diag::measure;

constexpr const char* kProgram = "rng_advance_cost";

// The same, launched programmatically after the draw: waits for it before writing.
__global__ void advance_after(unsigned long long* words, unsigned long long increment) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  words[1] += increment;
}

// draw_words, letting its dependents be scheduled at its start.
__global__ void draw_words_trigger(const unsigned long long* words, unsigned long long* out) {
  asm volatile("griddepcontrol.launch_dependents;");
  draw_at(words[0], words[1], out);
}

// Advances first, letting its dependent launch at once.
__global__ void advance_first(unsigned long long* words, unsigned long long increment) {
  asm volatile("griddepcontrol.launch_dependents;");
  words[1] += increment;
}

// Draws once the kernel before it (launched programmatically after it) has finished.
__global__ void draw_words_waiting(const unsigned long long* words, unsigned long long* out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  draw_at(words[0], words[1], out);
}

}  // namespace

int main() {
  const unsigned long long seed = 42, start = 1000;
  const auto [s, out, words] = diag::offset_setup(seed, start);

  cudaGraph_t g_args = nullptr, g_adv = nullptr, g_node = nullptr;
  cudaEvent_t end = nullptr, end_host = nullptr;
  check(cudaEventCreateWithFlags(&end, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check(cudaEventCreateWithFlags(&end_host, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaGraphExec_t args = capture(s, [&] { draw_args<<<kBlocks, kThreads, 0, s>>>(seed, start, out); }, &g_args);
  cudaGraphExec_t adv = capture(s, [&] { diag::queue_draw_and_advance(s, words, out); }, &g_adv);
  cudaGraphExec_t adv_node = capture(s, [&] { diag::queue_draw_and_advance(s, words, out, end); }, &g_node);
  cudaGraph_t g_pdl = nullptr, g_first = nullptr, g_trig = nullptr;
  cudaGraphExec_t pdl_trig = capture(s, [&] {
    draw_words_trigger<<<kBlocks, kThreads, 0, s>>>(words, out);
    launch_programmatic(advance_after, 1, 1, s, words, kIncrement);
  }, &g_trig);
  cudaGraphExec_t adv_pdl = capture(s, [&] {
    draw_words<<<kBlocks, kThreads, 0, s>>>(words, out);
    launch_programmatic(advance_after, 1, 1, s, words, kIncrement);
  }, &g_pdl);
  cudaGraphExec_t pdl_first = capture(s, [&] {
    advance_first<<<1, 1, 0, s>>>(words, kIncrement);
    launch_programmatic(draw_words_waiting, kBlocks, kThreads, s, static_cast<const unsigned long long*>(words), out);
  }, &g_first);
  cudaGraphNode_t node = nullptr;
  std::size_t n = 1;
  check(cudaGraphGetNodes(g_args, &node, &n), "cudaGraphGetNodes");
  cudaKernelNodeParams params{};
  check(cudaGraphKernelNodeGetParams(node, &params), "cudaGraphKernelNodeGetParams");

  diag::OffsetCheck offsets(kProgram, out);
  const auto expect_offset = [&](const char* name, unsigned long long want) { offsets.expect(name, want); };

  (void)measure(kProgram, "fixed", s, [&](int) { check(cudaGraphLaunch(args, s), "cudaGraphLaunch"); });
  expect_offset("fixed", start);
  const int by_args = measure(kProgram, "args", s, [&](int turn) {
    unsigned long long sd = seed, offset = start + kIncrement * static_cast<unsigned long long>(turn);
    unsigned long long* o = out;
    void* kernel_args[] = {&sd, &offset, &o};
    params.kernelParams = kernel_args;
    check(cudaGraphExecKernelNodeSetParams(args, node, &params), "cudaGraphExecKernelNodeSetParams");
    check(cudaGraphLaunch(args, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  expect_offset("args", start + kIncrement * static_cast<unsigned long long>(by_args - 1));
  const int by_advance = measure(kProgram, "advance", s, [&](int) { check(cudaGraphLaunch(adv, s), "cudaGraphLaunch"); });
  check(cudaStreamSynchronize(s), "sync");
  expect_offset("advance", start + kIncrement * static_cast<unsigned long long>(by_advance - 1));
  const int by_node = measure(kProgram, "adv+node", s, [&](int) { check(cudaGraphLaunch(adv_node, s), "cudaGraphLaunch"); });
  check(cudaStreamSynchronize(s), "sync");
  expect_offset("adv+node", start + kIncrement * static_cast<unsigned long long>(by_advance + by_node - 1));
  const int by_event = measure(kProgram, "adv+event", s, [&](int) {
    check(cudaGraphLaunch(adv, s), "cudaGraphLaunch");
    check(cudaEventRecord(end_host, s), "cudaEventRecord");
  });
  check(cudaStreamSynchronize(s), "sync");
  const unsigned long long done = static_cast<unsigned long long>(by_advance + by_node + by_event);
  expect_offset("adv+event", start + kIncrement * (done - 1));
  const int by_pdl = measure(kProgram, "adv+pdl", s, [&](int) { check(cudaGraphLaunch(adv_pdl, s), "cudaGraphLaunch"); });
  check(cudaStreamSynchronize(s), "sync");
  expect_offset("adv+pdl", start + kIncrement * (done + static_cast<unsigned long long>(by_pdl) - 1));
  const int by_trig = measure(kProgram, "pdl+trig", s, [&](int) { check(cudaGraphLaunch(pdl_trig, s), "cudaGraphLaunch"); });
  check(cudaStreamSynchronize(s), "sync");
  expect_offset("pdl+trig", start + kIncrement * (done + static_cast<unsigned long long>(by_pdl + by_trig) - 1));
  const int by_first = measure(kProgram, "pdl-first", s, [&](int) { check(cudaGraphLaunch(pdl_first, s), "cudaGraphLaunch"); });
  check(cudaStreamSynchronize(s), "sync");
  // Advancing before the draw: the last launch drew at the offset after all launches so far.
  expect_offset("pdl-first", start + kIncrement * (done + static_cast<unsigned long long>(by_pdl + by_trig + by_first)));
  // Once more at the end: the first way measured also pays the program's warm-up.
  (void)measure(kProgram, "fixed", s, [&](int) { check(cudaGraphLaunch(args, s), "cudaGraphLaunch"); });
  return offsets.finish();
}
