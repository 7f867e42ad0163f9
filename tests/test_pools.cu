// Graph-private pools on the GPU: sharing, reuse, exact figures, memory returned to the
// device, and graph memory nodes (cudaMallocAsync inside a capture).
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cmath>
#include <cstdio>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;

namespace {

constexpr std::size_t MiB = 1 << 20;

// Captures: a temporary of `temp_count` floats is filled from `in`, transformed, reduced
// into `out` (out = 3 * in + offset), and freed inside the capture.
void capture_stage(Graph& g, const CaptureOptions& opts, const float* in, float* out,
                   std::size_t n, std::size_t temp_count, float offset) {
  CaptureScope scope(g, opts);
  DeviceBuffer<float> temp(temp_count);
  copy_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(temp.data(), in, n);
  affine_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(temp.data(), n, 3.0f, offset);
  copy_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(out, temp.data(), n);
  cugraphs::check_launch("capture_stage");
}

}  // namespace

TEST_CASE("Pools: two graphs sharing a pool reserve less than two private pools, and replay "
          "correctly in capture order", "[pool][gpu]") {
  constexpr std::size_t n = 1 << 20;
  constexpr std::size_t temp_count = 8 * n;  // 32 MiB temporaries
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> in(n), mid(n), out(n);

  std::size_t shared_reserved = 0, separate_reserved = 0;
  for (const bool shared : {true, false}) {
    Graph first, second;
    auto pool = cugraphs::graph_pool_handle();
    CaptureOptions opts_first, opts_second;
    opts_first.pool = pool;
    if (shared) opts_second.pool = pool;
    capture_stage(first, opts_first, in.data(), mid.data(), n, temp_count, 1.0f);
    capture_stage(second, opts_second, mid.data(), out.data(), n, temp_count, -2.0f);
    if (shared) {
      CHECK(first.pool_id() == second.pool_id());
      shared_reserved = pool.reserved_bytes();
    } else {
      CHECK(first.pool_id() != second.pool_id());
      separate_reserved = first.pool().reserved_bytes() + second.pool().reserved_bytes();
    }
    for (int r = 0; r < 5; ++r) {
      const auto host_in = random_floats(n, 77 + r);
      in.copy_from_host(host_in);
      out.copy_from_host(std::vector<float>(n, -999.0f));
      first.replay();
      second.replay();
      const auto host_out = out.to_host();
      for (std::size_t i = 0; i < n; i += 997)
        REQUIRE(host_out[i] == std::fma(3.0f, std::fma(3.0f, host_in[i], 1.0f), -2.0f));  // nvcc fuses a*x+b
    }
  }
  std::printf("shared pool reserves %zu bytes; two private pools reserve %zu bytes\n",
              shared_reserved, separate_reserved);
  CHECK(shared_reserved >= temp_count * sizeof(float));
  CHECK(shared_reserved < separate_reserved);
  CHECK(separate_reserved >= 2 * temp_count * sizeof(float));
}

TEST_CASE("Pools: a block freed in one capture is reused by the next capture into the pool",
          "[pool][gpu]") {
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions opts;
  opts.pool = pool;
  Graph a, b;
  const float* first_address = nullptr;
  {
    CaptureScope scope(a, opts);
    DeviceBuffer<float> t(1000);
    first_address = t.data();
    fill_kernel<<<4, 256, 0, scope.stream()>>>(t.data(), 1000, 1.0f);
  }
  CHECK(pool.allocated_bytes() == 0);
  {
    CaptureScope scope(b, opts);
    DeviceBuffer<float> t(1000);
    CHECK(t.data() == first_address);
    fill_kernel<<<4, 256, 0, scope.stream()>>>(t.data(), 1000, 2.0f);
  }
}

