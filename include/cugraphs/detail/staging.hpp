// Staging by copies, as the seed's Graph::stage_and_launch does it, and the checks of an
// input leaf that every way of staging makes first.
#pragma once

#include <cugraphs/error.hpp>
#include <cugraphs/flatten.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cugraphs::detail {

// The run-time checks of an input leaf before staging (Graph::stage_and_launch and
// GraphedCallable): done for every leaf before anything is enqueued.
// `leaf` names what is staged ("input leaf"; a graphed pair's backward stages "incoming
// gradient leaf"s).
void check_input_leaf(std::size_t i, const void* data, std::size_t size, std::size_t static_size,
                             std::string_view op, std::string_view leaf = "input leaf");

// InputMode::InPlace: refuses a call whose writable input leaf i (a DeviceSpan of non-const
// elements, at `data`) is not aligned to 256 bytes as its static input is. The call would copy
// it in, and f's writes to it would reach only that copy, never the caller's buffer.
[[noreturn]] void refuse_unaligned_writable(std::size_t i, const void* data, std::string_view op,
                                            std::string_view leaf);

// Copy mode: refuses a call whose input leaf i (its address in `slot[i]`, 0: not copied) lies
// in a static input j that the same call overwrites (slot[j] != 0; j may be i, shifted): one
// staging copy moves every leaf at once, so leaf i would read a mix of old and new values
// (outputs that are views of the static inputs fed back crosswise). `statics` and `bytes`
// describe the static inputs, `order` lists them by address, `hull` spans them all (most
// calls stop at it; the others search `order`).
void check_staged_overlap(std::span<const unsigned long long> slot, std::span<const void* const> statics,
                          std::span<const std::size_t> bytes, std::span<const unsigned> order,
                          std::pair<std::uintptr_t, std::uintptr_t> hull, std::string_view op,
                          std::string_view leaf);

// Copies `bytes` from `from` onto the static leaf at `to` on `stream`, unless the input is
// already there; cudaMemcpyDefault: the input may be device, pinned host or managed memory.
// `what` names the copy in an error.
void copy_leaf(const void* to, const void* from, std::size_t bytes, cudaStream_t stream, std::string_view op,
                      std::string_view what = "cudaMemcpyAsync");

// The seed's staging by copies: every leaf of `inputs` onto the matching leaf of `statics`
// (the element types checked at compile time, every size before anything is enqueued, and
// `precheck` first), one cudaMemcpyAsync per leaf not already in place.
template <class Statics, class Inputs, class Precheck>
void stage_copies(const Statics& statics, const Inputs& inputs, cudaStream_t stream, std::string_view op,
                  Precheck&& precheck) {
  static_assert(leaf_count_v<Statics> == leaf_count_v<Inputs>,
                "cugraphs: stage_and_launch needs as many input leaves as static leaves");
  const auto to = flatten(statics);
  const auto from = flatten(inputs);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    static_assert((std::is_same_v<typename std::tuple_element_t<I, decltype(to)>::value_type,
                                  typename std::tuple_element_t<I, decltype(from)>::value_type> && ...),
                  "cugraphs: stage_and_launch: every input leaf must have its static leaf's element type");
    precheck();
    (check_input_leaf(I, std::get<I>(from).data(), std::get<I>(from).size(), std::get<I>(to).size(), op), ...);
    (copy_leaf(std::get<I>(to).data(), std::get<I>(from).data(), std::get<I>(from).size_bytes(), stream, op), ...);
  }(std::make_index_sequence<leaf_count_v<Statics>>{});
}

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/staging.ipp>
#endif
