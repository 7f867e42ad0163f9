// Can a graph that draws random numbers get each launch's offset as a kernel argument without
// the host touching the executable (issue 29)? Raw CUDA, no cugraphs. The drawing kernel
// takes (seed, offset) as arguments, as PerLaunch::Parameters does, but its node is
// device-updatable (cudaLaunchAttributeDeviceUpdatableKernelNode), and a one-thread kernel
// in the same graph writes the next launch's offset into the node's arguments
// (cudaGraphKernelNodeSetParam). Arguments are fixed when a grid is launched, so the updater
// need not wait for the draw to finish, only for it to be launched: an edge from the draw's
// launch-completion port lets it run beside the draw. Ways, each against the others in one
// run:
//   fixed      the same offset every launch (the floor, a bare launch)
//   fixed-du   the same, the node device-updatable, nothing updating it
//   args       the driver's cuGraphExecKernelNodeSetParams before each launch (Parameters)
//   advance    draw from device words, a programmatic edge to a kernel advancing them
//              (PerLaunch::Advance without its end mark)
//   upd-after  the updater after the draw (a full edge)
//   upd-pdl    the updater after a programmatic edge (it starts when the draw ends)
//   upd-lc     the updater after the draw's launch-completion port (it runs beside the draw)
//   upd-lc10   ten drawing kernels in a chain, each device-updatable, one updater after
//              the launch-completion port of each, setting all ten;
//              against fixed10 and args10 (ten driver updates)
//   upd-post   upd-lc made after the capture: a plain drawing node made device-updatable by
//              cudaGraphKernelNodeSetAttribute, the updater added by cudaGraphAddKernelNode
//              with a launch-completion edge (what capture_end could do to a user's graph)
//   moved      the host sets the node (the generator moved), uploads, then launches
//   moved-dev  a one-thread kernel launched before the graph sets the node from the device
//              (the generator moved), then upd-lc's graph is launched
// The host's cost a call and the time to completion, as the other diagnostics (launch_timing.cuh).
// Every launch logs the offset it drew at: each way's log must step by the increment from its
// first entry (launches queued 16 deep behind a spinning kernel included).
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/device_update_cost.cu -o device_update_cost -lcuda
#include "launch_timing.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <vector>

namespace {

using diag::check;
using diag::check_driver;
using diag::measure;

constexpr const char* kProgram = "device_update_cost";
constexpr unsigned kBlocks = 8, kThreads = 256;
constexpr unsigned long long kIncrement = 4;
constexpr int kLogCapacity = 4096;
constexpr int kChain = 10;

// log[0] counts entries; log[1 + k] is the offset the k-th drawing grid of the way drew at.
__device__ void draw_at(unsigned long long seed, unsigned long long offset, unsigned long long* out,
                        unsigned long long* log) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long h = seed * 0x9E3779B97F4A7C15ull ^ (offset + i) * 0xBF58476D1CE4E5B9ull;
  out[i] = h ^ (h >> 31);
  if (i == 0) {
    const unsigned long long k = atomicAdd(log, 1ull);
    if (k < kLogCapacity) log[1 + k] = offset;
  }
}

__global__ void draw_args(unsigned long long seed, unsigned long long offset, unsigned long long* out,
                          unsigned long long* log) {
  draw_at(seed, offset, out, log);
}

__global__ void draw_words(const unsigned long long* words, unsigned long long* out, unsigned long long* log) {
  draw_at(words[0], words[1], out, log);
}

__global__ void advance_after(unsigned long long* words, unsigned long long increment) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  words[1] += increment;
}

// Sets the next launch's offset in `count` device-updatable nodes (the offset argument at
// byte 8 of each); words[1] holds the offset this launch drew at.
struct Nodes {
  cudaGraphDeviceNode_t node[kChain];
};
__global__ void update_offsets(Nodes nodes, int count, unsigned long long* words, unsigned long long increment) {
  const unsigned long long next = words[1] + increment;
  words[1] = next;
  for (int k = 0; k < count; ++k) (void)cudaGraphKernelNodeSetParam(nodes.node[k], 8, &next, sizeof next);
}

