// Programmatic dependent launch: a chain of small dependent kernels captured with
// cugraphs::launch(programmatic = true) against the same chain captured with plain launches,
// replays back to back, to completion. Each kernel does its index math before pdl::wait(),
// so a programmatic edge lets that prologue (and the launch itself) overlap the previous
// kernel's work. Each lets its successor be scheduled right after its wait (pdl::trigger(),
// as docs/launch.md advises for short kernels): the goal's chain. A second PDL chain triggers
// after its work instead (the row's "trigger at the end" column), which the H200 ran at 1.27x
// against 1.67x (2026-12-05).
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <vector>

namespace cugraphs_bench {
namespace {

// One link: its successor may be scheduled as soon as its predecessor has completed.
__global__ void pdl_link(float* y, const float* x, unsigned n, int k) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float add = static_cast<float>(k & 7) * 0.125f;
  cugraphs::pdl::wait();
  cugraphs::pdl::trigger();
  if (i < n) y[i] = x[i] * 0.999f + add;
}

// pdl_link, letting its successor be scheduled only once its work is done.
__global__ void pdl_link_late(float* y, const float* x, unsigned n, int k) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float add = static_cast<float>(k & 7) * 0.125f;
  cugraphs::pdl::wait();
  if (i < n) y[i] = x[i] * 0.999f + add;
  cugraphs::pdl::trigger();
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
  std::printf("%-8s %14s %14s %8s %8s          %14s %8s\n", "kernels", "plain", "PDL", "speedup", "goal", "PDL, late",
              "speedup");
  Json& sec = report.section("pdl");
  for (const int len : lengths) {
    cugraphs::Graph plain, pdl, late;
    for (cugraphs::Graph* g : {&plain, &pdl, &late}) {
      cugraphs::LaunchConfig config;
      config.grid = dim3(n / 256);
      config.block = dim3(256);
      config.programmatic = g != &plain;
      cugraphs::CaptureScope scope(*g);
      for (int k = 0; k < len; ++k)
        cugraphs::launch(config, g == &late ? pdl_link_late : pdl_link, k % 2 == 0 ? b.data() : a.data(),
                         k % 2 == 0 ? a.data() : b.data(), n, k);
      scope.end();
    }
    // Three rounds, each starting with another chain, so that no chain always runs first or
    // last (the order moved the figures between runs); the median of each chain's three.
    std::array<cugraphs::Graph*, 3> chains{&plain, &pdl, &late};
    std::array<std::vector<double>, 3> times;
    for (int round = 0; round < 3; ++round)
      for (int k = 0; k < 3; ++k) {
        const int c = (round + k) % 3;
        times[c].push_back(to_done([&] { chains[c]->replay(); }, stream));
      }
    const double t_plain = median(times[0]), t_pdl = median(times[1]), t_late = median(times[2]);
    const double speedup = t_plain / t_pdl;
    std::string verdict = "";
    if (len >= 100)
      verdict = report.goal({"pdl", "pdl_chain_speedup", "chain of dependent kernels: plain graph / PDL graph, to done",
                             "kernels", len},
                            speedup, ">=", 1.3);
    std::printf("%-8d %11.2f us %11.2f us %8.3f %8s %-7s %11.2f us %8.3f\n", len, t_plain, t_pdl, speedup,
                len >= 100 ? ">= 1.3" : "-", verdict.c_str(), t_late, t_plain / t_late);
    Json& row = sec[std::to_string(len)];
    row["plain_done_us"] = t_plain;
    // The goal's chain. Until the twelfth session (2026-12-05) it triggered at the end, and the
    // chain triggering after its wait was "pdl_early_done_us".
    row["pdl_done_us"] = t_pdl;
    row["pdl_late_done_us"] = t_late;
  }
}

}  // namespace cugraphs_bench
