// Faults: a capture invalidated in each capture mode, an exception thrown from user code at
// every point where user code runs, and destruction in every order. Each case checks the
// error that came out, the state left behind (no stream capturing, the graph empty and
// reusable) and that every byte went back to the device.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureMode;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::ConditionalScope;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Generator;
using cugraphs::Graph;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
constexpr std::size_t MiB = std::size_t{1} << 20;

// A user exception that is neither a cugraphs::Error nor a std::runtime_error: the library
// must let it out exactly as thrown. `where` says which throw site fired.
struct Boom : std::exception {
  explicit Boom(int w) : where(w) {}
  const char* what() const noexcept override { return "Boom: user code failed"; }
  int where;
};

template <class F>
Boom expect_boom(F&& fn) {
  try {
    fn();
  } catch (const Boom& b) {
    return b;
  } catch (const std::exception& e) {
    FAIL("expected Boom, got another exception: " << e.what());
  } catch (...) {
    FAIL("expected Boom, got an exception of unknown type");
  }
  FAIL("expected Boom, nothing was thrown");
  return Boom(-1);
}

__global__ void affine_into(float* out, const float* in, std::size_t n, float a, float b) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}

__global__ void accumulate(float* acc, const float* x, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) acc[i] += x[i];
}

void ramp(float* x, std::size_t n, float base, cudaStream_t s) {
  ramp_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, base);
  cugraphs::check_launch("ramp_kernel");
}

// Requires every element to be f(i); reports the first mismatch.
template <class F>
void require_values(const std::vector<float>& got, F&& f) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != f(i)) {
      INFO("element " << i << ": got " << got[i] << ", expected " << f(i));
      REQUIRE(got[i] == f(i));
    }
  }
}

// The device's free memory at the start of a scenario. Scenarios run twice: the first run
// loads the kernels and creates the per-thread streams, so the second, measured run starts
// from a steady state and must give back every byte.
struct MemoryMark {
  explicit MemoryMark(bool measured_run) : measured(measured_run) {}
  bool measured;
  std::size_t start = device_free_bytes();

  void expect_back(const char* when) const {
    const std::size_t now = device_free_bytes();
    if (!measured) return;
    INFO("free device memory " << when << ": " << now << " bytes, at the start " << start << " bytes (difference "
                               << (static_cast<long long>(now) - static_cast<long long>(start)) << ")");
    CHECK(now == start);
  }
  // Memory that a scenario still holds on purpose (a pool kept alive) is really in use.
  void expect_held(std::size_t at_least) const {
    const std::size_t now = device_free_bytes();
    INFO("held " << (static_cast<long long>(start) - static_cast<long long>(now)) << " bytes, expected at least "
                 << at_least);
    CHECK(now + at_least <= start);
  }
};

// A capture that an exception ended: nothing captures, the graph is empty, and the current
// stream is the one from before the capture.
void check_capture_aborted(const Graph& g, const std::vector<cudaStream_t>& streams, cudaStream_t current) {
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(g.is_instantiated());
  CHECK(g.native_graph() == nullptr);
  CHECK(g.open_conditionals() == 0);
  for (const cudaStream_t s : streams) CHECK_FALSE(cugraphs::is_capturing(s));
  CHECK_FALSE(cugraphs::is_capturing(cugraphs::capture_stream()));
  CHECK(cugraphs::current_stream() == current);
  CHECK(cudaGetLastError() == cudaSuccess);
  const auto e = expect_error([&] { (void)g.pool_id(); });  // the graph let go of the pool
  CHECK(contains(e.what(), "nothing has been captured"));
}

// A pool that no graph holds any more: nothing is handed out, and trim() gives every
// segment back.
void check_pool_released(cugraphs::PoolHandle& pool) {
  CHECK(pool.allocated_bytes() == 0);
  const std::size_t reserved = pool.reserved_bytes();
  CHECK(pool.trim() == reserved);
  CHECK(pool.reserved_bytes() == 0);
}

// A stream that synchronizes with the legacy default stream (cudaStreamDefault flags).
struct BlockingStream {
  cudaStream_t s = nullptr;
  BlockingStream() { cugraphs::check(cudaStreamCreateWithFlags(&s, cudaStreamDefault), "cudaStreamCreate"); }
  ~BlockingStream() { cudaStreamDestroy(s); }
  BlockingStream(const BlockingStream&) = delete;
  BlockingStream& operator=(const BlockingStream&) = delete;
};

enum class Unsafe { Malloc, SyncCapturingStream, LegacyStreamLaunch };

struct InvalidatingCall {
  CaptureMode mode;
  Unsafe call;
  const char* description;
  const char* cause_in_message;  // what the Error's message must name
  cudaError_t in_capture;        // what the call itself is expected to return
};

