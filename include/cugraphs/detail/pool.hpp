// The graph-private memory pool behind PoolHandle: device segments from cudaMalloc, carved
// by BlockAllocator, returned to the device when the pool dies.
#pragma once

#include <cugraphs/detail/block_allocator.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/pool_checks.hpp>
#include <cugraphs/error.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs::detail {

class Pool {
public:
  explicit Pool(int device, bool checked = false)
      : id_(next_id()), device_(device), checks_(checked ? std::make_unique<PoolChecks>(id_) : nullptr) {}
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  ~Pool();

  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] int device() const noexcept { return device_; }

  [[nodiscard]] std::size_t reserved_bytes() const;
  [[nodiscard]] std::size_t allocated_bytes() const;
  [[nodiscard]] std::size_t segment_count() const;
  // The segments' (address, bytes): the memory graphs captured into the pool may use.
  [[nodiscard]] std::vector<std::pair<std::uintptr_t, std::size_t>> segment_ranges() const;

  // Hands out `bytes` (rounded up to the block alignment) for capture `capture` on `stream`.
  [[nodiscard]] Block* allocate(std::size_t bytes, std::uint64_t capture, cudaStream_t stream);

  void free(Block* b) noexcept;

  void begin_capture(std::uint64_t capture);
  // `produced_graph`: the capture ended with a graph (checked mode records what it used).
  void end_capture(std::uint64_t capture, bool produced_graph = false) noexcept;

  /// Checked mode (see pool_checks.hpp); the rest are no-ops on unchecked pools.
  [[nodiscard]] bool checked() const noexcept { return checks_ != nullptr; }
  // Both create or destroy an event, possibly while an enclosing Global capture is open on
  // this thread (capture_end of a nested capture, reset inside a capture): relaxed mode.
  void register_graph(std::uint64_t capture);
  void forget_graph(std::uint64_t capture) noexcept;
  // Checks that graph `capture` may run on `stream`, runs `launch`, and records it, under
  // the pool's lock so that two threads cannot both pass the check and then overlap. The
  // event calls run in relaxed capture mode: a Global capture elsewhere must not break.
  template <class Launch>
  void checked_launch(std::uint64_t capture, cudaStream_t stream, Launch&& launch) {
    std::lock_guard lock(m_);
    RelaxedCaptureMode relaxed;
    checks_->before_replay(capture, stream);
    launch();
    checks_->after_replay(capture, stream);
  }
  // Memory written whole through cugraphs holds fresh data again (checked mode).
  void note_written(const void* p, std::size_t bytes) noexcept;
  // Refuses to read memory whose graph outputs a later replay overwrote (checked mode).
  void check_read(const void* p, std::size_t bytes, std::string_view op) const;

  // Graphs captured into the pool may still touch its free blocks on replay, so segments
  // are only given back early (trim) while no graph refers to the pool.
  void attach_graph() noexcept;
  void detach_graph() noexcept { graphs_.fetch_sub(1, std::memory_order_relaxed); }
  [[nodiscard]] int graph_count() const noexcept { return graphs_.load(std::memory_order_relaxed); }

  // Gives fully free segments back to the device; only possible while no graph refers to
  // the pool. Returns the bytes released.
  std::size_t trim();

private:
  static std::uint64_t next_id() noexcept;

  // m_ held.
  void add_segment(std::size_t size);

  // m_ held.
  std::size_t release_free_segments();

  const std::uint64_t id_;
  const int device_;
  mutable std::mutex m_;
  BlockAllocator blocks_;
  std::vector<std::uint64_t> open_;  // captures into this pool that are still open
  std::atomic<int> graphs_{0};
  std::unique_ptr<PoolChecks> checks_;  // checked mode only
  std::uint64_t serial_ = 0;            // allocations handed out (checked mode)
};

// A graph's share of a pool: the pool it captured into, held attached (segments are not
// trimmed while graphs refer to the pool), and in checked mode the capture the pool knows
// the graph by. Move-only; release() lets go of both.
class PoolShare {
public:
  PoolShare() = default;
  ~PoolShare() { release(); }
  PoolShare(PoolShare&& o) noexcept : pool_(std::move(o.pool_)), checked_(std::exchange(o.checked_, 0)) {}
  PoolShare& operator=(PoolShare&& o) noexcept;
  PoolShare(const PoolShare&) = delete;
  PoolShare& operator=(const PoolShare&) = delete;

  void attach(std::shared_ptr<Pool> p) noexcept;
  // The capture that produced the graph, recorded with a checked pool.
  void register_capture(std::uint64_t capture);
  void release() noexcept;

  [[nodiscard]] const std::shared_ptr<Pool>& get() const noexcept { return pool_; }
  // Whether launches go through the pool's checks (checked_launch).
  [[nodiscard]] bool checked() const noexcept { return checked_ != 0; }
  template <class Launch>
  void checked_launch(cudaStream_t stream, Launch&& launch) {
    pool_->checked_launch(checked_, stream, std::forward<Launch>(launch));
  }

private:
  std::shared_ptr<Pool> pool_;
  std::uint64_t checked_ = 0;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/pool.ipp>
#endif
