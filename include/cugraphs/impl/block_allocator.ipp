// The bodies of the functions <cugraphs/detail/block_allocator.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/block_allocator.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE BlockAllocator::~BlockAllocator() {
  for (auto& s : segments_)
    for (Block* b = s.head; b != nullptr;) delete std::exchange(b, b->next);
}

CUGRAPHS_INLINE void BlockAllocator::add_segment(void* base, std::size_t size) {
  auto* b = new Block{reinterpret_cast<std::uintptr_t>(base), size, true, {}, nullptr, nullptr,
                      segments_.size()};
  segments_.push_back({base, size, b, true});
  reserved_ += size;
  free_.insert(b);
}

CUGRAPHS_INLINE Block* BlockAllocator::allocate(std::size_t size, BlockTag want, std::span<const std::uint64_t> open) {
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

CUGRAPHS_INLINE void BlockAllocator::free(Block* b, std::span<const std::uint64_t> open) {
  allocated_ -= b->size;
  b->free = true;
  b->tag = settle(b->tag, open);
  b = merge_neighbours(b, open);
  free_.insert(b);
}

CUGRAPHS_INLINE void BlockAllocator::coalesce(std::span<const std::uint64_t> open) {
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

CUGRAPHS_INLINE std::vector<void*> BlockAllocator::take_free_segments(std::span<const std::uint64_t> open) {
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

CUGRAPHS_INLINE std::vector<void*> BlockAllocator::segment_bases() const {
  std::vector<void*> out;
  for (const auto& s : segments_)
    if (s.live) out.push_back(s.base);
  return out;
}

CUGRAPHS_INLINE std::vector<std::pair<std::uintptr_t, std::size_t>> BlockAllocator::segment_ranges() const {
  std::vector<std::pair<std::uintptr_t, std::size_t>> out;
  for (const auto& s : segments_)
    if (s.live) out.emplace_back(reinterpret_cast<std::uintptr_t>(s.base), s.size);
  return out;
}

CUGRAPHS_INLINE std::size_t BlockAllocator::segment_count() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(segments_.begin(), segments_.end(), [](const Segment& s) { return s.live; }));
}

CUGRAPHS_INLINE BlockTag BlockAllocator::settle(BlockTag t, std::span<const std::uint64_t> open) noexcept {
  if (t.capture != 0 && std::find(open.begin(), open.end(), t.capture) == open.end()) return {};
  return t;
}

CUGRAPHS_INLINE Block* BlockAllocator::merge_neighbours(Block* b, std::span<const std::uint64_t> open) {
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

CUGRAPHS_INLINE void BlockAllocator::split(Block* b, std::size_t size) {
  auto* rest = new Block{b->addr + size, b->size - size, true, b->tag, b, b->next, b->segment};
  if (b->next != nullptr) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  free_.insert(rest);
}

CUGRAPHS_INLINE void BlockAllocator::unlink(Block* b) {
  if (b->prev != nullptr) b->prev->next = b->next;
  if (b->next != nullptr) b->next->prev = b->prev;
  if (segments_[b->segment].head == b) segments_[b->segment].head = b->next;
  delete b;
}

CUGRAPHS_INLINE void BlockAllocator::FreeList::assign(std::vector<Block*> blocks) {
  std::sort(blocks.begin(), blocks.end(), BySizeThenAddress{});
  blocks_ = std::move(blocks);
}

}  // namespace cugraphs::detail
