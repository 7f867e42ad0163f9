// A data-parallel step on every visible GPU, one rank a device: a gradient kernel, an
// all-reduce (average) of the gradients through NCCL, an update kernel. Eagerly from one
// thread (the collectives in one NCCL group) against a GraphSet replay of the same step;
// then 10,000 replays in a row, which must finish (no hang) with the weights exact.
// Built where NCCL 2.9+ was found. Prints the figures and writes them as JSON.
#include "bench_common.hpp"

#include <cugraphs/graph.hpp>
#include <cugraphs/nccl.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

using namespace cugraphs_bench;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;

namespace {

constexpr std::size_t kN = 1 << 20;  // 4 MiB of gradients a device
constexpr int kThreads = 256;
constexpr int kBlocks = static_cast<int>((kN + kThreads - 1) / kThreads);

// g = rank + 1 (small integers: every average is exact)
__global__ void gradients(float* g, std::size_t n, float value) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) g[i] = value;
}
// w -= g
__global__ void update(float* w, const float* g, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) w[i] -= g[i];
}

struct Rank {
  int device;
  std::unique_ptr<cugraphs::Stream> stream;
  std::unique_ptr<DeviceBuffer<float>> w, g;
};

}  // namespace

int main(int argc, char** argv) {
  if (!have_device("bench_allreduce")) return 0;
  const std::string out = json_path(argc, argv, "bench_allreduce");
  int count = 0;
  cugraphs::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  std::vector<int> devices(static_cast<std::size_t>(count));
  std::iota(devices.begin(), devices.end(), 0);
  cugraphs::nccl::Communicators comms(devices);
  std::vector<Rank> ranks;
  for (const int d : devices) {
    Rank r{d, std::make_unique<cugraphs::Stream>(d), nullptr, nullptr};
    r.w = std::make_unique<DeviceBuffer<float>>(kN, *r.stream);
    r.g = std::make_unique<DeviceBuffer<float>>(kN, *r.stream);
    r.w->copy_from_host(std::vector<float>(kN, 0.0f), *r.stream);
    ranks.push_back(std::move(r));
  }
  // Every rank's gradient is rank + 1, so the average is (D + 1) / 2 and every step takes
  // that from every weight, exactly (D + 1 is even or the halves are exact in float).
  const float average = static_cast<float>(count + 1) / 2.0f;
  auto kernels_then_reduce = [&](Rank& r, cudaStream_t s) {
    gradients<<<kBlocks, kThreads, 0, s>>>(r.g->data(), kN, static_cast<float>(r.device + 1));
    cugraphs::nccl::all_reduce(r.g->span(), ncclAvg, comms.on(r.device), s);
    update<<<kBlocks, kThreads, 0, s>>>(r.w->data(), r.g->data(), kN);
  };
  auto eager_step = [&] {
    for (auto& r : ranks) {
      cugraphs::detail::DeviceGuard on(r.device);
      gradients<<<kBlocks, kThreads, 0, *r.stream>>>(r.g->data(), kN, static_cast<float>(r.device + 1));
    }
    cugraphs::nccl::check(ncclGroupStart(), "ncclGroupStart");
    for (auto& r : ranks) cugraphs::nccl::all_reduce(r.g->span(), ncclAvg, comms.on(r.device), *r.stream);
    cugraphs::nccl::check(ncclGroupEnd(), "ncclGroupEnd");
    for (auto& r : ranks) {
      cugraphs::detail::DeviceGuard on(r.device);
      update<<<kBlocks, kThreads, 0, *r.stream>>>(r.w->data(), r.g->data(), kN);
    }
  };
  auto sync_all = [&] {
    for (auto& r : ranks) r.stream->synchronize();
  };
  std::uint64_t steps = 0;  // steps taken so far, eager or replayed
  eager_step();             // NCCL connects its ranks here, outside any capture
  ++steps;
  sync_all();

  cugraphs::GraphSet set;
  set.capture([&](int device, cudaStream_t s) { kernels_then_reduce(ranks[static_cast<std::size_t>(device)], s); });

  // Host cost per step (the launching thread only) and time to completion, back to back.
  const int batches = reps(30), per_batch = 20;
  std::vector<double> eager_host, replay_host, eager_done, replay_done;
  for (int b = 0; b < batches; ++b) {
    auto t0 = Clock::now();
    for (int i = 0; i < per_batch; ++i) eager_step();
    eager_host.push_back(us_since(t0) / per_batch);
    sync_all();
    eager_done.push_back(us_since(t0) / per_batch);
    steps += per_batch;
    t0 = Clock::now();
    for (int i = 0; i < per_batch; ++i) set.replay();
    replay_host.push_back(us_since(t0) / per_batch);
    set.synchronize();
    replay_done.push_back(us_since(t0) / per_batch);
    steps += per_batch;
  }

  // 10,000 replays in a row, watched: a hang (a rank waiting for a partner that never
  // comes) would show as streams still busy after the deadline.
  constexpr int kLong = 10000;
  const auto t_long = Clock::now();
  for (int i = 0; i < kLong; ++i) set.replay();
  steps += kLong;
  bool finished = false;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    bool busy = false;
    for (std::size_t i = 0; i < set.size(); ++i) {
      cugraphs::detail::DeviceGuard on(set.device(i));
      const cudaError_t e = cudaStreamQuery(set.stream(i));
      if (e == cudaErrorNotReady) busy = true;
      else cugraphs::check(e, "cudaStreamQuery");
    }
    if (!busy) {
      finished = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double long_ms = us_since(t_long) / 1000.0;
  bool exact = finished;
  if (finished) {
    const float expected = -average * static_cast<float>(steps);
    for (auto& r : ranks) {
      const auto w = r.w->to_host(*r.stream);
      for (const float v : w) exact = exact && v == expected;
    }
  }

  const double eh = median(eager_host), rh = median(replay_host), ed = median(eager_done), rd = median(replay_done);
  std::printf("== all-reduce step on %d device%s (%zu floats a rank: gradient kernel, ncclAllReduce avg, update)\n",
              count, count == 1 ? "" : "s", kN);
  std::printf("host cost per step: eager %.2f us, GraphSet replay %.2f us (%.2fx less)\n", eh, rh, eh / rh);
  std::printf("to completion per step, back to back: eager %.2f us, replay %.2f us (%.2fx)\n", ed, rd, ed / rd);
  std::printf("%d replays in a row: %s in %.1f ms; weights exact after %llu steps: %s\n", kLong,
              finished ? "finished" : "NOT finished (hang?)", long_ms, static_cast<unsigned long long>(steps),
              exact ? "yes" : "no");
  Json j = Json::object();
  j["devices"] = Json(count);
  j["floats_per_rank"] = Json(kN);
  j["eager_host_us"] = Json(eh);
  j["replay_host_us"] = Json(rh);
  j["eager_done_us"] = Json(ed);
  j["replay_done_us"] = Json(rd);
  j["long_replays"] = Json(kLong);
  j["long_replays_finished"] = Json(finished ? 1 : 0);
  j["long_replays_ms"] = Json(long_ms);
  j["weights_exact"] = Json(exact ? 1 : 0);
  if (std::FILE* f = std::fopen(out.c_str(), "w")) {
    std::fputs((j.dump() + "\n").c_str(), f);
    std::fclose(f);
  }
  return finished && exact ? 0 : 1;
}