cudaError_t make_call(Unsafe call, cudaStream_t capturing, float* scratch) {
  switch (call) {
    case Unsafe::Malloc: {
      void* p = nullptr;
      const cudaError_t e = cudaMalloc(&p, MiB);
      if (e == cudaSuccess) (void)cudaFree(p);
      return e;
    }
    case Unsafe::SyncCapturingStream:
      return cudaStreamSynchronize(capturing);
    case Unsafe::LegacyStreamLaunch:
      fill_kernel<<<1, 64>>>(scratch, 64, 9.0f);  // no stream: the legacy default stream
      return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Invalidated captures
// ---------------------------------------------------------------------------------------------

TEST_CASE("Faults: a call that invalidates the capture, in each capture mode, ends it with an Error "
          "naming the cause, the mode and the remedy; the graph captures again and every byte "
          "comes back",
          "[faults][modes][gpu]") {
  const InvalidatingCall calls[] = {
      {CaptureMode::Global, Unsafe::Malloc, "cudaMalloc", "cudaMalloc", cudaErrorStreamCaptureUnsupported},
      {CaptureMode::Global, Unsafe::SyncCapturingStream, "cudaStreamSynchronize of the capturing stream",
       "synchronize", cudaErrorStreamCaptureUnsupported},
      {CaptureMode::Global, Unsafe::LegacyStreamLaunch,
       "a kernel on the legacy default stream while a blocking stream captures", "legacy default stream",
       cudaErrorStreamCaptureImplicit},
      {CaptureMode::ThreadLocal, Unsafe::Malloc, "cudaMalloc", "cudaMalloc", cudaErrorStreamCaptureUnsupported},
      {CaptureMode::ThreadLocal, Unsafe::SyncCapturingStream, "cudaStreamSynchronize of the capturing stream",
       "synchronize", cudaErrorStreamCaptureUnsupported},
      {CaptureMode::ThreadLocal, Unsafe::LegacyStreamLaunch,
       "a kernel on the legacy default stream while a blocking stream captures", "legacy default stream",
       cudaErrorStreamCaptureImplicit},
      // Relaxed allows cudaMalloc (test_modes.cu); waiting on the capturing stream and
      // touching the legacy stream stay invalid.
      {CaptureMode::Relaxed, Unsafe::SyncCapturingStream, "cudaStreamSynchronize of the capturing stream",
       "cudaStreamSynchronize", cudaErrorStreamCaptureUnsupported},
      {CaptureMode::Relaxed, Unsafe::LegacyStreamLaunch,
       "a kernel on the legacy default stream while a blocking stream captures", "legacy default stream",
       cudaErrorStreamCaptureImplicit},
  };
  constexpr std::size_t n = 5000;
  DeviceBuffer<float> out(n);
  const BlockingStream blocking;
  const std::vector<float> poison(n, -777.0f);

  for (const auto& c : calls) {
    const std::string mode = fmt::format("CaptureMode::{}", cugraphs::detail::name(c.mode));
    INFO(mode << ", " << c.description);
    for (int round = 0; round < 2; ++round) {
      const MemoryMark mark(round == 1);
      const float base = 3.0f + static_cast<float>(round);
      {
        auto pool = cugraphs::graph_pool_handle();
        CaptureOptions opts;
        opts.pool = pool;
        opts.mode = c.mode;
        if (c.call == Unsafe::LegacyStreamLaunch) opts.stream = blocking.s;  // else capture_stream()
        const cudaStream_t stream = opts.stream != nullptr ? opts.stream : cugraphs::capture_stream();
        out.copy_from_host(poison, stream);

        cudaError_t inside = cudaSuccess;
        auto body = [&](cudaStream_t s, bool invalidate) {
          DeviceBuffer<float> temp(n);  // from the capture's pool
          ramp(temp.data(), n, base, s);
          affine_into<<<blocks_for(n), kThreads, 0, s>>>(out.data(), temp.data(), n, 2.0f, -1.0f);
          if (invalidate) inside = make_call(c.call, s, out.data());
        };
        Graph g;
        const auto e = expect_error([&] { cugraphs::capture(g, [&](cudaStream_t s) { body(s, true); }, opts); });
        std::printf("%s, %s: the call returned %s (expected %s); the capture ended with %s\n", mode.c_str(),
                    c.description, cudaGetErrorName(inside), cudaGetErrorName(c.in_capture),
                    cudaGetErrorName(e.code()));
        // The call itself is refused with one of the stream-capture errors (the exact one is
        // the driver's choice; the capture's end is what cugraphs reports).
        CHECK(inside >= cudaErrorStreamCaptureUnsupported);
        CHECK(inside <= cudaErrorStreamCaptureWrongThread);
        CHECK(e.code() == cudaErrorStreamCaptureInvalidated);
        const std::string w = e.what();
        INFO(w);
        CHECK(contains(w, "Graph::capture_end"));
        CHECK(contains(w, "invalidated"));
        CHECK(contains(w, "Likely cause"));
        CHECK(contains(w, c.cause_in_message));
        CHECK(contains(w, mode));
        CHECK(contains(w, "Remedy"));
        if (c.mode == CaptureMode::Relaxed) CHECK_FALSE(contains(w, "capture with CaptureMode::Relaxed"));

        check_capture_aborted(g, {stream}, nullptr);
        CHECK(out.to_host(stream) == poison);  // nothing captured ever ran
        check_pool_released(pool);
        mark.expect_back("after the invalidated capture");

        // The same graph, pool and stream capture and replay correctly.
        cugraphs::capture(g, [&](cudaStream_t s) { body(s, false); }, opts);
        REQUIRE(g.is_instantiated());
        CHECK(g.mode() == c.mode);
        CHECK(g.pool_id() == pool.id());
        g.replay(stream);
        require_values(out.to_host(stream), [&](std::size_t i) { return 2.0f * ramp_value(i, base) - 1.0f; });
        g.reset();
      }
      mark.expect_back("after the graph and its pool are gone");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Exceptions from user code
// ---------------------------------------------------------------------------------------------

TEST_CASE("Faults: an exception thrown from a capture() body propagates unchanged, aborts the "
          "capture, and the graph captures again",
          "[faults][gpu]") {
  constexpr std::size_t n = 1 << 16;
  cugraphs::Stream user;
  cugraphs::StreamGuard on(user);  // the current stream a failed capture must restore
  DeviceBuffer<float> out(n, user);
  const std::vector<float> poison(n, -5.5f);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      auto pool = cugraphs::graph_pool_handle();
      CaptureOptions opts;
      opts.pool = pool;
      out.copy_from_host(poison);
      Graph g;
      std::vector<cudaStream_t> seen;
      auto body = [&](cudaStream_t s, bool fail) {
        seen.push_back(s);
        DeviceBuffer<float> temp(n);
        ramp(temp.data(), n, 1.25f, s);
        affine_into<<<blocks_for(n), kThreads, 0, s>>>(out.data(), temp.data(), n, -0.5f, 4.0f);
        if (fail) {
          CHECK(pool.allocated_bytes() >= n * sizeof(float));
          throw Boom(1);
        }
      };
      const Boom b = expect_boom([&] { cugraphs::capture(g, [&](cudaStream_t s) { body(s, true); }, opts); });
      CHECK(b.where == 1);
      check_capture_aborted(g, seen, user);
      CHECK(out.to_host() == poison);
      check_pool_released(pool);
      mark.expect_back("after the aborted capture");

      cugraphs::capture(g, [&](cudaStream_t s) { body(s, false); }, opts);
      CHECK(cugraphs::current_stream() == user.get());
      g.replay();
      require_values(out.to_host(), [](std::size_t i) { return -0.5f * ramp_value(i, 1.25f) + 4.0f; });
    }
    mark.expect_back("after the graph and its pool are gone");
  }
}

TEST_CASE("Faults: an exception leaving a CaptureScope that drew random numbers propagates "
          "unchanged; the generator is released (it reseeds, its offset unchanged) and the graph "
          "captures again",
          "[faults][rng][gpu]") {
  constexpr std::size_t n = 1 << 16;
  DeviceBuffer<float> out(n), expected(n);
  Generator gen(77), ref(77);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      Graph g;
      const std::uint64_t before = gen.offset();
      cudaStream_t capturing = nullptr;
      const Boom b = expect_boom([&] {
        CaptureScope scope(g);
        capturing = scope.stream();
        draw(gen, out, 2, scope.stream());
        DeviceBuffer<float> temp(n);
        ramp(temp.data(), n, 2.0f, scope.stream());
        throw Boom(2);
      });
      CHECK(b.where == 2);
      check_capture_aborted(g, {capturing}, nullptr);
      CHECK(gen.offset() == before);
      CHECK_NOTHROW(gen.manual_seed(100 + round));  // no open capture records the generator
      ref.manual_seed(100 + round);
      mark.expect_back("after the aborted capture");

      {
        CaptureScope scope(g);
        draw(gen, out, 2, scope.stream());
      }
      for (int replay = 0; replay < 2; ++replay) {
        g.replay();
        draw(ref, expected, 2, nullptr);
        REQUIRE(bitwise_equal(out.to_host(), expected.to_host()));
      }
      CHECK(gen.offset() == ref.offset());
    }
    mark.expect_back("after the graph is gone");
  }
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES

namespace {


// One iteration of a count-down loop: says whether another one should run.
__global__ void count_down(int* budget, bool* go_on) {
  if (*budget > 0) *budget -= 1;
  *go_on = *budget > 0;
}

// Captures `build(scope, fail, streams)` twice into one graph: with fail = true it must throw
// Boom(3) from inside a conditional body, with fail = false it must capture; `verify()` then
// replays the graph and checks its effect. `streams` collects every stream that captured.
template <class Build, class Verify>
void exception_in_body(Build&& build, Verify&& verify) {
  cugraphs::Stream user;
  cugraphs::StreamGuard on(user);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      auto pool = cugraphs::graph_pool_handle();
      CaptureOptions opts;
      opts.pool = pool;
      Graph g;
      std::vector<cudaStream_t> streams;
      const Boom b = expect_boom([&] {
        CaptureScope scope(g, opts);
        streams.push_back(scope.stream());
        build(scope, true, streams);
      });
      CHECK(b.where == 3);
      check_capture_aborted(g, streams, user);
      check_pool_released(pool);
      mark.expect_back("after the aborted capture");
      {
        CaptureScope scope(g, opts);
        build(scope, false, streams);
      }
      REQUIRE(g.is_instantiated());
      CHECK(cugraphs::current_stream() == user.get());
      verify(g);
    }
    mark.expect_back("after the graph and its pool are gone");
  }
}

// Work inside a body that fails: a pool buffer and a kernel, then the throw.
void fail_in_body(cudaStream_t s) {
  DeviceBuffer<int> temp(1000);
  cugraphs::check(cudaMemsetAsync(temp.data(), 0, temp.bytes(), s), "memset in body");
  add_to<<<1, 1, 0, s>>>(temp.data(), 5);
  throw Boom(3);
}

}  // namespace

