// Test support: the right Catch2 header (v2 on Debian, v3 elsewhere) and small helpers.
#pragma once

#if defined(CUGRAPHS_CATCH2_V3)
#  include <catch2/catch_test_macros.hpp>
#  include <catch2/matchers/catch_matchers_string.hpp>
// nvcc 13.0's front ends (cudafe++ and cicc) never finish some test files when they emulate
// g++ 13 (Ubuntu 24.04's) and Catch2 v3 wraps every TEST_CASE and assertion in
// `#pragma nv_diagnostic push` / `nv_diag_suppress 177` / `pop`: they spin at the end of the
// translation unit. Without those pragmas each file compiles in seconds, and nvcc gives no
// warning they would have silenced. Reproducer and workaround: tools/diagnostics/README.md.
#  if defined(__CUDACC__) && !defined(CUGRAPHS_KEEP_CATCH2_NV_PRAGMAS)
#    undef CATCH_INTERNAL_START_WARNINGS_SUPPRESSION
#    undef CATCH_INTERNAL_STOP_WARNINGS_SUPPRESSION
#    undef CATCH_INTERNAL_SUPPRESS_GLOBALS_WARNINGS
#    undef CATCH_INTERNAL_SUPPRESS_UNUSED_VARIABLE_WARNINGS
#    undef CATCH_INTERNAL_SUPPRESS_PARENTHESES_WARNINGS
#    define CATCH_INTERNAL_START_WARNINGS_SUPPRESSION
#    define CATCH_INTERNAL_STOP_WARNINGS_SUPPRESSION
#    define CATCH_INTERNAL_SUPPRESS_GLOBALS_WARNINGS
#    define CATCH_INTERNAL_SUPPRESS_UNUSED_VARIABLE_WARNINGS
#    define CATCH_INTERNAL_SUPPRESS_PARENTHESES_WARNINGS
#  endif
#else
#  include <catch2/catch.hpp>
#endif

#include <cugraphs/error.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs_test {

// Runs `fn`, requires it to throw cugraphs::Error, and returns the error for inspection.
template <class F>
cugraphs::Error expect_error(F&& fn) {
  try {
    fn();
  } catch (const cugraphs::Error& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("expected cugraphs::Error, got another exception: " << e.what());
  }
  FAIL("expected cugraphs::Error, nothing was thrown");
  return cugraphs::Error("unreachable");
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The parts that `text` lacks (none: it says them all), for one CHECK that prints what is missing.
inline std::vector<std::string> missing(const std::string& text, std::initializer_list<std::string_view> parts) {
  std::vector<std::string> out;
  for (const std::string_view part : parts)
    if (text.find(part) == std::string::npos) out.emplace_back(part);
  return out;
}

// The no-access mapping of this process (a "---p" line of /proc/self/maps: a reservation,
// such as CUDA keeps its device addresses in) that holds `p`, as {start, end}; {0, 0} where
// none does or the map cannot be read. The tests' own reading, beside the library's.
inline std::pair<std::uintptr_t, std::uintptr_t> no_access_mapping(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::string access;
    if ((in >> std::hex >> lo >> dash >> hi >> access) && dash == '-' && lo <= at && at < hi)
      return access.starts_with("---") ? std::pair{lo, hi} : std::pair<std::uintptr_t, std::uintptr_t>{0, 0};
  }
  return {0, 0};
}

// CUGRAPHS_STRESS_SCALE (default 1): how much of their repetitions the long tests run;
// the sanitizer runs of tools/gpu-check set 0.01. Call it on the test's own thread.
inline double stress_scale() {
  const char* text = std::getenv("CUGRAPHS_STRESS_SCALE");
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double scale = std::strtod(text, &end);
  if (end == text || !(scale > 0.0) || !std::isfinite(scale))
    FAIL("CUGRAPHS_STRESS_SCALE must be a positive number, it is '" << text << "'");
  return scale;
}

// `n` scaled by CUGRAPHS_STRESS_SCALE, at least 1.
inline std::size_t scaled(std::size_t n) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(static_cast<double>(n) * stress_scale())));
}

// Seconds of the steady clock since `t0`.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The device's free memory, once its work has finished (stream-ordered frees release
// memory only when they run).
inline std::size_t device_free_bytes() {
  cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::size_t free_b = 0, total = 0;
  cugraphs::check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo");
  return free_b;
}

// Non-trivial random floats in [-2, 2), never all equal, from a fixed seed.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace cugraphs_test
