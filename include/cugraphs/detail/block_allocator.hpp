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
  ~BlockAllocator() {
    for (auto& s : segments_)
      for (Block* b = s.head; b != nullptr;) delete std::exchange(b, b->next);
  }

  // Adds a segment of device memory [base, base + size) as one free, settled block.
  void add_segment(void* base, std::size_t size) {
    auto* b = new Block{reinterpret_cast<std::uintptr_t>(base), size, true, {}, nullptr, nullptr,
                        segments_.size()};
    segments_.push_back({base, size, b, true});
    reserved_ += size;
    free_.insert(b);
  }

  // Best fit among the blocks this request may use; nullptr when none fits. `size` must be
  // a multiple of kBlockAlignment. `open` lists the captures into this pool still open.
  [[nodiscard]] Block* allocate(std::size_t size, BlockTag want,
                                std::span<const std::uint64_t> open) {
    Block probe;
    probe.size = size;
    for (auto it = free_.lower_bound(&probe); it != free_.end(); ++it) {
      Block* b = *it;
      const BlockTag t = settle(b->tag, open);
      if (t.capture != 0 && t != want) continue;
      free_.erase(it);
      if (b->size - size >= kBlockAlignment) split(b, size);
      b->free = false;
      b->tag = want;
      allocated_ += b->size;
      return b;
    }
    return nullptr;
  }

  // Returns a block; it merges with free neighbours whose reuse rules are compatible.
  void free(Block* b, std::span<const std::uint64_t> open) {
    allocated_ -= b->size;
    b->free = true;
    b->tag = settle(b->tag, open);
    b = merge_neighbours(b, open);
    free_.insert(b);
  }

  // After a capture ends, its pending blocks are settled and may merge with neighbours.
  // The free list is rebuilt once, sorted, rather than kept in order block by block.
  void coalesce(std::span<const std::uint64_t> open) {
    free_.clear();
    std::vector<Block*> free_blocks;
    for (auto& s : segments_) {
      if (!s.live) continue;
      for (Block* b = s.head; b != nullptr; b = b->next) {
        if (!b->free) continue;
        b->tag = settle(b->tag, open);
        b = merge_neighbours(b, open);  // a free predecessor absorbs b and stands in its place
        if (free_blocks.empty() || free_blocks.back() != b) free_blocks.push_back(b);
      }
    }
    free_.assign(std::move(free_blocks));
  }

  // Removes every segment that is one settled free block and returns their base
  // addresses for the caller to give back to the device.
  [[nodiscard]] std::vector<void*> take_free_segments(std::span<const std::uint64_t> open) {
    std::vector<void*> out;
    for (auto& s : segments_) {
      Block* b = s.head;
      if (!s.live || !b->free || b->next != nullptr || settle(b->tag, open).capture != 0) continue;
      free_.erase(b);
      delete b;
      s.head = nullptr;
      s.live = false;
      reserved_ -= s.size;
      out.push_back(s.base);
    }
    return out;
  }

  [[nodiscard]] std::vector<void*> segment_bases() const {
    std::vector<void*> out;
    for (const auto& s : segments_)
      if (s.live) out.push_back(s.base);
    return out;
  }

  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }
  [[nodiscard]] std::size_t allocated_bytes() const noexcept { return allocated_; }
  [[nodiscard]] std::size_t free_block_count() const noexcept { return free_.size(); }
  [[nodiscard]] std::size_t segment_count() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(segments_.begin(), segments_.end(), [](const Segment& s) { return s.live; }));
  }

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

  [[nodiscard]] static BlockTag settle(BlockTag t, std::span<const std::uint64_t> open) noexcept {
    if (t.capture != 0 && std::find(open.begin(), open.end(), t.capture) == open.end()) return {};
    return t;
  }

  // Two free neighbours merge when one is settled or both wait on the same capture and stream.
  [[nodiscard]] static bool compatible(BlockTag a, BlockTag b) noexcept {
    return a.capture == 0 || b.capture == 0 || a == b;
  }

  // `b` is free and not in free_; its free neighbours are absorbed. Returns the merged block.
  Block* merge_neighbours(Block* b, std::span<const std::uint64_t> open) {
    if (Block* p = b->prev; p != nullptr && p->free) {
      p->tag = settle(p->tag, open);
      if (compatible(p->tag, b->tag)) {
        free_.erase(p);
        p->size += b->size;
        if (b->tag.capture != 0) p->tag = b->tag;
        unlink(b);
        b = p;
      }
    }
    if (Block* n = b->next; n != nullptr && n->free) {
      n->tag = settle(n->tag, open);
      if (compatible(b->tag, n->tag)) {
        free_.erase(n);
        b->size += n->size;
        if (n->tag.capture != 0) b->tag = n->tag;
        unlink(n);
      }
    }
    return b;
  }

  // Splits `b` (not in free_) so that it keeps `size` bytes; the rest becomes a free block
  // with b's reuse tag, which is the conservative choice.
  void split(Block* b, std::size_t size) {
    auto* rest = new Block{b->addr + size, b->size - size, true, b->tag, b, b->next, b->segment};
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    free_.insert(rest);
  }

  // Removes `b`, whose bytes a neighbour has absorbed, from its segment's list.
  void unlink(Block* b) {
    if (b->prev != nullptr) b->prev->next = b->next;
    if (b->next != nullptr) b->next->prev = b->prev;
    if (segments_[b->segment].head == b) segments_[b->segment].head = b->next;
    delete b;
  }

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
    void assign(std::vector<Block*> blocks) {
      std::sort(blocks.begin(), blocks.end(), BySizeThenAddress{});
      blocks_ = std::move(blocks);
    }

  private:
    std::vector<Block*> blocks_;
  };
  FreeList free_;
  std::size_t reserved_ = 0;
  std::size_t allocated_ = 0;
};

}  // namespace cugraphs::detail