TEST_CASE("Pools: figures are exact", "[pool][gpu]") {
  auto pool = cugraphs::graph_pool_handle();
  CHECK(pool.id() != 0);
  CHECK(pool.reserved_bytes() == 0);
  CHECK(pool.allocated_bytes() == 0);
  CaptureOptions opts;
  opts.pool = pool;
  Graph g;
  {
    CaptureScope scope(g, opts);
    DeviceBuffer<float> a(1000);          // 4000 bytes -> 4096
    DeviceBuffer<double> b(3 * MiB / 8);  // 3 MiB: a segment of its own, 4 MiB
    CHECK(pool.allocated_bytes() == 4096 + 3 * MiB);
    CHECK(pool.reserved_bytes() == 2 * MiB + 4 * MiB);
    fill_kernel<<<4, 256, 0, scope.stream()>>>(a.data(), 1000, 1.0f);
  }
  CHECK(pool.allocated_bytes() == 0);
  CHECK(pool.reserved_bytes() == 6 * MiB);
  CHECK(pool.trim() == 0);  // a graph still refers to the pool
  g.reset();
  CHECK(pool.trim() == 6 * MiB);
  CHECK(pool.reserved_bytes() == 0);
}

TEST_CASE("Pools: after every graph is reset and every buffer destroyed, the memory is back on "
          "the device", "[pool][gpu]") {
  // Warm up the context and the stream-ordered allocator so their one-time costs are out.
  { DeviceBuffer<float> warm(1024); }
  const std::size_t start = device_free_bytes();
  {
    auto pool = cugraphs::graph_pool_handle();
    CaptureOptions opts;
    opts.pool = pool;
    std::vector<Graph> graphs(4);
    std::vector<DeviceBuffer<float>> kept;
    for (auto& g : graphs) {
      CaptureScope scope(g, opts);
      kept.emplace_back(16 * MiB);  // 64 MiB each, kept alive past the capture
      DeviceBuffer<float> temp(8 * MiB);
      fill_kernel<<<64, 256, 0, scope.stream()>>>(temp.data(), 8 * MiB, 1.0f);
      copy_kernel<<<64, 256, 0, scope.stream()>>>(kept.back().data(), temp.data(), 8 * MiB);
    }
    for (auto& g : graphs) g.replay();
    CHECK(pool.reserved_bytes() >= 4 * 64 * MiB);
    const std::size_t during = device_free_bytes();
    std::printf("device memory in use by the pool: %zu MiB\n", (start - during) / MiB);
    CHECK(start - during >= 4 * 64 * MiB);
    for (auto& g : graphs) g.reset();
    kept.clear();
  }
  const std::size_t end = device_free_bytes();
  std::printf("free device memory: start %zu MiB, end %zu MiB\n", start / MiB, end / MiB);
  CHECK(end + 2 * MiB >= start);
}

TEST_CASE("Pools: cudaMallocAsync and cudaFreeAsync inside a capture replay repeatedly",
          "[pool][gpu]") {
  constexpr std::size_t n = 1 << 18;
  cugraphs::Stream stream;
  DeviceBuffer<float> in(n, stream), out(n, stream);
  Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) {
    float* temp = nullptr;
    cugraphs::check(cudaMallocAsync(reinterpret_cast<void**>(&temp), n * sizeof(float), s),
                    "cudaMallocAsync in capture");
    copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(temp, in.data(), n);
    affine_kernel<<<blocks_for(n), kThreads, 0, s>>>(temp, n, -0.5f, 4.0f);
    copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(out.data(), temp, n);
    cugraphs::check(cudaFreeAsync(temp, s), "cudaFreeAsync in capture");
  }, [&] { CaptureOptions o; o.stream = stream; return o; }());
  for (int r = 0; r < 50; ++r) {
    const auto host_in = random_floats(n, 500 + r);
    in.copy_from_host(host_in, stream);
    g.replay(stream);
    const auto host_out = out.to_host(stream);
    for (std::size_t i = 0; i < n; i += 1013) REQUIRE(host_out[i] == -0.5f * host_in[i] + 4.0f);
  }
}

TEST_CASE("Pools: pools and capture streams of a device that does not exist are an Error",
          "[pool][gpu]") {
  int devices = 0;
  cugraphs::check(cudaGetDeviceCount(&devices), "count devices");
  const auto e = expect_error([&] { (void)cugraphs::graph_pool_handle(devices); });
  CHECK(e.code() == cudaErrorInvalidDevice);
  CHECK(contains(e.what(), "no such device"));
  const auto e2 = expect_error([&] { (void)cugraphs::capture_stream(-1); });
  CHECK(e2.code() == cudaErrorInvalidDevice);
}
