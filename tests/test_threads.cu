// Threads: eight threads at once capturing and replaying their own graphs (ThreadLocal
// mode), capturing into one shared pool, drawing random numbers, calling graphed callables,
// making unsafe calls beside open captures, and failing in the middle of a capture.
// Catch2's assertions are not thread-safe: the workers check with expect() (support/threads.hpp),
// and the main thread asserts on what run_workers collected.
#include "kernels.cuh"
#include "rng_kernels.cuh"
#include "testing.hpp"
#include "threads.hpp"

#include <cugraphs/detail/block_allocator.hpp>  // kBlockAlignment, round_up
#include <cugraphs/graph.hpp>
#include <fmt/format.h>

#include <curand_kernel.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureMode;
using cugraphs::CaptureOptions;
using cugraphs::CaptureScope;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Generator;
using cugraphs::Graph;
using cugraphs::PhiloxArgs;

namespace {

constexpr int kWorkers = 8;

// ---------------------------------------------------------------------------------------
// The work each thread graphs, and its eager twin.

// The buffers of one graph (allocated inside its capture) or of its eager twin.
struct Buffers {
  DeviceBuffer<float> state, out, count;
};

// Inside a capture open on this thread the buffers come from the capture's pool; outside,
// from stream-ordered allocation on `s`.
Buffers make_buffers(std::size_t n, cudaStream_t s) {
  return {DeviceBuffer<float>(n, s), DeviceBuffer<float>(n, s), DeviceBuffer<float>(n, s)};
}

// One thread's step: dependent non-linear steps with thread- and round-specific constants,
// an affine map, the state copied to the output, and the run counted (count += 1).
struct Recipe {
  std::size_t n;
  int k0;
  float a, b;

