// GraphSet: one graph per device captured from the same step on a thread per device, and
// the refusal of a stream of another device at replay. On a machine with one GPU the set
// holds one graph; the cases that need two GPUs say so and skip.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;
using cugraphs::GraphSet;
using cugraphs::GraphSetOptions;

namespace {

constexpr std::size_t kN = 4099;

int device_count() {
  int n = 0;
  cugraphs::check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  return n;
}

bool two_gpus(const char* what) {
  if (device_count() >= 2) return true;
  std::printf("needs 2 GPUs: skipped (%s)\n", what);
  WARN("needs 2 GPUs: skipped (" << what << ")");
  return false;
}

// One buffer per device, filled with a ramp that differs by device, made on that device
// with a stream of its own (which frees it, on the right device, whatever is current).
struct PerDevice {
  std::vector<std::unique_ptr<cugraphs::Stream>> streams;  // first: they outlive the buffers
  std::vector<std::unique_ptr<DeviceBuffer<float>>> x;
  std::vector<std::vector<float>> start;
  explicit PerDevice(int devices) {
    for (int d = 0; d < devices; ++d) {
      std::vector<float> v(kN);
      for (std::size_t i = 0; i < kN; ++i) v[i] = static_cast<float>((i * 13 + static_cast<std::size_t>(d) * 7) % 31) - 15.0f;
      streams.push_back(std::make_unique<cugraphs::Stream>(d));
      x.push_back(std::make_unique<DeviceBuffer<float>>(kN, *streams.back()));
      x.back()->copy_from_host(std::span<const float>(v), *streams.back());
      start.push_back(std::move(v));
    }
  }
  std::vector<float> read(int d) { return x[static_cast<std::size_t>(d)]->to_host(*streams[static_cast<std::size_t>(d)]); }
};

// The step: x = 0.5 x + (device + 1), twice; exact in float for these values.
void step_on(float* x, int device, cudaStream_t s) {
  affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x, kN, 0.5f, static_cast<float>(device + 1));
  affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x, kN, 0.5f, static_cast<float>(device + 1));
  cugraphs::check_launch("affine_kernel");
}
float step_value(float v, int device) {
  for (int k = 0; k < 2; ++k) v = 0.5f * v + static_cast<float>(device + 1);
  return v;
}

}  // namespace

TEST_CASE("GraphSet: the same step captured on every device, one thread each, replays on each device's stream "
          "and gives the step's results",
          "[graph_set][gpu]") {
  const int devices = device_count();
  PerDevice data(devices);
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<int> calls{0};
  GraphSet set;
  set.capture([&](int device, cudaStream_t s) {
    {
      std::lock_guard lock(m);
      threads.insert(std::this_thread::get_id());
    }
    int current = -1;
    cugraphs::check(cudaGetDevice(&current), "cudaGetDevice");
    if (current != device) throw std::runtime_error("the step ran with another device current");
    ++calls;
    step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s);
  });
  CHECK(calls == devices);
  CHECK(threads.size() == static_cast<std::size_t>(devices));
  CHECK(threads.count(std::this_thread::get_id()) == 0);  // never on the calling thread
  REQUIRE(set.size() == static_cast<std::size_t>(devices));
  std::set<std::uint64_t> pools;
  for (std::size_t i = 0; i < set.size(); ++i) {
    CHECK(set.device(i) == static_cast<int>(i));
    CHECK(set.graph(i).pool().device() == static_cast<int>(i));
    CHECK(set.graph(i).native_exec() != nullptr);
    CHECK_FALSE(cugraphs::is_capturing(set.stream(i)));
    pools.insert(set.graph(i).pool_id());
  }
  CHECK(pools.size() == set.size());  // a private pool per device
  // Nothing ran during the capture: the buffers still hold their start values.
  for (int d = 0; d < devices; ++d) CHECK(data.read(d) == data.start[static_cast<std::size_t>(d)]);

  std::vector<std::vector<float>> expected = data.start;
  for (int replay = 0; replay < 3; ++replay) {
    set.replay();
    set.synchronize();
    for (int d = 0; d < devices; ++d) {
      auto& e = expected[static_cast<std::size_t>(d)];
      for (float& v : e) v = step_value(v, d);
      INFO("replay " << replay << ", device " << d);
      REQUIRE(data.read(d) == e);
    }
  }
  // On streams of the caller's choosing, one per device.
  std::vector<std::unique_ptr<cugraphs::Stream>> own;
  std::vector<cudaStream_t> streams;
  for (int d = 0; d < devices; ++d) {
    own.push_back(std::make_unique<cugraphs::Stream>(d));
    streams.push_back(*own.back());
  }
  set.replay(streams);
  for (int d = 0; d < devices; ++d) {
    own[static_cast<std::size_t>(d)]->synchronize();
    auto& e = expected[static_cast<std::size_t>(d)];
    for (float& v : e) v = step_value(v, d);
    REQUIRE(data.read(d) == e);
  }
  calls = 0;
  set.capture([&](int device, cugraphs::CaptureScope& scope) {  // a second capture replaces the first
    ++calls;
    step_on(data.x[static_cast<std::size_t>(device)]->data(), device, scope.stream());
  });
  CHECK(calls == devices);
  CHECK(set.size() == static_cast<std::size_t>(devices));
}

