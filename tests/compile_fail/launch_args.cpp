// expect: cugraphs::launch: every argument must convert to its kernel parameter's type
// A pointer of the wrong element type passed to cugraphs::launch: a plain cudaLaunchKernelEx
// through void** would take it and the kernel would read the bytes as floats.
#include <cugraphs/launch.hpp>

void scale(float* /*x*/, int /*n*/) {}  // stands for a __global__ kernel (host compiler here)

void run(double* wrong, int n) {
  cugraphs::launch(cugraphs::LaunchConfig{}, scale, wrong, n);
}
