// Foundation benchmark: the host cost of Graph::replay() against a bare cudaGraphLaunch of
// the same executable, a 100-kernel step run eagerly against its replay, and the memory of
// two graphs sharing a pool against two private pools. One run, medians, ratios.
#include "bench_common.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <string>

using namespace cugraphs_bench;

namespace {

__global__ void tiny(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;
}

constexpr int kN = 1024;

// Host cost per launch: batches of `batch` launches timed on the host clock, the stream
// drained (untimed) between batches, bare and cugraphs batches alternating so drift in the
// machine affects both alike. Returns {bare us, cugraphs us} medians.
std::pair<double, double> replay_host_cost(cugraphs::Graph& g, cudaStream_t s, int batches, int batch) {
  std::vector<double> bare, ours;
  cudaGraphExec_t exec = g.native_exec();
  for (int r = 0; r < batches; ++r) {
    for (int which = 0; which < 2; ++which) {
      const bool bare_now = (which == 0) == (r % 2 == 0);
      cugraphs::check(cudaStreamSynchronize(s), "sync");
      const auto t0 = Clock::now();
      if (bare_now) {
        for (int i = 0; i < batch; ++i) cugraphs::check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      } else {
        for (int i = 0; i < batch; ++i) g.replay(s);
      }
      (bare_now ? bare : ours).push_back(us_since(t0) / batch);
    }
  }
  cugraphs::check(cudaStreamSynchronize(s), "sync");
  return {median(bare), median(ours)};
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_device("bench_foundation")) return 77;
  const std::string json = json_path(argc, argv, "bench_foundation");
  Report report("foundation");
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> x(kN);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "memset");

  // 1. Replay host cost, for a 1-kernel and a 100-kernel graph.
  std::printf("%-44s %12s %12s %8s %s\n", "measure", "cugraphs", "baseline", "ratio", "goal");
  for (const int nodes : {1, 100}) {
    cugraphs::Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) {
      for (int k = 0; k < nodes; ++k) tiny<<<(kN + 255) / 256, 256, 0, s>>>(x.data(), kN, 0.5f);
    });
    for (int w = 0; w < 50; ++w) g.replay(stream);  // warm-up
    const auto [bare, ours] = replay_host_cost(g, stream, 400, 64);
    std::printf("%-44s %9.3f us %9.3f us %8.3f %s\n",
                fmt::format("replay host cost, {} node(s), vs cudaGraphLaunch", nodes).c_str(), ours,
                bare, ours / bare, "<= 1.05");
    report.add(fmt::format("replay_host_us_{}_nodes", nodes), ours);
    report.add(fmt::format("bare_launch_host_us_{}_nodes", nodes), bare);
    report.add(fmt::format("replay_vs_bare_ratio_{}_nodes", nodes), ours / bare);
  }

  // 2. A 100-kernel step: eager launches vs one replay, each followed by a synchronize.
  {
    constexpr int kKernels = 100, kIters = 200;
    auto eager_step = [&](cudaStream_t s) {
      for (int k = 0; k < kKernels; ++k) tiny<<<(kN + 255) / 256, 256, 0, s>>>(x.data(), kN, 0.5f);
    };
    cugraphs::Graph g;
    cugraphs::capture(g, eager_step);
    std::vector<double> eager, replay;
    for (int i = 0; i < 20; ++i) {
      eager_step(stream);
      g.replay();
    }
    stream.synchronize();
    for (int i = 0; i < kIters; ++i) {
      auto t0 = Clock::now();
      eager_step(stream);
      stream.synchronize();
      eager.push_back(us_since(t0));
      t0 = Clock::now();
      g.replay();
      stream.synchronize();
      replay.push_back(us_since(t0));
    }
    const double e = median(eager), r = median(replay);
    std::printf("%-44s %9.1f us %9.1f us %7.2fx %s\n", "100-kernel step: replay vs eager (to done)", r,
                e, e / r, "speedup");
    report.add("step100_eager_us", e);
    report.add("step100_replay_us", r);
    report.add("step100_speedup", e / r);
  }

  // 3. Two graphs with 64 MiB temporaries each: one shared pool vs two private pools.
  {
    constexpr std::size_t kTemp = 16 << 20;  // floats: 64 MiB
    auto capture_with_temp = [&](cugraphs::Graph& g, const cugraphs::CaptureOptions& opts) {
      cugraphs::CaptureScope scope(g, opts);
      cugraphs::DeviceBuffer<float> temp(kTemp);
      tiny<<<(kN + 255) / 256, 256, 0, scope.stream()>>>(temp.data(), kN, 2.0f);
    };
    cugraphs::CaptureOptions shared;
    shared.pool = cugraphs::graph_pool_handle();
    cugraphs::Graph a, b, c, d;
    capture_with_temp(a, shared);
    capture_with_temp(b, shared);
    capture_with_temp(c, {});
    capture_with_temp(d, {});
    const double shared_mib = static_cast<double>(shared.pool->reserved_bytes()) / (1 << 20);
    const double separate_mib =
        static_cast<double>(c.pool().reserved_bytes() + d.pool().reserved_bytes()) / (1 << 20);
    std::printf("%-44s %8.1f MiB %8.1f MiB %8.3f %s\n", "two graphs: shared pool vs private pools",
                shared_mib, separate_mib, shared_mib / separate_mib, "< 1");
    report.add("shared_pool_reserved_mib", shared_mib);
    report.add("private_pools_reserved_mib", separate_mib);
  }
  report.write(json);
  return 0;
}
