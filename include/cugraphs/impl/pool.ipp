// The bodies of the functions <cugraphs/detail/pool.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/pool.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE Pool::~Pool() {
  if (checks_) {  // its events go in relaxed mode too, like every other call here
    RelaxedCaptureMode relaxed;
    checks_.reset();
  }
  // Every block is back (buffers and graphs hold the pool alive), so all segments go.
  const auto bases = blocks_.segment_bases();
  if (bases.empty()) return;
  CUGRAPHS_TRY {
    DeviceGuard on(device_);
    RelaxedCaptureMode relaxed;
    for (void* p : bases) report_in_destructor(cudaFree(p), "cudaFree (releasing a pool segment)");
  } CUGRAPHS_CATCH_ALL {
    report_in_destructor(caught_code(), "releasing a graph pool");
  }
}

CUGRAPHS_INLINE std::size_t Pool::reserved_bytes() const {
  std::lock_guard lock(m_);
  return blocks_.reserved_bytes();
}

CUGRAPHS_INLINE std::size_t Pool::allocated_bytes() const {
  std::lock_guard lock(m_);
  return blocks_.allocated_bytes();
}

CUGRAPHS_INLINE std::size_t Pool::segment_count() const {
  std::lock_guard lock(m_);
  return blocks_.segment_count();
}

CUGRAPHS_INLINE std::vector<std::pair<std::uintptr_t, std::size_t>> Pool::segment_ranges() const {
  std::lock_guard lock(m_);
  return blocks_.segment_ranges();
}

CUGRAPHS_INLINE Block* Pool::allocate(std::size_t bytes, std::uint64_t capture, cudaStream_t stream) {
  // Rounding up to the block and segment sizes must not wrap around: a size near SIZE_MAX
  // would become a tiny block (or a null one) handed out as a huge buffer.
  if (bytes > std::numeric_limits<std::size_t>::max() - kSegmentGranularity)
    throw_cuda(cudaErrorMemoryAllocation,
               detail::format("graph pool {}: an allocation of {} bytes (no device has that much)", id_, bytes));
  const std::size_t size = round_up(bytes == 0 ? 1 : bytes, kBlockAlignment);
  const BlockTag tag{capture, stream};
  std::lock_guard lock(m_);
  Block* b = blocks_.allocate(size, tag, open_);
  if (b == nullptr) {
    add_segment(size);
    b = blocks_.allocate(size, tag, open_);
  }
  if (checks_ && b != nullptr) {
    b->serial = ++serial_;
    CUGRAPHS_TRY {
      checks_->allocated(capture, b->addr, b->size, b->serial);
    } CUGRAPHS_CATCH_ALL {
      blocks_.free(b, open_);
      CUGRAPHS_RETHROW;
    }
  }
  return b;
}

CUGRAPHS_INLINE void Pool::free(Block* b) noexcept {
  std::lock_guard lock(m_);
  if (checks_) checks_->freed(b->serial);
  blocks_.free(b, open_);
}

CUGRAPHS_INLINE void Pool::begin_capture(std::uint64_t capture) {
  std::lock_guard lock(m_);
  open_.push_back(capture);
}

CUGRAPHS_INLINE void Pool::end_capture(std::uint64_t capture, bool produced_graph) noexcept {
  std::lock_guard lock(m_);
  std::erase(open_, capture);
  blocks_.coalesce(open_);
  if (checks_) {
    CUGRAPHS_TRY {
      checks_->end_capture(capture, produced_graph);
    } CUGRAPHS_CATCH_ALL {
      report_in_destructor(cudaErrorMemoryAllocation, "checked pool: recording a capture");
    }
  }
}

CUGRAPHS_INLINE void Pool::register_graph(std::uint64_t capture) {
  std::lock_guard lock(m_);
  RelaxedCaptureMode relaxed;
  checks_->register_graph(capture);
}

CUGRAPHS_INLINE void Pool::forget_graph(std::uint64_t capture) noexcept {
  std::lock_guard lock(m_);
  RelaxedCaptureMode relaxed;
  checks_->forget_graph(capture);
}

CUGRAPHS_INLINE void Pool::note_written(const void* p, std::size_t bytes) noexcept {
  if (!checks_) return;
  std::lock_guard lock(m_);
  checks_->written(reinterpret_cast<std::uintptr_t>(p), bytes);
}

CUGRAPHS_INLINE void Pool::check_read(const void* p, std::size_t bytes, std::string_view op) const {
  if (!checks_) return;
  std::lock_guard lock(m_);
  checks_->check_read(reinterpret_cast<std::uintptr_t>(p), bytes, op);
}

CUGRAPHS_INLINE void Pool::attach_graph() noexcept {
  std::lock_guard lock(m_);
  graphs_.fetch_add(1, std::memory_order_relaxed);
}

CUGRAPHS_INLINE std::size_t Pool::trim() {
  std::lock_guard lock(m_);
  if (graph_count() != 0) return 0;
  return release_free_segments();
}

CUGRAPHS_INLINE std::uint64_t Pool::next_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

CUGRAPHS_INLINE void Pool::add_segment(std::size_t size) {
  const std::size_t bytes = round_up(size, kSegmentGranularity);
  DeviceGuard on(device_);
  RelaxedCaptureMode relaxed;  // cudaMalloc is not captured, but would invalidate a Global capture
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "graph pool {}: cudaMalloc of a {} byte segment", id_, bytes);
  blocks_.add_segment(p, bytes);
}

CUGRAPHS_INLINE std::size_t Pool::release_free_segments() {
  const std::size_t before = blocks_.reserved_bytes();
  const auto bases = blocks_.take_free_segments(open_);
  if (!bases.empty()) {
    DeviceGuard on(device_);
    RelaxedCaptureMode relaxed;
    for (void* p : bases) check(cudaFree(p), "cudaFree (releasing a pool segment)");
  }
  return before - blocks_.reserved_bytes();
}

CUGRAPHS_INLINE PoolShare& PoolShare::operator=(PoolShare&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    checked_ = std::exchange(o.checked_, 0);
  }
  return *this;
}

CUGRAPHS_INLINE void PoolShare::attach(std::shared_ptr<Pool> p) noexcept {
  release();
  p->attach_graph();
  pool_ = std::move(p);
}

CUGRAPHS_INLINE void PoolShare::register_capture(std::uint64_t capture) {
  if (!pool_->checked()) return;
  pool_->register_graph(capture);
  checked_ = capture;
}

CUGRAPHS_INLINE void PoolShare::release() noexcept {
  if (!pool_) return;
  if (checked_ != 0) pool_->forget_graph(std::exchange(checked_, 0));
  pool_->detach_graph();
  pool_.reset();
}

}  // namespace cugraphs::detail