TEST_CASE("GraphSet: a step that throws on one device leaves the set empty; the exception propagates and the "
          "set captures afterwards",
          "[graph_set][gpu]") {
  const int devices = device_count();
  PerDevice data(devices);
  GraphSet set;
  const int failing = devices - 1;
  CHECK_THROWS_WITH(set.capture([&](int device, cudaStream_t s) {
    step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s);
    if (device == failing) throw std::runtime_error("step failed on the last device");
  }),
                    "step failed on the last device");
  CHECK(set.empty());
  auto e = expect_error([&] { set.replay(); });
  CHECK(contains(e.what(), "GraphSet::replay: nothing has been captured into this set"));
  for (int d = 0; d < devices; ++d) CHECK(data.read(d) == data.start[static_cast<std::size_t>(d)]);

  set.capture([&](int device, cudaStream_t s) { step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s); });
  set.replay();
  set.synchronize();
  for (int d = 0; d < devices; ++d) {
    std::vector<float> e2 = data.start[static_cast<std::size_t>(d)];
    for (float& v : e2) v = step_value(v, d);
    CHECK(data.read(d) == e2);
  }
}

TEST_CASE("GraphSet: bad devices, pools, indices and stream lists are Errors naming the cause; the set is left "
          "as it was",
          "[graph_set][gpu]") {
  const int devices = device_count();
  PerDevice data(devices);
  auto step = [&](int device, cudaStream_t s) { step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s); };
  GraphSet set;
  GraphSetOptions o;
  o.devices = {devices};
  auto e = expect_error([&] { set.capture(step, o); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), fmt::format("GraphSet::capture: device {} does not exist", devices)));
  o.devices = {0, 0};
  e = expect_error([&] { set.capture(step, o); });
  CHECK(contains(e.what(), "device 0 is listed twice; a set holds one graph per device"));
  o.devices = {0};
  o.pools = {cugraphs::graph_pool_handle(), cugraphs::graph_pool_handle()};
  e = expect_error([&] { set.capture(step, o); });
  CHECK(contains(e.what(), "2 pools were given for 1 devices"));
  CHECK(set.empty());
  {
    Graph outer;
    cugraphs::CaptureOptions empty;
    empty.allow_empty = true;  // the enclosing capture records nothing on purpose
    cugraphs::CaptureScope scope(outer, empty);
    e = expect_error([&] { set.capture(step, {}); });
    CHECK(contains(e.what(), "a capture is open on this thread"));
  }

  // Given pools are used, one per device.
  o.pools = {cugraphs::graph_pool_handle()};
  set.capture(step, o);
  REQUIRE(set.size() == 1);
  CHECK(set.graph(0).pool_id() == o.pools[0].id());
  e = expect_error([&] { (void)set.device(1); });
  CHECK(contains(e.what(), "GraphSet::device: index 1 is out of range: the set holds 1 graphs"));
  std::vector<cudaStream_t> none;
  e = expect_error([&] { set.replay(none); });
  CHECK(contains(e.what(), "0 streams were given for 1 graphs"));
  set.replay();  // still usable
  set.synchronize();
  std::vector<float> expected = data.start[0];
  for (float& v : expected) v = step_value(v, 0);
  CHECK(data.read(0) == expected);
}