TEST_CASE("Faults: an exception thrown inside an If body propagates, aborts the capture, and the "
          "graph captures again",
          "[faults][conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> counter(1);
  exception_in_body(
      [&](CaptureScope& scope, bool fail, std::vector<cudaStream_t>& streams) {
        add_to<<<1, 1, 0, scope.stream()>>>(counter.data(), 1);
        ConditionalScope<cugraphs::If> when(scope, flag.data());
        streams.push_back(when.stream());
        add_to<<<1, 1, 0, when.stream()>>>(counter.data(), 10);
        if (fail) fail_in_body(when.stream());
      },
      [&](Graph& g) {
        put(counter, 7);
        put(flag, true);
        g.replay();
        CHECK(get(counter) == 18);
        put(flag, false);
        g.replay();
        CHECK(get(counter) == 19);
      });
}

TEST_CASE("Faults: an exception thrown inside a While body propagates, aborts the capture, and "
          "the graph captures again",
          "[faults][conditional][gpu]") {
  DeviceBuffer<bool> go_on(1);
  DeviceBuffer<int> budget(1), counter(1);
  exception_in_body(
      [&](CaptureScope& scope, bool fail, std::vector<cudaStream_t>& streams) {
        ConditionalScope<cugraphs::While> loop(scope, go_on.data());
        streams.push_back(loop.stream());
        count_down<<<1, 1, 0, loop.stream()>>>(budget.data(), go_on.data());
        add_to<<<1, 1, 0, loop.stream()>>>(counter.data(), 10);
        if (fail) fail_in_body(loop.stream());
      },
      [&](Graph& g) {
        for (const int iterations : {3, 1, 6}) {
          put(counter, -4);
          put(budget, iterations);
          put(go_on, true);
          g.replay();
          CHECK(get(counter) == -4 + 10 * iterations);
          CHECK(get(budget) == 0);
        }
      });
}

