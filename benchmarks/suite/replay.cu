// Straight-line graphs of 1 to 10,000 tiny kernels: the host cost of Graph::replay()
// against a bare cudaGraphLaunch of the same executable, cugraphs' capture + instantiate +
// upload against the raw CUDA calls doing the same, and eager launches against one replay,
// to completion. The kernels touch 4 KiB, so launch costs, not memory, are what is timed;
// there is no cache effect to rotate away.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <vector>

namespace cugraphs_bench {
namespace {

constexpr int kFloats = 1024;

__global__ void tiny(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;  // converges to 2: values stay finite however many run
}

void launch_chain(float* x, int nodes, cudaStream_t s) {
  for (int k = 0; k < nodes; ++k) tiny<<<kFloats / 256, 256, 0, s>>>(x, kFloats, 0.5f);
}

// The largest graphs take about 5 ms of device time per launch (toolchain.md): smaller
// batches and fewer repetitions keep the section short without starving the medians.
int batch_for(int nodes) { return nodes >= 10000 ? 4 : nodes >= 1000 ? 16 : 32; }

cugraphs::Graph chain_graph(float* x, int nodes) {
  cugraphs::Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) { launch_chain(x, nodes, s); });
  cugraphs::check_launch("tiny kernels");
  return g;
}

}  // namespace

void replay_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> x(kFloats);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "memset");
  std::vector<double> nodes, ours, bare;
  HostTimer timer(stream);
  std::printf("\n== replay host cost: Graph::replay() vs cudaGraphLaunch of the same executable\n");
  std::printf("%8s %14s %14s %8s %8s %s\n", "nodes", "replay()", "bare launch", "ratio", "goal", "");
  for (const int n : kNodeCounts) {
    cugraphs::Graph g = chain_graph(x.data(), n);
    const cudaGraphExec_t exec = g.native_exec();
    for (int w = 0; w < 3; ++w) g.replay();
    cugraphs::check(cudaStreamSynchronize(stream), "sync");
    const int count = reps(n >= 10000 ? 20 : n >= 1000 ? 40 : 100);
    const auto m = timer.medians({[&] { g.replay(); },
                                  [&] { cugraphs::check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }},
                                 batch_for(n), count);
    const double ratio = m[0] / m[1];
    const std::string v = report.goal({"replay_host", "replay_vs_launch",
                                       fmt::format("replay() / cudaGraphLaunch host cost, {} node{}", n,
                                                   n == 1 ? "" : "s"),
                                       "nodes", n},
                                      ratio, "<=", 1.05);
    std::printf("%8d %11.3f us %11.3f us %8.3f %8s %s\n", n, m[0], m[1], ratio, "<= 1.05", v.c_str());
    nodes.push_back(n);
    ours.push_back(m[0]);
    bare.push_back(m[1]);
  }
  timer.note_uncovered();
  Json& sec = report.section("replay_host");
  sec["nodes"] = nodes;
  sec["cugraphs_us"] = ours;
  sec["bare_us"] = bare;
  sec["uncovered_batches"] = timer.uncovered();
}

