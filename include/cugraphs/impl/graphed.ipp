// The bodies of the functions <cugraphs/graphed.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/graphed.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void check_sample_leaf(std::string_view op, std::size_t i, const void* data, std::size_t size,
    int device) {
  if (size == 0) return;
  if (data == nullptr) throw_misuse(op, "sample leaf {} is a null pointer with {} elements", i, size);
  check_device_readable(data, device, op, detail::format("sample leaf {}", i));
}

}  // namespace cugraphs::detail