#  if CUGRAPHS_HAS_CONDITIONAL_ELSE_SWITCH

TEST_CASE("Faults: an exception thrown inside an IfElse else-body propagates, aborts the capture, "
          "and the graph captures again",
          "[faults][conditional][gpu]") {
  DeviceBuffer<bool> flag(1);
  DeviceBuffer<int> counter(1);
  exception_in_body(
      [&](CaptureScope& scope, bool fail, std::vector<cudaStream_t>& streams) {
        ConditionalScope<cugraphs::IfElse> branch(scope, flag.data());
        streams.push_back(branch.stream());
        add_to<<<1, 1, 0, branch.stream()>>>(counter.data(), 10);
        branch.otherwise();
        streams.push_back(branch.stream());
        add_to<<<1, 1, 0, branch.stream()>>>(counter.data(), 20);
        if (fail) fail_in_body(branch.stream());
      },
      [&](Graph& g) {
        put(counter, 1);
        put(flag, true);
        g.replay();
        CHECK(get(counter) == 11);
        put(flag, false);
        g.replay();
        CHECK(get(counter) == 31);
      });
}

TEST_CASE("Faults: an exception thrown inside a Switch case propagates, aborts the capture, and "
          "the graph captures again",
          "[faults][conditional][gpu]") {
  DeviceBuffer<unsigned> index(1);
  DeviceBuffer<int> counter(1);
  exception_in_body(
      [&](CaptureScope& scope, bool fail, std::vector<cudaStream_t>& streams) {
        ConditionalScope<cugraphs::Switch> sw(scope, index.data(), 3);
        for (unsigned k = 0; k < 3; ++k) {
          sw.case_(k);
          streams.push_back(sw.stream());
          add_to<<<1, 1, 0, sw.stream()>>>(counter.data(), 100 * static_cast<int>(k + 1));
          if (fail && k == 1) fail_in_body(sw.stream());  // case 0 is already captured
        }
      },
      [&](Graph& g) {
        put(counter, 0);
        const unsigned choices[] = {1u, 2u, 0u, 7u};
        int expected = 0;
        for (const unsigned i : choices) {
          put(index, i);
          g.replay();
          expected += i < 3 ? 100 * static_cast<int>(i + 1) : 0;
          CHECK(get(counter) == expected);
        }
      });
}

