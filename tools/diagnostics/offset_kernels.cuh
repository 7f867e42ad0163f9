// What rng_advance_cost.cu and disabled_node_cost.cu share: a "draw" that hashes a (seed,
// offset) into every thread's output and keeps the offset it drew at in out[0], read from
// device words or taken as arguments; the kernel that advances the words; and the check of the
// offset the last launch drew at. For one translation unit per program.
#pragma once

#include "launch_timing.cuh"

#include <cuda_runtime.h>

#include <cstdio>

namespace diag {

constexpr unsigned kBlocks = 8, kThreads = 256;
constexpr unsigned long long kIncrement = 4;  // what a launch draws

__device__ inline void draw_at(unsigned long long seed, unsigned long long offset, unsigned long long* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long h = seed * 0x9E3779B97F4A7C15ull ^ (offset + i) * 0xBF58476D1CE4E5B9ull;
  out[1 + i] = h ^ (h >> 31);
  if (i == 0) out[0] = offset;
}

// Draws at the (seed, offset) of `words`.
__global__ void draw_words(const unsigned long long* words, unsigned long long* out) { draw_at(words[0], words[1], out); }

// Draws at the offset it is given as an argument.
__global__ void draw_args(unsigned long long seed, unsigned long long offset, unsigned long long* out) {
  draw_at(seed, offset, out);
}

// Advances the words' offset by what a launch draws.
__global__ void advance(unsigned long long* words, unsigned long long increment) { words[1] += increment; }

// A non-blocking stream, the draw's output (out[0] the offset drawn at, then one word a
// thread) and the device words, set to (seed, start).
struct OffsetSetup {
  cudaStream_t s = nullptr;
  unsigned long long* out = nullptr;
  unsigned long long* words = nullptr;
};
inline OffsetSetup offset_setup(unsigned long long seed, unsigned long long start) {
  OffsetSetup o;
  check(cudaStreamCreateWithFlags(&o.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaMalloc(&o.out, (1 + kBlocks * kThreads) * sizeof(unsigned long long)), "cudaMalloc");
  check(cudaMalloc(&o.words, 2 * sizeof(unsigned long long)), "cudaMalloc");
  const unsigned long long init[2] = {seed, start};
  check(cudaMemcpy(o.words, init, sizeof init, cudaMemcpyHostToDevice), "cudaMemcpy");
  return o;
}

// Queues the draw from `words` and the advance after it on `s` (a capture: the graph of
// PerLaunch::Advance), then, if `end` is given, its record as a node (how Advance marks a
// launch's end).
inline void queue_draw_and_advance(cudaStream_t s, unsigned long long* words, unsigned long long* out,
                                   cudaEvent_t end = nullptr) {
  draw_words<<<kBlocks, kThreads, 0, s>>>(words, out);
  advance<<<1, 1, 0, s>>>(words, kIncrement);
  if (end != nullptr) check(cudaEventRecordWithFlags(end, s, cudaEventRecordExternal), "cudaEventRecordWithFlags (a node)");
}

// Counts the launches whose last draw was not at the offset wanted, saying which.
class OffsetCheck {
public:
  OffsetCheck(const char* program, const unsigned long long* out) : program_(program), out_(out) {}
  void expect(const char* name, unsigned long long want) {
    unsigned long long got = 0;
    check(cudaMemcpy(&got, out_, sizeof got, cudaMemcpyDeviceToHost), "read back");
    if (got == want) return;
    std::printf("%s %s: the last launch drew at offset %llu, want %llu\n", program_, name, got, want);
    ++failures_;
  }
  // Prints the verdict; the program's exit status.
  int finish() const {
    std::printf("%s: offsets %s\n", program_, failures_ == 0 ? "as expected" : "WRONG");
    return failures_ == 0 ? 0 : 1;
  }

private:
  const char* program_;
  const unsigned long long* out_;
  int failures_ = 0;
};

}  // namespace diag
