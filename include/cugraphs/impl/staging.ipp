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

CUGRAPHS_INLINE void copy_leaf(const void* to, const void* from, std::size_t bytes, cudaStream_t stream,
    std::string_view op, std::string_view what) {
  if (bytes == 0 || from == to) return;
  check(cudaMemcpyAsync(const_cast<void*>(to), from, bytes, cudaMemcpyDefault, stream), "{}: {}", op, what);
}

}  // namespace cugraphs::detail
