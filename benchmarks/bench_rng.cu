// RNG benchmark: host cost of replaying a graph that draws random numbers (the replay posts
// the generator's (seed, offset) to the graph's ring) against the same graph drawing from
// fixed arguments; and both to completion. The goal is at most 1.1x.
#include "bench_common.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <cstdio>

using namespace cugraphs_bench;

namespace {

__global__ void uniforms(float* out, unsigned n, cugraphs::PhiloxArgs args) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = curand_uniform(&state);
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_device("bench_rng")) return 77;
  const std::string json = json_path(argc, argv, "bench_rng");
  Report report("rng");
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  constexpr unsigned n = 1 << 20;
  cugraphs::DeviceBuffer<float> out(n);
  cugraphs::Generator gen(1);
  cugraphs::Graph with_rng, without_rng;
  cugraphs::capture(with_rng, [&](cudaStream_t s) { uniforms<<<n / 256, 256, 0, s>>>(out.data(), n, gen.philox(1)); });
  cugraphs::capture(without_rng, [&](cudaStream_t s) {
    uniforms<<<n / 256, 256, 0, s>>>(out.data(), n, cugraphs::PhiloxArgs{1, 0, nullptr});
  });

  // Host cost: batches of 32 replays queued behind a spinning kernel, alternating.
  constexpr int kBatch = 32, kReps = 80;
  std::vector<double> host_with, host_without;
  for (int r = 0; r < kReps + 5; ++r) {
    for (int which = 0; which < 2; ++which) {
      const bool rng_now = (which == 0) == (r % 2 == 0);
      spin<<<1, 1, 0, stream>>>(2'000'000);
      const auto t0 = Clock::now();
      for (int i = 0; i < kBatch; ++i) (rng_now ? with_rng : without_rng).replay();
      const double us = us_since(t0) / kBatch;
      stream.synchronize();
      if (r >= 5) (rng_now ? host_with : host_without).push_back(us);
    }
  }
  // To completion, back to back.
  auto done = [&](cugraphs::Graph& g) {
    std::vector<double> v;
    for (int r = 0; r < 9; ++r) {
      stream.synchronize();
      const auto t0 = Clock::now();
      for (int i = 0; i < 100; ++i) g.replay();
      stream.synchronize();
      v.push_back(us_since(t0) / 100);
    }
    return median(v);
  };
  const double hw = median(host_with), ho = median(host_without);
  const double dw = done(with_rng), dn = done(without_rng);
  std::printf("replay host cost: with RNG %.3f us, without %.3f us: ratio %.3f (goal <= 1.1)\n", hw, ho, hw / ho);
  std::printf("replay to done (1M uniforms): with RNG %.2f us, without %.2f us\n", dw, dn);
  report.add("replay_host_us_with_rng", hw);
  report.add("replay_host_us_without_rng", ho);
  report.add("rng_replay_host_ratio", hw / ho);
  report.add("replay_done_us_with_rng", dw);
  report.add("replay_done_us_without_rng", dn);
  report.write(json);
  return 0;
}
