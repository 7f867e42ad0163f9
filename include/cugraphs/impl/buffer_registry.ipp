// The bodies of the functions <cugraphs/detail/buffer_registry.hpp> declares: included at its
// end in header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/buffer_registry.hpp>
#include <cugraphs/config.hpp>

#include <algorithm>

namespace cugraphs::detail {

CUGRAPHS_INLINE BufferRegistry& BufferRegistry::instance() noexcept {
  static BufferRegistry* r = new BufferRegistry;  // outlives every static buffer at exit
  return *r;
}

CUGRAPHS_INLINE void BufferRegistry::add(const void* p, std::size_t bytes) noexcept {
  std::lock_guard lock(m_);
  CUGRAPHS_TRY {
    buffers_.insert_or_assign(reinterpret_cast<std::uintptr_t>(p), Entry{bytes, next_id_++, false});
    live_.store(buffers_.size(), std::memory_order_relaxed);
  } CUGRAPHS_CATCH_ALL {
    // Out of host memory: this buffer goes unwatched.
  }
}

CUGRAPHS_INLINE void BufferRegistry::remove(const void* p) noexcept {
  std::lock_guard lock(m_);
  const auto it = buffers_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == buffers_.end()) return;
  if (it->second.named) named_buffers_freed.fetch_add(1, std::memory_order_relaxed);
  buffers_.erase(it);
  live_.store(buffers_.size(), std::memory_order_relaxed);
}

CUGRAPHS_INLINE void BufferRegistry::name(std::span<const std::uint64_t> words, std::size_t node,
                                          std::vector<NamedBuffer>& out) {
  std::lock_guard lock(m_);
  if (buffers_.empty()) return;
  const std::size_t first = out.size();  // this node's, searched for repeats
  for (const std::uint64_t w : words) {
    if (w == 0) continue;
    // The buffer starting at or before w; w may be its one-past-the-end address only where no
    // buffer starts there.
    auto it = buffers_.upper_bound(static_cast<std::uintptr_t>(w));
    if (it == buffers_.begin()) continue;
    --it;
    if (w - it->first > it->second.bytes) continue;
    const auto same = [&](const NamedBuffer& b) { return b.id == it->second.id && b.node == node; };
    if (std::any_of(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), same)) continue;
    it->second.named = true;
    out.push_back({it->first, it->second.bytes, it->second.id, node});
  }
}

CUGRAPHS_INLINE const NamedBuffer* BufferRegistry::first_gone(std::span<const NamedBuffer> named) const {
  std::lock_guard lock(m_);
  std::uint64_t last = 0;  // entries of one buffer often follow each other
  for (const NamedBuffer& b : named) {
    if (b.id == last) continue;
    const auto it = buffers_.find(b.base);
    if (it == buffers_.end() || it->second.id != b.id) return &b;
    last = b.id;
  }
  return nullptr;
}

}  // namespace cugraphs::detail
