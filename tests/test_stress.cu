// Stress: long runs of capture, replay and reset that leave every memory figure flat, a
// million replays of one graph that each provably ran, and 64 graphs (one per batch size)
// sharing one pool in about the memory of the largest graph alone. CUGRAPHS_STRESS_SCALE
// (default 1) scales the repetition counts; lines starting with "figure: " are collected by
// tools/gpu-check into its summary.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/detail/block_allocator.hpp>  // kSegmentGranularity
#include <cugraphs/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

// y = 2x - 1: exact in float on a ramp (support/kernels.cuh), fused or not.
__global__ void twice_minus_one(float* out, const float* in, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i] - 1.0f;
}

// One replay: counts itself and adds the low byte of its number to a checksum, so the
// final values prove that every replay ran, once, in order.
__global__ void count_replay(unsigned long long* c) {
  const unsigned long long k = ++c[0];
  c[1] += k & 0xff;
}

// The batch graphs' work. Every operation is a single rounding (explicit fma) or a plain
// add in a fixed order, so the host reproduces it bitwise.
__global__ void scale_shift(float* t, const float* x, std::size_t n, float a, float c) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) t[i] = __fmaf_rn(x[i], a, c);
}
__global__ void add_neighbour(float* t2, const float* t1, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) t2[i] = __fmaf_rn(t1[(i + 1) % n], 0.5f, t1[i]);
}
// out[r * R + j] = sum over m of t[r * K + j + m * R], in order of m.
__global__ void strided_sums(float* out, const float* t, std::size_t rows, std::size_t K, std::size_t R) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (idx >= rows * R) return;
  const std::size_t r = idx / R, j = idx % R;
  float s = 0.0f;
  for (std::size_t m = 0; m < K / R; ++m) s += t[r * K + j + m * R];
  out[idx] = s;
}

}  // namespace

TEST_CASE("Stress: 10,000 capture/replay/reset cycles into one shared pool leave device memory "
          "and pool figures flat",
          "[stress][pool][gpu]") {
  const std::size_t cycles = scaled(10'000);
  const std::size_t check_every = std::max<std::size_t>(1, cycles / 10);
  constexpr std::size_t n = 1 << 14;
  cugraphs::Stream s;
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions opts;
  opts.pool = pool;
  Graph g;
  std::size_t checked = 0;
  // Captures a temporary and a buffer that outlives the capture, replays, checks the values
  // when asked, then lets everything go.
  auto cycle = [&](std::size_t i, bool check) {
    const float base = static_cast<float>(i % 97) - 40.0f;
    {
      DeviceBuffer<float> out;
      {
        CaptureScope scope(g, opts);
        DeviceBuffer<float> temp(n);
        out = DeviceBuffer<float>(n);
        ramp_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(temp.data(), n, base);
        twice_minus_one<<<blocks_for(n), kThreads, 0, scope.stream()>>>(out.data(), temp.data(), n);
      }
      g.replay(s);
      if (check) {
        const auto got = out.to_host(s);
        for (std::size_t k = 0; k < n; ++k) REQUIRE(got[k] == 2.0f * ramp_value(k, base) - 1.0f);
        ++checked;
      }
    }
    g.reset();
  };
  for (std::size_t i = 0; i < 3; ++i) cycle(i, true);  // warm-up: kernels loaded, streams made
  checked = 0;

  const std::size_t free_start = device_free_bytes();
  const std::size_t reserved_start = pool.reserved_bytes(), allocated_start = pool.allocated_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < cycles; ++i) cycle(i, i % check_every == 0 || i + 1 == cycles);
  const double elapsed = seconds_since(t0);
  const std::size_t free_end = device_free_bytes();
  const std::size_t reserved_end = pool.reserved_bytes(), allocated_end = pool.allocated_bytes();

  std::printf("figure: %zu capture/replay/reset cycles into one shared pool (values checked %zu times): free "
              "device memory start %.1f MiB end %.1f MiB (%lld bytes difference); pool reserved start %zu end %zu "
              "bytes; pool allocated start %zu end %zu bytes; %.1f us a cycle\n",
              cycles, checked, static_cast<double>(free_start) / MiB, static_cast<double>(free_end) / MiB,
              static_cast<long long>(free_end) - static_cast<long long>(free_start), reserved_start, reserved_end,
              allocated_start, allocated_end, elapsed * 1e6 / static_cast<double>(cycles));
  CHECK(checked >= std::min<std::size_t>(cycles, 10));
  CHECK(free_end == free_start);
  CHECK(reserved_end == reserved_start);
  CHECK(reserved_end == cugraphs::detail::kSegmentGranularity);  // one segment, reused every cycle
  CHECK(allocated_start == 0);
  CHECK(allocated_end == 0);
}

