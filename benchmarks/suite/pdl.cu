// Programmatic dependent launch: a chain of small dependent kernels captured with
// cugraphs::launch(programmatic = true) against the same chain captured with plain launches,
// replays back to back, to completion. Each kernel does its index math before pdl::wait(),
// so a programmatic edge lets that prologue (and the launch itself) overlap the previous
// kernel's tail. It lets its successor be scheduled once its work is done (pdl::trigger() at
// its end); a second PDL chain triggers right after its wait instead, so that each kernel's
// successor is launched while it works (the row's "early" column).
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <vector>

namespace cugraphs_bench {
namespace {

__global__ void pdl_link(float* y, const float* x, unsigned n, int k) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float add = static_cast<float>(k & 7) * 0.125f;
  cugraphs::pdl::wait();
  if (i < n) y[i] = x[i] * 0.999f + add;
  cugraphs::pdl::trigger();
}

// pdl_link, letting its successor be scheduled as soon as its predecessor has completed.
__global__ void pdl_link_early(float* y, const float* x, unsigned n, int k) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float add = static_cast<float>(k & 7) * 0.125f;
  cugraphs::pdl::wait();
  cugraphs::pdl::trigger();
  if (i < n) y[i] = x[i] * 0.999f + add;
}

}  // namespace

void pdl_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  constexpr unsigned n = 4096;  // 16 blocks: a small kernel, as in decode steps
  cugraphs::DeviceBuffer<float> a(n), b(n);
  cugraphs::check(cudaMemsetAsync(a.data(), 0, a.bytes(), stream), "cudaMemsetAsync");
  cugraphs::check(cudaMemsetAsync(b.data(), 0, b.bytes(), stream), "cudaMemsetAsync");
  constexpr std::array<int, 3> lengths{10, 100, 1000};
  std::printf("\n== PDL: a chain of dependent kernels, programmatic edges vs plain, replays to done\n");
  std::printf("%-8s %14s %14s %8s %8s          %14s %8s\n", "kernels", "plain", "PDL", "speedup", "goal", "PDL, early",
              "speedup");
  Json& sec = report.section("pdl");
  for (const int len : lengths) {
    cugraphs::Graph plain, pdl, early;
    for (cugraphs::Graph* g : {&plain, &pdl, &early}) {
      cugraphs::LaunchConfig config;
      config.grid = dim3(n / 256);
      config.block = dim3(256);
      config.programmatic = g != &plain;
      cugraphs::CaptureScope scope(*g);
      for (int k = 0; k < len; ++k)
        cugraphs::launch(config, g == &early ? pdl_link_early : pdl_link, k % 2 == 0 ? b.data() : a.data(),
                         k % 2 == 0 ? a.data() : b.data(), n, k);
      scope.end();
    }
    // Three rounds, each starting with another chain, so that no chain always runs first or
    // last (the order moved the figures between runs); the median of each chain's three.
    std::array<cugraphs::Graph*, 3> chains{&plain, &pdl, &early};
    std::array<std::vector<double>, 3> times;
    for (int round = 0; round < 3; ++round)
      for (int k = 0; k < 3; ++k) {
        const int c = (round + k) % 3;
        times[c].push_back(to_done([&] { chains[c]->replay(); }, stream));
      }
    const double t_plain = median(times[0]), t_pdl = median(times[1]), t_early = median(times[2]);
    const double speedup = t_plain / t_pdl;
    std::string verdict = "";
    if (len >= 100)
      verdict = report.goal({"pdl", "pdl_chain_speedup", "chain of dependent kernels: plain graph / PDL graph, to done",
                             "kernels", len},
                            speedup, ">=", 1.3);
    std::printf("%-8d %11.2f us %11.2f us %8.3f %8s %-7s %11.2f us %8.3f\n", len, t_plain, t_pdl, speedup,
                len >= 100 ? ">= 1.3" : "-", verdict.c_str(), t_early, t_plain / t_early);
    Json& row = sec[std::to_string(len)];
    row["plain_done_us"] = t_plain;
    row["pdl_done_us"] = t_pdl;
    row["pdl_early_done_us"] = t_early;
  }
}

}  // namespace cugraphs_bench
