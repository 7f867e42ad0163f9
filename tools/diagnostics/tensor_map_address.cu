// Where a tensor map (CUtensorMap, the 128-byte TMA descriptor a kernel takes by value) keeps
// its tensor's address (issue 29: InputMode::InPlace finds a static input's address in f's
// kernel arguments as an 8-byte word and rewrites it at each call). Raw driver API, no
// cugraphs. For tiled maps of several ranks, element types and swizzles, it encodes the same
// tensor at base address A and at A + k * 256 and reports
//   - which bytes of the descriptor differ between the two encodings,
//   - whether A is stored as a plain 8-byte word (and at which offset),
//   - whether writing A + k * 256 over that word gives, bit for bit, the encoding of
//     A + k * 256 (so a word rewrite is what cuTensorMapReplaceAddress does), and the same
//     against cuTensorMapReplaceAddress itself.
// Prints one line a case and a verdict last: "plain word" when every case encoded keeps the
// address as one word and only there, "NOT plain" otherwise (then a static input's tensor map cannot
// be found, and InPlace must refuse kernels that may take one).
//   nvcc -std=c++20 -O2 -arch=sm_90 tools/diagnostics/tensor_map_address.cu -lcuda -o tensor_map_address
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Case {
  const char* name;
  CUtensorMapDataType type;
  std::uint32_t element;  // bytes
  std::uint32_t rank;
  CUtensorMapSwizzle swizzle;
};

bool encode(CUtensorMap& map, const Case& c, void* base) {
  cuuint64_t dims[5] = {256, 64, 8, 2, 2};
  cuuint64_t strides[4]{};  // bytes, for dimensions 1..rank-1
  cuuint64_t step = dims[0] * c.element;
  for (std::uint32_t d = 1; d < c.rank; ++d) {
    strides[d - 1] = step;
    step *= dims[d];
  }
  // A box row of at most the swizzle's span (32, 64 or 128 bytes; 64 without swizzle).
  const std::uint32_t row = c.swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : 64;
  cuuint32_t box[5] = {row / c.element, 8, 2, 1, 1};
  cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  std::memset(&map, 0, sizeof map);
  const CUresult r = cuTensorMapEncodeTiled(&map, c.type, c.rank, base, dims, strides, box, elem_strides,
                                            CU_TENSOR_MAP_INTERLEAVE_NONE, c.swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    std::printf("%-28s encode failed: %s\n", c.name, s ? s : "?");
    return false;
  }
  return true;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  void* block = nullptr;
  check(cudaMalloc(&block, 64 << 20), "cudaMalloc");
  const Case cases[] = {
      {"f32 rank 1", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, 1, CU_TENSOR_MAP_SWIZZLE_NONE},
      {"f32 rank 2", CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, 2, CU_TENSOR_MAP_SWIZZLE_NONE},
      {"f16 rank 2 swizzle 64B", CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, 2, CU_TENSOR_MAP_SWIZZLE_64B},
      {"bf16 rank 3 swizzle 128B", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, 3, CU_TENSOR_MAP_SWIZZLE_128B},
      {"u8 rank 5 swizzle 32B", CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, 5, CU_TENSOR_MAP_SWIZZLE_32B},
  };
  const std::uintptr_t shifts[] = {256, 4096, std::uintptr_t{1} << 20, (std::uintptr_t{48} << 20) + 768};
  bool plain = true;
  int tried = 0, failed = 0;  // cases encoded, and cases the driver refused to encode
  for (const Case& c : cases) {
    for (std::uintptr_t shift : shifts) {
      auto* a = static_cast<std::byte*>(block);
      auto* b = a + shift;
      CUtensorMap ma{}, mb{}, patched{}, replaced{};
      if (!encode(ma, c, a) || !encode(mb, c, b)) {
        ++failed;
        continue;
      }
      ++tried;
      unsigned char ba[128], bb[128];
      std::memcpy(ba, &ma, 128);
      std::memcpy(bb, &mb, 128);
      std::vector<int> differ;
      for (int i = 0; i < 128; ++i)
        if (ba[i] != bb[i]) differ.push_back(i);
      int word = -1, words = 0;
      for (int at = 0; at + 8 <= 128; at += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, ba + at, 8);
        if (w == reinterpret_cast<std::uintptr_t>(a)) {
          word = at;
          ++words;
        }
      }
      bool inside = word >= 0;
      for (int i : differ) inside = inside && i >= word && i < word + 8;
      bool rewrite_same = false;
      if (word >= 0) {
        patched = ma;
        const auto wb = reinterpret_cast<std::uintptr_t>(b);
        std::memcpy(reinterpret_cast<unsigned char*>(&patched) + word, &wb, 8);
        rewrite_same = std::memcmp(&patched, &mb, 128) == 0;
      }
      replaced = ma;
      const bool replace_ok = cuTensorMapReplaceAddress(&replaced, b) == CUDA_SUCCESS;
      const bool replace_same = replace_ok && std::memcmp(&replaced, &mb, 128) == 0;
      const bool ok = words == 1 && inside && rewrite_same;
      plain = plain && ok;
      std::printf("%-28s +%-9zu bytes differing %2zu (first %3d), address word at %3d (%d found), only there %s, "
                  "word rewrite == encoding %s, cuTensorMapReplaceAddress == encoding %s\n",
                  c.name, static_cast<std::size_t>(shift), differ.size(), differ.empty() ? -1 : differ.front(), word,
                  words, inside ? "yes" : "no", rewrite_same ? "yes" : "no", replace_same ? "yes" : "no");
    }
  }
  check(cudaFree(block), "cudaFree");
  std::printf("tensor maps: %d cases encoded (%d refused by the driver), the address %s\n", tried, failed,
              plain && tried > 0 ? "is a plain word, stored once (plain word)" : "is NOT plain");
  return 0;
}
