// What cuRAND's host API does inside a stream capture (docs/porting.md: a port that draws
// with curandGenerateUniform in its step and captures the step). Raw CUDA and cuRAND, no
// cugraphs. For each generator type, warmed (one eager draw before the capture) or not, it
// captures one curandGenerateUniform into a graph, replays it four times, and compares each
// replay's numbers with the eager draws of a twin generator (same type and seed, same calls
// without the capture): "replay k = eager draw j" or "none", and whether the replays repeat.
// Then one eager draw on the captured generator after the replays, placed the same way. The
// captured kernels' names are printed (cudaFuncGetName), so that the library can know them.
// Last, for the generators that keep their states on the device, warmed: the step reseeds the
// generator (curandSetPseudoRandomGeneratorSeed) or sets its offset (curandSetGeneratorOffset)
// inside the capture before drawing, as an engine wanting a seed a frame would; each status,
// the capture's end, and whether the generator draws eagerly afterwards.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/curand_host_capture.cu -lcurand -lcuda -o curand_host_capture
#include <cuda.h>
#include <cuda_runtime.h>
#include <curand.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

constexpr std::size_t kCount = 1 << 16;
constexpr int kReplays = 4;
constexpr int kEagerDraws = 12;

std::vector<float> fetch(const float* d) {
  std::vector<float> h(kCount);
  check(cudaMemcpy(h.data(), d, kCount * sizeof(float), cudaMemcpyDeviceToHost), "copy back");
  return h;
}

// Which of the twin's eager draws equals h: its index, or -1.
int place(const std::vector<std::vector<float>>& eager, const std::vector<float>& h) {
  for (std::size_t j = 0; j < eager.size(); ++j) {
    if (std::memcmp(eager[j].data(), h.data(), kCount * sizeof(float)) == 0) return static_cast<int>(j);
  }
  return -1;
}

std::string kernels_of(cudaGraph_t graph) {
  std::size_t n = 0;
  check(cudaGraphGetNodes(graph, nullptr, &n), "nodes");
  std::vector<cudaGraphNode_t> nodes(n);
  check(cudaGraphGetNodes(graph, nodes.data(), &n), "nodes");
  std::string out;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "type");
    if (type != cudaGraphNodeTypeKernel) {
      out += " [node type " + std::to_string(static_cast<int>(type)) + "]";
      continue;
    }
    // The runtime's name where it knows the function; else the driver's (a library's own
    // runtime registered the kernel: cuRAND links it statically).
    cudaKernelNodeParams p{};
    const char* name = nullptr;
    if (cudaGraphKernelNodeGetParams(node, &p) != cudaSuccess || cudaFuncGetName(&name, p.func) != cudaSuccess) {
      cudaGetLastError();
      name = nullptr;
      CUDA_KERNEL_NODE_PARAMS d{};
      CUfunction f = nullptr;
      if (cuGraphKernelNodeGetParams(node, &d) == CUDA_SUCCESS) {
        f = d.func;
        if (f == nullptr && d.kern != nullptr && cuKernelGetFunction(&f, d.kern) != CUDA_SUCCESS) f = nullptr;
      }
      if (f == nullptr || cuFuncGetName(&name, f) != CUDA_SUCCESS) name = nullptr;
      out += " (driver)";
    }
    out += " ";
    out += name != nullptr ? name : "?";
  }
  return out;
}

enum class Change { none, seed, offset };

struct Type {
  const char* name;
  curandRngType_t type;
};

