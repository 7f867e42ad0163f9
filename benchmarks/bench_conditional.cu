// Conditional benchmark: a Jacobi solve looping on the device (one replay, a While node)
// against the same solve driven from the host (launch a batch, copy the residual back,
// decide), on a small grid where launch overhead dominates and on a large one; and the
// cost of an empty If node per replay.
#include "../examples/jacobi.cuh"
#include "bench_common.hpp"

#include <cstdio>
#include <string>

using namespace cugraphs_bench;

namespace {

__global__ void tiny(int* x) { *x += 1; }

// Median time per replay, launch to completion, over `reps` back-to-back replays timed
// with events.
double replay_us(cugraphs::Graph& g, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  cugraphs::check(cudaEventCreate(&a), "event");
  cugraphs::check(cudaEventCreate(&b), "event");
  std::vector<double> per;
  for (int r = 0; r < 15; ++r) {
    cugraphs::check(cudaEventRecord(a, s), "record");
    for (int i = 0; i < reps; ++i) g.replay(s);
    cugraphs::check(cudaEventRecord(b, s), "record");
    cugraphs::check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    cugraphs::check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    per.push_back(ms * 1e3 / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(per);
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_device("bench_conditional")) return 77;
  const std::string json = json_path(argc, argv, "bench_conditional");
  Report report("conditional");
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::printf("%-52s %12s %12s %9s %s\n", "measure", "device loop", "host loop", "speedup", "goal");

  struct Case {
    const char* name;
    int n, batch;
    jacobi::Stop stop;
  };
  // Small: to convergence, checked every 10 sweeps. Large: a fixed number of sweeps (the
  // tolerance is unreachable), checked every 20.
  for (const Case c : {Case{"small", 64, 10, {0.1f, 100000}}, Case{"large", 2048, 20, {0.0f, 2000}}}) {
    jacobi::Buffers buffers(c.n);
    const auto p = buffers.problem();
    cugraphs::Graph solve = jacobi::capture_solver(p, c.batch, c.stop);
    std::vector<double> device_ms, host_ms;
    int device_sweeps = 0, host_sweeps = 0;
    for (int r = 0; r < 5; ++r) {
      buffers.reset();
      stream.synchronize();
      auto t0 = Clock::now();
      solve.replay();
      stream.synchronize();
      device_ms.push_back(us_since(t0) / 1e3);
      device_sweeps = buffers.sweeps.to_host()[0];

      buffers.reset();
      stream.synchronize();
      t0 = Clock::now();
      host_sweeps = jacobi::solve_from_host(p, c.batch, c.stop, stream);
      host_ms.push_back(us_since(t0) / 1e3);
    }
    const double d = median(device_ms), h = median(host_ms);
    std::printf("%-52s %9.2f ms %9.2f ms %8.2fx %s\n",
                fmt::format("Jacobi {0}x{0}, {1} sweeps (device) / {2} (host)", c.n, device_sweeps, host_sweeps).c_str(),
                d, h, h / d, c.n == 64 ? ">= 3x" : "");
    report.add(fmt::format("jacobi_{}_device_ms", c.name), d);
    report.add(fmt::format("jacobi_{}_host_ms", c.name), h);
    report.add(fmt::format("jacobi_{}_speedup", c.name), h / d);
    report.add(fmt::format("jacobi_{}_sweeps", c.name), device_sweeps);
    if (device_sweeps != host_sweeps) std::printf("  note: sweep counts differ\n");
  }

  // An empty If node: a graph of one kernel, with and without an If node (its body empty)
  // after it. Our If includes the kernel that copies the flag into the condition.
  {
    cugraphs::DeviceBuffer<int> x(1);
    cugraphs::DeviceBuffer<bool> flag(1);
    const bool yes[1] = {true};
    flag.copy_from_host(std::span<const bool>(yes, 1));
    cugraphs::Graph plain, with_if;
    cugraphs::capture(plain, [&](cudaStream_t s) { tiny<<<1, 1, 0, s>>>(x.data()); });
    {
      cugraphs::CaptureScope scope(with_if);
      tiny<<<1, 1, 0, scope.stream()>>>(x.data());
      cugraphs::ConditionalScope<cugraphs::If> empty(scope, flag.data());
    }
    for (int i = 0; i < 100; ++i) {
      plain.replay();
      with_if.replay();
    }
    const double p = replay_us(plain, stream, 500), w = replay_us(with_if, stream, 500);
    std::printf("%-52s %9.2f us %9.2f us %+8.2f us\n", "replay to done: 1 kernel + empty If / 1 kernel", w, p, w - p);
    report.add("replay_1_kernel_us", p);
    report.add("replay_1_kernel_plus_empty_if_us", w);
    report.add("empty_if_cost_us", w - p);
  }
  report.write(json);
  return 0;
}
