// The bodies of the functions <cugraphs/detail/staging.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/staging.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void check_input_leaf(std::size_t i, const void* data, std::size_t size, std::size_t static_size,
    std::string_view op, std::string_view leaf) {
  if (size != static_size)
    throw_misuse(op, "{} {} has {} elements but its static leaf has {}; nothing was staged or launched", leaf, i,
                 size, static_size);
  if (data == nullptr && size != 0) [[unlikely]]
    throw_misuse(op, "{} {} is a null pointer with {} elements; nothing was staged or launched", leaf, i, size);
}

CUGRAPHS_INLINE void refuse_unaligned_writable(std::size_t i, const void* data, std::string_view op,
    std::string_view leaf) {
  throw_misuse(op, "{} {} (at {}) is writable (a DeviceSpan of non-const elements) but not aligned to 256 bytes as "
                   "its static input is, so a call made with InputMode::InPlace copies it in, and f's writes to it "
                   "would reach only that copy, never this buffer; nothing was staged or launched. If f only reads "
                   "it, make that argument a DeviceSpan<const T>; if f writes it, pass it aligned to 256 bytes, or "
                   "make the callable with InputMode::Copy and return what f computes",
               leaf, i, data);
}

CUGRAPHS_INLINE void check_staged_overlap(std::span<const unsigned long long> slot,
    std::span<const void* const> statics, std::span<const std::size_t> bytes, std::span<const unsigned> order,
    std::pair<std::uintptr_t, std::uintptr_t> hull, std::string_view op, std::string_view leaf) {
  const auto start = [&](unsigned j) { return reinterpret_cast<std::uintptr_t>(statics[j]); };
  for (std::size_t i = 0; i < slot.size(); ++i) {
    const std::uintptr_t a = slot[i];
    if (a == 0 || a >= hull.second || a + bytes[i] <= hull.first) [[likely]]
      continue;
    // The static inputs by address: the last that starts at or before `a`, then those after
    // it that start before the input ends.
    auto it = std::ranges::upper_bound(order, a, {}, start);
    if (it != order.begin()) --it;
    for (; it != order.end() && start(*it) < a + bytes[i]; ++it) {
      const unsigned j = *it;
      if (slot[j] == 0 || a >= start(j) + bytes[j]) continue;  // not overwritten, or before it
      throw_misuse(op, "{} {} lies in static input {}, which this call also overwrites with {} {}: the staging "
                       "copy moves every leaf at once, so it would read a mix of old and new values (a call's "
                       "outputs that are views of its static inputs, fed back crosswise or shifted). Copy that "
                       "input into a buffer of your own first; nothing was staged or launched",
                   leaf, i, j, leaf, j);
    }
  }
}

CUGRAPHS_INLINE void copy_leaf(const void* to, const void* from, std::size_t bytes, cudaStream_t stream,
    std::string_view op, std::string_view what) {
  if (bytes == 0 || from == to) return;
  check(cudaMemcpyAsync(const_cast<void*>(to), from, bytes, cudaMemcpyDefault, stream), "{}: {}", op, what);
}

}  // namespace cugraphs::detail
