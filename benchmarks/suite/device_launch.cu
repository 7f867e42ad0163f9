// Device-side launch: from "a value is known on the device" to "the graph it selects has
// finished", with DeviceDispatch (a dispatcher graph tail-launches the bucket's graph)
// against the host round trip (copy the value back, synchronize, pick, launch); and one
// graph launched from the host against the same graph tail-launched by a kernel.
#include "suite.hpp"

#include <cugraphs/device_dispatch.hpp>
#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <vector>

namespace cugraphs_bench {
namespace {

__global__ void write_key(unsigned* key, unsigned v) { *key = v; }

__global__ void bucket_work(float* x, unsigned rows) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * 256) x[i] = x[i] * 0.5f + 1.0f;
}

__global__ void tail_launch(cugraphs::DeviceGraph g) { g.launch_tail(); }

}  // namespace

void device_launch_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  constexpr std::array<unsigned, 4> bounds{16, 64, 256, 1024};
  cugraphs::DeviceBuffer<float> x(1024 * 256);
  cugraphs::DeviceBuffer<unsigned> key(1);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "cudaMemsetAsync");
  cugraphs::CaptureOptions o;
  o.device_launch = true;
  std::vector<cugraphs::Graph> buckets(bounds.size());
  for (std::size_t b = 0; b < bounds.size(); ++b) {
    cugraphs::CaptureScope scope(buckets[b], o);
    bucket_work<<<bounds[b], 256, 0, scope.stream()>>>(x.data(), bounds[b]);
    scope.end();
  }
  std::vector<cugraphs::Graph*> pointers;
  for (auto& g : buckets) pointers.push_back(&g);
  cugraphs::DeviceDispatch dispatch(pointers, bounds, key.data());
  unsigned* pinned = nullptr;
  cugraphs::check(cudaMallocHost(&pinned, sizeof(unsigned)), "cudaMallocHost");
  unsigned step = 0;
  auto next_key = [&] { return 1u + (step++ * 37u) % 1000u; };  // every bucket in turn
  const double device_us = to_done(
      [&] {
        write_key<<<1, 1, 0, stream>>>(key.data(), next_key());
        dispatch.replay();
      },
      stream);
  const double host_us = to_done(
      [&] {
        write_key<<<1, 1, 0, stream>>>(key.data(), next_key());
        cugraphs::check(cudaMemcpyAsync(pinned, key.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, stream),
                        "cudaMemcpyAsync");
        cugraphs::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        std::size_t b = 0;
        while (bounds[b] < *pinned) ++b;
        buckets[b].replay();
      },
      stream);
  dispatch.check();
  cugraphs::check(cudaFreeHost(pinned), "cudaFreeHost");

  cugraphs::Graph launcher;
  {
    cugraphs::CaptureScope scope(launcher, o);
    tail_launch<<<1, 1, 0, scope.stream()>>>(buckets[1].device_graph());
    scope.end();
  }
  const double from_host_us = to_done([&] { buckets[1].replay(); }, stream);
  const double from_device_us = to_done([&] { launcher.replay(); }, stream);
  buckets[1].check_device_launches();

  const double speedup = host_us / device_us;
  const std::string v = report.goal(
      {"device_launch", "dispatch_vs_round_trip", "value on the device to its graph done: host round trip / device dispatch"},
      speedup, ">=", 3.0);
  std::printf("\n== Device launch: a key known on the device selects one of 4 bucket graphs\n");
  std::printf("%-34s %12s\n", "", "per step");
  std::printf("%-34s %9.2f us\n", "host round trip (copy, sync, launch)", host_us);
  std::printf("%-34s %9.2f us   %.2fx faster (goal >= 3) %s\n", "device dispatch (tail launch)", device_us, speedup,
              v.c_str());
  std::printf("%-34s %9.2f us\n", "one graph launched from the host", from_host_us);
  std::printf("%-34s %9.2f us   (a one-kernel graph tail-launches it)\n", "the same graph, launched by a kernel",
              from_device_us);
  Json& sec = report.section("device_launch");
  sec["dispatch_done_us"] = device_us;
  sec["round_trip_done_us"] = host_us;
  sec["host_launch_done_us"] = from_host_us;
  sec["device_launch_done_us"] = from_device_us;
}

}  // namespace cugraphs_bench