void capture_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> x(kFloats);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "memset");
  cugraphs::check(cudaStreamSynchronize(stream), "sync");
  cugraphs::CaptureOptions opts;
  opts.stream = stream;  // both paths capture on the same stream
  std::vector<double> nodes, ours, raw, ours_record, raw_record;
  std::printf("\n== capture + instantiate + upload: CaptureScope vs the raw CUDA calls\n");
  std::printf("%8s %14s %14s %8s   %s\n", "nodes", "cugraphs", "raw CUDA", "ratio", "(recording part: cugraphs / raw)");
  for (const int n : kNodeCounts) {
    std::vector<double> o, r, orec, rrec;
    // cugraphs hands each capture's graph to export_dot's record, which lets go of the
    // previous one, and cudaGraphDestroy of 10,000 nodes is not capture time: keeping the
    // previous Graph alive past the next timed capture moves that destruction outside.
    cugraphs::Graph previous;
    const int count = reps(n >= 10000 ? 5 : n >= 1000 ? 9 : 31);
    for (int rep = 0; rep < count + 1; ++rep) {  // round 0 warms up
      for (int which = 0; which < 2; ++which) {
        const bool ours_now = (which == 0) == (rep % 2 == 0);
        double total = 0, record = 0;
        if (ours_now) {
          cugraphs::Graph g;
          const auto t0 = Clock::now();
          {
            cugraphs::CaptureScope scope(g, opts);
            launch_chain(x.data(), n, scope.stream());
            record = us_since(t0);
            scope.end();
          }
          total = us_since(t0);
          cugraphs::check_launch("tiny kernels");
          previous = std::move(g);
        } else {
          cudaGraph_t graph = nullptr;
          cudaGraphExec_t exec = nullptr;
          cudaGraphInstantiateParams params{};
          params.flags = cudaGraphInstantiateFlagUpload;
          params.uploadStream = stream;
          const auto t0 = Clock::now();
          cugraphs::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
          launch_chain(x.data(), n, stream);
          record = us_since(t0);
          cugraphs::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
          cugraphs::check(cudaGraphInstantiateWithParams(&exec, graph, &params), "cudaGraphInstantiateWithParams");
          cugraphs::check(cudaStreamSynchronize(stream), "sync after upload");
          total = us_since(t0);
          cugraphs::check_launch("tiny kernels");
          if (params.result_out != cudaGraphInstantiateSuccess) throw std::runtime_error("raw instantiate failed");
          cugraphs::check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
          cugraphs::check(cudaGraphDestroy(graph), "cudaGraphDestroy");
        }
        if (rep == 0) continue;
        (ours_now ? o : r).push_back(total);
        (ours_now ? orec : rrec).push_back(record);
      }
    }
    const double mo = median(o), mr = median(r);
    std::printf("%8d %11.1f us %11.1f us %8.3f   %.1f / %.1f us\n", n, mo, mr, mo / mr, median(orec), median(rrec));
    nodes.push_back(n);
    ours.push_back(mo);
    raw.push_back(mr);
    ours_record.push_back(median(orec));
    raw_record.push_back(median(rrec));
  }
  Json& sec = report.section("capture");
  sec["nodes"] = nodes;
  sec["cugraphs_us"] = ours;
  sec["raw_us"] = raw;
  sec["cugraphs_record_us"] = ours_record;
  sec["raw_record_us"] = raw_record;
}

void eager_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> x(kFloats);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "memset");
  std::vector<double> nodes, eager, replay;
  std::printf("\n== to completion: the same kernels launched eagerly vs one replay (host clock around a sync)\n");
  std::printf("%8s %14s %14s %9s\n", "nodes", "eager", "replay", "speedup");
  for (const int n : kNodeCounts) {
    cugraphs::Graph g = chain_graph(x.data(), n);
    std::vector<double> e, r;
    const int count = reps(n >= 10000 ? 7 : n >= 1000 ? 21 : n >= 100 ? 101 : 201);
    for (int rep = 0; rep < count + 2; ++rep) {  // rounds 0 and 1 warm up
      for (int which = 0; which < 2; ++which) {
        const bool eager_now = (which == 0) == (rep % 2 == 0);
        cugraphs::check(cudaStreamSynchronize(stream), "sync");
        const auto t0 = Clock::now();
        if (eager_now) {
          launch_chain(x.data(), n, stream);
        } else {
          g.replay();
        }
        cugraphs::check(cudaStreamSynchronize(stream), "sync");
        const double us = us_since(t0);
        if (rep >= 2) (eager_now ? e : r).push_back(us);
      }
    }
    cugraphs::check_launch("tiny kernels");
    const double me = median(e), mr = median(r);
    std::printf("%8d %11.1f us %11.1f us %8.2fx\n", n, me, mr, me / mr);
    nodes.push_back(n);
    eager.push_back(me);
    replay.push_back(mr);
  }
  Json& sec = report.section("eager_vs_replay");
  sec["nodes"] = nodes;
  sec["eager_us"] = eager;
  sec["replay_us"] = replay;
}

}  // namespace cugraphs_bench
