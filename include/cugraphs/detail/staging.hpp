// Staging by copies, as the seed's Graph::stage_and_launch does it, and the checks of an
// input leaf that every way of staging makes first.
#pragma once

#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

namespace cugraphs::detail {

// The run-time checks of an input leaf before staging (Graph::stage_and_launch and
// GraphedCallable): done for every leaf before anything is enqueued.
// `leaf` names what is staged ("input leaf"; a graphed pair's backward stages "incoming
// gradient leaf"s).
inline void check_input_leaf(std::size_t i, const void* data, std::size_t size, std::size_t static_size,
                             std::string_view op, std::string_view leaf = "input leaf") {
  if (size != static_size)
    throw_misuse(op, "{} {} has {} elements but its static leaf has {}; nothing was staged or launched", leaf, i,
                 size, static_size);
  if (data == nullptr && size != 0) [[unlikely]]
    throw_misuse(op, "{} {} is a null pointer with {} elements; nothing was staged or launched", leaf, i, size);
}

// Copies `bytes` from `from` onto the static leaf at `to` on `stream`, unless the input is
// already there; cudaMemcpyDefault: the input may be device, pinned host or managed memory.
inline void copy_leaf(const void* to, const void* from, std::size_t bytes, cudaStream_t stream, std::string_view op) {
  if (bytes == 0 || from == to) return;
  check(cudaMemcpyAsync(const_cast<void*>(to), from, bytes, cudaMemcpyDefault, stream), "{}: cudaMemcpyAsync", op);
}

}  // namespace cugraphs::detail
