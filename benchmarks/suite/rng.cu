// Replays of a graph whose kernel draws random numbers through a Generator (each replay
// posts the generator's (seed, offset) to the graph's ring before cudaGraphLaunch) against
// the same graph drawing from fixed arguments: host cost with the stream kept busy, and
// back-to-back replays to completion.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <cstdio>
#include <vector>

namespace cugraphs_bench {
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

void rng_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  constexpr unsigned n = 1u << 20;
  cugraphs::DeviceBuffer<float> out(n);
  cugraphs::Generator gen(1);
  cugraphs::Graph with_rng, without_rng;
  cugraphs::capture(with_rng, [&](cudaStream_t s) { uniforms<<<n / 256, 256, 0, s>>>(out.data(), n, gen.philox(1)); });
  cugraphs::capture(without_rng, [&](cudaStream_t s) {
    uniforms<<<n / 256, 256, 0, s>>>(out.data(), n, cugraphs::PhiloxArgs{1, 0, nullptr});
  });
  cugraphs::check_launch("uniforms");
  HostTimer timer(stream);
  const auto m = timer.medians({[&] { with_rng.replay(); }, [&] { without_rng.replay(); }}, 32, reps(80), 5);
  auto done = [&](cugraphs::Graph& g) {
    std::vector<double> v;
    for (int r = 0; r < reps(9) + 1; ++r) {
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      const auto t0 = Clock::now();
      for (int i = 0; i < 100; ++i) g.replay();
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      if (r > 0) v.push_back(us_since(t0) / 100);
    }
    return median(v);
  };
  const double dw = done(with_rng), dn = done(without_rng);
  const double ratio = m[0] / m[1];
  const std::string v = report.goal({"rng", "rng_vs_fixed", "replay host cost with RNG / without"}, ratio, "<=", 1.1);
  std::printf("\n== RNG: replay of a graph drawing 1M uniforms through a Generator vs fixed Philox arguments\n");
  std::printf("%-26s %14s %14s %8s %8s\n", "", "with RNG", "without", "ratio", "goal");
  std::printf("%-26s %11.3f us %11.3f us %8.3f %8s %s\n", "host cost per replay", m[0], m[1], ratio, "<= 1.1", v.c_str());
  std::printf("%-26s %11.2f us %11.2f us %8.3f\n", "to done, back to back", dw, dn, dw / dn);
  timer.note_uncovered();
  Json& sec = report.section("rng");
  sec["with_rng_us"] = m[0];
  sec["without_rng_us"] = m[1];
  sec["with_rng_done_us"] = dw;
  sec["without_rng_done_us"] = dn;
  sec["uncovered_batches"] = timer.uncovered();
}

}  // namespace cugraphs_bench
