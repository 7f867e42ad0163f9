// Whether the process's own memory map tells device memory that was freed from pageable host
// memory: both read as "unregistered" to cudaPointerGetAttributes (pointer_kinds.cu), so a
// cudaMemcpyDefault copy of freed device memory cannot be told from a pageable copy by CUDA's
// queries. For each address: the /proc/self/maps line that holds it (or "unmapped"), and
// mincore's answer for its page. Raw CUDA, no cugraphs.
//   nvcc -O2 -arch=sm_90 tools/diagnostics/freed_mapping.cu -o freed_mapping
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

void describe(const char* what, const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::string line = "unmapped";
  std::ifstream maps("/proc/self/maps");
  for (std::string l; std::getline(maps, l);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(l.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && lo <= a && a < hi) {
      line = l;
      break;
    }
  }
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char in_core = 0;
  const int r = mincore(reinterpret_cast<void*>(a & ~(page - 1)), page, &in_core);
  std::printf("%-36s %p: mincore %s | %s\n", what, p, r == 0 ? "ok" : std::strerror(errno), line.c_str());
}

}  // namespace

int main() {
  void* live = nullptr;
  void* freed = nullptr;
  if (cudaMalloc(&live, 1 << 20) != cudaSuccess || cudaMalloc(&freed, 1 << 20) != cudaSuccess) return 1;
  (void)cudaFree(freed);
  void* pinned = nullptr;
  (void)cudaMallocHost(&pinned, 4096);
  int on_stack = 0;
  void* heap = std::malloc(64);
  void* big_heap = std::malloc(64 << 20);  // mmapped by glibc
  cudaStream_t s = nullptr;
  (void)cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* graph_made = nullptr;
  cudaGraph_t g = nullptr;
  (void)cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  (void)cudaMallocAsync(&graph_made, 1 << 20, s);
  (void)cudaStreamEndCapture(s, &g);
  // Freed inside a Relaxed capture, as the crash of relaxed_freed_memory.cu.
  void* freed_in_capture = nullptr;
  cudaGraph_t g2 = nullptr;
  (void)cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  (void)cudaMalloc(&freed_in_capture, 1 << 20);
  (void)cudaFree(freed_in_capture);
  (void)cudaStreamEndCapture(s, &g2);
  describe("live cudaMalloc", live);
  describe("cudaMalloc then cudaFree", freed);
  describe("cudaFree inside a Relaxed capture", freed_in_capture);
  describe("graph allocation, not run", graph_made);
  describe("pinned", pinned);
  describe("stack", &on_stack);
  describe("heap (small)", heap);
  describe("heap (64 MiB, mmapped)", big_heap);
  std::free(heap);
  std::free(big_heap);
  return 0;
}
