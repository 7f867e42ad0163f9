// Small kernels shared by the GPU tests.
#pragma once

#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace cugraphs_test {

inline constexpr int kThreads = 256;
inline int blocks_for(std::size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// One dependent step of a non-linear recurrence; `k` makes every step different.
__global__ void step_kernel(float* x, std::size_t n, int k) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    x[i] = v * (0.75f + 0.01f * static_cast<float>(k % 7)) + 0.5f * __sinf(v + 0.1f * k);
  }
}

// Adds `v` to one counter: the body kernel of the conditional and reliability tests.
__global__ void add_to(int* x, int v) { *x += v; }

__global__ void fill_kernel(float* x, std::size_t n, float value) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = value + 0.001f * static_cast<float>(i % 1000);
}

// x[i] = base + (i % 1013) / 128: exact in float, different for neighbouring elements, so
// arithmetic on it is exact whether or not the compiler fuses it. ramp_value(i, base) is
// x[i] on the host.
__global__ void ramp_kernel(float* x, std::size_t n, float base) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = base + static_cast<float>(i % 1013) * 0.0078125f;
}
inline float ramp_value(std::size_t i, float base) { return base + static_cast<float>(i % 1013) * 0.0078125f; }

__global__ void affine_kernel(float* x, std::size_t n, float a, float b) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

__global__ void copy_kernel(float* dst, const float* src, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

// The GPU's clock, in nanoseconds (%globaltimer).
__device__ inline unsigned long long gpu_ns() {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Keeps the calling thread busy for about `ns` nanoseconds.
__device__ inline void spin_ns(unsigned long long ns) {
  const unsigned long long start = gpu_ns();
  while (gpu_ns() - start < ns) {
  }
}

// Keeps the first warp busy for about `ns` nanoseconds, then writes `value` to every element:
// work queued after it on the same stream must see the write.
__global__ void slow_fill_kernel(float* x, std::size_t n, float value, unsigned long long ns) {
  // The first warp waits as a whole (lane 0 reads the clock, every lane takes its reading)
  // so that no warp reaches the barrier with some of its threads still spinning: synccheck
  // reports a barrier reached by a divergent warp.
  if (threadIdx.x < warpSize) {
    const unsigned lanes = __activemask();
    unsigned long long start = __shfl_sync(lanes, gpu_ns(), 0), now = 0;
    do {
      now = __shfl_sync(lanes, gpu_ns(), 0);
    } while (now - start < ns);
  }
  __syncthreads();
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}

inline void launch_step(float* x, std::size_t n, int k, cudaStream_t s) {
  step_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, k);
  cugraphs::check_launch("step_kernel");
}

// One value into, or out of, a one-element buffer (waits for the copy).
template <class T>
void put(cugraphs::DeviceBuffer<T>& b, T value) {
  const T one[1] = {value};
  b.copy_from_host(std::span<const T>(one, 1));
}
// Every element of `b` set to `value` (waits for the copy).
template <class T>
void put_all(cugraphs::DeviceBuffer<T>& b, T value) {
  b.copy_from_host(std::vector<T>(b.size(), value));
}
// x = 1 and acc = 0 now, and x = 7 once a kernel queued on `stream` has spun 50 ms: a sample
// still on its way when work that must wait for it is queued (the tests of warm-ups).
inline void fill_late(cugraphs::DeviceBuffer<float>& x, cugraphs::DeviceBuffer<float>& acc, cudaStream_t stream) {
  put_all(x, 1.0f);
  put_all(acc, 0.0f);
  slow_fill_kernel<<<1, 32, 0, stream>>>(x.data(), 1, 7.0f, 50'000'000);
}

template <class T>
T get(const cugraphs::DeviceBuffer<T>& b) {
  return b.to_host()[0];
}

// `n` non-trivial floats (random_floats with `seed`) in a new device buffer.
inline cugraphs::DeviceBuffer<float> filled(std::size_t n, std::uint32_t seed) {
  cugraphs::DeviceBuffer<float> b(n);
  b.copy_from_host(random_floats(n, seed));
  return b;
}

// The `n` elements at `p` once every stream's work is done (the tests' streams may be
// non-blocking); `p` may be device, pinned host or managed memory. A raw read: no check of
// a checked pool runs.
template <class T>
std::vector<T> host(const T* p, std::size_t n) {
  cugraphs::check(cudaDeviceSynchronize(), "wait for every stream");
  std::vector<T> v(n);
  cugraphs::check(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDefault), "read back");
  return v;
}
inline std::vector<float> host(cugraphs::DeviceSpan<const float> s) { return host(s.data(), s.size()); }
template <class T>
std::vector<T> host(const cugraphs::DeviceBuffer<T>& b) {
  return host(static_cast<const T*>(b.data()), b.size());
}

// Captures x = 2x + 1 into `g` (on its capture stream) and requires two replays to give
// 2(2x + 1) + 1: the check that a graph captures and replays after an earlier failure.
inline void capture_and_check_affine(cugraphs::Graph& g, cugraphs::DeviceBuffer<float>& x) {
  const auto before = host(x.span());
  {
    cugraphs::CaptureScope scope(g);
    affine_kernel<<<blocks_for(x.size()), kThreads, 0, scope.stream()>>>(x.data(), x.size(), 2.0f, 1.0f);
    cugraphs::check_launch("affine_kernel");
  }
  g.replay();
  g.replay();
  const auto after = host(x.span());
  for (std::size_t i = 0; i < x.size(); i += 97) REQUIRE(after[i] == 2.0f * (2.0f * before[i] + 1.0f) + 1.0f);
}

// How many edges of `g` are programmatic dependencies.
inline std::size_t programmatic_edges(cudaGraph_t g) {
  std::size_t n = 0;
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  const auto get_edges = cudaGraphGetEdges;
#else
  const auto get_edges = cudaGraphGetEdges_v2;
#endif
  REQUIRE(get_edges(g, nullptr, nullptr, nullptr, &n) == cudaSuccess);
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (n != 0) REQUIRE(get_edges(g, from.data(), to.data(), data.data(), &n) == cudaSuccess);
  std::size_t programmatic = 0;
  for (const auto& e : data) programmatic += e.type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
  return programmatic;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace cugraphs_test