// Sets every node's offset and the words to `offset` (the generator moved; launched outside
// the graph, on the replay's stream).
__global__ void set_offsets(Nodes nodes, int count, unsigned long long* words, unsigned long long offset) {
  words[1] = offset;
  for (int k = 0; k < count; ++k) (void)cudaGraphKernelNodeSetParam(nodes.node[k], 8, &offset, sizeof offset);
}

// Captures draw_args as a device-updatable node on `s`; its device handle.
cudaGraphDeviceNode_t launch_updatable(cudaStream_t s, unsigned long long seed, unsigned long long offset,
                                       unsigned long long* out, unsigned long long* log) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeDeviceUpdatableKernelNode;
  attribute.val.deviceUpdatableKernelNode.deviceUpdatable = 1;
  diag::launch_with(attribute, "cudaLaunchKernelEx (device-updatable)", draw_args, kBlocks, kThreads, s, seed, offset,
                    out, log);
  return attribute.val.deviceUpdatableKernelNode.devNode;  // written back by CUDA
}

// How the updater depends on the drawing nodes captured last on `s`.
enum class Edge { Full, Programmatic, LaunchCompletion };

// Makes the capture's next node depend on `nodes` by `edge`.
void depend_on(cudaStream_t s, const std::vector<cudaGraphNode_t>& nodes, Edge edge) {
  std::vector<cudaGraphEdgeData> data(nodes.size());
  for (auto& d : data) {
    d = cudaGraphEdgeData{};
    if (edge == Edge::Full) continue;
    d.type = cudaGraphDependencyTypeProgrammatic;
    d.from_port = edge == Edge::LaunchCompletion ? cudaGraphKernelNodePortLaunchCompletion
                                                 : cudaGraphKernelNodePortProgrammatic;
  }
  check(cudaStreamUpdateCaptureDependencies(s, const_cast<cudaGraphNode_t*>(nodes.data()), data.data(), nodes.size(),
                                            cudaStreamSetCaptureDependencies),
        "cudaStreamUpdateCaptureDependencies");
}

// The node the capture on `s` would make its next node depend on (exactly one).
cudaGraphNode_t last_node(cudaStream_t s) {
  cudaStreamCaptureStatus status{};
  const cudaGraphNode_t* deps = nullptr;
  size_t n = 0;
  check(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &n), "cudaStreamGetCaptureInfo");
  if (n != 1) {
    std::printf("%s: the capture has %zu dependencies, want 1\n", kProgram, n);
    std::exit(1);
  }
  return deps[0];
}

// Instantiates and uploads `graph`.
cudaGraphExec_t instantiate(cudaGraph_t graph, cudaStream_t s) {
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphUpload(exec, s), "cudaGraphUpload");
  check(cudaStreamSynchronize(s), "upload");
  return exec;
}

// Captures `count` drawing kernels in a chain (device-updatable if `updatable`), then, if
// `edge` is given, the updater after them.
cudaGraphExec_t capture_draws(cudaStream_t s, int count, bool updatable, const Edge* edge, unsigned long long seed,
                              unsigned long long start, unsigned long long* out, unsigned long long* words,
                              unsigned long long* log, cudaGraph_t* graph) {
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  Nodes nodes{};
  std::vector<cudaGraphNode_t> draws;
  for (int k = 0; k < count; ++k) {
    if (updatable) {
      nodes.node[k] = launch_updatable(s, seed, start, out, log);
    } else {
      draw_args<<<kBlocks, kThreads, 0, s>>>(seed, start, out, log);
    }
    draws.push_back(last_node(s));
  }
  if (edge != nullptr) {
    depend_on(s, *edge == Edge::LaunchCompletion ? draws : std::vector<cudaGraphNode_t>{draws.back()}, *edge);
    update_offsets<<<1, 1, 0, s>>>(nodes, count, words, kIncrement);
  }
  check(cudaStreamEndCapture(s, graph), "cudaStreamEndCapture");
  return instantiate(*graph, s);
}

