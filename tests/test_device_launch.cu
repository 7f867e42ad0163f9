// Device-side launch on the GPU: graphs captured with CaptureOptions::device_launch, replayed
// from the host and launched by kernels (tail, fire-and-forget, sibling); the status word
// through which a failed device-side launch reaches the host; what such a graph refuses to
// hold, in words; and DeviceDispatch, which picks a bucket graph from a key on the device.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/device_dispatch.hpp>
#include <cugraphs/graph.hpp>

#include <array>
#include <string>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::Graph;

namespace {

constexpr std::size_t kN = 3000;  // not a multiple of the block size

__global__ void add_kernel(float* x, std::size_t n, float v) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += v;
}

__global__ void set_kernel(unsigned* p, unsigned v) { *p = v; }

// Launches `g` from the device (one thread): 0 tail, 1 fire-and-forget, 2 sibling, 3 two
// fire-and-forget launches in a row (the second while the first runs).
__global__ void launch_from_device(cugraphs::DeviceGraph g, int how) {
  if (how == 0) g.launch_tail();
  else if (how == 1) g.launch_fire_and_forget();
  else if (how == 2) g.launch_sibling();
  else {
    g.launch_fire_and_forget();
    g.launch_fire_and_forget();
  }
}

CaptureOptions for_device() {
  CaptureOptions o;
  o.device_launch = true;
  return o;
}

// A graph for device launch that adds `v` to every element of `x`.
Graph adding(DeviceBuffer<float>& x, float v) {
  Graph g;
  CaptureScope scope(g, for_device());
  add_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, v);
  cugraphs::check_launch("add_kernel");
  scope.end();
  return g;
}

// Writes v to *p after about `ns` nanoseconds.
__global__ void slow_set_kernel(unsigned* p, unsigned v, unsigned long long ns) {
  spin_ns(ns);
  *p = v;
}

// `count` graphs for device launch: graph b writes b + 1 to `ran` (after about `wait_ns`).
std::vector<Graph> flagging_buckets(DeviceBuffer<unsigned>& ran, std::size_t count, unsigned long long wait_ns = 0) {
  std::vector<Graph> buckets;
  for (unsigned b = 0; b < count; ++b) {
    Graph g;
    CaptureScope scope(g, for_device());
    if (wait_ns == 0) set_kernel<<<1, 1, 0, scope.stream()>>>(ran.data(), b + 1);
    else slow_set_kernel<<<1, 1, 0, scope.stream()>>>(ran.data(), b + 1, wait_ns);
    scope.end();
    buckets.push_back(std::move(g));
  }
  return buckets;
}

// The buckets' addresses, as DeviceDispatch takes them.
std::vector<Graph*> pointers_to(std::vector<Graph>& buckets) {
  std::vector<Graph*> pointers;
  for (auto& g : buckets) pointers.push_back(&g);
  return pointers;
}

void require_all(const DeviceBuffer<float>& x, float v) {
  const auto h = host(x);
  for (std::size_t i = 0; i < h.size(); i += 101) REQUIRE(h[i] == v);
  REQUIRE(h.back() == v);
}

}  // namespace

TEST_CASE("Device launch: a graph captured for device launch replays from the host, and kernels launch it as a "
          "tail launch, fire-and-forget and sibling",
          "[device_launch][gpu]") {
  DeviceBuffer<float> x(kN);
  put_all(x, 1.0f);
  Graph g = adding(x, 2.0f);
  g.replay();
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  require_all(x, 3.0f);
  float expected = 3.0f;
  // Each launch kind from a launcher graph made for device launch, then a tail launch from a
  // plain launcher graph: the launching graph itself need not be made for device launch.
  const std::array<std::pair<int, bool>, 4> rounds{{{0, false}, {1, false}, {2, false}, {0, true}}};
  for (const auto& [how, plain_launcher] : rounds) {
    Graph launcher;
    {
      CaptureScope scope(launcher, plain_launcher ? CaptureOptions{} : for_device());
      launch_from_device<<<1, 1, 0, scope.stream()>>>(g.device_graph(), how);
    }
    for (int r = 0; r < 3; ++r) {
      launcher.replay();
      expected += 2.0f;
    }
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    INFO("launch kind " << how << (plain_launcher ? " from a plain launcher graph" : ""));
    require_all(x, expected);
  }
  g.check_device_launches();  // none failed: no throw
}

