// Helpers of the bad-input tests (tests/test_reliability_*.cu): the checks that every
// object is usable after an Error, and small kernels and callables they capture. Each
// including program is one translation unit.
#pragma once

#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace cugraphs_reliability {

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Graph;

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
inline constexpr std::size_t kN = 3000;  // not a multiple of the block size
inline constexpr const char* kUnwritable = "/nonexistent-cugraphs-directory/graph.dot";

__global__ void axpb(float* out, const float* in, std::size_t n, float a, float b) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}
__global__ void countdown(int* n, int* iterations, bool* go) {
  if (*n > 0) {
    *n -= 1;
    *iterations += 1;
  }
  *go = *n > 0;
}
__global__ void record_philox(cugraphs::PhiloxArgs args, unsigned long long* out) {
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  out[0] = seed;
  out[1] = offset;
}

// After an Error: no capture open on this thread, the capture stream not capturing, the
// current stream as expected, no CUDA error left behind, and the device healthy.
inline void check_clean(cudaStream_t expected_current = nullptr) {
  CHECK(cugraphs::detail::innermost_capture() == nullptr);
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
  CHECK(cugraphs::current_stream() == expected_current);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

// Whether the capture on `s` is active (not merely open and invalidated).
inline bool capture_active(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cugraphs::check(cudaStreamIsCapturing(s, &st), "cudaStreamIsCapturing");
  return st == cudaStreamCaptureStatusActive;
}

// x = a * x + b over non-trivial data. `a` is a power of two, so a * x is exact and the
// device's result (fused or not) equals the host's bitwise; a * x + b == x has no float
// solution for the (a, b) used here, so a replay that did not run cannot pass.
struct Affine {
  float a, b;
  DeviceBuffer<float> x{kN};

  void launch(cudaStream_t s) const {
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, a, b);
    cugraphs::check_launch("affine_kernel");
  }
  void capture(Graph& g, const CaptureOptions& opts = {}) const {
    cugraphs::capture(g, [&](cudaStream_t s) { launch(s); }, opts);
  }
  // Two replays of `g` on `s`, each on fresh inputs, every element checked.
  void check_replays(Graph& g, std::uint32_t seed, cudaStream_t s = nullptr) {
    for (std::uint32_t r = 0; r < 2; ++r) {
      const auto in = random_floats(kN, seed + r);
      x.copy_from_host(in, s);
      g.replay(s);
      const auto out = x.to_host(s);
      for (std::size_t i = 0; i < kN; ++i) REQUIRE(out[i] == a * in[i] + b);
    }
  }
};

inline int current_device() {
  int d = 0;
  cugraphs::check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

// Another device than the current one, or -1 (with a warning) on a machine with one GPU.
inline int other_device(const char* row) {
  int n = 0;
  cugraphs::check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (n < 2) {
    std::printf("needs 2 GPUs: skipped (%s)\n", row);
    WARN("needs 2 GPUs: skipped (" << row << ")");
    return -1;
  }
  return (current_device() + 1) % n;
}

// Whether kernels read plain malloc'd memory here (HMM or ATS): then it is not foreign.
inline bool device_reads_pageable_memory() {
  int v = 0;
  cugraphs::check(cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, current_device()),
                  "cudaDeviceGetAttribute");
  return v != 0;
}

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <class T>
std::unique_ptr<T, FreeDeleter> malloc_one(T value) {
  std::unique_ptr<T, FreeDeleter> p(static_cast<T*>(std::malloc(sizeof(T))));
  REQUIRE(p != nullptr);
  *p = value;
  return p;
}

// f(x) = 2 x + 1, into a buffer f allocates (from the graph's pool while capturing).
struct TwoXPlusOne {
  int* calls;
  DeviceBuffer<float> operator()(In x) const {
    ++*calls;
    DeviceBuffer<float> out(x.size());
    axpb<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), x.data(), x.size(), 2.0f, 1.0f);
    cugraphs::check_launch("axpb");
    return out;
  }
};

inline void check_two_x_plus_one(Out out, const std::vector<float>& in) {
  const auto got = host(out);
  REQUIRE(got.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) REQUIRE(got[i] == 2.0f * in[i] + 1.0f);
}

}  // namespace cugraphs_reliability
