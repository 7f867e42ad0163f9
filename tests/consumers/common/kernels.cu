// A consumer's device code: one kernel and the launch its host code calls. Compiled by
// nvcc; including <cugraphs/graph.hpp> here also registers cugraphs' own kernels.
#include <cugraphs/graph.hpp>

__global__ void scale(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

void launch_scale(float* x, int n, float a, cudaStream_t s) {
  scale<<<(n + 255) / 256, 256, 0, s>>>(x, n, a);
  cugraphs::check_launch("scale");
}
