// Device code of cugraphs' host API, compiled only by nvcc, registered in launchers.hpp.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/launchers.hpp>

#include <cstddef>
#include <cstdint>

#if !defined(__CUDACC__)
#  error "cugraphs/detail/kernels.cuh is device code: include it only from sources compiled by nvcc"
#endif

namespace cugraphs::detail {

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// A template, so that every translation unit may define it without clashing.
template <int = 0>
__global__ void set_condition_kernel(cudaGraphConditionalHandle handle, const void* flag, unsigned width) {
  // Width 0: `flag` is the value itself (a condition reset to its initial value).
  const unsigned value = width == 0   ? static_cast<unsigned>(reinterpret_cast<unsigned long long>(flag))
                         : width == 1 ? *static_cast<const unsigned char*>(flag)
                                      : *static_cast<const unsigned*>(flag);
  cudaGraphSetConditional(handle, value);
}

template <int = 0>
cudaError_t launch_set_condition_kernel(cudaGraphConditionalHandle handle, const void* flag,
                                        unsigned width, cudaStream_t stream) {
  set_condition_kernel<<<1, 1, 0, stream>>>(handle, flag, width);
  return cudaGetLastError();
}

// Internal linkage: every nvcc translation unit registers at start-up (an unused inline
// variable might never be emitted).
[[maybe_unused]] static const bool kernels_registered = [] {
  register_set_condition(&launch_set_condition_kernel<>);
  return true;
}();
#endif

// Whether post `tag - 1` is in `slot` of a host ring (detail/host_ring.hpp), as seen by the
// whole block: thread 0 reads the tag with acquire semantics at system scope, and the
// barrier orders every thread's later reads of the slot after that acquire. Once per
// kernel: a second call would overwrite `seen` while threads may still be reading it.
template <int = 0>
__device__ bool block_sees_tag(const unsigned long long* slot, unsigned long long tag) {
  __shared__ bool seen;
  if (threadIdx.x == 0) {
    unsigned long long now = 0;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(now) : "l"(slot) : "memory");
    seen = now == tag;
  }
  __syncthreads();
  return seen;
}

// The head of the per-launch ring (detail/launch_ring.hpp): takes the next launch's slot
// if the host posted it, copying the generators' words and the input addresses to device
// memory. A launch with nothing posted keeps the last numbers and stages nothing.
template <int = 0>
__global__ void ring_head_kernel_impl(RingArgs a) {
  const unsigned long long next = a.control[0];
  const unsigned long long* slot = a.ring + (next % a.slots) * a.width;
  const bool took = block_sees_tag(slot, next + 1);
  if (threadIdx.x == 0) a.control[1] = took ? 1 : 0;
  if (!took) return;
  const unsigned rng_words = 2 * a.generators;
  for (unsigned i = threadIdx.x; i < rng_words + a.leaves; i += blockDim.x) {
    const unsigned long long w = __ldcv(slot + 1 + i);
    if (i < rng_words)
      a.values[i] = w;
    else
      a.sources[i - rng_words] = reinterpret_cast<const void*>(w);
  }
}

// The tail: one more launch has finished with its slot and with everything the ring's owner
// holds. Put after the graph's last nodes, so it runs after every other node of the launch.
template <int = 0>
__global__ void ring_tail_kernel_impl(RingArgs a) {
  if (a.control[1] == 0) return;
  const unsigned long long done = a.control[0] + 1;
  a.control[0] = done;
  *reinterpret_cast<volatile unsigned long long*>(a.host_done) = done;
  __threadfence_system();
}

// The staging copy: copies every input address of the launch onto its static buffer.
template <int = 0>
__global__ void stage_copy_kernel(StageArgs a) {
  const unsigned leaf = blockIdx.y;
  const void* src = nullptr;
  if (a.control == nullptr) {
    src = a.inline_sources[leaf];
  } else {
    if (a.control[1] == 0) return;
    src = a.sources[leaf];
  }
  if (src == nullptr) return;  // aliased input: nothing to copy
  const StageTarget t = a.targets[leaf];
  const std::size_t start = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(t.dst)) % 16) == 0) {
    const std::size_t vectors = t.bytes / 16;
    for (std::size_t i = start; i < vectors; i += stride)
      static_cast<uint4*>(t.dst)[i] = static_cast<const uint4*>(src)[i];
    for (std::size_t i = vectors * 16 + start; i < t.bytes; i += stride)
      static_cast<unsigned char*>(t.dst)[i] = static_cast<const unsigned char*>(src)[i];
  } else {
    for (std::size_t i = start; i < t.bytes; i += stride)
      static_cast<unsigned char*>(t.dst)[i] = static_cast<const unsigned char*>(src)[i];
  }
}

