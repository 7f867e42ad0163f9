// Whose is synccheck's "Divergent thread(s) in warp" inside cuBLAS's
// cutlass_80_simt_sgemm_64x64_8x5_nn_align1, reported when test_cublas's GEMM runs in a
// While body (docs/reliability.md, Sanitizers): cuBLAS's kernel, the tool inside conditional
// bodies, or cugraphs? The same GEMM (64 x 48 x 32, fp32, column-major, C = A B + C), with no
// cugraphs at all, in one of ten ways given as the argument:
//   eager       launched on a stream
//   graph       captured into a plain graph
//   while       captured into the body of a While node (raw CUDA, one iteration)
//   while-own   a warp-synchronous kernel of ours (shuffles, __syncwarp) in a While body:
//               the tool inside a body, with no cuBLAS
//   graph-own   the same kernel of ours in a plain graph
//   graph-bar   a block-barrier kernel of ours (__syncthreads, no divergence) in a plain graph
//   while-bar   the same in a While body: the tool and a block barrier inside a body
//   device-bar  the same in a graph instantiated for device launch, launched from the host
//   device      the GEMM in a graph instantiated for device launch, launched from the host
//   tail-bar    the block-barrier kernel's device-launch graph tail-launched by a kernel of
//               another graph: launched from the device, as DeviceGraph launches
// Each prints one line and exits 0 when the result matches the host's. synccheck-while-gemm
// runs all ten under `compute-sanitizer --tool synccheck` and prints one line for each.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::printf("%s: cuBLAS status %d\n", what, static_cast<int>(s));
  std::exit(1);
}

constexpr int kM = 64, kN = 48, kK = 32;

__global__ void stop(cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, 0); }

__global__ void tail_launch(cudaGraphExec_t exec) { (void)cudaGraphLaunch(exec, cudaStreamGraphTailLaunch); }

// Each warp's 32 values summed by shuffles; lane 0 writes the sum (out has one float a warp).
__global__ void warp_sums(const float* x, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  float v = i < n ? x[i] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  __syncwarp();
  if ((threadIdx.x & 31) == 0 && i < n) out[i / 32] = v;
}