TEST_CASE("Device launch: a device-side launch that fails (the graph launched again while it runs) is recorded "
          "and reported by check_device_launches, once",
          "[device_launch][reliability][gpu]") {
  DeviceBuffer<float> x(kN);
  put_all(x, 5.0f);
  Graph g;  // runs for about 2 ms: the second launch comes while the first runs
  {
    CaptureScope scope(g, for_device());
    slow_fill_kernel<<<1, kThreads, 0, scope.stream()>>>(x.data(), kN, 6.0f, 2'000'000);
  }
  Graph launcher;
  {
    CaptureScope scope(launcher);
    launch_from_device<<<1, 1, 0, scope.stream()>>>(g.device_graph(), 3);
  }
  launcher.replay();
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  require_all(x, 6.0f);  // the first launch ran
  const auto e = expect_error([&] { g.check_device_launches(); });
  CHECK(e.code() == cudaErrorInvalidValue);
  CHECK(contains(e.what(), "Graph::check_device_launches"));
  CHECK(contains(e.what(), "from the device failed"));
  g.check_device_launches();  // reported once
  put_all(x, 5.0f);
  g.replay();  // the graph stays usable
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  require_all(x, 6.0f);
}

TEST_CASE("Device launch: what a device graph cannot hold is an Error naming the node, and a graph not made for "
          "device launch has no device handle",
          "[device_launch][reliability][gpu]") {
  DeviceBuffer<float> x(kN);
  SECTION("a host function node") {
    Graph g;
    const auto e = expect_error([&] {
      CaptureScope scope(g, for_device());
      add_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(x.data(), kN, 1.0f);
      cugraphs::check(cudaLaunchHostFunc(scope.stream(), [](void*) {}, nullptr), "cudaLaunchHostFunc");
      scope.end();
    });
    CHECK(contains(e.what(), "device launch"));
    CHECK(contains(e.what(), "host function"));
    CHECK(contains(e.what(), "node 1"));
    CHECK_FALSE(g.is_instantiated());
  }
  SECTION("a memory allocation node") {
    Graph g;
    const auto e = expect_error([&] {
      CaptureScope scope(g, for_device());
      void* p = nullptr;
      cugraphs::check(cudaMallocAsync(&p, 1024, scope.stream()), "cudaMallocAsync");
      cugraphs::check(cudaFreeAsync(p, scope.stream()), "cudaFreeAsync");
      scope.end();
    });
    CHECK(contains(e.what(), "memory allocation"));
    CHECK(contains(e.what(), "node 0"));
  }
  SECTION("random numbers drawn through a Generator") {
    Graph g;
    cugraphs::Generator gen(7);
    CaptureScope scope(g, for_device());
    const auto e = expect_error([&] { (void)gen.philox(4); });
    CHECK(contains(e.what(), "device launch"));
    scope.abort();
  }
  SECTION("a graph captured without device_launch") {
    Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) { add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f); });
    const auto e = expect_error([&] { (void)g.device_graph(); });
    CHECK(contains(e.what(), "CaptureOptions::device_launch"));
  }
}

