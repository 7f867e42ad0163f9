// device_dispatch: a decode-like loop whose every step's size is decided on the device. A
// kernel counts the rows still active; the step then runs the graph of the smallest bucket
// that holds them. Run three ways: with DeviceDispatch (a dispatcher graph reads the count on
// the device), with the counting kernel dispatching itself through the DispatchTable
// (dispatch_now: the bucket starts at once), and with the host round trip (copy the count
// back, synchronize, pick the graph, launch). Checks that all give bitwise the same rows and
// prints the time per step of each.
#include <cugraphs/device_dispatch.hpp>
#include <cugraphs/graph.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace {

constexpr unsigned kWidth = 256;    // values per row
constexpr unsigned kMaxRows = 1024;
constexpr unsigned kSteps = 400;
constexpr float kLimit = 40.0f;     // a row whose first value reaches it stops
constexpr std::array<unsigned, 6> kBounds{32, 64, 128, 256, 512, 1024};

// The active rows (a prefix: later rows grow faster and stop first), counted by one block;
// every thread gets the count.
__device__ unsigned block_count_active(const float* x) {
  __shared__ unsigned count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  unsigned mine = 0;
  for (unsigned r = threadIdx.x; r < kMaxRows; r += blockDim.x) mine += x[r * kWidth] < kLimit ? 1u : 0u;
  atomicAdd(&count, mine);
  __syncthreads();
  return count;
}

// Counts the active rows into *key.
__global__ void count_active(const float* x, unsigned* key) {
  const unsigned count = block_count_active(x);
  if (threadIdx.x == 0) *key = count;
}

// count_active, then its first thread dispatches the bucket itself: no dispatcher graph.
__global__ void count_and_dispatch(const float* x, unsigned* key, cugraphs::DispatchTable table) {
  const unsigned count = block_count_active(x);
  if (threadIdx.x == 0) {
    *key = count;
    __threadfence();
    (void)table.dispatch_now(count);  // the bucket reads *key
  }
}

// One step over `rows` rows (a bucket's size), of which the first *active are updated.
__global__ void step_rows(float* x, const unsigned* active, unsigned rows) {
  const unsigned r = blockIdx.x, c = threadIdx.x;
  if (r >= rows || r >= *active) return;
  float& v = x[r * kWidth + c];
  v = v * 1.001f + 0.01f * static_cast<float>(r + 1) + 1e-4f * static_cast<float>(c % 13);
}

// Bucket graphs, one per bound, for launch from the device.
std::vector<cugraphs::Graph> make_buckets(float* x, const unsigned* active) {
  std::vector<cugraphs::Graph> buckets(kBounds.size());
  cugraphs::CaptureOptions o;
  o.device_launch = true;
  for (std::size_t b = 0; b < kBounds.size(); ++b) {
    cugraphs::CaptureScope scope(buckets[b], o);
    step_rows<<<kBounds[b], kWidth, 0, scope.stream()>>>(x, active, kBounds[b]);
    cugraphs::check_launch("step_rows");
    scope.end();
  }
  return buckets;
}

void reset(cugraphs::DeviceBuffer<float>& x) {
  std::vector<float> h(kMaxRows * kWidth);
  for (unsigned r = 0; r < kMaxRows; ++r)
    for (unsigned c = 0; c < kWidth; ++c) h[r * kWidth + c] = 0.001f * static_cast<float>((r * 31 + c * 7) % 97);
  x.copy_from_host(h);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("device_dispatch: no CUDA device found; this example launches graphs from a GPU");
    return 1;
  }
  try {
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    cugraphs::DeviceBuffer<float> x(kMaxRows * kWidth);
    cugraphs::DeviceBuffer<unsigned> key(1);
    auto buckets = make_buckets(x.data(), key.data());
    std::vector<cugraphs::Graph*> pointers;
    for (auto& g : buckets) pointers.push_back(&g);
    cugraphs::DeviceDispatch dispatch(pointers, kBounds, key.data());

    // On the device: count, then the dispatcher tail-launches the bucket. No host wait.
    auto run_device = [&] {
      for (unsigned s = 0; s < kSteps; ++s) {
        count_active<<<1, 256, 0, stream>>>(x.data(), key.data());
        dispatch.replay();
      }
      stream.synchronize();
      dispatch.check();
    };
    // On the device, one graph a step: its kernel counts and launches the bucket at once.
    cugraphs::Graph step;
    {
      cugraphs::CaptureOptions o;
      o.device_launch = true;
      cugraphs::CaptureScope scope(step, o);
      count_and_dispatch<<<1, 256, 0, scope.stream()>>>(x.data(), key.data(), dispatch.table());
      cugraphs::check_launch("count_and_dispatch");
      scope.end();
    }
    auto run_table = [&] {
      for (unsigned s = 0; s < kSteps; ++s) step.replay();
      stream.synchronize();
      dispatch.check();
    };
    // Through the host: count, copy the key back, wait, pick the bucket, launch it.
    unsigned* pinned = nullptr;
    cugraphs::check(cudaMallocHost(&pinned, sizeof(unsigned)), "cudaMallocHost");
    auto run_host = [&] {
      for (unsigned s = 0; s < kSteps; ++s) {
        count_active<<<1, 256, 0, stream>>>(x.data(), key.data());
        cugraphs::check(cudaMemcpyAsync(pinned, key.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, stream),
                        "cudaMemcpyAsync");
        stream.synchronize();
        std::size_t b = 0;
        while (kBounds[b] < *pinned) ++b;
        buckets[b].replay();
      }
      stream.synchronize();
    };

    // Each way from the same rows: its seconds and the rows it leaves.
    const auto timed = [&](const auto& run) {
      reset(x);
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const double s = seconds_since(t0);
      return std::pair(s, x.to_host());
    };
    (void)timed(run_device);  // warm-up of every path
    (void)timed(run_table);
    (void)timed(run_host);
    const auto [device_s, device_rows] = timed(run_device);
    unsigned last_active = 0;
    key.copy_to_host(std::span<unsigned>(&last_active, 1));
    const auto [table_s, table_rows] = timed(run_table);
    const auto [host_s, host_rows] = timed(run_host);
    cugraphs::check(cudaFreeHost(pinned), "cudaFreeHost");

    const auto equal = [](const std::vector<float>& a, const std::vector<float>& b) {
      return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    const bool same = equal(device_rows, host_rows) && equal(table_rows, host_rows);
    std::printf("device_dispatch: %u steps over %u buckets (%u rows active at the end)\n", kSteps,
                static_cast<unsigned>(kBounds.size()), last_active);
    std::printf("  host round trip:  %8.2f us a step\n", 1e6 * host_s / kSteps);
    std::printf("  device dispatch:  %8.2f us a step (DeviceDispatch, a dispatcher graph)\n", 1e6 * device_s / kSteps);
    std::printf("  dispatch_now:     %8.2f us a step (the counting kernel launches the bucket)\n",
                1e6 * table_s / kSteps);
    std::printf("device dispatch %.2fx, dispatch_now %.2fx faster a step, rows %s\n", host_s / device_s,
                host_s / table_s, same ? "bitwise equal" : "DIFFER (bug)");
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("device_dispatch: %s\n", e.what());
    return 1;
  }
}
