// A kernel that traps during a replay loses the CUDA context for the whole process: the
// next synchronize throws cugraphs::Error saying the context is lost, and every later
// library call gives such an Error too, never a crash or a hang; destructors report and
// return. A program of its own, without Catch2, since no CUDA work succeeds in this process
// afterwards. Exits 77 without a device, 0 when everything was as expected, 1 otherwise.
#include <cugraphs/graph.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Graph;

__global__ void add_kernel(int* x, int v) { *x += v; }
__global__ void add_from(int* x, const int* v) { *x += *v; }
__global__ void trap_kernel() { __trap(); }
__global__ void noise_kernel(float* out, cugraphs::PhiloxArgs args) {
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  out[threadIdx.x] = static_cast<float>((seed + offset + threadIdx.x) % 1000);
}

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok:  " : "FAIL:", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

// `fn` must throw cugraphs::Error with a sticky code and a message that says the context
// is lost.
template <class F>
void expect_context_lost(const std::string& what, F&& fn) {
  try {
    fn();
    expect(false, what + ": nothing was thrown");
  } catch (const cugraphs::Error& e) {
    const std::string message = e.what();
    std::printf("      %s threw cugraphs::Error %s: %s\n", what.c_str(), cudaGetErrorName(e.code()), message.c_str());
    expect(cugraphs::detail::is_sticky(e.code()),
           what + ": the code (" + cudaGetErrorName(e.code()) + ") is one that loses the context");
    expect(message.find("context is lost") != std::string::npos, what + ": the message says the context is lost");
    expect(message.find("restart the process") != std::string::npos, what + ": the message gives the remedy");
  } catch (const std::exception& e) {
    expect(false, what + ": threw another exception: " + e.what());
  }
}

// Tries `fn` on work queued behind the trap: it may be accepted (the fault is not known
// yet) or refused with the lost context; anything else is a failure.
template <class F>
void queue_behind_trap(const std::string& what, F&& fn) {
  try {
    fn();
    std::printf("      %s: accepted (queued behind the trap)\n", what.c_str());
  } catch (const cugraphs::Error& e) {
    std::printf("      %s: refused with %s\n", what.c_str(), cudaGetErrorName(e.code()));
    expect(cugraphs::detail::is_sticky(e.code()), what + ": refused only for the lost context");
  }
}

int run() {
  using clock = std::chrono::steady_clock;
  cugraphs::Stream s;
  DeviceBuffer<int> counter(1, s), input(1, s);
  counter.copy_from_host(std::vector<int>{5}, s);
  input.copy_from_host(std::vector<int>{7}, s);

  // Everything below is built while the context is healthy.
  Graph healthy;
  cugraphs::capture(healthy, [&](cudaStream_t cs) { add_kernel<<<1, 1, 0, cs>>>(counter.data(), 3); });
  healthy.replay(s);
  s.synchronize();
  expect(counter.to_host(s)[0] == 8, "a healthy replay ran (5 + 3 = 8)");

  cugraphs::Generator gen(11);
  DeviceBuffer<float> noise(32, s);
  Graph random;
  cugraphs::capture(random, [&](cudaStream_t cs) { noise_kernel<<<1, 32, 0, cs>>>(noise.data(), gen.philox(1)); });
  random.replay(s);
  s.synchronize();

  cugraphs::GraphedOptions opts;
  opts.warmup_iters = 0;
  int* const c = counter.data();
  auto callable = cugraphs::make_graphed_callable(
      opts, [c](DeviceSpan<const int> x) { add_from<<<1, 1, 0, cugraphs::current_stream()>>>(c, x.data()); },
      DeviceSpan<const int>(input));
  {
    cugraphs::StreamGuard on(s);
    callable(DeviceSpan<const int>(input));
  }
  expect(counter.to_host(s)[0] == 15, "a healthy graphed call ran (8 + 7 = 15)");

  Graph trapping;
  cugraphs::capture(trapping, [&](cudaStream_t cs) {
    add_kernel<<<1, 1, 0, cs>>>(counter.data(), 100);
    trap_kernel<<<1, 1, 0, cs>>>();
  });
  expect(cudaGetLastError() == cudaSuccess, "no error is pending before the trap");

  std::printf("replaying a graph whose kernel traps\n");
  const auto t0 = clock::now();
  try {
    trapping.replay(s);
    expect(true, "the trapping replay was launched (the fault comes later, on the device)");
  } catch (const cugraphs::Error& e) {
    expect(false, std::string("the launch itself failed: ") + e.what());
  }
  // Work queued behind the trap never runs; waiting for it must not hang later.
  queue_behind_trap("a replay of a graph drawing random numbers", [&] { random.replay(s); });
  queue_behind_trap("a graphed call", [&] {
    cugraphs::StreamGuard on(s);
    callable(DeviceSpan<const int>(input));
  });

  expect_context_lost("Stream::synchronize after the trapping replay", [&] { s.synchronize(); });
  expect_context_lost("Graph::replay of a healthy graph", [&] { healthy.replay(s); });
  expect_context_lost("Graph::replay of a graph drawing random numbers", [&] { random.replay(s); });
  expect_context_lost("a graphed call", [&] {
    cugraphs::StreamGuard on(s);
    callable(DeviceSpan<const int>(input));
  });
  expect_context_lost("DeviceBuffer::to_host", [&] { (void)counter.to_host(s); });
  expect_context_lost("a new DeviceBuffer", [&] { DeviceBuffer<int> b(64, s); });
  expect_context_lost("capturing a new graph", [&] {
    Graph g;
    cugraphs::capture(g, [&](cudaStream_t cs) {
      add_kernel<<<1, 1, 0, cs>>>(counter.data(), 1);
      cugraphs::check_launch("add_kernel");
    });
    g.replay(s);
    s.synchronize();
  });
  expect_context_lost("make_graphed_callable", [&] {
    auto again = cugraphs::make_graphed_callable(
        [c](DeviceSpan<const int> x) { add_from<<<1, 1, 0, cugraphs::current_stream()>>>(c, x.data()); },
        DeviceSpan<const int>(input));
    again(DeviceSpan<const int>(input));
  });
  expect_context_lost("cugraphs::check(cudaDeviceSynchronize())",
                      [] { cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); });
  // Host-side figures need no device and still answer.
  try {
    std::printf("      pool figures still answer: healthy graph's pool reserves %zu bytes\n",
                healthy.pool().reserved_bytes());
    expect(true, "pool figures are readable after the fault");
  } catch (const std::exception& e) {
    expect(false, std::string("reading pool figures threw: ") + e.what());
  }
  std::printf("destroying every object (destructors report the lost context on stderr)\n");
  std::fflush(stdout);
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t0).count());
}

}  // namespace

int main() {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s); this test needs a GPU\n",
                e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
    return 77;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const int ms_to_destructors = run();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    std::printf("after the trap: %d ms until the destructors ran; %lld ms in all\n", ms_to_destructors,
                static_cast<long long>(ms));
    expect(ms < 20'000, "nothing hung (the whole program took under 20 s)");
  } catch (const std::exception& e) {
    expect(false, std::string("an unexpected exception escaped: ") + e.what());
  }
  std::printf("%s: %d failure(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
