// What a Relaxed capture's end pays for the kernel-argument check (reliability row 130): the
// same straight-line capture of N kernels, each taking three pointers of cudaMalloc memory and
// two integers, ended in Global mode (not searched) and in Relaxed mode (every argument word
// asked of CUDA), and in Relaxed mode with EscapeCheck::Off (not searched); capture_end alone
// (instantiation is asked for later and not timed), median of several rounds, in microseconds,
// with the check's cost a node (Relaxed over Relaxed with the check off). Uses cugraphs.
//   nvcc -O2 -std=c++20 -arch=sm_90 -DFMT_USE_CONSTEXPR=1 -Iinclude tools/diagnostics/relaxed_audit_cost.cu \
//        -o relaxed_audit_cost
#include <cugraphs/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

__global__ void axpy(float* y, const float* x, const float* a, int n, int k) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += a[k % n] * x[i];
}

double end_us(int nodes, cugraphs::CaptureMode mode, cugraphs::EscapeCheck escapes, float* y, const float* x,
              const float* a) {
  std::vector<double> samples;
  for (int round = 0; round < 7; ++round) {
    cugraphs::Graph g;
    cugraphs::CaptureOptions o;
    o.mode = mode;
    o.escapes = escapes;
    o.instantiate = false;
    g.capture_begin(o);
    for (int k = 0; k < nodes; ++k) axpy<<<1, 64, 0, g.stream()>>>(y, x, a, 64, k);
    const auto t0 = std::chrono::steady_clock::now();
    g.capture_end();
    samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::ranges::sort(samples);
  return samples[samples.size() / 2];
}

}  // namespace

int main() {
  float *y = nullptr, *x = nullptr, *a = nullptr;
  if (cudaMalloc(&y, 256) != cudaSuccess || cudaMalloc(&x, 256) != cudaSuccess || cudaMalloc(&a, 256) != cudaSuccess) {
    std::printf("no CUDA device\n");
    return 77;
  }
  using cugraphs::CaptureMode;
  using cugraphs::EscapeCheck;
  std::printf("%8s %12s %12s %14s %14s\n", "nodes", "Global us", "Relaxed us", "Relaxed Off us", "extra us/node");
  for (const int nodes : {1, 10, 100, 1000, 10000}) {
    const double global = end_us(nodes, CaptureMode::Global, EscapeCheck::Auto, y, x, a);
    const double relaxed = end_us(nodes, CaptureMode::Relaxed, EscapeCheck::Auto, y, x, a);
    const double off = end_us(nodes, CaptureMode::Relaxed, EscapeCheck::Off, y, x, a);
    std::printf("%8d %12.1f %12.1f %14.1f %14.3f\n", nodes, global, relaxed, off, (relaxed - off) / nodes);
  }
  (void)cudaFree(y);
  (void)cudaFree(x);
  (void)cudaFree(a);
  return 0;
}
