// The DeviceBuffers alive now that were allocated outside any capture, so that a graph can
// tell at replay that a buffer its capture named has been freed since: a replay would read
// and write whatever the allocator has put at that address after (often the buffer that
// replaced it, by chance). Weights reloaded from a checkpoint into new buffers, a matrix
// reallocated at a new size: replays would go on with the old addresses, silently.
//
// A graph names a buffer when one of its nodes (at any depth) holds an address from the
// buffer's first byte to one past its last: an 8-byte word of a kernel's arguments (the
// runtime's reading, else the driver's), or a copy's or memset's own pointers. It keeps the
// buffers' ids; a replay compares one counter (bumped whenever a named buffer is freed) and,
// only when it moved, asks whether its own are all alive.
#pragma once

#include <cugraphs/config.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

namespace cugraphs::detail {

// Bumped each time a buffer some graph named is freed.
inline std::atomic<std::uint64_t> named_buffers_freed{0};

// A live buffer a graph's capture named.
struct NamedBuffer {
  static constexpr std::size_t kNested = static_cast<std::size_t>(-1);
  std::uintptr_t base;
  std::size_t bytes;
  std::uint64_t id;  // which allocation: ids are never reused
  std::size_t node;  // the top-level node that names it (its index), or kNested (a child graph, a body)
};

class BufferRegistry {
public:
  static BufferRegistry& instance() noexcept;

  // A buffer allocated outside any capture; a failure to note it (no memory) leaves it unwatched.
  void add(const void* p, std::size_t bytes) noexcept;
  // Its memory goes back (nothing for a pointer never added).
  void remove(const void* p) noexcept;
  // Whether no buffer is alive: then no graph can name one, and nothing is looked up.
  [[nodiscard]] bool empty() const noexcept { return live_.load(std::memory_order_relaxed) == 0; }

  // Appends to `out` the live buffer each word of `words` points into (or one past), named
  // by `node`; a buffer is added once a call.
  void name(std::span<const std::uint64_t> words, std::size_t node, std::vector<NamedBuffer>& out);
  // The first of `named` that is no longer alive (not the same allocation), or null.
  [[nodiscard]] const NamedBuffer* first_gone(std::span<const NamedBuffer> named) const;

private:
  struct Entry {
    std::size_t bytes;
    std::uint64_t id;
    bool named;  // some graph named it: its free bumps named_buffers_freed
  };
  mutable std::mutex m_;
  std::map<std::uintptr_t, Entry> buffers_;
  std::atomic<std::size_t> live_{0};
  std::uint64_t next_id_ = 1;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/buffer_registry.ipp>
#endif
