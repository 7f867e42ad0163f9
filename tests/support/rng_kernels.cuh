// The Philox kernel the RNG tests share: each GPU thread draws `per_thread` uniforms from
// the (seed, offset) of `args` and writes the last one.
#pragma once

#include "kernels.cuh"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

namespace cugraphs_test {

__global__ void uniforms(float* out, std::size_t n, cugraphs::PhiloxArgs args, int per_thread) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  float v = 0.0f;
  for (int k = 0; k < per_thread; ++k) v = curand_uniform(&state);
  out[i] = v;
}

// Fills `out` from `g` on `s`, each element the last of `per_thread` draws.
inline void draw(cugraphs::Generator& g, cugraphs::DeviceBuffer<float>& out, int per_thread, cudaStream_t s) {
  uniforms<<<blocks_for(out.size()), kThreads, 0, s>>>(out.data(), out.size(), g.philox(per_thread), per_thread);
  cugraphs::check_launch("uniforms");
}

}  // namespace cugraphs_test
