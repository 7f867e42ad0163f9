// What a Relaxed capture makes of memory allocated and freed inside it (a scratch container
// made and destroyed in the captured step, which Relaxed lets through): one process a variant,
// so that a crash names its variant. Raw CUDA, no cugraphs. Each variant cudaMallocs 256
// bytes, uses them once on the capture stream, cudaFrees them, ends the capture, and prints
// what the end, the instantiation and one launch return.
//   nvcc -O2 -arch=sm_90 tools/diagnostics/relaxed_freed_memory.cu -o relaxed_freed_memory
//   for v in 0 1 2 3; do ./relaxed_freed_memory $v; echo "exit $?"; done
// Variants: 0 a kernel adds into it, 1 a device-to-device copy reads it, 2 a memset writes
// it, 3 a cudaMemcpyDefault copy reads it.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__global__ void add_one(unsigned* p) { p[threadIdx.x] += 1; }

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  const int variant = argc > 1 ? std::atoi(argv[1]) : 0;
  unsigned* out = nullptr;
  cudaStream_t s{};
  if (cudaMalloc(&out, 256) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return 1;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  unsigned* p = nullptr;
  const cudaError_t allocated = cudaMalloc(&p, 256);
  if (variant == 0) add_one<<<1, 64, 0, s>>>(p);
  if (variant == 1) cudaMemcpyAsync(out, p, 256, cudaMemcpyDeviceToDevice, s);
  if (variant == 2) cudaMemsetAsync(p, 0, 256, s);
  if (variant == 3) cudaMemcpyAsync(out, p, 256, cudaMemcpyDefault, s);
  const cudaError_t freed = cudaFree(p);
  cudaGraph_t graph{};
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  std::printf("variant %d: malloc %s, free %s, end %s\n", variant, cudaGetErrorName(allocated),
              cudaGetErrorName(freed), cudaGetErrorName(ended));
  std::fflush(stdout);  // a crash in the instantiation below loses nothing printed
  if (ended != cudaSuccess) return 1;
  cudaGraphExec_t exec{};
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  std::printf("variant %d: instantiate %s\n", variant, cudaGetErrorName(made));
  if (made == cudaSuccess) {
    const cudaError_t launched = cudaGraphLaunch(exec, s);
    const cudaError_t synced = cudaStreamSynchronize(s);
    std::printf("variant %d: launch %s, synchronize %s\n", variant, cudaGetErrorName(launched),
                cudaGetErrorName(synced));
  }
  return 0;
}
