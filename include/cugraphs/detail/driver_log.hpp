// What the driver logged while a capture was open (CUDA 12.9+): quoted in the Error of a
// capture that fails, so that the user reads the driver's own reason too.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/format.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <string_view>

namespace cugraphs::detail {

// Where the driver's log stood when a capture began, so that a failure can quote what the
// driver logged since (CUDA 12.9+: cudaLogsCurrent / cudaLogsDumpToMemory).
struct DriverLog {
#if CUGRAPHS_CTK_AT_LEAST(12, 9)
  cudaLogIterator start{};
  bool valid = false;
  void mark() noexcept;
  // What the driver logged since mark(), as " The driver said: ..." or nothing.
  [[nodiscard]] std::string since();
#else
  void mark() noexcept {}
  [[nodiscard]] std::string since() { return {}; }
#endif
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/driver_log.ipp>
#endif
