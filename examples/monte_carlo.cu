// monte_carlo: estimates pi from random points in the unit square, stepped by graph
// replays. Each replay draws fresh numbers from a Generator (graph-safe RNG); the example
// checks the estimate against pi, that consecutive replays drew different points, and that
// the graph drew exactly the numbers the same calls draw eagerly.
#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kThreads = 256, kBlocks = 512, kSamplesPerThread = 64;
constexpr double kPi = 3.14159265358979323846;

// Each thread draws kSamplesPerThread points (2 values each), counts those inside the
// quarter circle, and keeps its first x for the checks.
__global__ void throw_darts(cugraphs::PhiloxArgs args, unsigned long long* hits, float* first_x) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, t, offset, &state);
  unsigned inside = 0;
  for (int s = 0; s < kSamplesPerThread; ++s) {
    const float x = curand_uniform(&state), y = curand_uniform(&state);
    if (s == 0) first_x[t] = x;
    inside += x * x + y * y <= 1.0f ? 1u : 0u;
  }
  atomicAdd(hits, static_cast<unsigned long long>(inside));
}

void step(cugraphs::Generator& gen, unsigned long long* hits, float* first_x, cudaStream_t s) {
  throw_darts<<<kBlocks, kThreads, 0, s>>>(gen.philox(2 * kSamplesPerThread), hits, first_x);
  cugraphs::check_launch("throw_darts");
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("monte_carlo: no CUDA device found; this example replays a graph and needs a GPU");
    return 1;
  }
  try {
    constexpr int kReplays = 200;
    constexpr int n = kThreads * kBlocks;
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    cugraphs::Generator gen(2026), twin(2026);
    cugraphs::DeviceBuffer<unsigned long long> hits(1), twin_hits(1);
    cugraphs::DeviceBuffer<float> first_x(n), twin_x(n);
    cugraphs::check(cudaMemsetAsync(hits.data(), 0, hits.bytes(), stream), "clear hits");
    cugraphs::check(cudaMemsetAsync(twin_hits.data(), 0, twin_hits.bytes(), stream), "clear hits");

    cugraphs::Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) { step(gen, hits.data(), first_x.data(), s); });

    bool all_differ = true, all_match = true;
    std::vector<float> previous;
    for (int r = 0; r < kReplays; ++r) {
      g.replay();
      step(twin, twin_hits.data(), twin_x.data(), stream);  // the same draw, eagerly
      if (r < 5) {  // spot checks
        const auto x = first_x.to_host(), tx = twin_x.to_host();
        all_match = all_match && std::memcmp(x.data(), tx.data(), x.size() * sizeof(float)) == 0;
        all_differ = all_differ && (previous.empty() || std::memcmp(x.data(), previous.data(), x.size() * sizeof(float)) != 0);
        previous = x;
      }
    }
    const unsigned long long inside = hits.to_host()[0], twin_inside = twin_hits.to_host()[0];
    const double samples = static_cast<double>(kReplays) * n * kSamplesPerThread;
    const double estimate = 4.0 * static_cast<double>(inside) / samples;
    const double sigma = 4.0 * std::sqrt((kPi / 4) * (1 - kPi / 4) / samples);
    std::printf("monte_carlo: %d replays, %.3g samples: pi ~ %.6f (error %.2e, %.1f sigma)\n", kReplays,
                samples, estimate, estimate - kPi, std::abs(estimate - kPi) / sigma);
    std::printf("monte_carlo: replays drew different points: %s; graph == eager draws: %s\n",
                all_differ ? "yes" : "NO", all_match && inside == twin_inside ? "yes" : "NO");
    const bool ok = std::abs(estimate - kPi) < 5 * sigma && all_differ && all_match && inside == twin_inside;
    std::puts(ok ? "monte_carlo: ok" : "monte_carlo: FAIL");
    return ok ? 0 : 1;
  } catch (const cugraphs::Error& e) {
    std::printf("monte_carlo: %s\n", e.what());
    return 1;
  }
}