#  endif
#endif

TEST_CASE("Faults: an exception thrown by a graphed callable during warm-up or during its capture "
          "propagates unchanged; nothing leaks and the callable can be made again",
          "[faults][graphed][gpu]") {
  constexpr std::size_t n = 3000;
  DeviceBuffer<float> x(n);
  ramp(x.data(), n, 0.5f, nullptr);
  cugraphs::Stream user;
  cugraphs::StreamGuard on(user);
  enum Where { WarmUp = 4, Capture = 5 };
  for (const Where where : {WarmUp, Capture}) {
    INFO((where == WarmUp ? "thrown in the second warm-up call" : "thrown in the capture call"));
    for (int round = 0; round < 2; ++round) {
      const MemoryMark mark(round == 1);
      {
        auto pool = cugraphs::graph_pool_handle();
        cugraphs::GraphedOptions opts;
        opts.pool = pool;
        opts.warmup_iters = 3;
        int calls = 0;
        bool fail = true;
        auto f = [&](In in) {
          ++calls;
          DeviceBuffer<float> y(in.size());
          affine_into<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(y.data(), in.data(),
                                                                                       in.size(), 2.0f, 1.0f);
          if (fail && where == WarmUp && calls == 2) throw Boom(WarmUp);
          if (fail && where == Capture && cugraphs::is_current_stream_capturing()) throw Boom(Capture);
          return y;
        };
        const Boom b = expect_boom([&] { (void)cugraphs::make_graphed_callable(opts, f, In(x)); });
        CHECK(b.where == where);
        CHECK(calls == (where == WarmUp ? 2 : 4));
        check_capture_aborted(Graph{}, {cugraphs::capture_stream()}, user);
        if (where == WarmUp) CHECK(pool.reserved_bytes() == 0);  // nothing was captured
        check_pool_released(pool);
        mark.expect_back("after the failed make_graphed_callable");

        fail = false;
        calls = 0;
        auto g = cugraphs::make_graphed_callable(opts, f, In(x));
        CHECK(calls == 4);
        CHECK(g.graph().pool_id() == pool.id());
        const Out y = g(In(x));
        require_values(host(y), [](std::size_t i) { return 2.0f * ramp_value(i, 0.5f) + 1.0f; });
      }
      mark.expect_back("after the callable and its pool are gone");
    }
  }
}

