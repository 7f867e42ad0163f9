// CUDA code of a consumer project: captures and replays a kernel when a GPU is present.
#include <cugraphs/graph.hpp>

#include <cstdio>

bool empty_replay_is_an_error();

__global__ void add_one(int* x) { *x += 1; }

int main() {
  if (!empty_replay_is_an_error()) {
    std::puts("consumer: FAIL: misuse was not reported");
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("consumer: built and linked against the cugraphs subproject; no GPU to run on");
    return 0;
  }
  cugraphs::DeviceBuffer<int> x(1);
  x.copy_from_host(std::vector<int>{41});
  cugraphs::Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) { add_one<<<1, 1, 0, s>>>(x.data()); });
  g.replay();
  const int value = x.to_host()[0];
  std::printf("consumer: captured and replayed through the subproject: %d\n", value);
  return value == 42 ? 0 : 1;
}
