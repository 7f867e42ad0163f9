// How a graph that advances its own RNG offsets (PerLaunch::Advance) could mark each
// launch's end more cheaply than its event record node (issue 29): raw CUDA, no cugraphs.
// The graph draws from device words, then an advance kernel, after a programmatic edge, waits
// for the draw and advances the words. The end is marked
//   fixed        (no advance: the draw with its offset as an argument; the floor)
//   pdl          not at all (the floor of the design)
//   pdl+node     by an event record node after the advance kernel (Advance today)
//   pdl+count    by the advance kernel itself: it counts launches in device memory
//   pdl+mapped   the same, the count also written to pinned, mapped host memory
// and, for the launch after the generator moved otherwise (the host sets the words with one
// small kernel, after the last launch's end, before the launch):
//   moved/event  cudaStreamWaitEvent on the record node's event, the set-words kernel, launch
//   moved/value  cuStreamWaitValue32 on the device count (>= launches queued), set, launch
//   moved/spin   a set-words kernel that itself polls the device count, launch
// For each: the host's cost a call and the time to completion (launch_timing.cuh); the
// offsets the last launches drew at, and the counts, are checked.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/end_mark_cost.cu -lcuda -o end_mark_cost
#include "offset_kernels.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace {

using diag::capture;
using diag::check;
using diag::check_driver;
using diag::draw_args;
using diag::draw_words;
using diag::kBlocks;
using diag::kIncrement;
using diag::kThreads;
using diag::measure;

constexpr const char* kProgram = "end_mark_cost";

// Waits for the draw (programmatic edge), advances the words; counts the launch in
// count[0] (device memory) and, where given, in *mapped (pinned host memory).
__global__ void advance_counting(unsigned long long* words, unsigned long long increment, unsigned* count,
                                 volatile unsigned* mapped) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  words[1] += increment;
  if (count != nullptr) {
    const unsigned n = count[0] + 1;
    count[0] = n;
    if (mapped != nullptr) {
      __threadfence_system();
      *mapped = n;
    }
  }
}

__global__ void set_words(unsigned long long* words, unsigned long long seed, unsigned long long offset) {
  words[0] = seed;
  words[1] = offset;
}

// Sets the words once the device count has reached `launches`.
__global__ void set_words_after(unsigned long long* words, unsigned long long seed, unsigned long long offset,
                                const volatile unsigned* count, unsigned launches) {
  while (static_cast<int>(*count - launches) < 0) {
  }
  words[0] = seed;
  words[1] = offset;
}

}  // namespace

int main() {
  const unsigned long long seed = 42, start = 1000;
  const auto [s, out, words] = diag::offset_setup(seed, start);
  unsigned* count = nullptr;
  check(cudaMalloc(&count, sizeof(unsigned)), "cudaMalloc");
  check(cudaMemset(count, 0, sizeof(unsigned)), "cudaMemset");
  unsigned* mapped = nullptr;
  check(cudaHostAlloc(&mapped, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  *mapped = 0;
  unsigned* mapped_dev = nullptr;
  check(cudaHostGetDevicePointer(&mapped_dev, mapped, 0), "cudaHostGetDevicePointer");
  cudaEvent_t end = nullptr;
  check(cudaEventCreateWithFlags(&end, cudaEventDisableTiming), "cudaEventCreateWithFlags");

  cudaGraph_t g[5] = {};
  cudaGraphExec_t fixed = capture(s, [&] { draw_args<<<kBlocks, kThreads, 0, s>>>(seed, start, out); }, &g[0]);
  const auto draw_and_advance = [&](unsigned* c, unsigned* m, cudaEvent_t e) {
    draw_words<<<kBlocks, kThreads, 0, s>>>(words, out);
    diag::launch_programmatic(advance_counting, 1, 1, s, words, kIncrement, c, static_cast<volatile unsigned*>(m));
    if (e != nullptr) check(cudaEventRecordWithFlags(e, s, cudaEventRecordExternal), "cudaEventRecordWithFlags (a node)");
  };
  cudaGraphExec_t pdl = capture(s, [&] { draw_and_advance(nullptr, nullptr, nullptr); }, &g[1]);
  cudaGraphExec_t node = capture(s, [&] { draw_and_advance(nullptr, nullptr, end); }, &g[2]);
  cudaGraphExec_t counted = capture(s, [&] { draw_and_advance(count, nullptr, nullptr); }, &g[3]);
  cudaGraphExec_t mapped_exec = capture(s, [&] { draw_and_advance(count, mapped_dev, nullptr); }, &g[4]);

  diag::OffsetCheck offsets(kProgram, out);
  unsigned long long drawn = 0;   // launches that advanced the words
  unsigned counted_launches = 0;  // launches that counted themselves
  const auto launch = [&](cudaGraphExec_t e) { check(cudaGraphLaunch(e, s), "cudaGraphLaunch"); };
  const auto advancing = [&](const char* name, cudaGraphExec_t e, bool counts) {
    const int n = measure(kProgram, name, s, [&](int) { launch(e); });
    check(cudaStreamSynchronize(s), "sync");
    drawn += static_cast<unsigned long long>(n);
    if (counts) counted_launches += static_cast<unsigned>(n);
    offsets.expect(name, start + kIncrement * (drawn - 1));
  };
  (void)measure(kProgram, "fixed", s, [&](int) { launch(fixed); });
  offsets.expect("fixed", start);
  advancing("pdl", pdl, false);
  advancing("pdl+node", node, false);
  advancing("pdl+count", counted, true);
  advancing("pdl+mapped", mapped_exec, true);
  if (*static_cast<volatile unsigned*>(mapped) != counted_launches) {
    std::printf("%s: mapped count %u, want %u\n", kProgram, *mapped, counted_launches);
    return 1;
  }

  // Every call as the launch after a move: the words set to where the host says, then the launch.
  const auto moved = [&](const char* name, cudaGraphExec_t e, bool counts, auto&& order_and_set) {
    const int n = measure(kProgram, name, s, [&](int) {
      order_and_set(start + kIncrement * drawn);  // where this launch draws
      launch(e);
      ++drawn;
      if (counts) ++counted_launches;
    });
    (void)n;
    check(cudaStreamSynchronize(s), "sync");
    offsets.expect(name, start + kIncrement * (drawn - 1));
  };
  moved("moved/event", node, false, [&](unsigned long long offset) {
    check(cudaStreamWaitEvent(s, end, 0), "cudaStreamWaitEvent");
    set_words<<<1, 1, 0, s>>>(words, seed, offset);
  });
  moved("moved/value", counted, true, [&](unsigned long long offset) {
    check_driver(cuStreamWaitValue32(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(count), counted_launches,
                                 CU_STREAM_WAIT_VALUE_GEQ),
             "cuStreamWaitValue32");
    set_words<<<1, 1, 0, s>>>(words, seed, offset);
  });
  moved("moved/spin", counted, true, [&](unsigned long long offset) {
    set_words_after<<<1, 1, 0, s>>>(words, seed, offset, count, counted_launches);
  });
  unsigned device_count = 0;
  check(cudaMemcpy(&device_count, count, sizeof device_count, cudaMemcpyDeviceToHost), "read count");
  if (device_count != counted_launches) {
    std::printf("%s: device count %u, want %u\n", kProgram, device_count, counted_launches);
    return 1;
  }
  (void)measure(kProgram, "fixed", s, [&](int) { launch(fixed); });
  return offsets.finish();
}
