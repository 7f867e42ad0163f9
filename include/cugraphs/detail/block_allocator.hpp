// Block bookkeeping of a graph-private pool: best-fit carving of segments into blocks,
// splitting and coalescing, and the rule for when a freed block may be handed out again.
// Pure host logic with no CUDA calls, so it is tested on machines without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace cugraphs::detail {

inline constexpr std::size_t kBlockAlignment = 512;         // every block size is a multiple
inline constexpr std::size_t kSegmentGranularity = 2 << 20;  // segments are multiples of 2 MiB

[[nodiscard]] constexpr std::size_t round_up(std::size_t n, std::size_t to) noexcept {
  return (n + to - 1) / to * to;
}

// Where a block was last handed out: which capture and which stream. While that capture is
// open, the freed block may be reused only by the same capture on the same stream (stream
// order makes that safe inside the graph); once the capture has ended the block is
// "settled" and any later capture into the pool may reuse it, since graphs sharing a pool
// are replayed in capture order.
struct BlockTag {
  std::uint64_t capture = 0;  // 0: never handed out inside a capture
  cudaStream_t stream = nullptr;
  friend bool operator==(const BlockTag&, const BlockTag&) = default;
};

struct Block {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  bool free = true;
  BlockTag tag;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  std::size_t segment = 0;
  std::uint64_t serial = 0;  // set by the pool for each allocation (checked mode)
};

class BlockAllocator {
public:
  BlockAllocator() = default;
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;
  ~BlockAllocator();

  // Adds a segment of device memory [base, base + size) as one free, settled block.
  void add_segment(void* base, std::size_t size);

  // Best fit among the blocks this request may use; nullptr when none fits. `size` must be
  // a multiple of kBlockAlignment. `open` lists the captures into this pool still open.
  [[nodiscard]] Block* allocate(std::size_t size, BlockTag want,
                                std::span<const std::uint64_t> open);

  // Returns a block; it merges with free neighbours whose reuse rules are compatible.
  void free(Block* b, std::span<const std::uint64_t> open);

  // After a capture ends, its pending blocks are settled and may merge with neighbours.
  // The free list is rebuilt once, sorted, rather than kept in order block by block.
  void coalesce(std::span<const std::uint64_t> open);

  // Removes every segment that is one settled free block and returns their base
  // addresses for the caller to give back to the device.
  [[nodiscard]] std::vector<void*> take_free_segments(std::span<const std::uint64_t> open);

  [[nodiscard]] std::vector<void*> segment_bases() const;
  // The live segments' (address, bytes).
  [[nodiscard]] std::vector<std::pair<std::uintptr_t, std::size_t>> segment_ranges() const;

  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }
  [[nodiscard]] std::size_t allocated_bytes() const noexcept { return allocated_; }
  [[nodiscard]] std::size_t free_block_count() const noexcept { return free_.size(); }
  [[nodiscard]] std::size_t segment_count() const noexcept;

private:
  struct Segment {
    void* base;
    std::size_t size;
    Block* head;
    bool live;
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const noexcept {
      return a->size != b->size ? a->size < b->size : a->addr < b->addr;
    }
  };

  [[nodiscard]] static BlockTag settle(BlockTag t, std::span<const std::uint64_t> open) noexcept;

  // Two free neighbours merge when one is settled or both wait on the same capture and stream.
  [[nodiscard]] static bool compatible(BlockTag a, BlockTag b) noexcept {
    return a.capture == 0 || b.capture == 0 || a == b;
  }

  // `b` is free and not in free_; its free neighbours are absorbed. Returns the merged block.
  Block* merge_neighbours(Block* b, std::span<const std::uint64_t> open);

  // Splits `b` (not in free_) so that it keeps `size` bytes; the rest becomes a free block
  // with b's reuse tag, which is the conservative choice.
  void split(Block* b, std::size_t size);

  // Removes `b`, whose bytes a neighbour has absorbed, from its segment's list.
  void unlink(Block* b);

  std::vector<Segment> segments_;
  // The free blocks in best-fit order, as a sorted vector: a pool has at most a few
  // thousand, and <set> would cost every translation unit that includes cugraphs its
  // compile time.
  class FreeList {
  public:
    using iterator = std::vector<Block*>::iterator;
    [[nodiscard]] iterator lower_bound(const Block* probe) {
      return std::lower_bound(blocks_.begin(), blocks_.end(), probe, BySizeThenAddress{});
    }
    [[nodiscard]] iterator end() noexcept { return blocks_.end(); }
    void insert(Block* b) { blocks_.insert(lower_bound(b), b); }
    void erase(iterator it) { blocks_.erase(it); }
    void erase(const Block* b) {
      if (const auto it = lower_bound(b); it != blocks_.end() && *it == b) blocks_.erase(it);
    }
    [[nodiscard]] std::size_t size() const noexcept { return blocks_.size(); }
    void clear() noexcept { blocks_.clear(); }
    void assign(std::vector<Block*> blocks);

  private:
    std::vector<Block*> blocks_;
  };
  FreeList free_;
  std::size_t reserved_ = 0;
  std::size_t allocated_ = 0;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/block_allocator.ipp>
#endif
