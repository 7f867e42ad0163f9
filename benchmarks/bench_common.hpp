// Timing helpers of the benchmark suite: host clocks, medians, a host-cost timer that keeps
// the device busy, goals, and a small JSON writer for the raw figures.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
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
    (void)cudaGetLastError();
    std::printf("%s: no CUDA device; nothing to measure\n", name);
    return false;
  }
  return true;
}

// Whether the program's first argument names the JSON file (it ends in ".json"); anything
// else there is not taken for a path (`bench_suite rng` runs the rng section, into the
// default file, rather than writing a file named "rng").
inline bool json_given(int argc, char** argv) {
  return argc > 1 && std::string_view(argv[1]).ends_with(".json");
}
// Where the figures go: the first argument when it names the JSON file, else NAME.json.
inline std::string json_path(int argc, char** argv, const char* name) {
  return json_given(argc, argv) ? std::string(argv[1]) : std::string(name) + ".json";
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Repetition counts scaled by CUGRAPHS_BENCH_SCALE (default 1; 0.2 for a quick look), never
// below `floor`: medians need a few samples even in a quick run.
inline int reps(int n, int floor = 3) {
  static const double scale = [] {
    const char* s = std::getenv("CUGRAPHS_BENCH_SCALE");
    const double v = s != nullptr ? std::atof(s) : 1.0;
    return v > 0 ? v : 1.0;
  }();
  return std::max(floor, static_cast<int>(std::lround(n * scale)));
}

// A JSON value: null, number, string, array or object (keys kept in insertion order).
// Non-finite numbers are written as null, which JSON readers accept.
class Json {
public:
  Json() = default;
  Json(double v) : kind_(Kind::Number), number_(v) {}                      // NOLINT
  Json(int v) : Json(static_cast<double>(v)) {}                            // NOLINT
  Json(std::size_t v) : Json(static_cast<double>(v)) {}                    // NOLINT
  Json(std::string v) : kind_(Kind::String), text_(std::move(v)) {}        // NOLINT
  Json(const char* v) : Json(std::string(v)) {}                            // NOLINT
  Json(const std::vector<double>& v) : kind_(Kind::Array) {                // NOLINT
    for (const double x : v) items_.emplace_back(x);
  }

  static Json array() {
    Json j;
    j.kind_ = Kind::Array;
    return j;
  }
  static Json object() {
    Json j;
    j.kind_ = Kind::Object;
    return j;
  }

  // Object member `key`, created (as null) when absent; a null value becomes an object.
  Json& operator[](const std::string& key) {
    if (kind_ == Kind::Null) kind_ = Kind::Object;
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] == key) return items_[i];
    keys_.push_back(key);
    items_.emplace_back();
    return items_.back();
  }
  // Appends to an array; a null value becomes an array.
  Json& push(Json v) {
    if (kind_ == Kind::Null) kind_ = Kind::Array;
    items_.push_back(std::move(v));
    return items_.back();
  }

  [[nodiscard]] std::string dump(int indent = 0) const {
    const std::string pad(static_cast<std::size_t>(indent) + 2, ' '), end_pad(static_cast<std::size_t>(indent), ' ');
    switch (kind_) {
      case Kind::Null: return "null";
      case Kind::Number: return std::isfinite(number_) ? fmt::format("{}", number_) : "null";
      case Kind::String: return quote(text_);
      case Kind::Array: {
        // Arrays of numbers stay on one line: curves read better that way.
        const bool flat = std::all_of(items_.begin(), items_.end(), [](const Json& j) { return j.kind_ != Kind::Object && j.kind_ != Kind::Array; });
        std::string out = "[";
        for (std::size_t i = 0; i < items_.size(); ++i) {
          out += i ? (flat ? ", " : ",\n" + pad) : (flat ? "" : "\n" + pad);
          out += items_[i].dump(indent + 2);
        }
        return out + (flat || items_.empty() ? "]" : "\n" + end_pad + "]");
      }
      case Kind::Object: {
        std::string out = "{";
        for (std::size_t i = 0; i < items_.size(); ++i)
          out += (i ? ",\n" : "\n") + pad + quote(keys_[i]) + ": " + items_[i].dump(indent + 2);
        return out + (items_.empty() ? "}" : "\n" + end_pad + "}");
      }
    }
    return "null";
  }

