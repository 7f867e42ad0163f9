// What the freed-memory check of Relaxed captures sees of values a kernel may be handed as an
// 8-byte argument: for each, cudaPointerGetAttributes' type, the driver's allocation range
// (cuMemGetAddressRange) and memory pool (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), and the
// /proc/self/maps line that holds it. Values: small and large cudaMalloc blocks, their ends,
// two blocks made one after the other, a block freed inside a Relaxed capture, cudaMallocAsync
// memory, a graph's allocation before and after its launch, VMM memory (cuMemMap) and the
// unmapped rest of its reservation, a device function's address, __device__ and __constant__
// symbols, a conditional handle, a texture object, and 64-bit values that are not addresses.
// The no-access mappings over 1 GiB are listed before CUDA starts, after the first cudaMalloc
// and after the first cudaMallocAsync. Raw CUDA, no cugraphs.
//   nvcc -O2 -arch=sm_90 tools/diagnostics/argument_kinds.cu -o argument_kinds -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

__device__ float twice(float x) { return 2.0f * x; }
__device__ float (*twice_address)(float) = twice;
__device__ float device_table[256];
__constant__ float constant_table[256];

void big_reservations(const char* when) {
  std::printf("no-access mappings over 1 GiB %s:\n", when);
  std::ifstream maps("/proc/self/maps");
  for (std::string l; std::getline(maps, l);) {
    std::uintptr_t lo = 0, hi = 0;
    char access[5] = {};
    if (std::sscanf(l.c_str(), "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, access) == 3 &&
        std::string(access, 3) == "---" && hi - lo > (std::uintptr_t{1} << 30))
      std::printf("  %" PRIxPTR "-%" PRIxPTR " (%.1f GiB)\n", lo, hi, static_cast<double>(hi - lo) / (1 << 30));
  }
}

void describe(const char* what, std::uint64_t v) {
  std::string line = "unmapped";
  std::ifstream maps("/proc/self/maps");
  for (std::string l; std::getline(maps, l);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(l.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && lo <= v && v < hi) {
      line = l.substr(0, 60);
      break;
    }
  }
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, reinterpret_cast<const void*>(v));
  (void)cudaGetLastError();
  CUdeviceptr base = 0;
  size_t bytes = 0;
  const CUresult range = cuMemGetAddressRange(&base, &bytes, static_cast<CUdeviceptr>(v));
  CUmemoryPool pool = nullptr;
  const CUresult pooled = cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, static_cast<CUdeviceptr>(v));
  char range_text[64] = "none";
  if (range == CUDA_SUCCESS)
    std::snprintf(range_text, sizeof range_text, "0x%llx +%zu", static_cast<unsigned long long>(base), bytes);
  std::printf("%-44s 0x%-14" PRIx64 " type %d%s | range %s | pool %s | %s\n", what, v, static_cast<int>(a.type),
              e == cudaSuccess ? "" : " (query failed)", range_text,
              pooled != CUDA_SUCCESS ? "error" : pool != nullptr ? "yes" : "no", line.c_str());
}

std::uint64_t word(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

int main() {
  big_reservations("before CUDA starts");
  (void)cudaFree(nullptr);
  big_reservations("once the context is made");
  float* small = nullptr;
  float* next = nullptr;
  float* big = nullptr;
  if (cudaMalloc(&small, 256) != cudaSuccess || cudaMalloc(&next, 256) != cudaSuccess ||
      cudaMalloc(&big, size_t{1} << 30) != cudaSuccess)
    return 1;
  big_reservations("after cudaMalloc");
  cudaStream_t s = nullptr;
  (void)cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* pooled = nullptr;
  (void)cudaMallocAsync(&pooled, 1 << 20, s);
  (void)cudaStreamSynchronize(s);
  big_reservations("after cudaMallocAsync");
  // Freed inside a Relaxed capture.
  void* freed = nullptr;
  cudaGraph_t relaxed = nullptr;
  (void)cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  (void)cudaMalloc(&freed, 256);
  (void)cudaFree(freed);
  (void)cudaStreamEndCapture(s, &relaxed);
  // A graph's allocation.
  void* made = nullptr;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t x = nullptr;
  (void)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  (void)cudaMallocAsync(&made, 1 << 20, s);
  (void)cudaStreamEndCapture(s, &g);
  (void)cudaGraphInstantiate(&x, g, 0);
  describe("graph allocation, not run", word(made));
  (void)cudaGraphLaunch(x, s);
  (void)cudaStreamSynchronize(s);
  describe("graph allocation, run", word(made));
  // VMM: two granules reserved, one mapped.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granule = 0;
  (void)cuMemGetAllocationGranularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CUdeviceptr reserved = 0;
  CUmemGenericAllocationHandle h{};
  (void)cuMemAddressReserve(&reserved, 2 * granule, 0, 0, 0);
  (void)cuMemCreate(&h, granule, &prop, 0);
  (void)cuMemMap(reserved, granule, 0, h, 0);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  (void)cuMemSetAccess(reserved, granule, &access, 1);
  float (*function)(float) = nullptr;
  (void)cudaMemcpyFromSymbol(&function, twice_address, sizeof function);
  void* symbol = nullptr;
  void* constant = nullptr;
  (void)cudaGetSymbolAddress(&symbol, device_table);
  (void)cudaGetSymbolAddress(&constant, constant_table);
  cudaGraph_t holder = nullptr;
  (void)cudaGraphCreate(&holder, 0);
  cudaGraphConditionalHandle handle{};
  (void)cudaGraphConditionalHandleCreate(&handle, holder, 0, 0);
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeLinear;
  rd.res.linear.devPtr = small;
  rd.res.linear.desc = cudaCreateChannelDesc<float>();
  rd.res.linear.sizeInBytes = 256;
  cudaTextureDesc td{};
  cudaTextureObject_t texture = 0;
  (void)cudaCreateTextureObject(&texture, &rd, &td, nullptr);
  describe("cudaMalloc 256 B", word(small));
  describe("its end (+256)", word(small) + 256);
  describe("its end - 1", word(small) + 255);
  describe("the next cudaMalloc 256 B", word(next));
  describe("one before the 256 B block", word(small) - 4);
  describe("8 before the next block (1-based)", word(next) - 8);
  describe("cudaMalloc 1 GiB", word(big));
  describe("8 before the 1 GiB block (1-based)", word(big) - 8);
  describe("its end", word(big) + (std::uint64_t{1} << 30));
  describe("cudaMalloc 256 B freed in a Relaxed capture", word(freed));
  describe("cudaMallocAsync 1 MiB", word(pooled));
  describe("VMM, mapped", reserved);
  describe("VMM, reserved and not mapped", reserved + granule);
  describe("device function's address", word(reinterpret_cast<const void*>(function)));
  describe("__device__ symbol", word(symbol));
  describe("__constant__ symbol", word(constant));
  describe("conditional handle", handle);
  describe("texture object", texture);
  describe("int2{1024, 5}", (std::uint64_t{5} << 32) | 1024);
  describe("int2{1920, 1080}", (std::uint64_t{1080} << 32) | 1920);
  describe("int2{4096, 32000}", (std::uint64_t{32000} << 32) | 4096);
  describe("0x400000100", 0x400000100ULL);
  return 0;
}
