// Device memory: graph-private pools (PoolHandle, graph_pool_handle) and owning buffers
// (DeviceBuffer, allocate), which draw from the pool of a capture open on their thread.
// DeviceSpan, the non-owning view, is span.hpp's.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/span.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cugraphs {

namespace detail {
class Pool;
struct Block;

// A DeviceBuffer's memory: a block of the pool of the capture open on this thread (`pool`
// and `block` set), else stream-ordered (cudaMallocAsync on `stream`). Not templates, so
// that the pool and the capture session stay out of the headers (memory.ipp).
struct BufferMemory {
  void* data = nullptr;
  std::shared_ptr<Pool> pool;
  Block* block = nullptr;
};
[[nodiscard]] BufferMemory allocate_buffer(std::size_t bytes, cudaStream_t stream);
// Gives the memory back: to its pool, or cudaFreeAsync on `stream` (deferred while `stream`
// is capturing). Reports failures (a destructor's path), never throws.
void release_buffer(void* data, cudaStream_t stream, Pool* pool, Block* block) noexcept;
// Checked pools (PoolOptions::checked): memory written whole holds fresh data again; a read
// of memory a later out-of-order replay overwrote is refused.
void note_buffer_written(Pool& pool, const void* p, std::size_t bytes) noexcept;
void check_buffer_read(const Pool& pool, const void* p, std::size_t bytes, std::string_view op);
}  // namespace detail

/// Shared ownership of a graph-private memory pool on one device. Copies are cheap and
/// refer to the same pool. The pool's memory returns to the device only when every handle,
/// every graph captured into it and every buffer allocated from it is gone.
class PoolHandle {
public:
  /// A unique id, never 0.
  [[nodiscard]] std::uint64_t id() const noexcept;
  [[nodiscard]] int device() const noexcept;
  /// Device memory the pool holds (its segments), in bytes.
  [[nodiscard]] std::size_t reserved_bytes() const;
  /// Bytes of the pool's blocks currently handed out (sizes rounded up to 512 bytes).
  [[nodiscard]] std::size_t allocated_bytes() const;
  /// Returns fully free segments to the device while no graph refers to the pool (graphs
  /// may still touch freed blocks on replay). Returns the bytes released.
  std::size_t trim();
  /// Whether the pool checks the replays of the graphs sharing it (PoolOptions::checked).
  [[nodiscard]] bool checked() const noexcept;

  friend bool operator==(const PoolHandle& a, const PoolHandle& b) noexcept {
    return a.pool_ == b.pool_;
  }

  /// The pool itself, for cugraphs internals.
  [[nodiscard]] const std::shared_ptr<detail::Pool>& impl() const noexcept { return pool_; }
  explicit PoolHandle(std::shared_ptr<detail::Pool> pool) noexcept : pool_(std::move(pool)) {}
  /// Moving a handle copies it: a moved-from handle still refers to its pool, never to none.
  PoolHandle(const PoolHandle&) noexcept = default;
  PoolHandle& operator=(const PoolHandle&) noexcept = default;

private:
  std::shared_ptr<detail::Pool> pool_;
};

/// How a shared pool behaves.
struct PoolOptions {
  /// Checked mode, for debugging: a replay that would run concurrently with another graph
  /// of the pool whose memory it shares is refused with an Error, and outputs that a later
  /// out-of-order replay overwrote are refused when read through cugraphs (host copies,
  /// graphed-callable inputs). Costs a lock and an event per replay. Default: off, on when
  /// the library is compiled with CUGRAPHS_CHECKED=1.
  bool checked = CUGRAPHS_CHECKED != 0;
};

/// A new graph-private pool on `device`, for graphs that should share memory.
[[nodiscard]] PoolHandle graph_pool_handle(int device, const PoolOptions& opts = {});

/// A new graph-private pool on the current device.
[[nodiscard]] inline PoolHandle graph_pool_handle(const PoolOptions& opts = {}) {
  return graph_pool_handle(detail::current_device(), opts);
}

/// An owning, move-only array of `count` T in device memory. Made while a capture is open
/// on this thread, it draws from the capture's pool (its address is baked into the graph
/// and stays valid after the graph is reset); otherwise it uses stream-ordered allocation
/// (cudaMallocAsync) on the given stream. Freeing returns pool memory to its pool, where
/// later captures into the pool reuse it.
template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "DeviceBuffer<T> needs a trivially copyable T: its bytes are copied as is");