private:
  enum class Kind { Null, Number, String, Array, Object };
  static std::string quote(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

  Kind kind_ = Kind::Null;
  double number_ = 0.0;
  std::string text_;
  std::vector<std::string> keys_;  // objects only, parallel to items_
  std::vector<Json> items_;
};

// The figure a goal is on: `id` names it alike at every size the goal is checked at (the
// key tools/plot-perf finds the goal by), `at` is that size, where the section sweeps one
// (`at_key` names the sweep: "nodes", "inputs", "graphs", "grid").
struct GoalOn {
  std::string section, id, what;
  std::string at_key = {};
  long long at = 0;
};

// A goal of the issue: `value` compared with `target` by `op` ("<=" or ">="). A goal on a
// ratio to PyTorch's figures has no value here: tools/plot-perf judges it as
// bench_suite_torch.py's `torch_key` over this suite's `suite_key`, both in `on.section`.
struct Goal {
  GoalOn on;
  double value;
  std::string op;
  double target;
  std::string torch_key = {}, suite_key = {};
  [[nodiscard]] bool judged_here() const { return torch_key.empty(); }
  [[nodiscard]] bool met() const { return op == "<=" ? value <= target : value >= target; }
};

// The figures of one run: sections of raw figures and the goals, written as one JSON object.
class Report {
public:
  // References into a Json stay valid only until a member is added beside them: every
  // top-level key exists from the start, and callers fetch a section again rather than
  // hold it across other sections.
  explicit Report(std::string name) {
    root_["benchmark"] = std::move(name);
    root_["meta"] = Json::object();
    root_["sections"] = Json::object();
    root_["goals"] = Json::array();
  }

  Json& meta() { return root_["meta"]; }
  Json& section(const std::string& name) { return root_["sections"][name]; }

  // Records a goal and returns a one-word verdict for the section's table.
  std::string goal(GoalOn on, double value, std::string op, double target) {
    goals_.push_back({std::move(on), value, std::move(op), target});
    return goals_.back().met() ? "met" : "MISSED";
  }
  // Records a goal on PyTorch's `torch_key` over this suite's `suite_key`, for tools/plot-perf
  // to judge with bench_suite_torch.py's figures.
  void torch_goal(GoalOn on, std::string torch_key, std::string suite_key, std::string op, double target) {
    goals_.push_back({std::move(on), std::nan(""), std::move(op), target, std::move(torch_key), std::move(suite_key)});
  }
  [[nodiscard]] const std::vector<Goal>& goals() const { return goals_; }

  // Writes the figures so far; `quiet` leaves out the line that says so (used after each
  // section, so that a run cut short still leaves what it measured).
  bool write(const std::string& path, bool quiet = false) {
    Json& goals = root_["goals"];
    goals = Json::array();  // rebuilt from goals_ at every write
    for (const Goal& g : goals_) {
      Json j = Json::object();
      j["section"] = g.on.section;
      j["id"] = g.on.id;
      j["what"] = g.on.what;
      if (!g.on.at_key.empty()) j["at"][g.on.at_key] = static_cast<double>(g.on.at);
      j["value"] = g.value;  // null for a goal judged by tools/plot-perf
      j["op"] = g.op;
      j["target"] = g.target;
      if (g.judged_here()) {
        j["met"] = g.met() ? "yes" : "no";
      } else {
        j["met"] = Json();
        j["versus"]["torch"] = g.torch_key;
        j["versus"]["suite"] = g.suite_key;
      }
      goals.push(std::move(j));
    }
    const std::string text = root_.dump() + "\n";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      const bool ok = std::fputs(text.c_str(), f) >= 0;
      std::fclose(f);
      if (ok) {
        if (!quiet) std::printf("figures written to %s\n", path.c_str());
        return true;
      }
    }
    std::printf("could not write %s\n", path.c_str());
    return false;
  }

private:
  Json root_ = Json::object();
  std::vector<Goal> goals_;
};

// Microseconds per call of 100 calls back to back on `stream`, to completion: the median
// of reps(7) rounds after one untimed round.
inline double to_done(const std::function<void()>& call, cudaStream_t stream) {
  auto sync = [&] {
    if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
      throw std::runtime_error(fmt::format("to_done: cudaStreamSynchronize: {}", cudaGetErrorString(e)));
  };
  std::vector<double> v;
  for (int r = 0; r < reps(7) + 1; ++r) {
    sync();
    const auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) call();
    sync();
    if (r > 0) v.push_back(us_since(t0) / 100);
  }
  return median(v);
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

