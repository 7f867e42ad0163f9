// Device-side launch: from "a value is known on the device" to "the graph it selects has
// finished", on the GPU's clock (%globaltimer: the kernel that writes the key stamps the start,
// the last block of the bucket's kernel the end), with DeviceDispatch (a dispatcher graph
// tail-launches the bucket's graph) and with a DispatchTable (the kernel that computes the key
// dispatches itself, as a tail launch or fire-and-forget: dispatch_now), against the host
// round trip (copy the value back, synchronize, pick, launch). Each step is queued behind a
// kernel that spins, so that the host has queued what the device path needs before the key
// exists, as in a loop whose host runs ahead. Also, on the host's clock, 100 steps back to
// back, and one graph launched from the host against the same graph tail-launched by a kernel.
#include "suite.hpp"

#include <cugraphs/device_dispatch.hpp>
#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace cugraphs_bench {
namespace {

__device__ unsigned long long gpu_ns() {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// stamps[0]: when the key was written; stamps[1]: when the bucket's kernel finished.
__global__ void write_key(unsigned* key, unsigned v, unsigned long long* stamps) {
  *key = v;
  __threadfence();
  stamps[0] = gpu_ns();
}

// The step that decides on the device: the next key from a step counter, then the dispatch.
__global__ void decide_and_dispatch(unsigned* step, unsigned* key, unsigned long long* stamps,
                                    cugraphs::DispatchTable table, bool now) {
  const unsigned k = 1u + (*step * 37u) % 1000u;
  *step += 1;
  *key = k;
  __threadfence();
  stamps[0] = gpu_ns();
  if (now) (void)table.dispatch_now(k);
  else (void)table.dispatch(k);
}

// A dispatcher graph's kernel that launches the bucket now (fire-and-forget) instead of as
// DeviceDispatch's does, after the dispatcher graph.
__global__ void dispatch_now_kernel(const unsigned* key, cugraphs::DispatchTable table) {
  (void)table.dispatch_now(*key);
}

// The bucket's work; its last block to finish stamps the end.
__global__ void bucket_work(float* x, unsigned rows, unsigned long long* stamps, unsigned* blocks_done) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * 256) x[i] = x[i] * 0.5f + 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(blocks_done, 1u) == gridDim.x - 1) {
      *blocks_done = 0;
      stamps[1] = gpu_ns();
    }
  }
}

__global__ void tail_launch(cugraphs::DeviceGraph g) { g.launch_tail(); }

}  // namespace

