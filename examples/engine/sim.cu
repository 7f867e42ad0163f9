// The particle kernels and their launch functions (sim.hpp). Compiled by nvcc: including
// <cugraphs/graph.hpp> here also registers the kernels cugraphs launches itself, for the
// host code that main.cpp compiles without nvcc.
#include "sim.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

namespace sim {
namespace {

constexpr int kThreads = 256;

int blocks_for(int n) { return (n + kThreads - 1) / kThreads; }

__device__ void record_speed(FrameState* state, float vx, float vy) {
  atomicMax(&state->vmax_bits, __float_as_uint(sqrtf(vx * vx + vy * vy)));
}

__global__ void begin_frame_kernel(FrameState* state) {
  state->t = 0.0f;
  state->substeps = 0;
  state->vmax_bits = 0;
  state->more = true;
}

__global__ void forces_kernel(Particles p, const float* controls, cugraphs::PhiloxArgs rng, FrameState* state,
                              float dt, float noise) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(rng);
  curandStatePhilox4_32_10_t random;
  curand_init(seed, static_cast<unsigned long long>(i), offset, &random);
  const float2 kick = curand_normal2(&random);
  const float dx = controls[0] - p.x[i], dy = controls[1] - p.y[i];
  const float r2 = dx * dx + dy * dy + 0.01f;  // softened: no particle is flung away
  const float pull = controls[2] * rsqrtf(r2) / r2;
  const float vx = 0.995f * p.vx[i] + dt * (pull * dx + noise * kick.x);
  const float vy = 0.995f * p.vy[i] + dt * (pull * dy + noise * kick.y);
  p.vx[i] = vx;
  p.vy[i] = vy;
  record_speed(state, vx, vy);
}

__global__ void plan_kernel(FrameState* state, float frame_dt, float cfl) {
  const float remaining = frame_dt - state->t;
  const float vmax = __uint_as_float(state->vmax_bits);
  const float longest = vmax > 0.0f ? cfl / vmax : remaining;
  if (longest >= remaining) {  // the last substep ends the frame exactly
    state->h = remaining;
    state->t = frame_dt;
  } else {
    state->h = longest;
    state->t += longest;
  }
  state->vmax_bits = 0;
}

__device__ void bounce(float& pos, float& vel) {
  if (pos < 0.0f) {
    pos = -pos;
    vel = -0.9f * vel;
  } else if (pos > 1.0f) {
    pos = 2.0f - pos;
    vel = -0.9f * vel;
  }
}

__global__ void substep_kernel(Particles p, FrameState* state) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.n) return;
  const float h = state->h;
  float x = p.x[i] + h * p.vx[i], y = p.y[i] + h * p.vy[i];
  float vx = p.vx[i], vy = p.vy[i];
  bounce(x, vx);
  bounce(y, vy);
  p.x[i] = x;
  p.y[i] = y;
  p.vx[i] = vx;
  p.vy[i] = vy;
  record_speed(state, vx, vy);
}

__global__ void check_kernel(FrameState* state, float frame_dt, unsigned max_substeps) {
  state->substeps += 1;
  state->total += 1;
  state->more = state->t < frame_dt && state->substeps < max_substeps;
}

}  // namespace

void launch_begin_frame(FrameState* state, cudaStream_t s) {
  begin_frame_kernel<<<1, 1, 0, s>>>(state);
  cugraphs::check_launch("begin_frame_kernel");
}

void launch_forces(Particles p, const float* controls, cugraphs::PhiloxArgs rng, FrameState* state,
                   const Config& config, cudaStream_t s) {
  forces_kernel<<<blocks_for(p.n), kThreads, 0, s>>>(p, controls, rng, state, config.frame_dt, config.noise);
  cugraphs::check_launch("forces_kernel");
}

void launch_plan(FrameState* state, const Config& config, cudaStream_t s) {
  plan_kernel<<<1, 1, 0, s>>>(state, config.frame_dt, config.cfl);
  cugraphs::check_launch("plan_kernel");
}

void launch_substep(Particles p, FrameState* state, cudaStream_t s) {
  substep_kernel<<<blocks_for(p.n), kThreads, 0, s>>>(p, state);
  cugraphs::check_launch("substep_kernel");
}

void launch_check(FrameState* state, const Config& config, cudaStream_t s) {
  check_kernel<<<1, 1, 0, s>>>(state, config.frame_dt, config.max_substeps);
  cugraphs::check_launch("check_kernel");
}

}  // namespace sim