void run(const Type& t, bool warm, cudaStreamCaptureMode mode, float* d, Change change = Change::none) {
  std::printf("%-14s %-5s %-12s %s", t.name, warm ? "warm" : "cold",
              mode == cudaStreamCaptureModeGlobal        ? "global"
              : mode == cudaStreamCaptureModeThreadLocal ? "thread-local"
                                                         : "relaxed",
              change == Change::seed ? "reseeded in capture: " : change == Change::offset ? "offset set in capture: " : "");
  cudaStream_t s{};
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");

  // The twin's eager draws: what the uncaptured program would have drawn, call by call.
  std::vector<std::vector<float>> eager;
  {
    curandGenerator_t twin{};
    if (curandCreateGenerator(&twin, t.type) != CURAND_STATUS_SUCCESS) {
      std::printf("create failed\n");
      check(cudaStreamDestroy(s), "stream");
      return;
    }
    curandSetStream(twin, s);
    curandSetPseudoRandomGeneratorSeed(twin, 1234);  // ignored (an error) by quasi generators
    for (int j = 0; j < kEagerDraws; ++j) {
      if (curandGenerateUniform(twin, d, kCount) != CURAND_STATUS_SUCCESS) std::printf("(twin draw %d failed) ", j);
      check(cudaStreamSynchronize(s), "twin sync");
      eager.push_back(fetch(d));
    }
    curandDestroyGenerator(twin);
  }

  curandGenerator_t gen{};
  curandCreateGenerator(&gen, t.type);
  curandSetStream(gen, s);
  curandSetPseudoRandomGeneratorSeed(gen, 1234);
  if (warm) {
    curandGenerateUniform(gen, d, kCount);
    check(cudaStreamSynchronize(s), "warm sync");
  }
  check(cudaStreamBeginCapture(s, mode), "begin capture");
  curandStatus_t changed = CURAND_STATUS_SUCCESS;
  if (change == Change::seed) changed = curandSetPseudoRandomGeneratorSeed(gen, 99);
  if (change == Change::offset) changed = curandSetGeneratorOffset(gen, 0);
  const curandStatus_t drawn = curandGenerateUniform(gen, d, kCount);
  cudaGraph_t graph{};
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (change != Change::none) std::printf("set: status %d; ", static_cast<int>(changed));
  if (drawn != CURAND_STATUS_SUCCESS || ended != cudaSuccess) {
    std::printf("capture: curand status %d, end %s", static_cast<int>(drawn), cudaGetErrorString(ended));
    cudaGetLastError();
    const curandStatus_t after = curandGenerateUniform(gen, d, kCount);
    const cudaError_t synced = cudaStreamSynchronize(s);
    std::printf("; eager draw after: status %d, sync %s\n", static_cast<int>(after), cudaGetErrorString(synced));
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    curandDestroyGenerator(gen);
    check(cudaStreamDestroy(s), "stream");
    return;
  }
  cudaGraphExec_t exec{};
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  std::vector<std::vector<float>> replays;
  std::printf("replays at eager draw:");
  for (int k = 0; k < kReplays; ++k) {
    check(cudaMemsetAsync(d, 0, kCount * sizeof(float), s), "clear");
    check(cudaGraphLaunch(exec, s), "launch");
    check(cudaStreamSynchronize(s), "replay sync");
    replays.push_back(fetch(d));
    std::printf(" %d", place(eager, replays.back()));
  }
  bool repeat = true;
  for (int k = 1; k < kReplays; ++k) {
    repeat = repeat && std::memcmp(replays[k].data(), replays[0].data(), kCount * sizeof(float)) == 0;
  }
  curandGenerateUniform(gen, d, kCount);
  check(cudaStreamSynchronize(s), "after sync");
  std::printf("; eager after: %d; replays %s;%s\n", place(eager, fetch(d)), repeat ? "REPEAT" : "differ",
              kernels_of(graph).c_str());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  curandDestroyGenerator(gen);
  check(cudaStreamDestroy(s), "stream");
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  float* d = nullptr;
  check(cudaMalloc(&d, kCount * sizeof(float)), "malloc");
  const Type types[] = {
      {"DEFAULT", CURAND_RNG_PSEUDO_DEFAULT},     {"XORWOW", CURAND_RNG_PSEUDO_XORWOW},
      {"MRG32K3A", CURAND_RNG_PSEUDO_MRG32K3A},   {"MTGP32", CURAND_RNG_PSEUDO_MTGP32},
      {"MT19937", CURAND_RNG_PSEUDO_MT19937},     {"PHILOX4_32_10", CURAND_RNG_PSEUDO_PHILOX4_32_10},
      {"SOBOL32", CURAND_RNG_QUASI_SOBOL32},
  };
  std::printf("type           start capture      (eager draw -1: none of the twin's first %d)\n", kEagerDraws);
  for (const Type& t : types) {
    for (bool warm : {false, true}) run(t, warm, cudaStreamCaptureModeThreadLocal, d);
  }
  run(types[0], false, cudaStreamCaptureModeGlobal, d);
  run(types[5], true, cudaStreamCaptureModeGlobal, d);
  run(types[0], false, cudaStreamCaptureModeRelaxed, d);
  for (const Type& t : types) {
    if (t.type == CURAND_RNG_PSEUDO_MT19937 || t.type == CURAND_RNG_QUASI_SOBOL32) continue;
    for (Change c : {Change::seed, Change::offset}) {
      run(t, true, cudaStreamCaptureModeGlobal, d, c);
      run(t, true, cudaStreamCaptureModeThreadLocal, d, c);
      run(t, true, cudaStreamCaptureModeRelaxed, d, c);
    }
  }
  check(cudaFree(d), "free");
  return 0;
}
