// The bodies of the functions <cugraphs/memory.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/memory.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/buffer_registry.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/deferred_frees.hpp>
#include <cugraphs/detail/pool.hpp>

namespace cugraphs {

namespace detail {

CUGRAPHS_INLINE BufferMemory allocate_buffer(std::size_t bytes, cudaStream_t stream) {
  BufferMemory m;
  if (auto* ctx = innermost_capture()) {
    m.pool = ctx->pool;
    m.block = m.pool->allocate(bytes, ctx->id, stream);
    m.data = reinterpret_cast<void*>(m.block->addr);
  } else {
    check(cudaMallocAsync(&m.data, bytes, stream), "DeviceBuffer: cudaMallocAsync of {} bytes", bytes);
    BufferRegistry::instance().add(m.data, bytes);  // graphs that name it refuse replays once it is freed
  }
  return m;
}

CUGRAPHS_INLINE void release_buffer(void* data, cudaStream_t stream, Pool* pool, Block* block) noexcept {
  if (block != nullptr) {
    pool->free(block);
    return;
  }
  BufferRegistry::instance().remove(data);
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const cudaError_t queried = cudaStreamIsCapturing(stream, &st);
  if (queried == cudaSuccess && st != cudaStreamCaptureStatusNone) {
    CUGRAPHS_TRY {
      DeferredFrees::instance().add(data, stream);
    } CUGRAPHS_CATCH_ALL {
      report_in_destructor(cudaErrorMemoryAllocation, "DeviceBuffer: deferring a free");
    }
  } else {
    if (queried != cudaSuccess) (void)cudaGetLastError();
    report_in_destructor(cudaFreeAsync(data, stream), "DeviceBuffer: cudaFreeAsync");
  }
}

CUGRAPHS_INLINE void note_buffer_written(Pool& pool, const void* p, std::size_t bytes) noexcept {
  pool.note_written(p, bytes);
}

CUGRAPHS_INLINE void check_buffer_read(const Pool& pool, const void* p, std::size_t bytes, std::string_view op) {
  pool.check_read(p, bytes, op);
}

}  // namespace detail

CUGRAPHS_INLINE std::uint64_t PoolHandle::id() const noexcept { return pool_->id(); }
CUGRAPHS_INLINE int PoolHandle::device() const noexcept { return pool_->device(); }
CUGRAPHS_INLINE std::size_t PoolHandle::reserved_bytes() const { return pool_->reserved_bytes(); }
CUGRAPHS_INLINE std::size_t PoolHandle::allocated_bytes() const { return pool_->allocated_bytes(); }
CUGRAPHS_INLINE std::size_t PoolHandle::trim() { return pool_->trim(); }
CUGRAPHS_INLINE bool PoolHandle::checked() const noexcept { return pool_->checked(); }

CUGRAPHS_INLINE PoolHandle graph_pool_handle(int device, const PoolOptions& opts) {
  if (device < 0 || device >= detail::device_count())
    detail::throw_cuda(cudaErrorInvalidDevice, detail::format("graph_pool_handle({}): no such device", device));
  return PoolHandle(std::make_shared<detail::Pool>(device, opts.checked));
}

}  // namespace cugraphs