class Log {
public:
  Log() { check(cudaMalloc(&log_, (1 + kLogCapacity) * sizeof(unsigned long long)), "cudaMalloc"); }
  void reset() { check(cudaMemset(log_, 0, sizeof(unsigned long long)), "cudaMemset"); }
  unsigned long long* data() const { return log_; }
  // Whether the offsets logged since reset() step by `step` each (or stay put if `step` is 0),
  // in groups of `per_launch` equal entries; prints the first fault.
  void expect(const char* name, unsigned long long step, int per_launch) {
    unsigned long long count = 0;
    check(cudaMemcpy(&count, log_, sizeof count, cudaMemcpyDeviceToHost), "read back");
    const auto n = static_cast<size_t>(count < kLogCapacity ? count : kLogCapacity);
    std::vector<unsigned long long> v(n);
    check(cudaMemcpy(v.data(), log_ + 1, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost), "read back");
    for (size_t k = 1; k < n; ++k) {
      const unsigned long long want = v[k - 1] + (k % static_cast<size_t>(per_launch) == 0 ? step : 0);
      if (v[k] == want) continue;
      std::printf("%s %s: grid %zu of %zu drew at offset %llu, want %llu\n", kProgram, name, k, n, v[k], want);
      ++failures_;
      return;
    }
    std::printf("%s %-10s %zu grids logged, offsets as expected\n", kProgram, name, n);
  }
  int finish() const {
    std::printf("%s: offsets %s\n", kProgram, failures_ == 0 ? "as expected" : "WRONG");
    return failures_ == 0 ? 0 : 1;
  }

private:
  unsigned long long* log_ = nullptr;
  int failures_ = 0;
};

}  // namespace