TEST_CASE("DeviceDispatch: a key written by a kernel picks the smallest bucket that holds it, with no host round "
          "trip, with the buckets in the table and beyond what it holds; a key above every bucket is reported",
          "[device_launch][dispatch][gpu]") {
  DeviceBuffer<unsigned> key(1), ran(1);
  cugraphs::Stream s;
  cugraphs::StreamGuard on(s);
  // 3 buckets travel in the table itself; 11 are more than it holds (DispatchTable::kInline).
  for (const std::size_t count : {std::size_t{3}, std::size_t{cugraphs::DispatchTable::kInline + 3}}) {
    std::vector<unsigned> bounds;
    for (std::size_t b = 0; b < count; ++b) bounds.push_back(4u << (2 * b));  // 4, 16, 64, ...
    std::vector<Graph> buckets = flagging_buckets(ran, count);
    const std::vector<Graph*> pointers = pointers_to(buckets);
    cugraphs::DeviceDispatch dispatch(pointers, bounds, key.data());
    // (key, the bucket that must run, counted from 1): each bound, and one above each bound.
    std::vector<std::pair<unsigned, unsigned>> cases{{1, 1}};
    for (unsigned b = 0; b < count; ++b) {
      cases.emplace_back(bounds[b], b + 1);
      if (b + 1 < count) cases.emplace_back(bounds[b] + 1, b + 2);
    }
    for (const auto& [k, bucket] : cases) {
      put(ran, 0u);
      set_kernel<<<1, 1, 0, s>>>(key.data(), k);  // the key is only known on the device
      dispatch.replay();
      s.synchronize();
      INFO(count << " buckets, key " << k);
      CHECK(get(ran) == bucket);
    }
    dispatch.check();  // nothing to report
    put(ran, 0u);
    set_kernel<<<1, 1, 0, s>>>(key.data(), bounds.back() + 1);
    dispatch.replay();
    s.synchronize();
    CHECK(get(ran) == 0u);
    const auto e = expect_error([&] { dispatch.check(); });
    CHECK(contains(e.what(), "a key of " + std::to_string(bounds.back() + 1) +
                                          " was above the largest bucket bound, " + std::to_string(bounds.back())));
  }
  std::vector<Graph> buckets = flagging_buckets(ran, 3);
  const std::vector<Graph*> pointers = pointers_to(buckets);
  const auto misuse = expect_error([&] { cugraphs::DeviceDispatch bad(pointers, std::array<unsigned, 3>{4, 4, 8}, key.data()); });
  CHECK(contains(misuse.what(), "ascend strictly"));

  // A bucket's graph names a buffer freed since its capture: the dispatch refuses, as the
  // bucket's own replay would (the device launches the buckets, and checks nothing). Before:
  // the bucket wrote into the freed buffer, silently.
  DeviceBuffer<unsigned> flag(1);
  std::vector<Graph> named = flagging_buckets(flag, 2);
  const std::vector<Graph*> named_pointers = pointers_to(named);
  cugraphs::DeviceDispatch watched(named_pointers, std::array<unsigned, 2>{4, 16}, key.data());
  watched.replay();
  flag = DeviceBuffer<unsigned>(1);
  const auto freed = expect_error([&] { watched.replay(); });
  CHECK(contains(freed.what(), "DeviceDispatch::replay: the graph names a DeviceBuffer that has been freed since its "
                               "capture (4 bytes at"));
  cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "sync");
}

namespace {

// A step that decides on the device: the key is twice the input, and the kernel that computes
// it dispatches through the table itself (no dispatcher graph).
__global__ void decide_and_dispatch(const unsigned* input, unsigned* key, cugraphs::DispatchTable table) {
  const unsigned k = *input * 2;
  *key = k;
  (void)table.dispatch(k);
}

__global__ void copy_word(const unsigned* from, unsigned* to) { *to = *from; }

// One step on input `in`: clears the buckets' flag, replays `step` on `s`, copies the flag from
// a kernel queued after the step (into `seen`), and waits.
void run_step(Graph& step, cugraphs::Stream& s, DeviceBuffer<unsigned>& input, DeviceBuffer<unsigned>& ran,
              DeviceBuffer<unsigned>& seen, unsigned in) {
  put(input, in);
  put(ran, 0u);
  put(seen, 99u);
  step.replay(s);
  copy_word<<<1, 1, 0, s>>>(ran.data(), seen.data());  // after the step in stream order
  s.synchronize();
}

}  // namespace

TEST_CASE("DeviceDispatch: the kernel that computes the key dispatches through its table, and work queued after "
          "the step waits for the bucket's graph; a key above every bucket is reported",
          "[device_launch][dispatch][gpu]") {
  DeviceBuffer<unsigned> input(1), key(1), ran(1), seen(1);
  const std::array<unsigned, 3> bounds{4, 16, 64};
  std::vector<Graph> buckets = flagging_buckets(ran, bounds.size());
  const std::vector<Graph*> pointers = pointers_to(buckets);
  cugraphs::DeviceDispatch dispatch(pointers, bounds, key.data());
  Graph step;
  {
    CaptureScope scope(step, for_device());
    decide_and_dispatch<<<1, 1, 0, scope.stream()>>>(input.data(), key.data(), dispatch.table());
    cugraphs::check_launch("decide_and_dispatch");
    scope.end();
  }
  cugraphs::Stream s;
  // input -> key -> bucket
  const std::array<std::pair<unsigned, unsigned>, 5> cases{{{1, 1}, {2, 1}, {3, 2}, {8, 2}, {32, 3}}};
  for (const auto& [in, bucket] : cases) {
    run_step(step, s, input, ran, seen, in);
    INFO("input " << in);
    CHECK(get(key) == 2 * in);
    CHECK(get(ran) == bucket);
    CHECK(get(seen) == bucket);
  }
  dispatch.check();  // nothing to report
  put(input, 33u);
  put(ran, 0u);
  step.replay(s);
  s.synchronize();
  CHECK(get(ran) == 0u);
  const auto e = expect_error([&] { dispatch.check(); });
  CHECK(contains(e.what(), "a key of 66 was above the largest bucket bound, 64"));
  // The dispatch stays usable after the report.
  put(input, 4u);
  step.replay(s);
  s.synchronize();
  CHECK(get(ran) == 2u);
  dispatch.check();
}