TEST_CASE("Stress: 10,000 capture/replay/reset cycles each into a fresh private pool give every "
          "segment back: device memory flat",
          "[stress][pool][gpu]") {
  const std::size_t cycles = scaled(10'000);
  const std::size_t check_every = std::max<std::size_t>(1, cycles / 10);
  constexpr std::size_t n = 1 << 14;
  cugraphs::Stream s;
  Graph g;
  std::size_t checked = 0;
  std::size_t reserved_min = SIZE_MAX, reserved_max = 0;
  auto cycle = [&](std::size_t i, bool check) {
    const float base = static_cast<float>(i % 89) + 0.5f;
    {
      DeviceBuffer<float> out;
      {
        CaptureScope scope(g);  // a new pool each time
        out = DeviceBuffer<float>(n);
        ramp_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(out.data(), n, base);
      }
      const std::size_t reserved = g.pool().reserved_bytes();
      reserved_min = std::min(reserved_min, reserved);
      reserved_max = std::max(reserved_max, reserved);
      g.replay(s);
      if (check) {
        const auto got = out.to_host(s);
        for (std::size_t k = 0; k < n; ++k) REQUIRE(got[k] == ramp_value(k, base));
        ++checked;
      }
      g.reset();
    }  // the buffer was the pool's last owner: its segment goes back to the device
  };
  for (std::size_t i = 0; i < 3; ++i) cycle(i, true);  // warm-up
  checked = 0;
  reserved_min = SIZE_MAX;
  reserved_max = 0;

  const std::size_t free_start = device_free_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < cycles; ++i) cycle(i, i % check_every == 0 || i + 1 == cycles);
  const double elapsed = seconds_since(t0);
  const std::size_t free_end = device_free_bytes();

  std::printf("figure: %zu capture/replay/reset cycles each into a private pool (values checked %zu times): free "
              "device memory start %.1f MiB end %.1f MiB (%lld bytes difference); each pool reserved %zu..%zu "
              "bytes while alive; %.1f us a cycle\n",
              cycles, checked, static_cast<double>(free_start) / MiB, static_cast<double>(free_end) / MiB,
              static_cast<long long>(free_end) - static_cast<long long>(free_start), reserved_min, reserved_max,
              elapsed * 1e6 / static_cast<double>(cycles));
  CHECK(checked >= std::min<std::size_t>(cycles, 10));
  CHECK(free_end == free_start);
  CHECK(reserved_min == reserved_max);  // every cycle's pool is alike: nothing accumulates
}

TEST_CASE("Stress: 1,000,000 replays of one graph all run, in order, with memory flat",
          "[stress][gpu]") {
  const std::size_t replays = scaled(1'000'000);
  cugraphs::Stream s;
  Graph g;
  DeviceBuffer<unsigned long long> counter;
  {
    CaptureScope scope(g);
    counter = DeviceBuffer<unsigned long long>(2);  // from the graph's pool
    count_replay<<<1, 1, 0, scope.stream()>>>(counter.data());
  }
  auto zero = [&] {
    cugraphs::check(cudaMemsetAsync(counter.data(), 0, counter.bytes(), s), "zero the counter");
  };
  zero();
  for (int i = 0; i < 100; ++i) g.replay(s);  // warm-up
  CHECK(counter.to_host(s) == std::vector<unsigned long long>{100, 100 * 101 / 2});
  zero();

  const std::size_t free_start = device_free_bytes();
  const std::size_t reserved_start = g.pool().reserved_bytes(), allocated_start = g.pool().allocated_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < replays; ++i) g.replay(s);
  const double host_s = seconds_since(t0);
  s.synchronize();
  const double total_s = seconds_since(t0);
  const auto got = counter.to_host(s);
  const std::size_t free_end = device_free_bytes();
  const std::size_t reserved_end = g.pool().reserved_bytes(), allocated_end = g.pool().allocated_bytes();

  unsigned long long checksum = 0;
  for (unsigned long long k = 1; k <= replays; ++k) checksum += k & 0xff;
  std::printf("figure: %zu replays of one graph: counter %llu (expected %zu), checksum %llu (expected %llu); free "
              "device memory start %.1f MiB end %.1f MiB (%lld bytes difference); pool reserved start %zu end %zu "
              "bytes, allocated start %zu end %zu bytes; %.2f us host cost and %.2f us to completion a replay\n",
              replays, got[0], replays, got[1], checksum, static_cast<double>(free_start) / MiB,
              static_cast<double>(free_end) / MiB, static_cast<long long>(free_end) - static_cast<long long>(free_start),
              reserved_start, reserved_end, allocated_start, allocated_end,
              host_s * 1e6 / static_cast<double>(replays), total_s * 1e6 / static_cast<double>(replays));
  CHECK(got[0] == replays);
  CHECK(got[1] == checksum);
  CHECK(free_end == free_start);
  CHECK(reserved_end == reserved_start);
  CHECK(allocated_end == allocated_start);
}