// Host cost per call, measured so that the host never waits for the device: each batch of
// calls is queued behind a spinning kernel. An event recorded after the spin tells whether
// the spin ended before the batch did; such a batch runs once more behind a spin four times
// as long (at least three times the failed batch), and if that is still too short it counts
// in `uncovered()`. After a covered batch the spin becomes three times that batch, or half
// the previous spin if that is longer (at least 1 ms): it follows the calls being timed and
// forgets an outlier within a few batches, rather than keep every later batch waiting on
// the longest one seen. An uncovered batch never changes it: a call that blocks on its own
// (a full device queue) would otherwise drive it up without bound.
class HostTimer {
public:
  explicit HostTimer(cudaStream_t stream) : stream_(stream) {
    ok(cudaEventCreateWithFlags(&after_spin_, cudaEventDisableTiming));
  }
  ~HostTimer() {
    if (after_spin_ != nullptr) (void)cudaEventDestroy(after_spin_);
  }
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;

  // Host microseconds per call of `call` over a batch of `n` calls.
  template <class Call>
  double batch(Call&& call, int n) {
    double us = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const unsigned long long retry = std::max(spin_ns_ * 4, static_cast<unsigned long long>(us * 3000.0));
      spin<<<1, 1, 0, stream_>>>(attempt == 0 ? spin_ns_ : std::min(retry, kMaxSpinNs));
      ok(cudaGetLastError());
      ok(cudaEventRecord(after_spin_, stream_));
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) call();
      us = us_since(t0);
      const cudaError_t q = cudaEventQuery(after_spin_);
      if (q == cudaErrorNotReady) (void)cudaGetLastError();  // not an error: the spin still runs
      ok(cudaStreamSynchronize(stream_));
      if (q == cudaErrorNotReady) {
        spin_ns_ = std::clamp(std::max(static_cast<unsigned long long>(us * 3000.0), spin_ns_ / 2), kMinSpinNs,
                              kMaxSpinNs);
        return us / n;
      }
    }
    ++uncovered_;
    return us / n;
  }

  // Runs each of `calls` in batches of `n`, `count` times after `warmup` untimed rounds,
  // rotating which goes first so that drift in the machine affects all alike. Returns the
  // median host microseconds per call of each.
  std::vector<double> medians(const std::vector<std::function<void()>>& calls, int n, int count, int warmup = 3) {
    return medians(calls, std::vector<int>(calls.size(), n), count, warmup);
  }

  // The same with a batch size per call (`n[k]` for `calls[k]`). The first call of a batch
  // costs more than the others, so only calls timed in batches of one size compare exactly.
  std::vector<double> medians(const std::vector<std::function<void()>>& calls, const std::vector<int>& n, int count,
                              int warmup = 3) {
    if (n.size() != calls.size()) throw std::invalid_argument("HostTimer::medians: one batch size per call");
    std::vector<std::vector<double>> samples(calls.size());
    for (int r = 0; r < warmup + count; ++r) {
      for (std::size_t k = 0; k < calls.size(); ++k) {
        const std::size_t which = (k + static_cast<std::size_t>(r)) % calls.size();
        const double us = batch(calls[which], n[which]);
        if (r >= warmup) samples[which].push_back(us);
      }
    }
    std::vector<double> out;
    for (const auto& s : samples) out.push_back(median(s));
    return out;
  }

  [[nodiscard]] int uncovered() const { return uncovered_; }
  // Prints a warning when some batch outlasted its spin even on the second try.
  void note_uncovered() const {
    if (uncovered_ > 0)
      std::printf("  note: %d batch(es) outlasted their spin twice: those host costs may include waiting for the device\n",
                  uncovered_);
  }

private:
  static constexpr unsigned long long kMinSpinNs = 1'000'000;
  static constexpr unsigned long long kMaxSpinNs = 200'000'000;
  static void ok(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(fmt::format("host timer: {}", cudaGetErrorString(e)));
  }

  cudaStream_t stream_;
  cudaEvent_t after_spin_ = nullptr;
  unsigned long long spin_ns_ = kMinSpinNs;
  int uncovered_ = 0;
};
#endif

}  // namespace cugraphs_bench
