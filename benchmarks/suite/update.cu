// Executable update, against the raw calls in the same run. For straight-line graphs of 10
// to 10,000 tiny kernels: instantiating a capture; applying a new capture of the same
// topology (other pointers and constants) to an executable, with Graph::update against
// cudaGraphExecUpdate; and changing one kernel node's arguments, with
// Graph::set_kernel_args against cudaGraphExecKernelNodeSetParams. Every call here is
// host work on graph objects: timed with the host clock, no device work in flight.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace cugraphs_bench {
namespace {

constexpr int kFloats = 1024;
constexpr std::array<int, 4> kSizes{10, 100, 1000, 10000};
constexpr int kRebinds = 200;  // per-node changes timed together

__global__ void tiny_affine(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;
}

void launch_chain(float* x, int nodes, float a, cudaStream_t s) {
  for (int k = 0; k < nodes; ++k) tiny_affine<<<kFloats / 256, 256, 0, s>>>(x, kFloats, a);
}

// A raw capture of the chain on `stream`.
cudaGraph_t raw_capture(float* x, int nodes, float a, cudaStream_t stream) {
  cudaGraph_t g = nullptr;
  cugraphs::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  launch_chain(x, nodes, a, stream);
  cugraphs::check(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
  return g;
}

// A deferred cugraphs capture of the chain into `pool`, for Graph::update.
cugraphs::Graph deferred_capture(float* x, int nodes, float a, cudaStream_t stream, const cugraphs::PoolHandle& pool) {
  cugraphs::Graph g;
  cugraphs::CaptureOptions co;
  co.stream = stream;
  co.pool = pool;
  co.instantiate = false;
  cugraphs::capture(g, [&](cudaStream_t s) { launch_chain(x, nodes, a, s); }, co);
  return g;
}

}  // namespace

void update_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> x(kFloats), y(kFloats);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "memset");
  cugraphs::check(cudaMemsetAsync(y.data(), 0, y.bytes(), stream), "memset");
  cugraphs::check(cudaStreamSynchronize(stream), "sync");
  std::vector<double> sizes, instantiate_us, update_raw_us, update_ours_us, rebind_raw_us, rebind_ours_us;
  std::printf("\n== executable update: whole-graph update and one node's arguments, cugraphs vs the raw calls\n");
  std::printf("%8s %14s %14s %14s %7s %14s %14s %7s\n", "nodes", "instantiate", "update (raw)", "Graph::update",
              "ratio", "rebind (raw)", "set_kernel_args", "ratio");
  for (const int n : kSizes) {
    // Instantiation of a fresh capture (no upload), the cost an update saves.
    std::vector<double> inst;
    // Single calls of a few microseconds: many repetitions, for stable medians.
    const int count = reps(n >= 10000 ? 9 : n >= 1000 ? 41 : 151);
    for (int rep = 0; rep < count + 1; ++rep) {
      cudaGraph_t g = raw_capture(x.data(), n, 0.5f, stream);
      cudaGraphExec_t e = nullptr;
      const auto t0 = Clock::now();
      cugraphs::check(cudaGraphInstantiateWithFlags(&e, g, 0), "cudaGraphInstantiateWithFlags");
      const double us = us_since(t0);
      if (rep > 0) inst.push_back(us);
      cugraphs::check(cudaGraphExecDestroy(e), "cudaGraphExecDestroy");
      cugraphs::check(cudaGraphDestroy(g), "cudaGraphDestroy");
    }

    // The executables updated: the raw one keeps the graph it was instantiated from and
    // destroys each template it replaces, as Graph::update does.
    cudaGraph_t raw_template = raw_capture(x.data(), n, 0.5f, stream);
    // Instantiated and uploaded as Graph::capture_end does: an executable already on the
    // device updates faster than one never uploaded, so the two must start alike.
    cudaGraphExec_t raw_exec = nullptr;
    cudaGraphInstantiateParams ip{};
    ip.flags = cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload;
    ip.uploadStream = stream;
    cugraphs::check(cudaGraphInstantiateWithParams(&raw_exec, raw_template, &ip), "cudaGraphInstantiateWithParams");
    cugraphs::check(cudaStreamSynchronize(stream), "sync");
    cudaGraph_t raw_applied = nullptr;  // the template applied last, when not raw_template
    cugraphs::Graph ours;
    cugraphs::KernelNode<float*, int, float> node;
    {
      cugraphs::CaptureOptions co;
      co.stream = stream;
      cugraphs::CaptureScope scope(ours, co);
      for (int k = 0; k < n; ++k) {
        tiny_affine<<<kFloats / 256, 256, 0, scope.stream()>>>(x.data(), kFloats, 0.5f);
        if (k == n / 2) node = cugraphs::captured_kernel_node(tiny_affine, scope.stream());
      }
    }
    std::vector<double> raw_up, ours_up;
    for (int rep = 0; rep < count + 1; ++rep) {
      float* target = rep % 2 == 0 ? y.data() : x.data();
      const float a = rep % 2 == 0 ? 0.25f : 0.5f;
      for (int which = 0; which < 2; ++which) {
        const bool ours_now = (which == 0) == (rep % 2 == 0);
        double us = 0;
        if (ours_now) {
          cugraphs::Graph next = deferred_capture(target, n, a, stream, ours.pool());
          const auto t0 = Clock::now();
          const cugraphs::UpdateResult r = ours.update(std::move(next));
          us = us_since(t0);
          if (!r.updated) throw std::runtime_error("Graph::update failed: " + r.message);
        } else {
          cudaGraph_t next = raw_capture(target, n, a, stream);
          cudaGraphExecUpdateResultInfo info{};
          const auto t0 = Clock::now();
          cugraphs::check(cudaGraphExecUpdate(raw_exec, next, &info), "cudaGraphExecUpdate");
          if (raw_applied != nullptr) cugraphs::check(cudaGraphDestroy(raw_applied), "cudaGraphDestroy");
          us = us_since(t0);
          raw_applied = next;
        }
        if (rep > 0) (ours_now ? ours_up : raw_up).push_back(us);
      }
    }

    // One node's arguments, kRebinds changes timed together, alternating targets.
    std::vector<cudaGraphNode_t> nodes(static_cast<std::size_t>(n));
    std::size_t count_nodes = nodes.size();
    cugraphs::check(cudaGraphGetNodes(raw_template, nodes.data(), &count_nodes), "cudaGraphGetNodes");
    cudaKernelNodeParams p{};
    cugraphs::check(cudaGraphKernelNodeGetParams(nodes[static_cast<std::size_t>(n / 2)], &p), "get params");
    std::vector<double> raw_rb, ours_rb;
    for (int rep = 0; rep < reps(41) + 1; ++rep) {
      for (int which = 0; which < 2; ++which) {
        const bool ours_now = (which == 0) == (rep % 2 == 0);
        const auto t0 = Clock::now();
        for (int i = 0; i < kRebinds; ++i) {
          float* target = i % 2 == 0 ? y.data() : x.data();
          int count_arg = kFloats;
          float a = 0.5f;
          if (ours_now) {
            ours.set_kernel_args(node, target, count_arg, a);
          } else {
            void* args[] = {&target, &count_arg, &a};
            cudaKernelNodeParams q = p;
            q.func = reinterpret_cast<void*>(tiny_affine);
            q.kernelParams = args;
            cugraphs::check(cudaGraphExecKernelNodeSetParams(raw_exec, nodes[static_cast<std::size_t>(n / 2)], &q),
                            "cudaGraphExecKernelNodeSetParams");
          }
        }
        const double us = us_since(t0) / kRebinds;
        if (rep > 0) (ours_now ? ours_rb : raw_rb).push_back(us);
      }
    }
    // Both executables still run.
    cugraphs::check(cudaGraphLaunch(raw_exec, stream), "cudaGraphLaunch");
    ours.replay();
    cugraphs::check(cudaStreamSynchronize(stream), "sync");
    cugraphs::check(cudaGraphExecDestroy(raw_exec), "cudaGraphExecDestroy");
    cugraphs::check(cudaGraphDestroy(raw_template), "cudaGraphDestroy");
    if (raw_applied != nullptr) cugraphs::check(cudaGraphDestroy(raw_applied), "cudaGraphDestroy");

    const double mi = median(inst), mu_raw = median(raw_up), mu_ours = median(ours_up);
    const double mr_raw = median(raw_rb), mr_ours = median(ours_rb);
    const std::string vu = report.goal(
        {"update", "update_vs_raw", fmt::format("Graph::update / cudaGraphExecUpdate, {} nodes", n), "nodes", n},
        mu_ours / mu_raw, "<=", 1.05);
    const std::string vr = report.goal({"update", "set_args_vs_raw",
                                        fmt::format("set_kernel_args / cudaGraphExecKernelNodeSetParams, {} nodes", n),
                                        "nodes", n},
                                       mr_ours / mr_raw, "<=", 1.05);
    std::printf("%8d %11.1f us %11.1f us %11.1f us %7.3f %11.3f us %11.3f us %7.3f  %s / %s\n", n, mi, mu_raw, mu_ours,
                mu_ours / mu_raw, mr_raw, mr_ours, mr_ours / mr_raw, vu.c_str(), vr.c_str());
    std::printf("%8s per node: instantiate %.3f us, update %.3f us (%.1fx cheaper)\n", "", mi / n, mu_ours / n,
                mi / mu_ours);
    sizes.push_back(n);
    instantiate_us.push_back(mi);
    update_raw_us.push_back(mu_raw);
    update_ours_us.push_back(mu_ours);
    rebind_raw_us.push_back(mr_raw);
    rebind_ours_us.push_back(mr_ours);
  }
  Json& sec = report.section("update");
  sec["nodes"] = sizes;
  sec["instantiate_us"] = instantiate_us;
  sec["update_raw_us"] = update_raw_us;
  sec["update_us"] = update_ours_us;
  sec["rebind_raw_us"] = rebind_raw_us;
  sec["rebind_us"] = rebind_ours_us;
}

}  // namespace cugraphs_bench