  void enqueue(Buffers& x, cudaStream_t s) const {
    const int blocks = blocks_for(n);
    for (int j = 0; j < 4; ++j) step_kernel<<<blocks, kThreads, 0, s>>>(x.state.data(), n, k0 + j);
    affine_kernel<<<blocks, kThreads, 0, s>>>(x.state.data(), n, a, b);
    copy_kernel<<<blocks, kThreads, 0, s>>>(x.out.data(), x.state.data(), n);
    affine_kernel<<<blocks, kThreads, 0, s>>>(x.count.data(), n, 1.0f, 1.0f);
    cugraphs::check_launch("Recipe::enqueue");
  }
};

Recipe recipe_for(int worker, int round, std::size_t n) {
  return {n, 7 * worker + 31 * round, 0.9f + 0.01f * static_cast<float>(worker),
          0.05f * static_cast<float>(round + 1) - 0.02f * static_cast<float>(worker)};
}

// Thread- and round-specific sizes, never a multiple of the block size.
std::size_t size_for(int worker, int round) {
  return 16384 + 1000 * static_cast<std::size_t>(worker) + 123 * static_cast<std::size_t>(round) + 37;
}

// `batches` x `per_batch` runs of `replay`, each followed on the same stream by the same work
// done eagerly (`eager_work` on `eager`). Each batch starts from fresh inputs and poisoned
// outputs; after it, the graph's output must equal the eager output bitwise and its counter
// must show every replay (`counts_per_replay` increments each). Returns the replays made.
int replay_and_compare(const std::function<void()>& replay, const std::function<void(Buffers&)>& eager_work,
                       Buffers& graph, Buffers& eager, cudaStream_t s, int batches, int per_batch,
                       int counts_per_replay, int worker, int round) {
  const std::size_t n = graph.state.size();
  constexpr float kPoison = -777.25f;
  const std::vector<float> poison(n, kPoison);
  for (int batch = 0; batch < batches; ++batch) {
    const auto fresh = random_floats(n, static_cast<std::uint32_t>(100000 * worker + 1000 * round + batch));
    const std::vector<float> start(n, static_cast<float>(batch + 1));
    for (Buffers* b : {&graph, &eager}) {
      b->state.copy_from_host(fresh, s);
      b->out.copy_from_host(poison, s);
      b->count.copy_from_host(start, s);
    }
    for (int i = 0; i < per_batch; ++i) {
      replay();
      eager_work(eager);
    }
    const auto got = graph.out.to_host(s);
    const auto want = eager.out.to_host(s);
    const auto count = graph.count.to_host(s);
    expect(std::none_of(got.begin(), got.end(), [](float v) { return v == kPoison; }) && !bitwise_equal(got, fresh),
           "round {} batch {}: the graph left its output poisoned or its input unchanged", round, batch);
    expect(bitwise_equal(got, want), "round {} batch {}: the graph's output differs from the eager run", round,
           batch);
    const float expected = start[0] + static_cast<float>(per_batch * counts_per_replay);
    expect(std::all_of(count.begin(), count.end(), [&](float c) { return c == expected; }),
           "round {} batch {}: the replay counter reads {} instead of {}: a replay was lost or repeated",
           round, batch, count[0], expected);
  }
  return batches * per_batch;
}

CaptureOptions thread_local_on(cudaStream_t stream) {
  CaptureOptions o;
  o.mode = CaptureMode::ThreadLocal;
  o.stream = stream;
  return o;
}

// Records the block of each buffer (for the shared-pool test).
struct Range {
  std::uintptr_t begin = 0, end = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------

TEST_CASE("Threads: 8 threads capture and replay their own graphs in ThreadLocal mode, results "
          "equal eager runs", "[threads][gpu]") {
  // Fewer batches and replays under CUGRAPHS_STRESS_SCALE (the sanitizer runs); the
  // threads, rounds and overlaps stay.
  constexpr int kRounds = 3;
  const int batches = static_cast<int>(scaled(8)), per_batch = static_cast<int>(scaled(10));
  bool own_stream = false;
  SECTION("each thread captures on its own capture_stream() and replays on its current stream") {
    own_stream = false;
  }
  SECTION("each thread captures and replays on a cugraphs::Stream it owns") { own_stream = true; }

  std::mutex m;
  std::vector<std::uint64_t> pool_ids;
  std::vector<cudaStream_t> streams(kWorkers, nullptr);  // each worker writes its own element
  std::atomic<int> replays{0}, replaying{0}, overlapped{0};
  const auto dot_dir = std::filesystem::temp_directory_path();
  Barrier barrier(kWorkers);
  const auto start = std::chrono::steady_clock::now();
  const auto failures = run_workers(barrier, [&](int t) {
    std::optional<cugraphs::Stream> owned;
    if (own_stream) owned.emplace();
    const cudaStream_t s = own_stream ? owned->get() : cugraphs::capture_stream();
    std::optional<cugraphs::StreamGuard> on;  // per thread: the other threads' current streams are untouched
    if (!own_stream) on.emplace(s);
    const cudaStream_t outside = cugraphs::current_stream();
    streams[static_cast<std::size_t>(t)] = s;
    const std::string dot = (dot_dir / fmt::format("cugraphs_threads_{}_{}.dot", ::getpid(), t)).string();

    // Capture, replay and reset a few times, so that captures of some threads overlap with
    // replays of others.
    for (int round = 0; round < kRounds; ++round) {
      const std::size_t n = size_for(t, round);
      const Recipe recipe = recipe_for(t, round, n);
      Buffers eager = make_buffers(n, s);
      Graph graph;
      Buffers captured;
      {
        // nullptr: this thread's capture_stream(), which is `s` in the first section.
        CaptureScope scope(graph, thread_local_on(own_stream ? s : nullptr));
        if (replaying.load() > 0) ++overlapped;
        expect(scope.stream() == s && cugraphs::current_stream() == s,
               "round {}: the capture does not run on this thread's stream", round);
        expect(cugraphs::is_current_stream_capturing(), "round {}: the current stream is not capturing", round);
        captured = make_buffers(n, scope.stream());  // from the graph's private pool
        recipe.enqueue(captured, scope.stream());
        scope.end();
      }
      expect(cugraphs::current_stream() == outside, "round {}: the current stream was not restored", round);
      expect(!cugraphs::is_capturing(s) && graph.is_instantiated(), "round {}: the capture did not complete", round);
      const auto pool = captured.state.pool();
      expect(pool.has_value() && pool->id() == graph.pool_id(),
             "round {}: a buffer made inside the capture is not from the graph's pool", round);
      {
        std::lock_guard lock(m);
        pool_ids.push_back(graph.pool_id());
      }
      // The most recent capture may be another thread's, which its owner may be
      // instantiating right now: writing it must be safe.
      cugraphs::export_dot(dot);
      expect(contains(read_file(dot), "step_kernel"), "round {}: export_dot wrote no step_kernel node", round);

      ++replaying;
      replays += replay_and_compare(
          [&] {
            if (own_stream) graph.replay(s);
            else graph.replay();  // on this thread's current stream, `s`
          },
          [&](Buffers& b) { recipe.enqueue(b, s); }, captured, eager, s, batches, per_batch, 1, t, round);
      --replaying;
      graph.reset();
    }
    std::filesystem::remove(dot);
  });
  const double elapsed = 1e3 * seconds_since(start);

  require_no_failures(failures);
  // Every capture had its own private pool, and every thread its own stream.
  CHECK(std::set<std::uint64_t>(pool_ids.begin(), pool_ids.end()).size() == kWorkers * kRounds);
  CHECK(std::set<cudaStream_t>(streams.begin(), streams.end()).size() == kWorkers);
  CHECK(std::count(streams.begin(), streams.end(), nullptr) == 0);
  if (!own_stream)  // capture streams are per thread: the main thread has yet another one
    CHECK(std::count(streams.begin(), streams.end(), cugraphs::capture_stream()) == 0);
  CHECK(replays.load() == kWorkers * kRounds * batches * per_batch);
  std::printf("threads (%s): %d threads x %d rounds x %d replays = %d replays, each checked against "
              "an eager run, in %.0f ms; %d of %d captures began while another thread was replaying\n",
              own_stream ? "own Stream" : "capture_stream", kWorkers, kRounds, batches * per_batch,
              replays.load(), elapsed, overlapped.load(), kWorkers * kRounds);
}

TEST_CASE("Threads: 8 threads capture concurrently into one shared pool; no block is freed, so "
          "their graphs use disjoint memory and replay concurrently", "[threads][pool][gpu]") {
  // Blocks freed by one capture into a pool are handed to later captures into the same pool,
  // which is why graphs sharing a pool must never run concurrently. Here nothing is freed
  // while any worker captures or replays: no capture frees a temporary, and every buffer a
  // capture allocates is kept (by the main thread, after the graph is reset) until all
  // workers have joined. The pool therefore never hands one block to two captures, the
  // graphs touch disjoint memory, and replaying them at the same time on different streams
  // is legitimate. The test checks that disjointness and the pool's exact figures.
  constexpr int kRounds = 3;
  const int batches = static_cast<int>(scaled(4)), per_batch = static_cast<int>(scaled(10));
  const auto pool = cugraphs::graph_pool_handle();
  std::mutex m;
  std::vector<Range> ranges;
  std::vector<std::vector<DeviceBuffer<float>>> kept(kWorkers);  // each worker writes its own element
  std::atomic<int> replays{0};
  Barrier barrier(kWorkers);
  const auto start = std::chrono::steady_clock::now();
  const auto failures = run_workers(barrier, [&](int t) {
    cugraphs::Stream s;
    for (int round = 0; round < kRounds; ++round) {
      const std::size_t n = size_for(t, round) + 517 * static_cast<std::size_t>(t);
      const Recipe recipe = recipe_for(t, round, n);
      Buffers eager = make_buffers(n, s);
      Graph graph;
      Buffers captured;
      CaptureOptions opts = thread_local_on(s);
      opts.pool = pool;
      {
        CaptureScope scope(graph, opts);
        captured = make_buffers(n, scope.stream());  // from the shared pool, under its mutex
        recipe.enqueue(captured, scope.stream());
        scope.end();
      }
      expect(graph.pool_id() == pool.id(), "round {}: the graph did not capture into the shared pool", round);
      {
        std::lock_guard lock(m);
        for (const auto* b : {&captured.state, &captured.out, &captured.count}) {
          const auto p = reinterpret_cast<std::uintptr_t>(b->data());
          ranges.push_back({p, p + b->bytes()});
        }
      }
      replays += replay_and_compare([&] { graph.replay(s); }, [&](Buffers& b) { recipe.enqueue(b, s); }, captured,
                                    eager, s, batches, per_batch, 1, t, round);
      graph.reset();
      auto& mine = kept[static_cast<std::size_t>(t)];
      mine.push_back(std::move(captured.state));
      mine.push_back(std::move(captured.out));
      mine.push_back(std::move(captured.count));
    }
  });
  const double elapsed = 1e3 * seconds_since(start);

  require_no_failures(failures);
  REQUIRE(ranges.size() == 3 * kWorkers * kRounds);
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::size_t overlaps = 0, expected_bytes = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].begin < ranges[i - 1].end) ++overlaps;
    expected_bytes += cugraphs::detail::round_up(ranges[i].end - ranges[i].begin, cugraphs::detail::kBlockAlignment);
  }
  CHECK(overlaps == 0);  // the pool never handed one block to two threads
  CHECK(pool.allocated_bytes() == expected_bytes);
  CHECK(pool.reserved_bytes() >= expected_bytes);
  CHECK(replays.load() == kWorkers * kRounds * batches * per_batch);
  kept.clear();
  CHECK(pool.allocated_bytes() == 0);
  std::printf("threads (shared pool): %d threads x %d captures into one pool, %zu blocks, all disjoint; "
              "%d replays checked in %.0f ms\n",
              kWorkers, kRounds, ranges.size(), replays.load(), elapsed);
}

