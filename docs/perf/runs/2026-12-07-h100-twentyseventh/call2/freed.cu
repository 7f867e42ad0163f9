// Relaxed capture: memory allocated and freed inside the capture, then a captured node uses it.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
__global__ void k(unsigned* p) { p[threadIdx.x] += 1; }
int main(int argc, char** argv) {
  const int v = atoi(argv[1]);
  unsigned* out; cudaMalloc(&out, 256);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  unsigned* p = nullptr; cudaError_t m = cudaMalloc(&p, 256);
  if (v == 0) k<<<1, 64, 0, s>>>(p);
  if (v == 1) cudaMemcpyAsync(out, p, 256, cudaMemcpyDeviceToDevice, s);
  if (v == 2) cudaMemsetAsync(p, 0, 256, s);
  if (v == 3) cudaMemcpyAsync(out, p, 256, cudaMemcpyDefault, s);
  cudaError_t f = cudaFree(p);
  cudaGraph_t g; cudaError_t e = cudaStreamEndCapture(s, &g);
  printf("variant %d: malloc %s free %s end %s\n", v, cudaGetErrorName(m), cudaGetErrorName(f), cudaGetErrorName(e)); fflush(stdout);
  if (e != cudaSuccess) return 1;
  cudaGraphExec_t x; cudaError_t i = cudaGraphInstantiate(&x, g, 0);
  printf("variant %d: instantiate %s\n", v, cudaGetErrorName(i)); fflush(stdout);
  if (i == cudaSuccess) { cudaError_t l = cudaGraphLaunch(x, s); cudaError_t y = cudaStreamSynchronize(s); printf("variant %d: launch %s sync %s\n", v, cudaGetErrorName(l), cudaGetErrorName(y)); }
  return 0;
}
