// Memory of N graphs that each allocate a temporary during capture (freed before the
// capture ends) and run a kernel on it: all N captured into one shared pool, where each
// capture reuses the block the previous one freed, against a private pool each. Figures
// are the pools' reserved bytes; the drop in the device's free memory is kept beside them
// as a cross-check (it also counts executables and allocator granularity).
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <vector>

namespace cugraphs_bench {
namespace {

constexpr std::size_t kTempFloats = std::size_t{1} << 20;  // 4 MiB
constexpr double kMiB = 1024.0 * 1024.0;

__global__ void scale(float* x, std::size_t n, float a) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = a * static_cast<float>(i % 13);
}

void capture_with_temp(cugraphs::Graph& g, const cugraphs::CaptureOptions& opts) {
  cugraphs::CaptureScope scope(g, opts);
  cugraphs::DeviceBuffer<float> temp(kTempFloats);
  scale<<<264, 256, 0, scope.stream()>>>(temp.data(), temp.size(), 2.0f);
  cugraphs::check_launch("scale");
}  // temp is freed inside the capture, then the scope ends it

double free_mib() {
  std::size_t free = 0, total = 0;
  cugraphs::check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return static_cast<double>(free) / kMiB;
}

}  // namespace

void memory_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  std::printf("\n== memory: N graphs with a 4 MiB temporary each, one shared pool vs a pool each (reserved MiB)\n");
  std::printf("%7s %12s %12s %8s | %s\n", "graphs", "shared", "separate", "ratio", "device free-memory drop: shared / separate");
  std::vector<double> graphs, shared_mib, separate_mib, shared_dev, separate_dev;
  for (const int n : kGraphCounts) {
    cugraphs::check(cudaDeviceSynchronize(), "sync");
    const double before_shared = free_mib();
    cugraphs::CaptureOptions shared;
    shared.pool = cugraphs::graph_pool_handle();
    std::vector<cugraphs::Graph> a(static_cast<std::size_t>(n));
    for (auto& g : a) capture_with_temp(g, shared);
    const double after_shared = free_mib();
    std::vector<cugraphs::Graph> b(static_cast<std::size_t>(n));
    for (auto& g : b) capture_with_temp(g, {});
    const double after_separate = free_mib();
    // Every graph runs once, the shared ones in capture order as a shared pool requires.
    for (auto& g : a) g.replay();
    for (auto& g : b) g.replay();
    cugraphs::check(cudaStreamSynchronize(stream), "sync");
    double s = static_cast<double>(shared.pool->reserved_bytes()) / kMiB, p = 0;
    for (auto& g : b) p += static_cast<double>(g.pool().reserved_bytes()) / kMiB;
    std::printf("%7d %8.1f MiB %8.1f MiB %8.3f | %.1f / %.1f MiB\n", n, s, p, s / p, before_shared - after_shared,
                after_shared - after_separate);
    graphs.push_back(n);
    shared_mib.push_back(s);
    separate_mib.push_back(p);
    shared_dev.push_back(before_shared - after_shared);
    separate_dev.push_back(after_shared - after_separate);
  }
  Json& sec = report.section("memory");
  sec["graphs"] = graphs;
  sec["temp_mib"] = static_cast<double>(kTempFloats * sizeof(float)) / kMiB;
  sec["shared_mib"] = shared_mib;
  sec["separate_mib"] = separate_mib;
  sec["shared_device_mib"] = shared_dev;
  sec["separate_device_mib"] = separate_dev;
}

}  // namespace cugraphs_bench