namespace {

// Writes the (seed, offset) this launch was given and the increment it reserved to the next
// free record: each draw leaves one (seed, offset, reserved) triple.
__global__ void record_draw(PhiloxArgs args, unsigned long long reserved, unsigned long long* records,
                            unsigned* count, unsigned capacity) {
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  const unsigned i = atomicAdd(count, 1u);
  if (i < capacity) {
    records[3 * i] = seed;
    records[3 * i + 1] = offset;
    records[3 * i + 2] = reserved;
  }
}

// What Generator::philox reserves for an increment: rounded up to Philox's block of 4.
constexpr std::uint64_t reserved_for(std::uint64_t increment) { return (increment + 3) / 4 * 4; }

}  // namespace

TEST_CASE("Threads: generators drawn from by 8 threads, eagerly and inside their captures, give "
          "each thread its eager numbers, and the default generator's draws add up exactly",
          "[threads][rng][gpu]") {
  // Fewer eager draws and replays under CUGRAPHS_STRESS_SCALE (the sanitizer runs); at
  // least 8 replays, so that eager draws still come between replays (r % 7 == 3).
  constexpr int kRounds = 2;
  const int eager_draws = std::max(2, static_cast<int>(scaled(10)));
  const int replays_per_round = std::max(8, static_cast<int>(scaled(60)));
  const int records_per_worker = kRounds * (eager_draws + 2 * replays_per_round);
  const auto capacity = static_cast<unsigned>(kWorkers * records_per_worker);

  Generator& shared = cugraphs::default_generator();
  const std::uint64_t seed = shared.seed();
  const std::uint64_t first_offset = shared.offset();
  cugraphs::Stream main_stream;
  DeviceBuffer<unsigned long long> records(3 * std::size_t{capacity}, main_stream);
  DeviceBuffer<unsigned> record_count(1, main_stream);
  const std::vector<unsigned> zero{0u};
  record_count.copy_from_host(zero, main_stream);

  std::atomic<std::uint64_t> shared_reserved{0};
  std::atomic<int> replays{0};
  Barrier barrier(kWorkers);
  const auto start = std::chrono::steady_clock::now();
  const auto failures = run_workers(barrier, [&](int t) {
    cugraphs::Stream s;
    const std::size_t n = 4096 + 128 * static_cast<std::size_t>(t) + 5;
    // `own` is this thread's alone; `twin` repeats every draw of `own` eagerly.
    Generator own(1000 + static_cast<std::uint64_t>(t)), twin(1000 + static_cast<std::uint64_t>(t));
    const int inc_a = 1 + t % 3, inc_b = 5 + t;
    const std::uint64_t eager_inc = 1 + static_cast<std::uint64_t>(t), inc_d1 = 2 + 2 * static_cast<std::uint64_t>(t),
                        inc_d2 = 9;
    std::uint64_t own_reserved = 0, mine_of_shared = 0;
    DeviceBuffer<float> eager_a(n, s), twin_a(n, s), twin_b(n, s);

    auto draw = [&](Generator& g, DeviceBuffer<float>& out, int per_thread, cudaStream_t on) {
      uniforms<<<blocks_for(n), kThreads, 0, on>>>(out.data(), n, g.philox(static_cast<std::uint64_t>(per_thread)),
                                                   per_thread);
      cugraphs::check_launch("uniforms");
    };
    auto record_shared = [&](std::uint64_t increment, cudaStream_t on) {
      record_draw<<<1, 1, 0, on>>>(cugraphs::default_generator().philox(increment), reserved_for(increment),
                                   records.data(), record_count.data(), capacity);
      cugraphs::check_launch("record_draw");
    };
    auto eager_step = [&](int round, int i) {
      draw(own, eager_a, inc_a, s);
      draw(twin, twin_a, inc_a, s);
      own_reserved += reserved_for(static_cast<std::uint64_t>(inc_a));
      expect(bitwise_equal(eager_a.to_host(s), twin_a.to_host(s)),
             "round {} eager draw {}: the thread's generator and its twin disagree", round, i);
    };

    for (int round = 0; round < kRounds; ++round) {
      // Eagerly, while other threads capture and replay: the own generator, and the default
      // generator that every thread shares.
      for (int i = 0; i < eager_draws; ++i) {
        eager_step(round, i);
        record_shared(eager_inc, s);
        mine_of_shared += reserved_for(eager_inc);
      }

      // Inside a capture: the own generator twice and the default generator twice.
      Graph graph;
      DeviceBuffer<float> out_a, out_b;
      const std::uint64_t before = own.offset();
      {
        CaptureScope scope(graph, thread_local_on(s));
        out_a = DeviceBuffer<float>(n, scope.stream());
        out_b = DeviceBuffer<float>(n, scope.stream());
        draw(own, out_a, inc_a, scope.stream());
        record_shared(inc_d1, scope.stream());
        draw(own, out_b, inc_b, scope.stream());
        record_shared(inc_d2, scope.stream());
        scope.end();
      }
      expect(own.offset() == before, "round {}: capturing advanced the generator", round);

      const std::vector<float> poison(n, -1.0f);
      out_a.copy_from_host(poison, s);
      out_b.copy_from_host(poison, s);
      std::vector<float> previous;
      for (int r = 0; r < replays_per_round; ++r) {
        graph.replay(s);
        own_reserved += reserved_for(static_cast<std::uint64_t>(inc_a)) + reserved_for(static_cast<std::uint64_t>(inc_b));
        mine_of_shared += reserved_for(inc_d1) + reserved_for(inc_d2);
        draw(twin, twin_a, inc_a, s);
        draw(twin, twin_b, inc_b, s);
        const auto a = out_a.to_host(s);
        expect(bitwise_equal(a, twin_a.to_host(s)) && bitwise_equal(out_b.to_host(s), twin_b.to_host(s)),
               "round {} replay {}: the replay's numbers differ from the same draws made eagerly", round, r);
        expect(!bitwise_equal(a, previous), "round {} replay {}: the replay repeated the previous numbers", round, r);
        previous = a;
        if (r % 7 == 3) eager_step(round, 100 + r);  // eager draws between replays
      }
      expect(own.offset() == twin.offset() && own.offset() == own_reserved,
             "round {}: the generator's offset is {}, its twin's {}, expected {}", round, own.offset(),
             twin.offset(), own_reserved);
      replays += replays_per_round;
    }
    s.synchronize();  // every record is written
    shared_reserved += mine_of_shared;
  });
  const double elapsed = 1e3 * seconds_since(start);

  require_no_failures(failures);
  const unsigned count = record_count.to_host(main_stream)[0];
  REQUIRE(count == static_cast<unsigned>(kWorkers * records_per_worker));
  const auto raw = records.to_host(main_stream);
  struct Draw {
    std::uint64_t seed, offset, reserved;
  };
  std::vector<Draw> draws(count);
  for (unsigned i = 0; i < count; ++i) draws[i] = {raw[3 * i], raw[3 * i + 1], raw[3 * i + 2]};
  std::sort(draws.begin(), draws.end(), [](const Draw& a, const Draw& b) { return a.offset < b.offset; });
  // Sorted by offset, the draws of all threads tile [first_offset, end) exactly: no two
  // draws share numbers and no numbers are skipped.
  std::size_t other_seed = 0, gaps_or_overlaps = 0;
  std::uint64_t next = first_offset, sum = 0;
  for (const auto& d : draws) {
    other_seed += d.seed != seed ? 1 : 0;
    gaps_or_overlaps += d.offset != next ? 1 : 0;
    next = d.offset + d.reserved;
    sum += d.reserved;
  }
  CHECK(other_seed == 0);
  CHECK(gaps_or_overlaps == 0);
  CHECK(sum == shared_reserved.load());
  CHECK(shared.offset() == first_offset + shared_reserved.load());
  std::printf("threads (rng): %u draws from the default generator by %d threads tile %llu offsets "
              "exactly; %d replays checked against eager draws in %.0f ms\n",
              count, kWorkers, static_cast<unsigned long long>(sum), replays.load(), elapsed);
}

