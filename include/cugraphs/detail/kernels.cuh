// Device code of cugraphs' host API, compiled only by nvcc, registered in launchers.hpp.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/detail/rng_state.hpp>

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
  const unsigned value = width == 1 ? *static_cast<const unsigned char*>(flag)
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
  set_condition_launcher.store(&launch_set_condition_kernel<>, std::memory_order_release);
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

// Head of a graphed callable, part 1: claims the next call's slot if the host posted it,
// and copies its sources to device memory once, so that the copy kernel's threads read
// device memory rather than the bus. One block: thread 0 reads the tag; after the barrier
// the block reads the sources in parallel (one round trip over the bus, not one a leaf).
template <int = 0>
__global__ void stage_claim_kernel(StageArgs a) {
  const unsigned long long next = *a.consumed;
  const unsigned long long* slot = a.ring + (next % a.slots) * (a.leaves + 1);
  const bool claim = block_sees_tag(slot, next + 1);
  if (threadIdx.x == 0) *a.claimed = claim ? 1 : 0;
  if (!claim) return;
  for (unsigned i = threadIdx.x; i < a.leaves; i += blockDim.x)
    a.sources[i] = reinterpret_cast<const void*>(__ldcv(slot + 1 + i));
}

// Head, part 2: copies the claimed slot's sources into the static buffers. Grid: (chunks,
// leaves).
template <int = 0>
__global__ void stage_copy_kernel(StageArgs a) {
  if (*a.claimed == 0) return;
  const unsigned leaf = blockIdx.y;
  const void* src = a.sources[leaf];
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

// Tail: one more call is done.
template <int = 0>
__global__ void stage_done_kernel(StageArgs a) {
  if (*a.claimed == 0) return;
  const unsigned long long done = *a.consumed + 1;
  *a.consumed = done;
  *reinterpret_cast<volatile unsigned long long*>(a.host_done) = done;
  __threadfence_system();
}

template <int = 0>
cudaError_t launch_stage_kernel(const StageArgs& a, StagePart part, cudaStream_t stream) {
  switch (part) {
    case StagePart::Claim: stage_claim_kernel<<<1, stage_claim_threads(a.leaves), 0, stream>>>(a); break;
    case StagePart::Copy: stage_copy_kernel<<<dim3(a.chunks, a.leaves), 256, 0, stream>>>(a); break;
    case StagePart::Tail: stage_done_kernel<<<1, 1, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

// Head of a graph that draws random numbers: copies the (seed, offset) pairs posted for this
// replay into the buffer its kernels read. A launch with nothing posted keeps the last pairs.
template <int = 0>
__global__ void rng_refresh_kernel_impl(RngRefreshArgs a) {
  const unsigned long long next = *a.consumed;
  const unsigned long long* slot = a.ring + (next % a.slots) * kRngSlotWidth;
  if (!block_sees_tag(slot, next + 1)) return;
  for (unsigned i = threadIdx.x; i < 2 * a.generators; i += blockDim.x) a.values[i] = __ldcv(slot + 1 + i);
  __syncthreads();  // every read of the slot and of *a.consumed is done before the slot is freed
  if (threadIdx.x == 0) {
    *a.consumed = next + 1;
    *reinterpret_cast<volatile unsigned long long*>(a.host_done) = next + 1;
    __threadfence_system();
  }
}

[[maybe_unused]] static const bool rng_registered = [] {
  rng_refresh_kernel.store(reinterpret_cast<const void*>(&rng_refresh_kernel_impl<>), std::memory_order_release);
  return true;
}();

[[maybe_unused]] static const bool stage_registered = [] {
  stage_launcher.store(&launch_stage_kernel<>, std::memory_order_release);
  return true;
}();

}  // namespace cugraphs::detail
