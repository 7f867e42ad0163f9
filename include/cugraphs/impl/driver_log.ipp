// The bodies of the functions <cugraphs/detail/driver_log.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/driver_log.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

#if CUGRAPHS_CTK_AT_LEAST(12, 9)
CUGRAPHS_INLINE void DriverLog::mark() noexcept {
  valid = cudaLogsCurrent(&start, 0) == cudaSuccess;
  if (!valid) (void)cudaGetLastError();  // an older driver: no log to quote
}

CUGRAPHS_INLINE std::string DriverLog::since() {
  if (!valid) return {};
  char text[4096] = {};
  std::size_t size = sizeof(text) - 1;
  if (cudaLogsDumpToMemory(&start, text, &size, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  // Lines read "[time][thread][CUDA][E] text": keep the texts, joined by "; ".
  const std::string_view all(text, std::min(size, sizeof(text) - 1));
  std::string said;
  for (std::size_t at = 0; at < all.size();) {
    std::size_t end = all.find('\n', at);
    if (end == std::string_view::npos) end = all.size();
    std::string_view line = all.substr(at, end - at);
    at = end + 1;
    while (line.size() > 1 && line.front() == '[') {
      const std::size_t close = line.find(']');
      if (close == std::string_view::npos) break;
      line.remove_prefix(close + 1);
    }
    while (!line.empty() && (line.front() == ' ' || line.back() == '\0' || line.back() == ' ' || line.back() == '\r')) {
      if (line.front() == ' ') line.remove_prefix(1);
      else line.remove_suffix(1);
    }
    if (line.empty()) continue;
    if (!said.empty()) said += "; ";
    said += line;
  }
  return said.empty() ? std::string{} : format(" The driver said: \"{}\".", said);
}
#endif

}  // namespace cugraphs::detail
