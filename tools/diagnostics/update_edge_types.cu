// Does cudaGraphExecUpdate look at the types of edges? Raw CUDA, no cugraphs. Two kernels
// in a capture: `early` lets its dependents start at once (it triggers first), spins for
// about 2 ms, then sets a flag; `late` does not wait for it and copies the flag out. With a
// programmatic edge between them `late` runs during the spin and reads 0; with a plain edge
// it runs after `early` and reads 1. Each way instantiates one capture, updates the
// executable with another (cudaGraphExecUpdate), launches it and prints the update's result
// and what `late` read: an executable that kept its programmatic edge after being updated
// with a plain capture would let kernels race that the new capture ordered.
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/update_edge_types.cu -o update_edge_types
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::printf("%s failed: %s\n", #x, cudaGetErrorName(e_));                        \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void early(int* flag) {
  cudaTriggerProgrammaticLaunchCompletion();
  const long long start = clock64();
  while (clock64() - start < 4'000'000) {
  }
  *flag = 1;
}

__global__ void late(const int* flag, int* out) { *out = *(volatile const int*)flag; }

// Captures [early, late] on `s`, `late` launched as a programmatic dependent when asked.
static cudaGraph_t capture(cudaStream_t s, int* flag, int* out, bool programmatic) {
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  early<<<1, 1, 0, s>>>(flag);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(1);
  config.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = programmatic ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&config, late, static_cast<const int*>(flag), out));
  CHECK(cudaStreamEndCapture(s, &g));
  return g;
}

// What `late` read in one launch of `exec`.
static int run(cudaGraphExec_t exec, cudaStream_t s, int* flag, int* out) {
  CHECK(cudaMemsetAsync(flag, 0, sizeof(int), s));
  CHECK(cudaMemsetAsync(out, 0xff, sizeof(int), s));
  CHECK(cudaGraphLaunch(exec, s));
  int host = -1;
  CHECK(cudaMemcpyAsync(&host, out, sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  return host;
}

static const char* result_name(cudaGraphExecUpdateResult r) {
  switch (r) {
    case cudaGraphExecUpdateSuccess: return "Success";
    case cudaGraphExecUpdateErrorTopologyChanged: return "ErrorTopologyChanged";
    case cudaGraphExecUpdateErrorNodeTypeChanged: return "ErrorNodeTypeChanged";
    case cudaGraphExecUpdateErrorParametersChanged: return "ErrorParametersChanged";
    case cudaGraphExecUpdateErrorNotSupported: return "ErrorNotSupported";
    case cudaGraphExecUpdateErrorAttributesChanged: return "ErrorAttributesChanged";
    default: return "another failure";
  }
}

int main() {
  int* flag = nullptr;
  int* out = nullptr;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMalloc(&out, sizeof(int)));
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const bool from : {false, true}) {
    cudaGraph_t first = capture(s, flag, out, from);
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, first, 0));
    const int before = run(exec, s, flag, out);
    cudaGraph_t second = capture(s, flag, out, !from);
    cudaGraphExecUpdateResultInfo info{};
    const cudaError_t e = cudaGraphExecUpdate(exec, second, &info);
    (void)cudaGetLastError();
    const int after = run(exec, s, flag, out);
    std::printf("update_edge_types: instantiated %s (late read %d), updated with %s: %s, %s; late then read %d (%s)\n",
                from ? "programmatic" : "plain", before, from ? "plain" : "programmatic", cudaGetErrorName(e),
                result_name(info.result), after,
                after == 0 ? "the edge is programmatic" : after == 1 ? "the edge is plain" : "?");
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(first));
    CHECK(cudaGraphDestroy(second));
  }
  return 0;
}
