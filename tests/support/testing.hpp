// Test support: the right Catch2 header (v2 on Debian, v3 elsewhere) and small helpers.
#pragma once

#if defined(CUGRAPHS_CATCH2_V3)
#  include <catch2/catch_test_macros.hpp>
#  include <catch2/matchers/catch_matchers_string.hpp>
#else
#  include <catch2/catch.hpp>
#endif

#include <cugraphs/error.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
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

// Non-trivial random floats in [-2, 2), never all equal, from a fixed seed.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace cugraphs_test