void device_launch_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  constexpr std::array<unsigned, 4> bounds{16, 64, 256, 1024};
  cugraphs::DeviceBuffer<float> x(1024 * 256);
  cugraphs::DeviceBuffer<unsigned> key(1), words(2);  // words: [0] blocks done, [1] the step counter
  cugraphs::DeviceBuffer<unsigned long long> stamps(2);
  cugraphs::check(cudaMemsetAsync(x.data(), 0, x.bytes(), stream), "cudaMemsetAsync");
  cugraphs::check(cudaMemsetAsync(words.data(), 0, words.bytes(), stream), "cudaMemsetAsync");
  cugraphs::CaptureOptions o;
  o.device_launch = true;
  std::vector<cugraphs::Graph> buckets(bounds.size());
  for (std::size_t b = 0; b < bounds.size(); ++b) {
    cugraphs::CaptureScope scope(buckets[b], o);
    bucket_work<<<bounds[b], 256, 0, scope.stream()>>>(x.data(), bounds[b], stamps.data(), words.data());
    scope.end();
  }
  std::vector<cugraphs::Graph*> pointers;
  for (auto& g : buckets) pointers.push_back(&g);
  cugraphs::DeviceDispatch dispatch(pointers, bounds, key.data());
  unsigned* pinned = nullptr;
  cugraphs::check(cudaMallocHost(&pinned, sizeof(unsigned)), "cudaMallocHost");
  // The step whose kernel computes the key and dispatches itself, as a tail launch and now.
  cugraphs::Graph deciding, deciding_now, dispatcher_now;
  for (const bool now : {false, true}) {
    cugraphs::CaptureScope scope(now ? deciding_now : deciding, o);
    decide_and_dispatch<<<1, 1, 0, scope.stream()>>>(words.data() + 1, key.data(), stamps.data(), dispatch.table(),
                                                     now);
    scope.end();
  }
  {
    cugraphs::CaptureScope scope(dispatcher_now, o);
    dispatch_now_kernel<<<1, 1, 0, scope.stream()>>>(key.data(), dispatch.table());
    scope.end();
  }
  unsigned step = 0;
  auto next_key = [&] { return 1u + (step++ * 37u) % 1000u; };  // every bucket in turn
  const auto by_dispatcher = [&] {
    write_key<<<1, 1, 0, stream>>>(key.data(), next_key(), stamps.data());
    dispatch.replay();
  };
  const auto by_table = [&] { deciding.replay(); };
  const auto by_table_now = [&] { deciding_now.replay(); };
  const auto by_dispatcher_now = [&] {
    write_key<<<1, 1, 0, stream>>>(key.data(), next_key(), stamps.data());
    dispatcher_now.replay();
  };
  const auto round_trip = [&] {
    write_key<<<1, 1, 0, stream>>>(key.data(), next_key(), stamps.data());
    cugraphs::check(cudaMemcpyAsync(pinned, key.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync");
    cugraphs::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::size_t b = 0;
    while (bounds[b] < *pinned) ++b;
    buckets[b].replay();
  };
  // From the key's stamp to the bucket's, each step alone behind a 20 us spin.
  const auto key_to_done = [&](const auto& one_step) {
    std::vector<double> v;
    for (int r = 0; r < reps(200) + 5; ++r) {
      spin<<<1, 1, 0, stream>>>(20'000);
      one_step();
      unsigned long long t[2] = {0, 0};
      cugraphs::check(cudaMemcpyAsync(t, stamps.data(), sizeof t, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
      cugraphs::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      if (t[1] <= t[0]) throw std::runtime_error("device_launch: the bucket finished before its key was written");
      if (r >= 5) v.push_back(static_cast<double>(t[1] - t[0]) / 1000.0);
    }
    return median(v);
  };
  const double dispatcher_key_us = key_to_done(by_dispatcher);
  const double table_key_us = key_to_done(by_table);
  const double table_now_key_us = key_to_done(by_table_now);
  const double dispatcher_now_key_us = key_to_done(by_dispatcher_now);
  const double round_trip_key_us = key_to_done(round_trip);
  const double device_us = to_done(by_dispatcher, stream);
  const double table_us = to_done(by_table, stream);
  const double table_now_us = to_done(by_table_now, stream);
  const double dispatcher_now_us = to_done(by_dispatcher_now, stream);
  const double host_us = to_done(round_trip, stream);
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

  const double speedup = round_trip_key_us / dispatcher_key_us;
  const double table_speedup = round_trip_key_us / table_key_us;
  const double table_now_speedup = round_trip_key_us / table_now_key_us;
  const std::string v = report.goal({"device_launch", "dispatch_vs_round_trip",
                                     "key known on the device to its graph done (GPU clock): host round trip / "
                                     "DeviceDispatch"},
                                    speedup, ">=", 3.0);
  const std::string vt = report.goal({"device_launch", "table_vs_round_trip",
                                      "key known on the device to its graph done (GPU clock): host round trip / "
                                      "dispatch from the kernel that computes the key"},
                                     table_speedup, ">=", 3.0);
  const std::string vn = report.goal({"device_launch", "table_now_vs_round_trip",
                                      "key known on the device to its graph done (GPU clock): host round trip / "
                                      "fire-and-forget dispatch from the kernel that computes the key"},
                                     table_now_speedup, ">=", 3.0);
  std::printf("\n== Device launch: a key known on the device selects one of 4 bucket graphs\n");
  std::printf("%-44s %14s %16s\n", "", "key to done", "100 steps, each");
  std::printf("%-44s %11.2f us %13.2f us\n", "host round trip (copy, sync, launch)", round_trip_key_us, host_us);
  std::printf("%-44s %11.2f us %13.2f us   %.2fx faster (goal >= 3) %s\n", "DeviceDispatch (dispatcher graph)",
              dispatcher_key_us, device_us, speedup, v.c_str());
  std::printf("%-44s %11.2f us %13.2f us   %.2fx faster (goal >= 3) %s\n", "DispatchTable (the deciding kernel)",
              table_key_us, table_us, table_speedup, vt.c_str());
  std::printf("%-44s %11.2f us %13.2f us   %.2fx faster (goal >= 3) %s\n", "DispatchTable::dispatch_now (now)",
              table_now_key_us, table_now_us, table_now_speedup, vn.c_str());
  std::printf("%-44s %11.2f us %13.2f us   %.2fx faster\n", "a dispatcher graph calling dispatch_now",
              dispatcher_now_key_us, dispatcher_now_us, round_trip_key_us / dispatcher_now_key_us);
  std::printf("(key to done: on the GPU's clock, from the kernel that wrote the key to the end of the bucket's\n"
              " kernel; 100 steps: on the host's clock, steps queued back to back, then one synchronize)\n");
  std::printf("%-44s %11.2f us\n", "one graph launched from the host", from_host_us);
  std::printf("%-44s %11.2f us   (a one-kernel graph tail-launches it)\n", "the same graph, launched by a kernel",
              from_device_us);
  Json& sec = report.section("device_launch");
  sec["dispatch_key_to_done_us"] = dispatcher_key_us;
  sec["table_key_to_done_us"] = table_key_us;
  sec["round_trip_key_to_done_us"] = round_trip_key_us;
  sec["table_done_us"] = table_us;
  sec["table_now_key_to_done_us"] = table_now_key_us;
  sec["table_now_done_us"] = table_now_us;
  sec["dispatcher_now_key_to_done_us"] = dispatcher_now_key_us;
  sec["dispatcher_now_done_us"] = dispatcher_now_us;
  sec["dispatch_done_us"] = device_us;
  sec["round_trip_done_us"] = host_us;
  sec["host_launch_done_us"] = from_host_us;
  sec["device_launch_done_us"] = from_device_us;
}

}  // namespace cugraphs_bench