TEST_CASE("Faults: an exception thrown by the second of three callables in make_graphed_callables "
          "propagates unchanged; the first is released, nothing leaks, and all three can be made "
          "again",
          "[faults][graphed][gpu]") {
  constexpr std::size_t n = 2048;
  DeviceBuffer<float> x(n), y_sample(n), z_sample(n);
  ramp(x.data(), n, 1.0f, nullptr);
  ramp(y_sample.data(), n, 2.0f, nullptr);
  ramp(z_sample.data(), n, 3.0f, nullptr);
  cugraphs::Stream user;
  cugraphs::StreamGuard on(user);
  enum Where { None = 0, WarmUp = 6, Capture = 7 };
  for (const Where where : {WarmUp, Capture}) {
    INFO((where == WarmUp ? "thrown in its second warm-up call" : "thrown in its capture call"));
    for (int round = 0; round < 2; ++round) {
      const MemoryMark mark(round == 1);
      {
        auto pool = cugraphs::graph_pool_handle();
        cugraphs::GraphedOptions opts;
        opts.pool = pool;
        int c1 = 0, c2 = 0, c3 = 0;
        Where fail = where;
        auto stage = [](In in, float a, float b) {
          DeviceBuffer<float> out(in.size());
          affine_into<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), in.data(),
                                                                                         in.size(), a, b);
          return out;
        };
        auto f1 = [&](In in) { ++c1; return stage(in, 2.0f, 1.0f); };
        auto f2 = [&](In in) {
          ++c2;
          if (fail == WarmUp && c2 == 2) throw Boom(WarmUp);
          if (fail == Capture && cugraphs::is_current_stream_capturing()) throw Boom(Capture);
          return stage(in, -0.5f, 3.0f);
        };
        auto f3 = [&](In in) { ++c3; return stage(in, 4.0f, 0.25f); };
        auto samples = std::tuple{std::tuple{In(x)}, std::tuple{In(y_sample)}, std::tuple{In(z_sample)}};

        const Boom b = expect_boom([&] { (void)cugraphs::make_graphed_callables(std::tuple{f1, f2, f3}, samples, opts); });
        CHECK(b.where == where);
        if (where == WarmUp) {
          CHECK(c1 == 3);  // warm-ups run first, in order; nothing was captured
          CHECK(c2 == 2);
          CHECK(c3 == 0);
          CHECK(pool.reserved_bytes() == 0);
        } else {
          CHECK(c1 == 4);  // three warm-ups and the capture
          CHECK(c2 == 4);
          CHECK(c3 == 3);  // warmed up, never captured
        }
        check_capture_aborted(Graph{}, {cugraphs::capture_stream()}, user);
        check_pool_released(pool);  // the first callable was captured and released again
        mark.expect_back("after the failed make_graphed_callables");

        fail = None;
        auto [g1, g2, g3] = cugraphs::make_graphed_callables(std::tuple{f1, f2, f3}, samples, opts);
        CHECK(g1.graph().pool_id() == pool.id());
        CHECK(g3.graph().pool_id() == pool.id());
        const Out y = g1(In(x));
        const Out z = g2(In(y));
        const Out w = g3(In(z));
        require_values(host(w), [](std::size_t i) {
          return 4.0f * (-0.5f * (2.0f * ramp_value(i, 1.0f) + 1.0f) + 3.0f) + 0.25f;
        });
      }
      mark.expect_back("after the callables and their pool are gone");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Destruction orders
// ---------------------------------------------------------------------------------------------

TEST_CASE("Faults: a pool handle released before its graph: the graph keeps the pool alive and "
          "replays correctly; the memory returns when the graph goes",
          "[faults][pool][gpu]") {
  constexpr std::size_t n = 1 << 20;
  DeviceBuffer<float> out(n);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      Graph g;
      {
        auto pool = cugraphs::graph_pool_handle();
        CaptureOptions opts;
        opts.pool = pool;
        cugraphs::capture(g, [&](cudaStream_t s) {
          DeviceBuffer<float> temp(4 * n);  // 16 MiB, freed inside the capture
          ramp(temp.data() + 3 * n, n, 6.0f, s);
          affine_into<<<blocks_for(n), kThreads, 0, s>>>(out.data(), temp.data() + 3 * n, n, 2.0f, -3.0f);
        }, opts);
        CHECK(g.pool_id() == pool.id());
      }  // the only handle is gone
      CHECK(g.pool().reserved_bytes() >= 16 * MiB);
      mark.expect_held(16 * MiB);
      for (int replay = 0; replay < 3; ++replay) {
        out.copy_from_host(std::vector<float>(n, -1.0f));
        g.replay();
        require_values(out.to_host(), [](std::size_t i) { return 2.0f * ramp_value(i, 6.0f) - 3.0f; });
      }
      CHECK(g.pool().allocated_bytes() == 0);
    }
    mark.expect_back("after the graph is gone");
  }
}