TEST_CASE("Threads: while 4 threads hold ThreadLocal captures open, 4 others make unsafe calls "
          "(cudaMalloc, synchronous cudaMemcpy, cudaFree) and every capture survives",
          "[threads][modes][gpu]") {
  constexpr int kRounds = 3, kUnsafeCalls = 8;
  constexpr std::size_t kFloats = 1 << 18;           // 1 MiB per unsafe allocation
  constexpr std::size_t kScratchFloats = 3 << 18;    // 3 MiB: more than a fresh pool's first segment holds
  std::atomic<int> unsafe_calls{0}, replays{0};
  Barrier barrier(kWorkers);
  const auto failures = run_workers(barrier, [&](int t) {
    if (t % 2 == 1) {
      // Unsafe calls on a thread that captures nothing, while every capture is open.
      for (int round = 0; round < kRounds; ++round) {
        barrier.arrive_and_wait();  // 1: the four captures are open
        for (int i = 0; i < kUnsafeCalls; ++i) {
          const auto host = random_floats(kFloats, static_cast<std::uint32_t>(77 * t + 1000 * round + i));
          std::vector<float> back(kFloats, 0.0f);
          void* p = nullptr;
          cudaError_t e = cudaMalloc(&p, kFloats * sizeof(float));
          if (e == cudaSuccess) e = cudaMemcpy(p, host.data(), kFloats * sizeof(float), cudaMemcpyHostToDevice);
          if (e == cudaSuccess) e = cudaMemcpy(back.data(), p, kFloats * sizeof(float), cudaMemcpyDeviceToHost);
          const cudaError_t freed = p != nullptr ? cudaFree(p) : cudaSuccess;
          (void)cudaGetLastError();
          expect(e == cudaSuccess && freed == cudaSuccess,
                 "round {} call {}: an unsafe call beside ThreadLocal captures failed: {}", round, i,
                 cudaGetErrorName(e != cudaSuccess ? e : freed));
          expect(bitwise_equal(host, back), "round {} call {}: the synchronous round trip changed the data", round, i);
          ++unsafe_calls;
        }
        barrier.arrive_and_wait();  // 2: done; the captures may end
      }
      return;
    }
    cugraphs::Stream s;
    for (int round = 0; round < kRounds; ++round) {
      const std::size_t n = size_for(t, round);
      const Recipe first = recipe_for(t, round, n), second = recipe_for(t + kWorkers, round, n);
      Buffers eager = make_buffers(n, s);
      Graph graph;
      Buffers captured;
      DeviceBuffer<float> scratch;
      {
        CaptureScope scope(graph, thread_local_on(s));
        captured = make_buffers(n, scope.stream());
        first.enqueue(captured, scope.stream());
        barrier.arrive_and_wait();  // 1
        // Keep capturing while the other threads make their unsafe calls. The scratch buffer
        // needs a new pool segment: a cudaMalloc on this capturing thread too, which the pool
        // makes in relaxed mode.
        scratch = DeviceBuffer<float>(kScratchFloats, scope.stream());
        const int blocks = blocks_for(n);
        copy_kernel<<<blocks, kThreads, 0, scope.stream()>>>(scratch.data(), captured.state.data(), n);
        copy_kernel<<<blocks, kThreads, 0, scope.stream()>>>(captured.state.data(), scratch.data(), n);
        second.enqueue(captured, scope.stream());
        barrier.arrive_and_wait();  // 2
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        cugraphs::check(cudaStreamIsCapturing(s, &status), "cudaStreamIsCapturing");
        expect(status == cudaStreamCaptureStatusActive,
               "round {}: the other threads' unsafe calls invalidated this ThreadLocal capture", round);
        scope.end();
      }
      expect(graph.is_instantiated(), "round {}: the capture did not complete", round);
      replays += replay_and_compare(
          [&] { graph.replay(s); },
          [&](Buffers& b) {  // the scratch round trip copies the state out and back: no change
            first.enqueue(b, s);
            second.enqueue(b, s);
          },
          captured, eager, s, 2, 10, 2, t, round);
    }
  });

  require_no_failures(failures);
  CHECK(unsafe_calls.load() == (kWorkers / 2) * kRounds * kUnsafeCalls);
  CHECK(replays.load() == (kWorkers / 2) * kRounds * 20);
  std::printf("threads (modes): %d unsafe call sequences made beside %d open ThreadLocal captures; every "
              "capture survived\n",
              unsafe_calls.load(), (kWorkers / 2) * kRounds);
}