public:
  DeviceBuffer() noexcept = default;

  /// `count` elements on the current stream (or from the open capture's pool).
  explicit DeviceBuffer(std::size_t count) : DeviceBuffer(count, current_stream()) {}

  DeviceBuffer(std::size_t count, cudaStream_t stream) : size_(count), stream_(stream) {
    if (count == 0) return;
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T))
      detail::throw_misuse("DeviceBuffer", "{} elements of {} bytes overflow the size of the address "
                                           "space (std::size_t); nothing was allocated",
                           count, sizeof(T));
    detail::BufferMemory m = detail::allocate_buffer(bytes(), stream);
    data_ = static_cast<T*>(m.data);
    pool_ = std::move(m.pool);
    block_ = m.block;
  }

  ~DeviceBuffer() { release(); }

  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
        stream_(o.stream_), pool_(std::move(o.pool_)), block_(std::exchange(o.block_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
      pool_ = std::move(o.pool_);
      block_ = std::exchange(o.block_, nullptr);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] DeviceSpan<T> span() const noexcept { return {data_, size_}; }
  operator DeviceSpan<T>() const noexcept { return span(); }              // NOLINT
  operator DeviceSpan<const T>() const noexcept { return {data_, size_}; }  // NOLINT
  /// The pool this buffer came from, if it was made during a capture.
  [[nodiscard]] std::optional<PoolHandle> pool() const {
    return pool_ ? std::optional<PoolHandle>(PoolHandle(pool_)) : std::nullopt;
  }

  /// Copies `host` (exactly size() elements) in and waits for the copy.
  void copy_from_host(std::span<const T> host, cudaStream_t stream = current_stream()) {
    check_host_copy(host.size(), stream, "DeviceBuffer::copy_from_host");
    detail::check(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream),
                  "DeviceBuffer::copy_from_host: cudaMemcpyAsync");
    detail::check(cudaStreamSynchronize(stream), "DeviceBuffer::copy_from_host: cudaStreamSynchronize");
    if (pool_) detail::note_buffer_written(*pool_, data_, bytes());
  }

  /// Copies the buffer out to `host` (exactly size() elements) and waits for the copy.
  void copy_to_host(std::span<T> host, cudaStream_t stream = current_stream()) const {
    check_host_copy(host.size(), stream, "DeviceBuffer::copy_to_host");
    if (pool_) detail::check_buffer_read(*pool_, data_, bytes(), "DeviceBuffer::copy_to_host");
    detail::check(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream),
                  "DeviceBuffer::copy_to_host: cudaMemcpyAsync");
    detail::check(cudaStreamSynchronize(stream), "DeviceBuffer::copy_to_host: cudaStreamSynchronize");
  }

  /// The buffer's contents as a host vector (waits for the copy).
  [[nodiscard]] std::vector<T> to_host(cudaStream_t stream = current_stream()) const {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no contiguous storage
      auto staging = std::make_unique<bool[]>(size_);
      copy_to_host(std::span<bool>(staging.get(), size_), stream);
      return std::vector<bool>(staging.get(), staging.get() + size_);
    } else {
      std::vector<T> out(size_);
      copy_to_host(out, stream);
      return out;
    }
  }

private:
  void check_host_copy(std::size_t host_count, cudaStream_t stream, std::string_view op) const {
    if (host_count != size_)
      detail::throw_misuse(op, "the host range has {} elements but the buffer has {}{}", host_count, size_,
                           size_ == 0 ? " (it is empty: default-constructed, of size 0, or moved from)" : "");
    if (stream != nullptr && stream != cudaStreamLegacy && is_capturing(stream))
      detail::throw_misuse(op, "the stream is capturing; a copy that waits for the host cannot "
                               "be captured (copy before capture_begin, or after capture_end)");
  }

  void release() noexcept {
    if (data_ == nullptr) return;
    detail::release_buffer(data_, stream_, pool_.get(), block_);
    data_ = nullptr;
    size_ = 0;
    block_ = nullptr;
    pool_.reset();
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<detail::Pool> pool_;  // set when the memory came from a graph pool
  detail::Block* block_ = nullptr;
};

/// `count` elements of T: from the open capture's pool, or stream-ordered on `stream`.
template <class T = std::byte>
[[nodiscard]] DeviceBuffer<T> allocate(std::size_t count, cudaStream_t stream = current_stream()) {
  return DeviceBuffer<T>(count, stream);
}

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/memory.ipp>
#endif