TEST_CASE("Stress: 64 graphs, one per batch size, sharing one pool reserve about the memory of "
          "the largest graph alone and replay correctly in capture order",
          "[stress][pool][gpu]") {
  constexpr std::size_t kBatches = 64;
  constexpr std::size_t K = 1 << 14;  // floats per batch row: 64 KiB of temporaries per row
  constexpr std::size_t R = 64;       // output floats per batch row
  cugraphs::Stream s;
  cugraphs::StreamGuard on(s);
  DeviceBuffer<float> x(kBatches * K);
  const auto a_of = [](std::size_t b) { return 1.0f + static_cast<float>(b) / 64.0f; };
  const auto c_of = [](std::size_t b) { return static_cast<float>(b) * 0.25f - 3.0f; };

  // Temporaries proportional to the batch (two of b * K floats, freed inside the capture)
  // and an output of b * R floats that outlives it.
  auto capture_batch = [&](Graph& g, const CaptureOptions& opts, std::size_t b, DeviceBuffer<float>& out) {
    const std::size_t n = b * K;
    CaptureScope scope(g, opts);
    DeviceBuffer<float> t1(n), t2(n);
    out = DeviceBuffer<float>(b * R);
    scale_shift<<<blocks_for(n), kThreads, 0, scope.stream()>>>(t1.data(), x.data(), n, a_of(b), c_of(b));
    add_neighbour<<<blocks_for(n), kThreads, 0, scope.stream()>>>(t2.data(), t1.data(), n);
    strided_sums<<<blocks_for(b * R), kThreads, 0, scope.stream()>>>(out.data(), t2.data(), b, K, R);
    cugraphs::check_launch("batch kernels");
  };
  auto reference = [&](const std::vector<float>& hx, std::size_t b) {
    const std::size_t n = b * K;
    std::vector<float> t1(n), t2(n), out(b * R);
    for (std::size_t i = 0; i < n; ++i) t1[i] = std::fma(hx[i], a_of(b), c_of(b));
    for (std::size_t i = 0; i < n; ++i) t2[i] = std::fma(t1[(i + 1) % n], 0.5f, t1[i]);
    for (std::size_t r = 0; r < b; ++r)
      for (std::size_t j = 0; j < R; ++j) {
        float sum = 0.0f;
        for (std::size_t m = 0; m < K / R; ++m) sum += t2[r * K + j + m * R];
        out[r * R + j] = sum;
      }
    return out;
  };

  // Each graph alone, in a private pool: what 64 separate pools would reserve.
  std::vector<std::size_t> alone(kBatches + 1, 0);
  std::size_t separate = 0;
  for (std::size_t b = 1; b <= kBatches; ++b) {
    Graph g;
    DeviceBuffer<float> out;
    capture_batch(g, CaptureOptions{}, b, out);
    alone[b] = g.pool().reserved_bytes();
    separate += alone[b];
  }
  const std::size_t largest_alone = alone[kBatches];

  // The same 64 graphs sharing one pool, captured largest first (the order that lets every
  // later graph fit in the memory of the first).
  const std::size_t free_before = device_free_bytes();
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions shared_opts;
  shared_opts.pool = pool;
  std::vector<Graph> graphs(kBatches);
  std::vector<DeviceBuffer<float>> outs(kBatches);
  std::vector<std::size_t> batch_of(kBatches);
  for (std::size_t i = 0; i < kBatches; ++i) {
    batch_of[i] = kBatches - i;
    capture_batch(graphs[i], shared_opts, batch_of[i], outs[i]);
  }
  const std::size_t shared = pool.reserved_bytes();
  const std::size_t outputs_bytes = pool.allocated_bytes();
  const std::size_t free_after = device_free_bytes();

  std::printf("figure: 64 graphs (batch 1..64, captured largest first) sharing one pool reserve %.1f MiB (%zu "
              "bytes, %.1f KiB of it live outputs); the largest graph alone reserves %.1f MiB; 64 separate pools "
              "would reserve %.1f MiB (%.1fx the shared pool); device memory taken by the shared graphs %.1f MiB\n",
              static_cast<double>(shared) / MiB, shared, static_cast<double>(outputs_bytes) / 1024.0,
              static_cast<double>(largest_alone) / MiB, static_cast<double>(separate) / MiB,
              static_cast<double>(separate) / static_cast<double>(shared),
              (static_cast<double>(free_before) - static_cast<double>(free_after)) / MiB);
  CHECK(shared >= largest_alone);
  CHECK(shared <= largest_alone + cugraphs::detail::kSegmentGranularity);
  CHECK(shared * 10 < separate);
  CHECK(free_before - free_after >= shared);

  for (int round = 0; round < 2; ++round) {
    const auto hx = random_floats(kBatches * K, 900 + static_cast<std::uint32_t>(round));
    x.copy_from_host(hx);
    for (auto& o : outs) cugraphs::check(cudaMemsetAsync(o.data(), 0xff, o.bytes(), s), "poison");  // NaNs
    for (auto& g : graphs) g.replay();  // in capture order, on one stream
    for (std::size_t i = 0; i < kBatches; ++i) {
      INFO("round " << round << ", batch " << batch_of[i]);
      const auto got = outs[i].to_host();
      const auto want = reference(hx, batch_of[i]);
      REQUIRE(bitwise_equal(got, want));
    }
  }
}
