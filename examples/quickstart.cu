// quickstart: a simulation step made of many small kernels, run eagerly and as a replayed
// CUDA graph. Checks that both give bitwise the same state and prints the speedup.
#include <cugraphs/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kParticles = 8192;
constexpr int kSubsteps = 16;  // 4 kernels each: 64 launches a step
constexpr int kSteps = 200;
constexpr float kDt = 1e-3f;

struct State {
  cugraphs::DeviceBuffer<float2> pos, vel, force;
};

__global__ void gravity_and_drag(const float2* vel, float2* force, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) force[i] = make_float2(-0.3f * vel[i].x, -9.81f - 0.3f * vel[i].y);
}

__global__ void spring_to_origin(const float2* pos, float2* force, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    force[i].x -= 4.0f * pos[i].x;
    force[i].y -= 4.0f * pos[i].y;
  }
}

__global__ void integrate(float2* pos, float2* vel, const float2* force, int n, float dt) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    vel[i].x += dt * force[i].x;
    vel[i].y += dt * force[i].y;
    pos[i].x += dt * vel[i].x;
    pos[i].y += dt * vel[i].y;
  }
}

__global__ void bounce_on_floor(float2* pos, float2* vel, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && pos[i].y < -1.0f) {
    pos[i].y = -2.0f - pos[i].y;
    vel[i].y = -0.8f * vel[i].y;
  }
}

void step(State& s, cudaStream_t stream) {
  constexpr int threads = 256, blocks = (kParticles + threads - 1) / threads;
  for (int k = 0; k < kSubsteps; ++k) {
    gravity_and_drag<<<blocks, threads, 0, stream>>>(s.vel.data(), s.force.data(), kParticles);
    spring_to_origin<<<blocks, threads, 0, stream>>>(s.pos.data(), s.force.data(), kParticles);
    integrate<<<blocks, threads, 0, stream>>>(s.pos.data(), s.vel.data(), s.force.data(), kParticles, kDt);
    bounce_on_floor<<<blocks, threads, 0, stream>>>(s.pos.data(), s.vel.data(), kParticles);
  }
  cugraphs::check_launch("simulation step");
}

State make_state(const std::vector<float2>& pos0, const std::vector<float2>& vel0, cudaStream_t s) {
  State st{cugraphs::DeviceBuffer<float2>(kParticles, s), cugraphs::DeviceBuffer<float2>(kParticles, s),
           cugraphs::DeviceBuffer<float2>(kParticles, s)};
  st.pos.copy_from_host(pos0, s);
  st.vel.copy_from_host(vel0, s);
  return st;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("quickstart: no CUDA device found. This demo captures and replays a CUDA graph, so "
              "it needs a GPU; the library and its host-only tests build without one.");
    return 1;
  }
  try {
    cudaDeviceProp prop{};
    cugraphs::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    std::printf("quickstart on %s: %d particles, %d kernels a step, %d steps\n", prop.name,
                kParticles, 4 * kSubsteps, kSteps);

    std::mt19937 gen(2026);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float2> pos0(kParticles), vel0(kParticles);
    for (int i = 0; i < kParticles; ++i) {
      pos0[i] = make_float2(u(gen), u(gen));
      vel0[i] = make_float2(2.0f * u(gen), 2.0f * u(gen));
    }
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);

    // Eager: 64 launches a step.
    State eager = make_state(pos0, vel0, stream);
    step(eager, stream);  // warm-up (module load), then start over
    eager = make_state(pos0, vel0, stream);
    stream.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kSteps; ++i) step(eager, stream);
    stream.synchronize();
    const double eager_s = seconds_since(t0);

    // Graph: capture one step once, replay it every step.
    State graphed = make_state(pos0, vel0, stream);
    cugraphs::Graph graph;
    t0 = std::chrono::steady_clock::now();
    {
      cugraphs::CaptureScope scope(graph);
      step(graphed, scope.stream());
    }
    const double capture_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kSteps; ++i) graph.replay();
    stream.synchronize();
    const double graph_s = seconds_since(t0);

    const auto pe = eager.pos.to_host(), pg = graphed.pos.to_host();
    const auto ve = eager.vel.to_host(), vg = graphed.vel.to_host();
    const bool same = std::memcmp(pe.data(), pg.data(), pe.size() * sizeof(float2)) == 0 &&
                      std::memcmp(ve.data(), vg.data(), ve.size() * sizeof(float2)) == 0;
    const bool moved = std::memcmp(pe.data(), pos0.data(), pe.size() * sizeof(float2)) != 0;

    std::printf("capture + instantiate once: %8.3f ms\n", capture_s * 1e3);
    std::printf("eager   %d steps:          %8.3f ms  (%6.1f us a step)\n", kSteps, eager_s * 1e3,
                eager_s * 1e6 / kSteps);
    std::printf("replay  %d steps:          %8.3f ms  (%6.1f us a step)\n", kSteps, graph_s * 1e3,
                graph_s * 1e6 / kSteps);
    std::printf("speedup: %.2fx; states bitwise equal: %s\n", eager_s / graph_s, same ? "yes" : "NO");
    if (!same || !moved) {
      std::puts(moved ? "quickstart: FAIL: the graph's result differs from eager"
                      : "quickstart: FAIL: the simulation did not move");
      return 1;
    }
    return 0;
  } catch (const cugraphs::Error& e) {
    std::printf("quickstart: %s\n", e.what());
    return 1;
  }
}