int main() {
  const unsigned long long seed = 42, start = 1000;
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  unsigned long long *out = nullptr, *words = nullptr;
  check(cudaMalloc(&out, kBlocks * kThreads * sizeof(unsigned long long)), "cudaMalloc");
  check(cudaMalloc(&words, 2 * sizeof(unsigned long long)), "cudaMalloc");
  const auto set_words = [&] {
    const unsigned long long init[2] = {seed, start};
    check(cudaMemcpy(words, init, sizeof init, cudaMemcpyHostToDevice), "cudaMemcpy");
  };
  set_words();
  Log log;

  cudaGraph_t g_fixed = nullptr, g_fixed_du = nullptr, g_after = nullptr, g_pdl = nullptr, g_lc = nullptr,
              g_adv = nullptr, g_fixed10 = nullptr, g_lc10 = nullptr, g_moved = nullptr;
  const Edge full = Edge::Full, pdl = Edge::Programmatic, lc = Edge::LaunchCompletion;
  cudaGraphExec_t fixed = capture_draws(s, 1, false, nullptr, seed, start, out, words, log.data(), &g_fixed);
  cudaGraphExec_t fixed_du = capture_draws(s, 1, true, nullptr, seed, start, out, words, log.data(), &g_fixed_du);
  cudaGraphExec_t after = capture_draws(s, 1, true, &full, seed, start, out, words, log.data(), &g_after);
  cudaGraphExec_t by_pdl = capture_draws(s, 1, true, &pdl, seed, start, out, words, log.data(), &g_pdl);
  cudaGraphExec_t by_lc = capture_draws(s, 1, true, &lc, seed, start, out, words, log.data(), &g_lc);
  cudaGraphExec_t fixed10 = capture_draws(s, kChain, false, nullptr, seed, start, out, words, log.data(), &g_fixed10);
  cudaGraphExec_t by_lc10 = capture_draws(s, kChain, true, &lc, seed, start, out, words, log.data(), &g_lc10);
  cudaGraphExec_t moved = capture_draws(s, 1, true, nullptr, seed, start, out, words, log.data(), &g_moved);
  // upd-post: the capture of a plain draw, changed after it.
  cudaGraph_t g_post = nullptr;
  cudaGraphExec_t post = nullptr;
  {
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    draw_args<<<kBlocks, kThreads, 0, s>>>(seed, start, out, log.data());
    check(cudaStreamEndCapture(s, &g_post), "cudaStreamEndCapture");
    cudaGraphNode_t draw = nullptr;
    size_t n = 1;
    check(cudaGraphGetNodes(g_post, &draw, &n), "cudaGraphGetNodes");
    cudaLaunchAttributeValue on{};
    on.deviceUpdatableKernelNode.deviceUpdatable = 1;
    check(cudaGraphKernelNodeSetAttribute(draw, cudaLaunchAttributeDeviceUpdatableKernelNode, &on),
          "cudaGraphKernelNodeSetAttribute (device-updatable)");
    cudaLaunchAttributeValue got{};
    check(cudaGraphKernelNodeGetAttribute(draw, cudaLaunchAttributeDeviceUpdatableKernelNode, &got),
          "cudaGraphKernelNodeGetAttribute (device-updatable)");
    std::printf("%s upd-post: device-updatable %d, device handle %p\n", kProgram, got.deviceUpdatableKernelNode.deviceUpdatable,
                static_cast<void*>(got.deviceUpdatableKernelNode.devNode));
    Nodes nodes{};
    nodes.node[0] = got.deviceUpdatableKernelNode.devNode;
    int count = 1;
    unsigned long long inc = kIncrement;
    void* args[] = {&nodes, &count, &words, &inc};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(update_offsets);
    p.gridDim = 1;
    p.blockDim = 1;
    p.kernelParams = args;
    cudaGraphNode_t updater = nullptr;
    check(cudaGraphAddKernelNode(&updater, g_post, nullptr, 0, &p), "cudaGraphAddKernelNode");
    cudaGraphEdgeData edge{};
    edge.type = cudaGraphDependencyTypeProgrammatic;
    edge.from_port = cudaGraphKernelNodePortLaunchCompletion;
    check(cudaGraphAddDependencies(g_post, &draw, &updater, &edge, 1), "cudaGraphAddDependencies (launch completion)");
    post = instantiate(g_post, s);
  }
  Nodes lc_nodes{};  // upd-lc's drawing node, for moved-dev
  {
    // The captured launch gave its handle; read it again from the node.
    size_t n = 0;
    check(cudaGraphGetNodes(g_lc, nullptr, &n), "cudaGraphGetNodes");
    std::vector<cudaGraphNode_t> all(n);
    check(cudaGraphGetNodes(g_lc, all.data(), &n), "cudaGraphGetNodes");
    for (cudaGraphNode_t node : all) {
      cudaKernelNodeParams p{};
      if (cudaGraphKernelNodeGetParams(node, &p) != cudaSuccess || p.func != reinterpret_cast<void*>(draw_args)) continue;
      cudaLaunchAttributeValue got{};
      check(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode, &got),
            "cudaGraphKernelNodeGetAttribute (device-updatable)");
      lc_nodes.node[0] = got.deviceUpdatableKernelNode.devNode;
    }
  }
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  draw_words<<<kBlocks, kThreads, 0, s>>>(words, out, log.data());
  diag::launch_programmatic(advance_after, 1, 1, s, words, kIncrement);
  check(cudaStreamEndCapture(s, &g_adv), "cudaStreamEndCapture");
  cudaGraphExec_t adv = instantiate(g_adv, s);

  // A graph's drawing nodes (for args and moved).
  const auto kernel_nodes = [](cudaGraph_t g) {
    size_t n = 0;
    check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
    std::vector<cudaGraphNode_t> nodes(n), draws;
    check(cudaGraphGetNodes(g, nodes.data(), &n), "cudaGraphGetNodes");
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
      if (type != cudaGraphNodeTypeKernel) continue;
      cudaKernelNodeParams p{};
      check(cudaGraphKernelNodeGetParams(node, &p), "cudaGraphKernelNodeGetParams");
      if (p.func == reinterpret_cast<void*>(draw_args)) draws.push_back(node);
    }
    return draws;
  };
  cudaFunction_t function = nullptr;
  check(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(draw_args)), "cudaGetFuncBySymbol");
  const auto set_offset = [&](cudaGraphExec_t exec, const std::vector<cudaGraphNode_t>& nodes, unsigned long long offset) {
    unsigned long long sd = seed, off = offset;
    unsigned long long *o = out, *l = log.data();
    void* args[] = {&sd, &off, &o, &l};
    for (cudaGraphNode_t node : nodes) {
      cudaKernelNodeParams p{};
      check(cudaGraphKernelNodeGetParams(node, &p), "cudaGraphKernelNodeGetParams");
      p.kernelParams = args;
      CUDA_KERNEL_NODE_PARAMS d = diag::driver_params(p, function);
      check_driver(cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUgraphNode>(node), &d),
                   "cuGraphExecKernelNodeSetParams");
    }
  };
  const std::vector<cudaGraphNode_t> nodes1 = kernel_nodes(g_fixed), nodes10 = kernel_nodes(g_fixed10),
                                     nodes_moved = kernel_nodes(g_moved);

  const auto plain = [&](cudaGraphExec_t exec) { return [&, exec](int) { check(cudaGraphLaunch(exec, s), "cudaGraphLaunch"); }; };
  const auto way = [&](const char* name, cudaGraphExec_t exec, unsigned long long step, int per_launch) {
    log.reset();
    set_words();
    (void)measure(kProgram, name, s, plain(exec));
    check(cudaStreamSynchronize(s), "sync");
    log.expect(name, step, per_launch);
  };

  way("fixed", fixed, 0, 1);
  way("fixed-du", fixed_du, 0, 1);
  log.reset();
  (void)measure(kProgram, "args", s, [&](int turn) {
    set_offset(fixed, nodes1, start + kIncrement * static_cast<unsigned long long>(turn));
    check(cudaGraphLaunch(fixed, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  log.expect("args", kIncrement, 1);
  way("advance", adv, kIncrement, 1);
  way("upd-after", after, kIncrement, 1);
  way("upd-pdl", by_pdl, kIncrement, 1);
  way("upd-lc", by_lc, kIncrement, 1);
  way("upd-post", post, kIncrement, 1);
  way("fixed10", fixed10, 0, kChain);
  log.reset();
  (void)measure(kProgram, "args10", s, [&](int turn) {
    set_offset(fixed10, nodes10, start + kIncrement * static_cast<unsigned long long>(turn));
    check(cudaGraphLaunch(fixed10, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  log.expect("args10", kIncrement, kChain);
  way("upd-lc10", by_lc10, kIncrement, kChain);
  log.reset();
  (void)measure(kProgram, "moved", s, [&](int turn) {
    set_offset(moved, nodes_moved, start + kIncrement * static_cast<unsigned long long>(turn));
    check(cudaGraphUpload(moved, s), "cudaGraphUpload");
    check(cudaGraphLaunch(moved, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  log.expect("moved", kIncrement, 1);
  log.reset();
  (void)measure(kProgram, "moved-dev", s, [&](int turn) {
    set_offsets<<<1, 1, 0, s>>>(lc_nodes, 1, words, start + kIncrement * static_cast<unsigned long long>(turn));
    check(cudaGraphLaunch(by_lc, s), "cudaGraphLaunch");
  });
  check(cudaStreamSynchronize(s), "sync");
  log.expect("moved-dev", kIncrement, 1);
  // The generator moved once: the host sets the updater's graph (node and words), then the
  // device carries on from there.
  log.reset();
  set_offset(by_lc, kernel_nodes(g_lc), 5000);
  {
    // The updater's words must say where the host put the node.
    const unsigned long long w[2] = {seed, 5000};
    check(cudaMemcpy(words, w, sizeof w, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  check(cudaGraphUpload(by_lc, s), "cudaGraphUpload");
  for (int k = 0; k < 50; ++k) check(cudaGraphLaunch(by_lc, s), "cudaGraphLaunch");
  check(cudaStreamSynchronize(s), "sync");
  unsigned long long first = 0;
  check(cudaMemcpy(&first, log.data() + 1, sizeof first, cudaMemcpyDeviceToHost), "read back");
  if (first != 5000) std::printf("%s upd-lc after a host update: first launch drew at %llu, want 5000\n", kProgram, first);
  log.expect("lc-moved", kIncrement, 1);
  way("fixed", fixed, 0, 1);  // again: the first way measured also pays the warm-up
  const int status = log.finish();
  return first == 5000 ? status : 1;
}