TEST_CASE("Faults: a graph destroyed before the buffers made in its capture, with a replay still "
          "in flight: the buffers keep the replay's values and stay valid; the memory returns with "
          "the last buffer",
          "[faults][pool][gpu]") {
  constexpr std::size_t n = 1 << 20;
  cugraphs::Stream s;
  DeviceBuffer<float> dummy(1, s);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      DeviceBuffer<float> kept, kept_too;
      {
        Graph g;
        {
          CaptureScope scope(g);
          kept = DeviceBuffer<float>(n);
          kept_too = DeviceBuffer<float>(3 * n);
          ramp(kept.data(), n, 4.0f, scope.stream());
          affine_into<<<blocks_for(n), kThreads, 0, scope.stream()>>>(kept_too.data(), kept.data(), n, 2.0f, -1.0f);
        }
        REQUIRE(kept.pool().has_value());
        slow_fill_kernel<<<1, kThreads, 0, s>>>(dummy.data(), 0, 0.0f, 20'000'000);  // holds the replay back
        g.replay(s);
        const cudaError_t queued = cudaStreamQuery(s);
        (void)cudaGetLastError();  // cudaErrorNotReady is news, not an error
        std::printf("graph destroyed while its replay is %s\n", queued == cudaErrorNotReady ? "still queued" : "done");
      }  // the graph goes with the replay queued behind the slow kernel
      require_values(kept.to_host(s), [](std::size_t i) { return ramp_value(i, 4.0f); });
      auto head = kept_too.to_host(s);
      head.resize(n);
      require_values(head, [](std::size_t i) { return 2.0f * ramp_value(i, 4.0f) - 1.0f; });
      auto pool = *kept.pool();
      CHECK(pool.allocated_bytes() >= 4 * n * sizeof(float));
      CHECK(pool.trim() == 0);  // both buffers live in the pool's segments
      mark.expect_held(4 * n * sizeof(float));
      // Still ordinary device memory: eager work reads and writes it.
      ramp(kept.data(), n, -2.0f, s);
      require_values(kept.to_host(s), [](std::size_t i) { return ramp_value(i, -2.0f); });
      kept = DeviceBuffer<float>();  // one buffer goes, the other still holds the pool
      CHECK(pool.allocated_bytes() >= 3 * n * sizeof(float));
    }
    mark.expect_back("after the last buffer is gone");
  }
}

TEST_CASE("Faults: buffers made in a capture destroyed before their graph: the graph still replays "
          "correctly and the memory returns when the graph goes",
          "[faults][pool][gpu]") {
  constexpr std::size_t n = 1 << 18;
  DeviceBuffer<float> out(n);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      Graph g;
      {
        DeviceBuffer<float> kept;
        {
          CaptureScope scope(g);
          kept = DeviceBuffer<float>(n);
          ramp(kept.data(), n, 6.0f, scope.stream());
          affine_into<<<blocks_for(n), kThreads, 0, scope.stream()>>>(out.data(), kept.data(), n, -1.0f, 0.5f);
        }
        g.replay();
        require_values(kept.to_host(), [](std::size_t i) { return ramp_value(i, 6.0f); });
      }  // the buffer goes; its block stays in the pool, which the graph holds
      CHECK(g.pool().allocated_bytes() == 0);
      CHECK(g.pool().reserved_bytes() > 0);
      CHECK(g.pool().trim() == 0);  // the graph may still touch the freed block on replay
      for (int replay = 0; replay < 3; ++replay) {
        out.copy_from_host(std::vector<float>(n, 123.0f));
        g.replay();
        require_values(out.to_host(), [](std::size_t i) { return -ramp_value(i, 6.0f) + 0.5f; });
      }
    }
    mark.expect_back("after the graph is gone");
  }
}

TEST_CASE("Faults: a graphed callable and its pool handle go in either order; the memory returns "
          "when the last goes",
          "[faults][graphed][pool][gpu]") {
  constexpr std::size_t n = 4096;
  DeviceBuffer<float> x(n), x2(n);
  ramp(x.data(), n, 1.5f, nullptr);
  ramp(x2.data(), n, -3.0f, nullptr);
  auto f = [](In in) {
    DeviceBuffer<float> y(in.size());
    affine_into<<<blocks_for(in.size()), kThreads, 0, cugraphs::current_stream()>>>(y.data(), in.data(), in.size(),
                                                                                 2.0f, 1.0f);
    return y;
  };
  using Callable = decltype(cugraphs::make_graphed_callable(f, In(x)));
  for (const bool handle_first : {true, false}) {
    INFO((handle_first ? "the pool handle goes first" : "the callable goes first"));
    for (int round = 0; round < 2; ++round) {
      const MemoryMark mark(round == 1);
      {
        // A unique_ptr rather than an optional: GCC 12 warns (wrongly) that an optional
        // PoolHandle may be destroyed uninitialized.
        auto pool = std::make_unique<cugraphs::PoolHandle>(cugraphs::graph_pool_handle());
        std::unique_ptr<Callable> g;
        {
          cugraphs::GraphedOptions opts;  // holds a copy of the handle until here
          opts.pool = *pool;
          g = std::make_unique<Callable>(cugraphs::make_graphed_callable(opts, f, In(x)));
        }
        if (handle_first) {
          pool.reset();
          for (const auto& [input, base] : {std::pair{&x, 1.5f}, std::pair{&x2, -3.0f}}) {
            const Out y = (*g)(In(*input));
            require_values(host(y), [b = base](std::size_t i) { return 2.0f * ramp_value(i, b) + 1.0f; });
          }
          mark.expect_held(1);
          g.reset();
        } else {
          const Out y = (*g)(In(x2));
          require_values(host(y), [](std::size_t i) { return 2.0f * ramp_value(i, -3.0f) + 1.0f; });
          g.reset();
          check_pool_released(*pool);
          pool.reset();
        }
      }
      mark.expect_back("after the callable and the handle are gone");
    }
  }
}

