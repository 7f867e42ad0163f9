// Timing helpers shared by the benchmarks: host clocks for host cost, medians of many
// repetitions, and a small JSON writer for the raw figures.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace cugraphs_bench {

using Clock = std::chrono::steady_clock;

inline double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Whether a CUDA device is present; says so for benchmark `name` when not.
inline bool have_device(const char* name) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("%s: no CUDA device; nothing to measure\n", name);
    return false;
  }
  return true;
}

// Where the figures go: the first argument, else NAME.json.
inline std::string json_path(int argc, char** argv, const char* name) {
  return argc > 1 ? std::string(argv[1]) : std::string(name) + ".json";
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

#if defined(__CUDACC__)
// Keeps the stream busy for about `ns` nanoseconds, so that host calls queued behind it
// are timed without waiting for the device.
static __global__ void spin(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
#endif

// Figures in insertion order, written as one flat JSON object.
class Report {
public:
  explicit Report(std::string name) : name_(std::move(name)) {}
  void add(const std::string& key, double value) { rows_.emplace_back(key, value); }
  void write(const std::string& path) const {
    std::string out = fmt::format("{{\n  \"benchmark\": \"{}\"", name_);
    for (const auto& [k, v] : rows_) out += fmt::format(",\n  \"{}\": {}", k, v);
    out += "\n}\n";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      std::fputs(out.c_str(), f);
      std::fclose(f);
      std::printf("figures written to %s\n", path.c_str());
    } else {
      std::printf("could not write %s\n", path.c_str());
    }
  }

private:
  std::string name_;
  std::vector<std::pair<std::string, double>> rows_;
};

}  // namespace cugraphs_bench
