// Rank-uniform capture: the captures of a GraphSet must issue the same collectives in the
// same order on every device, or replaying them would pair one device's all-reduce with
// another's broadcast (or wait for ever). Each capture keeps a log, one line per collective
// (cugraphs/nccl.hpp writes it); this compares the logs.
#pragma once

#include <cugraphs/detail/format.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cugraphs::detail {

// What differs between the devices' logs, or nothing when every log equals the first.
[[nodiscard]] inline std::optional<std::string> collective_mismatch(std::span<const std::vector<std::string>> logs,
                                                                    std::span<const int> devices) {
  for (std::size_t r = 1; r < logs.size(); ++r) {
    const auto& a = logs[0];
    const auto& b = logs[r];
    const std::size_t common = std::min(a.size(), b.size());
    for (std::size_t k = 0; k < common; ++k)
      if (a[k] != b[k])
        return format("collective {} differs: device {} captured {}, device {} captured {}", k, devices[0], a[k],
                      devices[r], b[k]);
    if (a.size() != b.size()) {
      const bool first_longer = a.size() > b.size();
      return format("device {} captured {} collective{} and device {} captured {}; the first without a partner "
                    "is {} on device {}",
                    devices[0], a.size(), a.size() == 1 ? "" : "s", devices[r], b.size(),
                    first_longer ? a[common] : b[common], first_longer ? devices[0] : devices[r]);
    }
  }
  return std::nullopt;
}

}  // namespace cugraphs::detail