template <int = 0>
cudaError_t launch_stage_kernel(const StageArgs& a, cudaStream_t stream) {
  stage_copy_kernel<<<dim3(a.chunks, a.leaves), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

// The fingerprint of an input (launchers.hpp): word k holds bytes [8k, 8k + 8) of the input,
// zeros past its end; each thread adds splitmix64(word ^ (k * golden ratio)) of its words to
// its sum, and the block's warps add theirs to `*out` (sums commute: the order of the threads
// does not matter, the positions do).
template <int = 0>
__global__ void fingerprint_kernel(const unsigned char* data, std::size_t bytes, unsigned long long* out) {
  const std::size_t words = (bytes + 7) / 8;
  const bool aligned = reinterpret_cast<std::uintptr_t>(data) % 8 == 0;
  unsigned long long sum = 0;
  for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < words;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned long long w = 0;
    if (aligned && 8 * k + 8 <= bytes) {
      w = reinterpret_cast<const unsigned long long*>(data)[k];
    } else {
      for (std::size_t b = 8 * k; b < bytes && b < 8 * k + 8; ++b)
        w |= static_cast<unsigned long long>(data[b]) << (8 * (b - 8 * k));
    }
    unsigned long long z = w ^ (static_cast<unsigned long long>(k) * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    sum += z ^ (z >> 31);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(out, sum);
}

template <int = 0>
cudaError_t launch_fingerprint_kernel(const void* data, std::size_t bytes, unsigned long long* out,
                                      cudaStream_t stream) {
  const std::size_t blocks = ((bytes + 7) / 8 + 255) / 256;
  fingerprint_kernel<<<blocks == 0 ? 1u : blocks > 1024 ? 1024u : static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const unsigned char*>(data), bytes, out);
  return cudaGetLastError();
}

// The advance kernel (PerLaunch::Advance): after the graph's last nodes, the next launch's
// offsets.
template <int = 0>
__global__ void advance_kernel_impl(AdvanceArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // After programmatic edges: the last kernels have completed and their reads of the words
  // are done (a no-op after plain edges).
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  for (unsigned i = threadIdx.x; i < a.generators; i += blockDim.x) a.values[2 * i + 1] += a.increments[i];
  if (a.launches == nullptr) return;
  // One more launch done, once every offset is written: a stream that waits for the count
  // then sets the words after these writes.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *a.launches += 1;
}

// Before a launch whose generators moved otherwise: every generator's (seed, offset).
template <int = 0>
__global__ void set_words_kernel(SetWordsArgs a) {
  for (unsigned i = threadIdx.x; i < a.words; i += blockDim.x) a.values[i] = a.w[i];
}

template <int = 0>
cudaError_t launch_set_words_kernel(const SetWordsArgs& a, cudaStream_t stream) {
  set_words_kernel<<<1, 32, 0, stream>>>(a);
  return cudaGetLastError();
}

[[maybe_unused]] static const bool advance_registered = [] {
  register_advance_kernels(reinterpret_cast<const void*>(&advance_kernel_impl<>), &launch_set_words_kernel<>);
  return true;
}();

[[maybe_unused]] static const bool ring_registered = [] {
  register_ring_kernels(reinterpret_cast<const void*>(&ring_head_kernel_impl<>),
                        reinterpret_cast<const void*>(&ring_tail_kernel_impl<>), &launch_stage_kernel<>);
  return true;
}();

[[maybe_unused]] static const bool fingerprint_registered = [] {
  register_fingerprint(&launch_fingerprint_kernel<>);
  return true;
}();

}  // namespace cugraphs::detail