TEST_CASE("Faults: a graphed callable destroyed with calls still queued waits for them: the last "
          "call's result lands in memory that outlives it",
          "[faults][graphed][gpu]") {
  constexpr std::size_t n = 1000;
  constexpr int kCalls = 100;  // more than the staging ring's slots
  std::vector<DeviceBuffer<float>> inputs;
  for (int i = 0; i < kCalls; ++i) {
    inputs.emplace_back(n);
    ramp(inputs.back().data(), n, static_cast<float>(i % 5), nullptr);
  }
  DeviceBuffer<float> acc(n), dummy(1);
  cugraphs::Stream s;
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    acc.copy_from_host(std::vector<float>(n, 0.25f));
    {
      cugraphs::StreamGuard on(s);
      const Out a = acc;
      auto g = cugraphs::make_graphed_callable([a](In x) {
        accumulate<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(a.data(), x.data(), x.size());
      }, In(inputs[0]));
      acc.copy_from_host(std::vector<float>(n, 0.25f), s);  // undo the warm-up calls
      slow_fill_kernel<<<1, kThreads, 0, s>>>(dummy.data(), 0, 0.0f, 20'000'000);  // holds the calls back
      for (int i = 0; i < kCalls; ++i) g(In(inputs[i]));
    }  // the callable goes while calls are still queued
    require_values(acc.to_host(), [](std::size_t i) {
      float sum = 0.25f;
      for (int k = 0; k < kCalls; ++k) sum += ramp_value(i, static_cast<float>(k % 5));
      return sum;
    });
    mark.expect_back("after the callable is gone");
  }
}

TEST_CASE("Faults: a Generator destroyed before a graph that draws from it: the graph keeps the "
          "generator's state and its replays draw what the generator would have drawn",
          "[faults][rng][gpu]") {
  constexpr std::size_t n = 1 << 16;
  DeviceBuffer<float> out(n), expected(n);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      Generator ref(2024);
      auto gen = std::make_unique<Generator>(2024);
      Graph g;
      {
        CaptureScope scope(g);
        draw(*gen, out, 3, scope.stream());
      }
      g.replay();
      draw(ref, expected, 3, nullptr);
      REQUIRE(bitwise_equal(out.to_host(), expected.to_host()));
      gen.reset();  // the graph holds the generator's state
      std::vector<float> previous = out.to_host();
      for (int replay = 0; replay < 3; ++replay) {
        g.replay();
        draw(ref, expected, 3, nullptr);
        const auto now = out.to_host();
        REQUIRE(bitwise_equal(now, expected.to_host()));
        REQUIRE_FALSE(bitwise_equal(now, previous));
        previous = now;
      }
    }
    mark.expect_back("after the graph is gone");
  }
}

TEST_CASE("Faults: a graph destroyed before the Generator it draws from: the generator keeps the "
          "offset the replays advanced and draws on correctly",
          "[faults][rng][gpu]") {
  constexpr std::size_t n = 1 << 16;
  DeviceBuffer<float> out(n), expected(n);
  for (int round = 0; round < 2; ++round) {
    const MemoryMark mark(round == 1);
    {
      Generator gen(99), ref(99);
      {
        Graph g;
        {
          CaptureScope scope(g);
          draw(gen, out, 5, scope.stream());  // 8 values per thread and replay
        }
        g.replay();
        g.replay();
      }
      CHECK(gen.offset() == 16);
      (void)ref.philox(5);
      (void)ref.philox(5);
      draw(gen, out, 5, nullptr);
      draw(ref, expected, 5, nullptr);
      CHECK(bitwise_equal(out.to_host(), expected.to_host()));
      CHECK_NOTHROW(gen.manual_seed(7));
      // The generator serves a new graph as well.
      Graph again;
      {
        CaptureScope scope(again);
        draw(gen, out, 1, scope.stream());
      }
      again.replay();
      ref.manual_seed(7);
      draw(ref, expected, 1, nullptr);
      CHECK(bitwise_equal(out.to_host(), expected.to_host()));
    }
    mark.expect_back("after the generator and the graphs are gone");
  }
}
