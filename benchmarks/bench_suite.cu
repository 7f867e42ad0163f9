// The benchmark suite: every cugraphs figure beside its raw CUDA baseline, measured in one
// run, printed as tables with ratios and the issue's goals, and written to one JSON file
// (tools/plot-perf turns it, with bench_suite_torch.py's file, into plots and tables).
//   bench_suite [FIGURES.json] [SECTION...]
// The figures go to FIGURES.json (a first argument ending in .json), else bench_suite.json.
// Sections: replay capture eager graphed conditional rng memory training update buckets pdl
// device_launch (default: all, in that order). CUGRAPHS_BENCH_SCALE scales the repetitions (0.2 for a
// quick look).
#include "suite/suite.hpp"

#include <cugraphs/graph.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace cugraphs_bench;

int main(int argc, char** argv) {
  // Line-buffered even into a pipe (tools/gpu-check tees it): a run stopped by a timeout
  // keeps every line it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!have_device("bench_suite")) return 77;
  const std::vector<std::pair<std::string_view, void (*)(Report&, cudaStream_t)>> sections{
      {"replay", replay_section}, {"capture", capture_section},         {"eager", eager_section},
      {"graphed", graphed_section}, {"conditional", conditional_section}, {"rng", rng_section},
      {"memory", memory_section}, {"training", training_section}, {"update", update_section},
      {"buckets", buckets_section}, {"pdl", pdl_section},
      {"device_launch", device_launch_section}};
  std::vector<std::string_view> wanted(argv + (json_given(argc, argv) ? 2 : 1), argv + argc);
  for (const auto w : wanted) {
    bool known = false;
    for (const auto& s : sections) known = known || s.first == w;
    if (!known) {
      std::fprintf(stderr, "bench_suite: unknown section '%.*s'\n", static_cast<int>(w.size()), w.data());
      return 2;
    }
  }
  const std::string json = json_path(argc, argv, "bench_suite");
  Report report("bench_suite");
  try {
    int device = 0, runtime = 0, driver = 0;
    cugraphs::check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    cugraphs::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    cugraphs::check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    cugraphs::check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    Json& meta = report.meta();
    meta["device"] = prop.name;
    meta["cuda_runtime"] = fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10);
    meta["cuda_driver"] = fmt::format("{}.{}", driver / 1000, driver % 1000 / 10);
    meta["cuda_headers"] = fmt::format("{}.{}", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    meta["cugraphs"] = fmt::format("{}.{}.{}", CUGRAPHS_VERSION_MAJOR, CUGRAPHS_VERSION_MINOR, CUGRAPHS_VERSION_PATCH);
#if defined(CUGRAPHS_CHECKED)
    meta["checked_pools"] = CUGRAPHS_CHECKED;  // 1 would add a lock and an event per replay
#endif
    std::printf("bench_suite on %s (CUDA runtime %d, driver %d)\n", prop.name, runtime, driver);

    cugraphs::Stream stream;
    const auto start = Clock::now();
    for (const auto& [name, run] : sections) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
      const auto t0 = Clock::now();
      run(report, stream);
      std::printf("(%.*s: %.1f s)\n", static_cast<int>(name.size()), name.data(), us_since(t0) / 1e6);
      report.meta()["seconds"] = us_since(start) / 1e6;
      report.write(json, true);  // a run stopped later (a timeout) still leaves these figures
    }
    report.meta()["seconds"] = us_since(start) / 1e6;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_suite: %s\n", e.what());
    report.write(json);  // what was measured before the failure
    return 1;
  }

  std::printf("\n== goals\n");
  int judged = 0, met = 0;
  for (const Goal& g : report.goals()) {
    if (!g.judged_here()) {
      std::printf("%-8s %-62s %9s %s %-6g %s\n", "PyTorch", g.on.what.c_str(), "", g.op.c_str(), g.target,
                  g.on.section.c_str());
      continue;
    }
    std::printf("%-8s %-62s %9.3f %s %-6g %s\n", g.met() ? "met" : "MISSED", g.on.what.c_str(), g.value, g.op.c_str(),
                g.target, g.on.section.c_str());
    ++judged;
    met += g.met() ? 1 : 0;
  }
  std::printf("%d of %d goals met", met, judged);
  if (const auto left = static_cast<int>(report.goals().size()) - judged; left > 0)
    std::printf(" (%d more, on PyTorch's figures, are judged by tools/plot-perf)", left);
  std::printf("\n");
  return report.write(json) ? 0 : 1;
}
