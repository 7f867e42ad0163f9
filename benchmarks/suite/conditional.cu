// A Jacobi solve looping on the device (one replay of a graph with a While node whose body
// sets its own condition) against the same solve driven from the host (launch a batch of
// sweeps, copy the residual back, decide), on a small grid where launch overhead dominates
// and on a large one; and the device time an empty If node adds to a replay. Compiled out
// below CUDA 12.4, which has no conditional nodes.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <span>
#include <vector>

#if CUGRAPHS_HAS_CONDITIONAL_NODES
#  include "../../examples/jacobi.cuh"
#endif

namespace cugraphs_bench {

#if CUGRAPHS_HAS_CONDITIONAL_NODES
namespace {

__global__ void bump(int* x) { *x += 1; }

// Median device time per replay over back-to-back replays, timed with events. The replays
// queue behind a spin, so that the device runs them back to back rather than at the pace
// the host launches them (about as fast as a one-kernel replay runs).
double replay_us(cugraphs::Graph& g, cudaStream_t s, int per_sample) {
  cudaEvent_t a = nullptr, b = nullptr;
  cugraphs::check(cudaEventCreate(&a), "cudaEventCreate");
  cugraphs::check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> per;
  int late = 0;
  for (int r = 0; r < reps(15); ++r) {
    spin<<<1, 1, 0, s>>>(3'000'000);
    cugraphs::check_launch("spin");
    cugraphs::check(cudaEventRecord(a, s), "cudaEventRecord");
    for (int i = 0; i < per_sample; ++i) g.replay(s);
    cugraphs::check(cudaEventRecord(b, s), "cudaEventRecord");
    const cudaError_t q = cudaEventQuery(a);
    if (q == cudaErrorNotReady) (void)cudaGetLastError();  // not an error: the spin still runs
    late += q == cudaSuccess ? 1 : 0;  // the replays were still being launched when it ended
    cugraphs::check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cugraphs::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    per.push_back(ms * 1e3 / per_sample);
  }
  cugraphs::check(cudaEventDestroy(a), "cudaEventDestroy");
  cugraphs::check(cudaEventDestroy(b), "cudaEventDestroy");
  if (late > 0) std::printf("  note: %d sample(s) outlasted their spin: those may be paced by the host\n", late);
  return median(per);
}

}  // namespace

void conditional_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  Json& sec = report.section("conditional");
  std::printf("\n== conditional loop: Jacobi to a stop rule, While node on the device vs a host-driven loop\n");
  std::printf("%-12s %8s %13s %13s %9s %8s %s\n", "grid", "sweeps", "device loop", "host loop", "speedup", "goal", "");
  struct Case {
    const char* name;
    int n, batch, count;
    jacobi::Stop stop;
  };
  // Small: to convergence, checked every 10 sweeps. Large: a fixed number of sweeps (the
  // tolerance is unreachable), checked every 20.
  for (const Case c : {Case{"small", 64, 10, 7, {0.1f, 100000}}, Case{"large", 2048, 20, 3, {0.0f, 2000}}}) {
    jacobi::Buffers buffers(c.n);
    const auto p = buffers.problem();
    cugraphs::Graph solve = jacobi::capture_solver(p, c.batch, c.stop);
    std::vector<double> device_ms, host_ms;
    int device_sweeps = 0, host_sweeps = 0;
    for (int r = 0; r < reps(c.count) + 1; ++r) {  // round 0 warms up
      buffers.reset();
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      auto t0 = Clock::now();
      solve.replay();
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      const double d = us_since(t0) / 1e3;
      device_sweeps = buffers.sweeps.to_host()[0];

      buffers.reset();
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      t0 = Clock::now();
      host_sweeps = jacobi::solve_from_host(p, c.batch, c.stop, stream);
      const double h = us_since(t0) / 1e3;
      if (r > 0) {
        device_ms.push_back(d);
        host_ms.push_back(h);
      }
    }
    const double d = median(device_ms), h = median(host_ms);
    const bool small = c.n == 64;
    const std::string v =
        small ? report.goal({"conditional", "device_vs_host_loop",
                             "device loop speedup over a host-driven loop, 64x64 Jacobi", "grid", c.n},
                            h / d, ">=", 3.0)
              : "";
    std::printf("%-12s %8d %10.2f ms %10.2f ms %8.2fx %8s %s\n", fmt::format("{0}x{0}", c.n).c_str(), device_sweeps, d,
                h, h / d, small ? ">= 3" : "", v.c_str());
    if (device_sweeps != host_sweeps)
      std::printf("  note: the host loop ran %d sweeps, the device loop %d\n", host_sweeps, device_sweeps);
    Json& g = sec[c.name];
    g["grid"] = c.n;
    g["sweeps"] = device_sweeps;
    g["host_sweeps"] = host_sweeps;
    g["device_loop_ms"] = d;
    g["host_loop_ms"] = h;
  }

  // An empty If node after one kernel, against the kernel alone; the If includes the kernel
  // that copies the flag into the condition.
  cugraphs::DeviceBuffer<int> x(1);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "memset");  // bump reads it
  cugraphs::DeviceBuffer<bool> flag(1);
  const bool yes[1] = {true};
  flag.copy_from_host(std::span<const bool>(yes, 1));
  cugraphs::Graph plain, with_if;
  cugraphs::capture(plain, [&](cudaStream_t s) { bump<<<1, 1, 0, s>>>(x.data()); });
  {
    cugraphs::CaptureScope scope(with_if);
    bump<<<1, 1, 0, scope.stream()>>>(x.data());
    cugraphs::ConditionalScope<cugraphs::If> empty(scope, flag.data());
    empty.end();
    scope.end();
  }
  for (int i = 0; i < 100; ++i) {
    plain.replay();
    with_if.replay();
  }
  const double pu = replay_us(plain, stream, 200), wu = replay_us(with_if, stream, 200);
  std::printf("empty If node: replay to done %.2f us with it, %.2f us without (%+.2f us)\n", wu, pu, wu - pu);
  Json& e = sec["empty_if"];
  e["replay_us"] = pu;
  e["replay_with_if_us"] = wu;
}

#else

void conditional_section(Report& report, cudaStream_t) {
  std::printf("\n== conditional loop: skipped (built with a CUDA toolkit older than 12.4: no conditional nodes)\n");
  report.section("conditional")["skipped"] = "CUDA toolkit older than 12.4";
}

#endif

}  // namespace cugraphs_bench