namespace {

using In = DeviceSpan<const float>;

__global__ void mix(float* out, const float* a, const float* b, std::size_t n, float k) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] * k + __sinf(b[i]);
}

// The callable each thread graphs: a buffer it allocates (from the graph's pool when
// captured), a mix of its two inputs, and dependent steps with thread-specific constants.
struct Blend {
  float k;
  int k0;
  DeviceBuffer<float> operator()(In x, In y) const {
    const cudaStream_t s = cugraphs::current_stream();
    const std::size_t n = x.size();
    DeviceBuffer<float> out(n);
    mix<<<blocks_for(n), kThreads, 0, s>>>(out.data(), x.data(), y.data(), n, k);
    for (int j = 0; j < 3; ++j) step_kernel<<<blocks_for(n), kThreads, 0, s>>>(out.data(), n, k0 + j);
    cugraphs::check_launch("Blend");
    return out;
  }
};

}  // namespace

TEST_CASE("Threads: 8 threads each make and call their own GraphedCallable on their own stream; "
          "every call equals the eager call bitwise", "[threads][graphed][gpu]") {
  constexpr int kRounds = 2, kCalls = 100, kInputs = 4;
  std::atomic<int> calls{0};
  Barrier barrier(kWorkers);
  const auto start = std::chrono::steady_clock::now();
  const auto failures = run_workers(barrier, [&](int t) {
    cugraphs::Stream s;
    const std::size_t n = 6000 + 333 * static_cast<std::size_t>(t);
    std::vector<DeviceBuffer<float>> xs, ys;
    for (int i = 0; i < kInputs; ++i) {
      xs.emplace_back(n, s.get());
      xs.back().copy_from_host(random_floats(n, static_cast<std::uint32_t>(500 * t + i)), s);
      ys.emplace_back(n, s.get());
      ys.back().copy_from_host(random_floats(n, static_cast<std::uint32_t>(500 * t + 100 + i)), s);
    }
    const std::vector<float> poison(n, -555.5f);
    for (int round = 0; round < kRounds; ++round) {
      const Blend f{0.5f + 0.1f * static_cast<float>(t) + 0.05f * static_cast<float>(round), 5 * t + 17 * round};
      // The eager result of every input pair, on this thread's stream.
      std::vector<std::vector<float>> want(kInputs * kInputs);
      {
        cugraphs::StreamGuard on(s);
        for (int xi = 0; xi < kInputs; ++xi)
          for (int yi = 0; yi < kInputs; ++yi)
            want[static_cast<std::size_t>(kInputs * xi + yi)] =
                f(xs[static_cast<std::size_t>(xi)], ys[static_cast<std::size_t>(yi)]).to_host(s);
      }
      // Warm-up, capture and the callable's own tables, concurrently with the other threads'
      // captures and calls (ThreadLocal: their synchronizations do not disturb each other).
      cugraphs::GraphedOptions opts;
      opts.mode = CaptureMode::ThreadLocal;
      opts.warmup_iters = 2;
      auto g = cugraphs::make_graphed_callable(opts, f, In(xs[0]), In(ys[0]));
      const DeviceSpan<float> out = g.static_outputs();
      std::vector<float> got(n);
      for (int call = 0; call < kCalls; ++call) {
        const int xi = call % kInputs, yi = (call / kInputs) % kInputs;
        const In x = xs[static_cast<std::size_t>(xi)], y = ys[static_cast<std::size_t>(yi)];
        cugraphs::check(cudaMemcpyAsync(out.data(), poison.data(), out.size_bytes(), cudaMemcpyHostToDevice, s),
                        "poison the output");
        if (t % 2 == 0) {
          (void)g(s.get(), x, y);
        } else {
          cugraphs::StreamGuard on(s);
          (void)g(x, y);  // on this thread's current stream
        }
        cugraphs::check(cudaMemcpyAsync(got.data(), out.data(), out.size_bytes(), cudaMemcpyDeviceToHost, s),
                        "read the output");
        s.synchronize();
        expect(bitwise_equal(got, want[static_cast<std::size_t>(kInputs * xi + yi)]),
               "round {} call {}: the graphed call differs from the eager call", round, call);
      }
      expect(g.calls() == kCalls && g.staged_copies() == 2 * kCalls,
             "round {}: {} calls and {} staged copies instead of {} and {}", round, g.calls(), g.staged_copies(),
             kCalls, 2 * kCalls);
      calls += kCalls;
    }
  });
  const double elapsed = 1e3 * seconds_since(start);

  require_no_failures(failures);
  CHECK(calls.load() == kWorkers * kRounds * kCalls);
  std::printf("threads (graphed): %d threads x %d callables x %d calls = %d calls checked in %.0f ms\n", kWorkers,
              kRounds, kCalls, calls.load(), elapsed);
}