TEST_CASE("Graph: a replay on a stream of another device is an Error naming both devices, before anything is "
          "posted or launched; so is GraphSet::replay with such a stream (needs 2 GPUs)",
          "[graph_set][reliability][gpu]") {
  if (!two_gpus("a replay on a stream of another device")) return;
  PerDevice data(2);
  // The graph draws random numbers, so a replay posts to its ring: a refused replay must
  // not have posted (the generator does not move).
  cugraphs::Generator gen(11);
  DeviceBuffer<float> noise(1024, *data.streams[0]);
  Graph g;
  {
    cugraphs::detail::DeviceGuard on(0);
    cugraphs::capture(g, [&](cudaStream_t s) {
      step_on(data.x[0]->data(), 0, s);
      draw(gen, noise, 1, s);
    });
  }
  const std::uint64_t offset = gen.offset();
  cugraphs::Stream foreign(1);
  auto e = expect_error([&] { g.replay(foreign); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::replay: the stream belongs to device 1 but this graph was captured on device 0"));
  {
    cugraphs::detail::DeviceGuard on(1);  // the legacy default stream is device 1's now
    e = expect_error([&] { g.replay(cudaStreamLegacy); });
    CHECK(contains(e.what(), "a default stream belongs to the current device"));
  }
  CHECK(data.read(0) == data.start[0]);  // nothing ran
  CHECK(gen.offset() == offset);           // nothing was posted
  {
    cugraphs::detail::DeviceGuard on(0);
    g.replay(cudaStreamLegacy);  // the right device: runs
    cugraphs::check(cudaStreamSynchronize(cudaStreamLegacy), "sync");
  }
  std::vector<float> expected = data.start[0];
  for (float& v : expected) v = step_value(v, 0);
  CHECK(data.read(0) == expected);

  GraphSet set;
  set.capture([&](int device, cudaStream_t s) { step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s); },
              GraphSetOptions{{0, 1}, {}, cugraphs::CaptureMode::ThreadLocal});
  const std::vector<cudaStream_t> swapped{set.stream(1), set.stream(0)};
  e = expect_error([&] { set.replay(swapped); });
  CHECK(contains(e.what(), "stream 0 belongs to device 1 but graph 0 was captured on device 0; nothing was launched"));
  CHECK(data.read(1) == data.start[1]);  // graph 1 did not run either
  GraphSetOptions wrong_pool{{0, 1}, {}, cugraphs::CaptureMode::ThreadLocal};
  {
    cugraphs::detail::DeviceGuard on(1);
    wrong_pool.pools = {cugraphs::graph_pool_handle(), cugraphs::graph_pool_handle()};  // both on device 1
  }
  e = expect_error([&] { set.capture([](int, cudaStream_t) {}, wrong_pool); });
  CHECK(contains(e.what(), "pool 0 belongs to device 1 but device 0 captures into it"));
  CHECK(set.size() == 2);  // unchanged
}

// Before: the set's captures (ThreadLocal, escape check Auto: off) let both through: the
// legacy-stream kernel ran once, while the set was captured, and every replay copied from a
// dead stack slot.
TEST_CASE("GraphSet: a step that launches on the legacy default stream, or copies from a stack variable, is "
          "refused by name as a Graph's capture is; EscapeCheck::Off lets them through",
          "[graph_set][escapes][gpu]") {
  const int devices = device_count();
  PerDevice data(devices);
  GraphSet set;
  auto e = expect_error([&] {
    set.capture([&](int device, cudaStream_t) {
      affine_kernel<<<blocks_for(kN), kThreads>>>(data.x[static_cast<std::size_t>(device)]->data(), kN, 2.0f, 0.0f);
    });
  });
  CHECK(contains(e.what(), "legacy default stream"));
  CHECK(set.empty());
  for (int d = 0; d < devices; ++d) CHECK(data.read(d) == data.start[static_cast<std::size_t>(d)]);
  e = expect_error([&] {
    set.capture([&](int device, cudaStream_t s) {
      const float dt = 0.5f;  // a per-frame scalar on the stack
      cugraphs::check(cudaMemcpyAsync(data.x[static_cast<std::size_t>(device)]->data(), &dt, sizeof dt,
                                      cudaMemcpyHostToDevice, s),
                      "cudaMemcpyAsync");
    });
  });
  CHECK(contains(e.what(), "plain pageable host memory"));
  CHECK(set.empty());
  GraphSetOptions off;
  off.escapes = cugraphs::EscapeCheck::Off;
  set.capture([&](int device, cudaStream_t s) { step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s); },
              off);
  set.replay();
  set.synchronize();
  for (int d = 0; d < devices; ++d) {
    std::vector<float> want = data.start[static_cast<std::size_t>(d)];
    for (float& v : want) v = step_value(v, d);
    CHECK(data.read(d) == want);
  }
}

// A step with nothing to do on one device (the last: on one GPU, the only one) records no
// work there. That is an Error by default (the usual cause is work on another stream, which
// would run once), the set left empty; GraphSetOptions::allow_empty keeps that device's
// graph empty and the others' as captured.
TEST_CASE("GraphSet: a device whose capture records no work is an Error unless allow_empty, which keeps it empty",
          "[graph_set][gpu]") {
  const int devices = device_count();
  PerDevice data(devices);
  const int idle = devices - 1;
  auto step = [&](int device, cudaStream_t s) {
    if (device != idle) step_on(data.x[static_cast<std::size_t>(device)]->data(), device, s);
  };
  GraphSet set;
  const auto e = expect_error([&] { set.capture(step); });
  CHECK(contains(e.what(), "recorded no work"));
  CHECK(contains(e.what(), "GraphSetOptions"));
  CHECK(set.empty());

  GraphSetOptions o;
  o.allow_empty = true;
  set.capture(step, o);
  REQUIRE(set.size() == static_cast<std::size_t>(devices));
  set.replay();
  set.replay();
  set.synchronize();
  for (int d = 0; d < devices; ++d) {
    std::vector<float> expected = data.start[static_cast<std::size_t>(d)];
    if (d != idle)
      for (float& v : expected) v = step_value(step_value(v, d), d);
    CHECK(data.read(d) == expected);
  }
}