namespace {

// dispatch_now from the kernel that computes the key; with `watch`, the kernel then waits (up
// to about half a second) for the bucket's write, and `saw` says whether the bucket ran while
// the launching kernel still ran, which a tail launch cannot do. (CUDA does not promise that
// a fire-and-forget child runs beside its launcher; on this one-kernel graph and a GPU with
// free SMs it does, and `saw` checks that dispatch_now really launches at once.)
__global__ void dispatch_now_kernel(const unsigned* input, cugraphs::DispatchTable table, bool watch,
                                    const volatile unsigned* ran, unsigned* saw) {
  *saw = 0;
  if (!table.dispatch_now(*input) || !watch) return;
  const unsigned long long start = gpu_ns();
  while (*ran == 0 && gpu_ns() - start < 500'000'000ull) {
  }
  *saw = *ran != 0 ? 1u : 0u;
}

}  // namespace

TEST_CASE("DeviceDispatch: dispatch_now starts the bucket's graph while the launching kernel runs, and work queued "
          "after the step still waits for it",
          "[device_launch][dispatch][gpu]") {
  DeviceBuffer<unsigned> input(1), key(1), ran(1), seen(1), saw(1);
  const std::array<unsigned, 2> bounds{4, 16};
  // Each bucket writes its flag 2 ms after it starts: long after the launching graph's end
  // when that graph does not wait for it.
  std::vector<Graph> buckets = flagging_buckets(ran, bounds.size(), 2'000'000);
  const std::vector<Graph*> pointers = pointers_to(buckets);
  cugraphs::DeviceDispatch dispatch(pointers, bounds, key.data());
  cugraphs::Stream s;
  // Watching from a graph made for device launch; not watching from one, and from a plain graph
  // (the launching graph need not be made for device launch).
  for (const auto& [watch, plain] : std::array<std::pair<bool, bool>, 3>{{{true, false}, {false, false}, {false, true}}}) {
    Graph step;
    {
      CaptureScope scope(step, plain ? CaptureOptions{} : for_device());
      dispatch_now_kernel<<<1, 1, 0, scope.stream()>>>(input.data(), dispatch.table(), watch, ran.data(), saw.data());
      cugraphs::check_launch("dispatch_now_kernel");
      scope.end();
    }
    for (const auto& [in, bucket] : std::array<std::pair<unsigned, unsigned>, 3>{{{3, 1}, {9, 2}, {4, 1}}}) {
      run_step(step, s, input, ran, seen, in);
      INFO((watch ? "watching" : "not watching") << (plain ? ", from a plain graph" : "") << ", input " << in);
      CHECK(get(ran) == bucket);
      CHECK(get(seen) == bucket);  // the step's end waited for the bucket, started now
      if (watch) CHECK(get(saw) == 1u);  // the bucket ran beside the kernel that launched it
    }
  }
  dispatch.check();  // nothing to report
  put(input, 17u);
  put(ran, 0u);
  Graph step;
  {
    CaptureScope scope(step, for_device());
    dispatch_now_kernel<<<1, 1, 0, scope.stream()>>>(input.data(), dispatch.table(), false, ran.data(), saw.data());
    scope.end();
  }
  step.replay(s);
  s.synchronize();
  CHECK(get(ran) == 0u);
  const auto e = expect_error([&] { dispatch.check(); });
  CHECK(contains(e.what(), "a key of 17 was above the largest bucket bound, 16"));
}

#if CUGRAPHS_HAS_DEVICE_UPDATABLE_NODES
namespace {

using ScaleNode = cugraphs::DeviceKernelNode<float*, std::size_t, float>;

__global__ void scale_kernel(float* x, std::size_t n, float a) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= a;
}