TEST_CASE("Threads: a capture that throws or is invalidated on one thread leaves the other "
          "threads' open captures intact", "[threads][gpu]") {
  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  enum class Role { Completes, Throws, Invalidates };
  constexpr int kRounds = 3;
  std::atomic<int> thrown{0}, invalidated{0}, completed{0};
  Barrier barrier(kWorkers);
  const auto failures = run_workers(barrier, [&](int t) {
    cugraphs::Stream s;
    for (int round = 0; round < kRounds; ++round) {
      // Every round two threads throw and two invalidate their own capture; which ones rotates.
      const int r = (t + round) % 4;
      const Role role = r == 1 ? Role::Throws : r == 3 ? Role::Invalidates : Role::Completes;
      const std::size_t n = size_for(t, round);
      const Recipe recipe = recipe_for(t, round, n);
      Buffers eager = make_buffers(n, s);
      const auto pool = cugraphs::graph_pool_handle();
      CaptureOptions opts = thread_local_on(s);
      opts.pool = pool;
      Graph graph;
      Buffers captured;
      bool boom = false;
      cudaError_t malloc_result = cudaSuccess;
      std::optional<cugraphs::Error> error;
      try {
        CaptureScope scope(graph, opts);
        captured = make_buffers(n, scope.stream());
        recipe.enqueue(captured, scope.stream());
        barrier.arrive_and_wait();  // 1: all eight captures are open
        if (role == Role::Throws) {
          DeviceBuffer<float> temp(n, scope.stream());
          fill_kernel<<<blocks_for(n), kThreads, 0, scope.stream()>>>(temp.data(), n, 1.0f);
          throw Boom("user code failed mid-capture");
        }
        if (role == Role::Invalidates) {
          // Unsafe on the capturing thread itself: refused, and this capture (only) is invalidated.
          void* p = nullptr;
          malloc_result = cudaMalloc(&p, 1 << 20);
          if (malloc_result == cudaSuccess) (void)cudaFree(p);
        }
        barrier.arrive_and_wait();  // 2: the failures happened while the other captures were open
        scope.end();
      } catch (const Boom&) {
        boom = true;
        barrier.arrive_and_wait();  // 2
      } catch (const cugraphs::Error& e) {
        error = e;
      }

      if (role == Role::Completes) {
        expect(!boom && !error, "round {}: the capture failed: {}", round, error ? error->what() : "Boom");
        ++completed;
      } else {
        if (role == Role::Throws) {
          expect(boom && !error, "round {}: the user's exception did not come through the scope", round);
          ++thrown;
        } else {
          expect(malloc_result == cudaErrorStreamCaptureUnsupported,
                 "round {}: cudaMalloc on the capturing thread returned {}", round, cudaGetErrorName(malloc_result));
          expect(error && error->code() == cudaErrorStreamCaptureInvalidated,
                 "round {}: ending the invalidated capture did not throw cudaErrorStreamCaptureInvalidated", round);
          ++invalidated;
        }
        // Aborted cleanly: nothing captures, no error lingers, the temporary is back in the pool.
        expect(!graph.is_capturing() && !graph.is_instantiated() && !cugraphs::is_capturing(s),
               "round {}: the failed capture left the graph or the stream capturing", round);
        expect(cugraphs::current_stream() == nullptr, "round {}: the current stream was not restored", round);
        expect(cudaGetLastError() == cudaSuccess, "round {}: the failure left a CUDA error behind", round);
        const std::size_t held = 3 * cugraphs::detail::round_up(n * sizeof(float), cugraphs::detail::kBlockAlignment);
        expect(pool.allocated_bytes() == held, "round {}: the pool holds {} bytes instead of {}", round,
               pool.allocated_bytes(), held);
        // The same graph and pool capture again.
        captured = Buffers{};
        {
          CaptureScope scope(graph, opts);
          captured = make_buffers(n, scope.stream());
          recipe.enqueue(captured, scope.stream());
          scope.end();
        }
      }
      expect(graph.is_instantiated(), "round {}: no graph to replay", round);
      (void)replay_and_compare([&] { graph.replay(s); }, [&](Buffers& b) { recipe.enqueue(b, s); }, captured, eager,
                               s, 2, 10, 1, t, round);
    }
  });

  require_no_failures(failures);
  CHECK(thrown.load() == 2 * kRounds);
  CHECK(invalidated.load() == 2 * kRounds);
  CHECK(completed.load() == (kWorkers - 4) * kRounds);
}
