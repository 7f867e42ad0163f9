// A consumer's host code, compiled by the host compiler alone: misuse is an Error without
// a GPU; with one, a graph of three kernels is captured into a pool and replayed.
#include <cugraphs/graph.hpp>

#include <cstdio>
#include <string>
#include <vector>

void launch_scale(float* x, int n, float a, cudaStream_t s);

int main() {
  try {
    cugraphs::Graph empty;
    empty.replay();
    std::puts("consumer: replaying an empty graph did not throw");
    return 1;
  } catch (const cugraphs::Error& e) {
    if (std::string(e.what()).find("nothing has been captured") == std::string::npos) {
      std::printf("consumer: unexpected message: %s\n", e.what());
      return 1;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("consumer: ok (no CUDA device: host checks only)");
    return 0;
  }
  constexpr int n = 1000;
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> x(n);
  x.copy_from_host(std::vector<float>(n, 1.0f));
  cugraphs::Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) {
    for (int k = 0; k < 3; ++k) launch_scale(x.data(), n, 2.0f, s);
  });
  g.replay();
  g.replay();
  const float v = x.to_host()[0];
  std::printf("consumer: ok (x[0] = %g after two replays of 3 kernels)\n", static_cast<double>(v));
  return v == 64.0f ? 0 : 1;
}
