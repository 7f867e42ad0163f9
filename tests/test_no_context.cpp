// is_current_stream_capturing() must never create a CUDA context. Run in a fresh process:
// on a machine without a GPU it must answer false without throwing; with one, the primary
// context of device 0 must still be inactive afterwards.
#include <cugraphs/graph.hpp>

#include <cstdio>

int main() {
  bool capturing = true;
  try {
    capturing = cugraphs::is_current_stream_capturing();
  } catch (const cugraphs::Error& e) {
    std::printf("FAIL: is_current_stream_capturing threw: %s\n", e.what());
    return 1;
  }
  if (capturing) {
    std::printf("FAIL: is_current_stream_capturing() is true outside any capture\n");
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("ok: false, no CUDA device here\n");
    return 0;
  }
  using PrimaryCtxGetState = int (*)(int, unsigned*, int*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 7000, cudaEnableDefault,
                                       &found) != cudaSuccess || fn == nullptr) {
    std::printf("FAIL: cannot reach cuDevicePrimaryCtxGetState\n");
    return 1;
  }
  unsigned flags = 0;
  int active = -1;
  if (reinterpret_cast<PrimaryCtxGetState>(fn)(0, &flags, &active) != 0) {
    std::printf("FAIL: cuDevicePrimaryCtxGetState failed\n");
    return 1;
  }
  if (active != 0) {
    std::printf("FAIL: a CUDA context was created\n");
    return 1;
  }
  // Sanity check of the probe itself: real work does create the context.
  (void)cudaFree(nullptr);
  reinterpret_cast<PrimaryCtxGetState>(fn)(0, &flags, &active);
  if (active != 1) {
    std::printf("FAIL: the context probe does not see contexts\n");
    return 1;
  }
  std::printf("ok: false, and no CUDA context was created\n");
  return 0;
}