// Changes the scale node, which runs right after it: 0 disables it, 1 enables it with a = 3,
// 2 enables it with a = 3 and one block only. The handle is read from device memory: the node is
// captured after this kernel, so its handle is known only once the capture has ended.
__global__ void update_scale(const ScaleNode* node, const int* mode, int* status) {
  cudaError_t e = cudaSuccess;
  if (*mode == 0) {
    e = node->set_enabled(false);
  } else if (*mode == 1) {
    e = node->set_enabled(true);
    if (e == cudaSuccess) e = node->set_arg<2>(3.0f);
  } else {
    e = node->set_enabled(true);
    if (e == cudaSuccess) e = node->set_arg<2>(3.0f);
    if (e == cudaSuccess) e = node->set_grid(dim3(1));
  }
  if (e != cudaSuccess) *status = static_cast<int>(e);
}

}  // namespace

TEST_CASE("Device launch: a kernel disables, re-enables, re-grids and re-parameterizes a device-updatable node of "
          "its graph",
          "[device_launch][device_update][gpu]") {
  DeviceBuffer<float> x(kN);
  DeviceBuffer<int> mode(1), status(1);
  DeviceBuffer<ScaleNode> handle(1);
  put(status, 0);
  Graph g;
  ScaleNode node;
  {
    CaptureScope scope(g);
    update_scale<<<1, 1, 0, scope.stream()>>>(handle.data(), mode.data(), status.data());
    cugraphs::LaunchConfig config;
    config.grid = dim3(static_cast<unsigned>(blocks_for(kN)));
    config.block = dim3(kThreads);
    node = cugraphs::launch_updatable(config, scale_kernel, x.data(), kN, 1.0f);
    scope.end();
  }
  put(handle, node);
  const std::array<int, 3> modes{1, 0, 2};
  for (const int m : modes) {
    put_all(x, 2.0f);
    put(mode, m);
    g.replay();
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(get(status) == 0);
    const auto h = host(x);
    INFO("mode " << m);
    if (m == 1) {
      CHECK(h[0] == 6.0f);
      CHECK(h[kN - 1] == 6.0f);
    } else if (m == 0) {
      CHECK(h[0] == 2.0f);
      CHECK(h[kN - 1] == 2.0f);
    } else {  // one block, a = 3
      CHECK(h[0] == 6.0f);
      CHECK(h[kThreads - 1] == 6.0f);
      CHECK(h[kThreads] == 2.0f);
      CHECK(h[kN - 1] == 2.0f);
    }
  }
  const auto e = expect_error([&] {
    cugraphs::LaunchConfig config;
    (void)cugraphs::launch_updatable(cugraphs::current_stream(), config, scale_kernel, x.data(), kN, 1.0f);
  });
  CHECK(contains(e.what(), "the stream is not capturing"));
}
#endif

TEST_CASE("Device launch: a graph whose device handle was given out keeps its executable: an update that cannot be "
          "made in place is an Error, one that can is uploaded again",
          "[device_launch][update][reliability][gpu]") {
  DeviceBuffer<float> x(kN);
  put_all(x, 1.0f);
  Graph g = adding(x, 2.0f);
  const auto handle = g.device_graph();
  // Same topology, another constant: updated in place (and uploaded for device launches).
  auto same = [&](cudaStream_t s) { add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 5.0f); };
  const auto r = g.capture_or_update(same);
  CHECK(r.updated);
  CHECK(g.native_exec() == handle.exec);
  Graph launcher;
  {
    CaptureScope scope(launcher);
    launch_from_device<<<1, 1, 0, scope.stream()>>>(handle, 0);
  }
  launcher.replay();
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  require_all(x, 6.0f);  // the device launch ran the updated constant
  // Another topology: a new instantiation would destroy the executable the handle names.
  auto other = [&](cudaStream_t s) {
    add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f);
    add_kernel<<<blocks_for(kN), kThreads, 0, s>>>(x.data(), kN, 1.0f);
  };
  const auto e = expect_error([&] { (void)g.capture_or_update(other); });
  CHECK(contains(e.what(), "device handle (device_graph()) was given out"));
  CHECK(g.native_exec() == handle.exec);
  g.replay();
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  require_all(x, 11.0f);
}
