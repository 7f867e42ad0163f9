// What the runtime and the driver say of an address, by where it came from: whether memory
// freed inside a capture (the Relaxed crash of relaxed_freed_memory.cu) can be told from a
// graph's allocation that is not backed yet (a graph sharing a pool reads another's output
// before that graph has run). For each address: cudaPointerGetAttributes' type and device
// pointer, the driver's CU_POINTER_ATTRIBUTE_RANGE_START_ADDR / RANGE_SIZE / MAPPED, and
// cuMemGetAddressRange; one line each. Build with -lcuda.
//   nvcc -O2 -arch=sm_90 tools/diagnostics/pointer_kinds.cu -lcuda -o pointer_kinds
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

void describe(const char* what, const void* p) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  (void)cudaGetLastError();
  CUdeviceptr start = 0;
  std::size_t size = 0;
  int mapped = -1;
  const auto d = reinterpret_cast<CUdeviceptr>(p);
  const CUresult r1 = cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d);
  const CUresult r2 = cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d);
  const CUresult r3 = cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, d);
  CUdeviceptr base = 0;
  std::size_t bytes = 0;
  const CUresult r4 = cuMemGetAddressRange(&base, &bytes, d);
  std::printf("%-44s %p: runtime %s type %d dev %p | range start %d (%#llx) size %d (%zu) mapped %d (%d) | "
              "address range %d (%#llx, %zu)\n",
              what, p, cudaGetErrorName(e), static_cast<int>(a.type), a.devicePointer, static_cast<int>(r1),
              static_cast<unsigned long long>(start), static_cast<int>(r2), size, static_cast<int>(r3), mapped,
              static_cast<int>(r4), static_cast<unsigned long long>(base), bytes);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  cudaStream_t s{};
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* live = nullptr;
  cudaMalloc(&live, 1 << 20);
  describe("live cudaMalloc", live);
  describe("live cudaMalloc + 4096", static_cast<char*>(live) + 4096);
  void* freed = nullptr;
  cudaMalloc(&freed, 1 << 20);
  cudaFree(freed);
  describe("cudaMalloc then cudaFree", freed);
  void* async = nullptr;
  cudaMallocAsync(&async, 1 << 20, s);
  cudaStreamSynchronize(s);
  describe("cudaMallocAsync (default pool), live", async);
  cudaFreeAsync(async, s);
  cudaStreamSynchronize(s);
  describe("cudaMallocAsync, freed", async);

  // A graph's allocation, not freed in the graph: captured, instantiated, not yet launched.
  void* in_graph = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaMallocAsync(&in_graph, 1 << 20, s);
  cudaMemsetAsync(in_graph, 0, 1 << 20, s);
  cudaGraph_t g{};
  cudaStreamEndCapture(s, &g);
  describe("graph allocation, captured", in_graph);
  cudaGraphExec_t x{};
  cudaGraphInstantiate(&x, g, 0);
  describe("graph allocation, instantiated", in_graph);
  cudaGraphLaunch(x, s);
  cudaStreamSynchronize(s);
  describe("graph allocation, launched", in_graph);
  cudaFreeAsync(in_graph, s);
  cudaStreamSynchronize(s);
  describe("graph allocation, freed after launch", in_graph);
  cudaDeviceGraphMemTrim(0);
  describe("graph allocation, freed and trimmed", in_graph);

  // Freed inside a Relaxed capture.
  void* relaxed = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  cudaMalloc(&relaxed, 256);
  cudaFree(relaxed);
  cudaGraph_t g2{};
  cudaMemsetAsync(live, 0, 256, s);
  cudaStreamEndCapture(s, &g2);
  describe("cudaMalloc + cudaFree inside a Relaxed capture", relaxed);

  int on_stack = 0;
  describe("pageable (stack)", &on_stack);
  void* heap = std::malloc(64);
  describe("pageable (heap)", heap);
  void* pinned = nullptr;
  cudaMallocHost(&pinned, 4096);
  describe("pinned (cudaMallocHost)", pinned);
  describe("null", nullptr);
  std::free(heap);
  return 0;
}