// Each block's 128 values summed through shared memory, every thread at every barrier.
__global__ void block_sums(const float* x, float* out, int n) {
  __shared__ float part[128];
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  part[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (unsigned half = 64; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

// Captures `work` on `s` into the body of a While node of `g` that runs once.
template <class Work>
void capture_while_once(cudaGraph_t g, cudaStream_t s, Work&& work) {
  cudaGraphConditionalHandle h{};
  check(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault), "cudaGraphConditionalHandleCreate");
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = cudaGraphCondTypeWhile;
  p.conditional.size = 1;
  cudaGraphNode_t node = nullptr;
  check(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &p), "cudaGraphAddNode (While)");
  check(cudaStreamBeginCaptureToGraph(s, p.conditional.phGraph_out[0], nullptr, nullptr, 0,
                                      cudaStreamCaptureModeRelaxed),
        "cudaStreamBeginCaptureToGraph");
  work();
  stop<<<1, 1, 0, s>>>(h);
  check(cudaGetLastError(), "stop");
  cudaGraph_t body = nullptr;
  check(cudaStreamEndCapture(s, &body), "cudaStreamEndCapture (body)");
}

// Runs `work` on `s` as `how` says: eagerly, captured into a graph, or in a While body.
template <class Work>
void run(const std::string& how, cudaStream_t s, Work&& work) {
  if (how == "eager") {
    work();
  } else {
    cudaGraph_t g = nullptr;
    if (how.rfind("while", 0) == 0) {
      check(cudaGraphCreate(&g, 0), "cudaGraphCreate");
      capture_while_once(g, s, work);
    } else {
      check(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
      work();
      check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
    }
    cudaGraphExec_t exec = nullptr;
    const bool from_device = how.rfind("tail", 0) == 0;
    if (how.rfind("device", 0) == 0 || from_device) {
      check(cudaGraphInstantiateWithFlags(&exec, g, cudaGraphInstantiateFlagDeviceLaunch),
            "cudaGraphInstantiateWithFlags (device launch)");
      check(cudaGraphUpload(exec, s), "cudaGraphUpload");
    } else {
      check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
    }
    if (from_device) {  // a one-kernel graph whose kernel tail-launches exec
      cudaGraph_t lg = nullptr;
      cudaGraphExec_t launcher = nullptr;
      check(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture (launcher)");
      tail_launch<<<1, 1, 0, s>>>(exec);
      check(cudaGetLastError(), "tail_launch");
      check(cudaStreamEndCapture(s, &lg), "cudaStreamEndCapture (launcher)");
      check(cudaGraphInstantiate(&launcher, lg, 0), "cudaGraphInstantiate (launcher)");
      check(cudaGraphLaunch(launcher, s), "cudaGraphLaunch (launcher)");
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize (launcher)");
      check(cudaGraphExecDestroy(launcher), "cudaGraphExecDestroy (launcher)");
      check(cudaGraphDestroy(lg), "cudaGraphDestroy (launcher)");
    } else {
      check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    }
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    check(cudaGraphDestroy(g), "cudaGraphDestroy");
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "while";
  static const char* const kWays[] = {"eager",     "graph",     "while",      "graph-own", "while-own",
                                      "graph-bar", "while-bar", "device-bar", "device",    "tail-bar"};
  bool known = false;
  for (const char* w : kWays) known = known || how == w;
  if (!known) {
    std::printf("usage: synccheck_while_gemm eager|graph|while|graph-own|while-own|graph-bar|while-bar|device-bar|device|tail-bar\n");
    return 2;
  }
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<float> a(kM * kK), b(kK * kN), c(kM * kN);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 5 % 13) - 6);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  check(cudaMalloc(&da, a.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&db, b.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&dc, c.size() * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dc, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  bool ok = true;
  const bool own = how.find("-own") != std::string::npos, bar = how.find("-bar") != std::string::npos;
  if (!own && !bar) {
    cublasHandle_t h = nullptr;
    check(cublasCreate(&h), "cublasCreate");
    check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check(cublasSetStream(h, s), "cublasSetStream");
    // The workspace is set after the stream (which resets it), and made outside any capture.
    void* workspace = nullptr;
    const std::size_t workspace_bytes = std::size_t{4} << 20;
    check(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc (workspace)");
    check(cublasSetWorkspace(h, workspace, workspace_bytes), "cublasSetWorkspace");
    const float alpha = 1.0f, beta = 1.0f;
    run(how, s, [&] {
      check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, &alpha, da, kM, db, kK, &beta, dc, kM),
            "cublasSgemm");
    });
    std::vector<float> got(c.size());
    check(cudaMemcpy(got.data(), dc, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (int j = 0; j < kN; ++j)
      for (int i = 0; i < kM; ++i) {
        float want = c[static_cast<std::size_t>(j) * kM + i];
        for (int l = 0; l < kK; ++l) want += a[static_cast<std::size_t>(l) * kM + i] * b[static_cast<std::size_t>(j) * kK + l];
        ok = ok && std::fabs(got[static_cast<std::size_t>(j) * kM + i] - want) <= 1e-3f * (1.0f + std::fabs(want));
      }
    check(cublasDestroy(h), "cublasDestroy");
    check(cudaFree(workspace), "cudaFree");
  } else if (bar) {
    const int n = kM * kK;  // a multiple of 128
    float* sums = nullptr;
    check(cudaMalloc(&sums, (n / 128) * sizeof(float)), "cudaMalloc");
    run(how, s, [&] {
      block_sums<<<n / 128, 128, 0, s>>>(da, sums, n);
      check(cudaGetLastError(), "block_sums");
    });
    std::vector<float> got(n / 128);
    check(cudaMemcpy(got.data(), sums, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (int b = 0; b < n / 128; ++b) {
      float want = 0.0f;  // small integers: every order of summation gives the same float
      for (int l = 0; l < 128; ++l) want += a[static_cast<std::size_t>(b) * 128 + l];
      ok = ok && got[static_cast<std::size_t>(b)] == want;
    }
    check(cudaFree(sums), "cudaFree");
  } else {
    const int n = kM * kK;
    float* sums = nullptr;
    check(cudaMalloc(&sums, (n / 32) * sizeof(float)), "cudaMalloc");
    run(how, s, [&] {
      warp_sums<<<(n + 127) / 128, 128, 0, s>>>(da, sums, n);
      check(cudaGetLastError(), "warp_sums");
    });
    std::vector<float> got(n / 32);
    check(cudaMemcpy(got.data(), sums, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (int w = 0; w < n / 32; ++w) {
      float want = 0.0f;
      for (int l = 0; l < 32; ++l) want += a[static_cast<std::size_t>(w) * 32 + l];
      ok = ok && got[static_cast<std::size_t>(w)] == want;
    }
    check(cudaFree(sums), "cudaFree");
  }
  check(cudaFree(da), "cudaFree");
  check(cudaFree(db), "cudaFree");
  check(cudaFree(dc), "cudaFree");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  std::printf("%s: result %s\n", how.c_str(), ok ? "matches the host's" : "WRONG");
  return ok ? 0 : 1;
}
