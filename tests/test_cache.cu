// GraphCache on the GPU: keys padded to buckets, lazy and largest-first captures into one
// pool, replays equal to eager calls, least-recently-used eviction under a byte budget and
// an entry limit, evicted executables taken over by in-place updates, and misuse.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <string>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;

namespace {

constexpr std::size_t kWidth = 256;   // floats per row
constexpr std::size_t kFan = 8;       // a row's temporary is kFan times as wide
constexpr std::size_t kMaxRows = 512;

// tmp[kFan i + j] = in[i] (j + 1) + sin(in[i])
__global__ void expand(float* tmp, const float* in, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = in[i];
  for (std::size_t j = 0; j < kFan; ++j) tmp[kFan * i + j] = v * static_cast<float>(j + 1) + __sinf(v);
}

// out[i] = the sum of row i of tmp
__global__ void reduce_rows(float* out, const float* tmp, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (std::size_t j = 0; j < kFan; ++j) s += tmp[kFan * i + j];
  out[i] = s;
}

// A model of `rows` rows read from `input` (kMaxRows rows, padded by the caller): a
// temporary kFan times the output's size, freed before it returns, and one output.
struct Model {
  const float* input;
  std::vector<std::string>* log;

  DeviceBuffer<float> operator()(const int& rows) const {
    std::string entry(cugraphs::is_current_stream_capturing() ? "c" : "e");
    entry += std::to_string(rows);  // not `"c" + std::string`: g++ 12 -O3 reports a false -Wrestrict there
    log->push_back(entry);
    const std::size_t n = static_cast<std::size_t>(rows) * kWidth;
    const cudaStream_t s = cugraphs::current_stream();
    DeviceBuffer<float> tmp(n * kFan), out(n);
    expand<<<blocks_for(n), kThreads, 0, s>>>(tmp.data(), input, n);
    reduce_rows<<<blocks_for(n), kThreads, 0, s>>>(out.data(), tmp.data(), n);
    cugraphs::check_launch("model");
    return out;
  }
};

// What `rows` rows give eagerly.
std::vector<float> eager(const Model& m, int rows) {
  std::vector<std::string> ignored;
  const Model quiet{m.input, &ignored};
  return quiet(rows).to_host();
}

// What every case starts with: a stream of its own, the padded input and the model.
struct Setup {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on{stream};
  DeviceBuffer<float> input{kMaxRows * kWidth};
  std::vector<std::string> log;
  Model model{input.data(), &log};

  explicit Setup(std::uint32_t seed) { input.copy_from_host(random_floats(input.size(), seed)); }
};

__global__ void accumulate(float* acc, const float* x) { *acc += *x; }

// log[*pos] = v; *wrote = *pos; ++*pos: an append at a position kept on the device.
__global__ void append_at(float* log, int* pos, float v, float* wrote) {
  const int p = *pos;
  log[p] = v;
  *wrote = static_cast<float>(p);
  *pos = p + 1;
}

__global__ void append_from(float* log, int* pos, const float* v, float* wrote) {
  const int p = *pos;
  log[p] = *v;
  *wrote = static_cast<float>(p);
  *pos = p + 1;
}

}  // namespace

TEST_CASE("GraphCache: a key runs the smallest bucket not below it, captured on its first call into one shared "
          "pool, and replays match eager calls", "[cache][gpu]") {
  Setup t(1);
  const Model& model = t.model;
  auto& input = t.input;
  auto& log = t.log;
  auto cache = cugraphs::make_graph_cache(std::vector<int>{512, 1, 8, 64}, model);

  CHECK(cache.buckets() == std::vector<int>{1, 8, 64, 512});
  CHECK(cache.bucket_for(0) == 1);
  CHECK(cache.bucket_for(5) == 8);
  CHECK(cache.bucket_for(64) == 64);
  CHECK(cache.bucket_for(300) == 512);
  auto e = expect_error([&] { (void)cache.bucket_for(513); });
  CHECK(contains(e.what(), "GraphCache: key 513 is beyond the largest bucket, 512"));
  e = expect_error([&] { (void)cache(513); });
  CHECK(contains(e.what(), "key 513 is beyond the largest bucket"));
  CHECK(cache.stats().captures == 0);  // lazy: nothing captured yet

  auto out = cache(5);
  CHECK(out.size() == 8 * kWidth);
  CHECK(bitwise_equal(host(out), eager(model, 8)));
  CHECK(log == std::vector<std::string>{"e8", "c8"});  // one warm-up call, then the capture
  CHECK(cache.stats().captures == 1);
  CHECK(cache.stats().instantiations == 1);
  CHECK(cache.stats().hits == 0);

  out = cache(7);  // the same bucket: replayed, not captured
  CHECK(log.size() == 2);
  CHECK(cache.stats().hits == 1);
  // The graph reads the caller's input as it is at each call.
  input.copy_from_host(random_floats(input.size(), 2));
  out = cache(8);
  CHECK(bitwise_equal(host(out), eager(model, 8)));

  for (int key : {1, 33, 300}) {
    out = cache(key);
    CHECK(bitwise_equal(host(out), eager(model, cache.bucket_for(key))));
  }
  CHECK(cache.stats().captures == 4);
  CHECK(cache.stats().entries == 4);
  CHECK(cache.stats().calls == 6);
  CHECK(cache.stats().bytes == 0);  // outputs share the pool like temporaries
  for (int bucket : cache.buckets()) {
    REQUIRE(cache.cached(bucket));
    CHECK(cache.graph(bucket)->pool_id() == cache.pool().id());
  }

  // One pool: the four graphs' temporaries and outputs share the largest one's memory.
  std::vector<std::string> log_alone;
  const Model alone{input.data(), &log_alone};
  auto largest = cugraphs::make_graph_cache(std::vector<int>{512}, alone);
  (void)largest(512);
  const double shared = static_cast<double>(cache.pool().reserved_bytes());
  const double single = static_cast<double>(largest.pool().reserved_bytes());
  INFO("four buckets reserve " << shared << " bytes, the largest alone " << single);
  CHECK(shared <= 1.2 * single);
}

TEST_CASE("GraphCache: capture_all captures every bucket when the cache is made, largest first", "[cache][gpu]") {
  Setup t(3);
  const Model& model = t.model;
  auto& log = t.log;
  cugraphs::GraphCacheOptions opts;
  opts.capture_all = true;
  opts.warmup_iters = 2;
  auto cache = cugraphs::make_graph_cache(std::vector<int>{1, 8, 64, 512}, model, opts);
  CHECK(log == std::vector<std::string>{"e512", "e512", "c512", "e64", "e64", "c64", "e8", "e8", "c8", "e1", "e1", "c1"});
  CHECK(cache.stats().captures == 4);
  for (int key : {512, 64, 8, 1, 100}) {
    const auto out = cache(key);
    CHECK(bitwise_equal(host(out), eager(model, cache.bucket_for(key))));
  }
  CHECK(cache.stats().hits == 5);
  CHECK(log.size() == 12);
}

TEST_CASE("GraphCache: under a byte budget the least recently used graphs are evicted, and a bucket captured "
          "after an eviction takes over the evicted executable with an in-place update", "[cache][gpu]") {
  Setup t(4);
  const Model& model = t.model;
  cugraphs::GraphCacheOptions opts;
  opts.keep_outputs = true;
  opts.byte_budget = 200 * 1024;  // outputs: 16, 32, 64 and 128 KiB
  auto cache = cugraphs::make_graph_cache(std::vector<int>{16, 32, 64, 128}, model, opts);

  (void)cache(16);
  (void)cache(32);
  (void)cache(64);
  CHECK(cache.stats().bytes == 112 * 1024);
  const cudaGraphExec_t exec32 = cache.graph(32)->native_exec();
  // 128 KiB more: 16 then 32 go (least recently used first), and 32's executable runs 128.
  auto out = cache(128);
  CHECK(bitwise_equal(host(out), eager(model, 128)));
  CHECK_FALSE(cache.cached(16));
  CHECK_FALSE(cache.cached(32));
  CHECK(cache.cached(64));
  CHECK(cache.stats().evictions == 2);
  CHECK(cache.stats().updates == 1);
  CHECK(cache.stats().instantiations == 3);
  CHECK(cache.stats().bytes == 192 * 1024);
  CHECK(cache.graph(128)->native_exec() == exec32);

  // 64 is used, so 128 is now the least recent; 16's size is known, so room is made first.
  (void)cache(64);
  const cudaGraphExec_t exec128 = cache.graph(128)->native_exec();
  out = cache(16);
  CHECK(bitwise_equal(host(out), eager(model, 16)));
  CHECK_FALSE(cache.cached(128));
  CHECK(cache.cached(64));
  CHECK(cache.graph(16)->native_exec() == exec128);
  CHECK(cache.stats().updates == 2);
  CHECK(cache.stats().bytes == 80 * 1024);
  CHECK(cache.stats().captures == 5);
  for (int key : {64, 16, 100, 20}) {
    out = cache(key);
    CHECK(bitwise_equal(host(out), eager(model, cache.bucket_for(key))));
  }

  // Without in-place updates every capture instantiates.
  opts.update_in_place = false;
  auto fresh = cugraphs::make_graph_cache(std::vector<int>{16, 32, 64, 128}, model, opts);
  for (int key : {16, 32, 64, 128, 16}) (void)fresh(key);
  CHECK(fresh.stats().updates == 0);
  CHECK(fresh.stats().instantiations == fresh.stats().captures);
  CHECK(fresh.stats().evictions == 3);
}

TEST_CASE("GraphCache: max_entries bounds the graphs; kept outputs stay put while their graph is cached; a bucket "
          "too large for the byte budget is an Error that leaves the cache usable", "[cache][gpu]") {
  Setup t(5);
  const Model& model = t.model;

  cugraphs::GraphCacheOptions two;
  two.max_entries = 2;
  two.keep_outputs = true;
  auto cache = cugraphs::make_graph_cache(std::vector<int>{16, 32, 64}, model, two);
  const auto out16 = cache(16);
  const auto expect16 = host(out16);
  const auto out32 = cache(32);
  CHECK(bitwise_equal(host(out16), expect16));  // 16's outputs survive another bucket's call
  CHECK(out16.data() != out32.data());
  (void)cache(64);
  CHECK(cache.stats().entries == 2);
  CHECK(cache.stats().evictions == 1);
  CHECK_FALSE(cache.cached(16));

  cugraphs::GraphCacheOptions small;
  small.keep_outputs = true;
  small.byte_budget = 50 * 1024;  // 16 (16 KiB) and 32 (32 KiB) fit, 64 (64 KiB) does not
  auto tight = cugraphs::make_graph_cache(std::vector<int>{16, 32, 64}, model, small);
  (void)tight(16);
  auto e = expect_error([&] { (void)tight(50); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "GraphCache: bucket 64's graph keeps 65536 bytes of outputs, more than the byte budget of "
                           "51200 bytes"));
  CHECK(tight.stats().captures == 2);
  e = expect_error([&] { (void)tight(64); });  // its size is known now: refused before any capture
  CHECK(tight.stats().captures == 2);
  CHECK_FALSE(tight.cached(64));
  const auto out = tight(20);
  CHECK(bitwise_equal(host(out), eager(model, 32)));
  CHECK(tight.stats().entries == 2);  // 16 and 32: 48 KiB
  CHECK(tight.stats().bytes == 48 * 1024);
}

TEST_CASE("GraphCache: misuse is an Error", "[cache][gpu]") {
  Setup t(6);
  const Model& model = t.model;
  auto& input = t.input;
  auto e = expect_error([&] { (void)cugraphs::make_graph_cache(std::vector<int>{}, model); });
  CHECK(contains(e.what(), "GraphCache: the bucket list is empty"));
  e = expect_error([&] { (void)cugraphs::make_graph_cache(std::vector<int>{8, 4, 8}, model); });
  CHECK(contains(e.what(), "GraphCache: bucket 8 is listed twice"));
  cugraphs::GraphCacheOptions none;
  none.max_entries = 0;
  e = expect_error([&] { (void)cugraphs::make_graph_cache(std::vector<int>{8}, model, none); });
  CHECK(contains(e.what(), "max_entries is 0"));
  cugraphs::GraphCacheOptions negative;
  negative.warmup_iters = -2;
  e = expect_error([&] { (void)cugraphs::make_graph_cache(std::vector<int>{8}, model, negative); });
  CHECK(contains(e.what(), "warmup_iters is -2"));

  auto cache = cugraphs::make_graph_cache(std::vector<int>{8}, model);
  DeviceBuffer<float> copied(kWidth);
  cugraphs::Graph other;
  {
    cugraphs::CaptureScope scope(other);
    e = expect_error([&] { (void)cache(8); });
    CHECK(contains(e.what(), "GraphCache: a capture is open on this thread"));
    copy_kernel<<<blocks_for(kWidth), kThreads, 0, scope.stream()>>>(copied.data(), input.data(), kWidth);
  }
  other.replay();  // the refused call left that capture going
  const auto all = random_floats(kMaxRows * kWidth, 6);
  CHECK(bitwise_equal(copied.to_host(), std::vector<float>(all.begin(), all.begin() + kWidth)));
  const auto out = cache(8);
  CHECK(bitwise_equal(host(out), eager(model, 8)));
  CHECK(cache.stats().calls == 1);
}

// Before: the warm-up ran on the capture stream, unordered with the call's stream, and read
// the input as it was before the work queued there (a request's tokens on their way).
TEST_CASE("GraphCache: a bucket's first call warms f up after the work queued on the call's stream", "[cache][gpu]") {
  cugraphs::Stream stream;
  auto x = filled(1, 1), acc = filled(1, 0);
  auto add_input = [&](int) {
    accumulate<<<1, 1, 0, cugraphs::current_stream()>>>(acc.data(), x.data());
    cugraphs::check_launch("accumulate");
  };
  auto cache = cugraphs::make_graph_cache(std::vector<int>{1}, add_input);  // one warm-up call
  fill_late(x, acc, stream);  // x = 1 and acc = 0 now (nothing has run yet), x = 7 after 50 ms
  (void)cache(stream, 1);
  stream.synchronize();
  CHECK(host(acc.span())[0] == 7.0f);  // the warm-up, which is the call, added 7 once
}

// Before: the call's stream was not watched (only the current one was), so f's work left on it
// (a library handle bound to the program's stream at start-up) ran once, eagerly, at the
// bucket's capture, and was missing from every replay: the second call of the bucket did not
// add, silently.
TEST_CASE("GraphCache: a call on a stream that is not current watches that stream while it captures: f's work "
          "left there is an Error, not a node missing from every replay",
          "[cache][gpu]") {
  cugraphs::Stream stream;  // the program's stream, held in a variable and never made current
  auto x = filled(1, 1), acc = filled(1, 0), other = filled(1, 0);
  bool left_on_stream = true;
  auto step = [&](int) {
    // Half of f ported (current_stream()), half left on the program's stream.
    accumulate<<<1, 1, 0, cugraphs::current_stream()>>>(other.data(), x.data());
    accumulate<<<1, 1, 0, left_on_stream ? static_cast<cudaStream_t>(stream) : cugraphs::current_stream()>>>(
        acc.data(), x.data());
    cugraphs::check_launch("accumulate");
  };
  auto cache = cugraphs::make_graph_cache(std::vector<int>{1}, step);
  const auto e = expect_error([&] { (void)cache(stream, 1); });
  CHECK(e.code() == cudaErrorStreamCaptureUnjoined);
  CHECK(contains(e.what(), "accumulate"));
  std::printf("cache: a call whose f leaves work on the call's stream says: %s\n", e.what());
  CHECK_FALSE(cache.cached(1));
  stream.synchronize();
  cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  // Mended, the same cache captures the bucket, and every call adds once.
  left_on_stream = false;
  float want = host(acc.span())[0];
  const float added = host(x.span())[0];
  for (int i = 0; i < 3; ++i) {
    (void)cache(stream, 1);
    want += added;  // the same float additions as the kernel's, in order
  }
  stream.synchronize();
  CHECK(cache.cached(1));
  CHECK(host(acc.span())[0] == want);
}

// A decode step's per-call value read from the host is frozen at its bucket's capture: the
// cache's calls cannot take it as an argument, and GraphCache::verify names it.
TEST_CASE("GraphCache: verify checks a bucket's graph against f run eagerly from the same state: a value read "
          "from the host and changed since the capture is named; the same value kept in device memory passes",
          "[cache][verify][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<int> pos(1);
  DeviceBuffer<float> log(16), temperature(1);
  put_all(pos, 0);
  put_all(log, -1.0f);
  float host_temperature = 1.0f;  // a request's temperature, read from the host
  bool from_device = false;
  auto append = [&](int) {
    DeviceBuffer<float> wrote(1);
    if (from_device)  // the port: the value in device memory, written before the calls
      append_from<<<1, 1, 0, cugraphs::current_stream()>>>(log.data(), pos.data(), temperature.data(), wrote.data());
    else
      append_at<<<1, 1, 0, cugraphs::current_stream()>>>(log.data(), pos.data(), host_temperature, wrote.data());
    cugraphs::check_launch("append");
    return wrote;
  };
  auto cache = cugraphs::make_graph_cache(std::vector<int>{1}, append);
  const auto not_cached = expect_error([&] { cache.verify(1, log, pos); });
  CHECK(contains(not_cached.what(), "is not cached"));
  (void)cache(1);
  (void)cache(1);
  cache.verify(1, log, pos);  // nothing changed since the capture: the replay matches
  host_temperature = 2.0f;    // the next request
  const auto e = expect_error([&] { cache.verify(1, log, pos); });
  CHECK(contains(e.what(), "the replay and the step run eagerly from the same state differ"));
  std::printf("cache: verify after a host value changed says: %s\n", e.what());
  // Ported: the value in device memory; the bucket captures again after clear().
  from_device = true;
  cache.clear();
  put_all(temperature, 1.0f);
  (void)cache(1);
  put_all(temperature, 3.0f);
  cache.verify(1, log, pos);
  const int at = host(pos)[0];
  REQUIRE(at >= 1);
  CHECK(host(log)[static_cast<std::size_t>(at - 1)] == 3.0f);  // the state holds the replay's
}

// Before: a bucket's first call ran f eagerly (the warm-up) and then replayed the graph just
// captured, so a step with effects beyond its outputs (a decode step appending to a KV cache
// at a position it advances on the device) did them twice on the first call of every bucket,
// silently: the sequence skipped a position and held a token twice.
TEST_CASE("GraphCache: a bucket's first call runs f once: the warm-up is the call (its effects stand, its outputs "
          "are the call's), later calls replay; with warmup_iters = 2 one more eager call runs first",
          "[cache][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<int> pos(1);
  DeviceBuffer<float> log(64);
  put_all(pos, 0);
  put_all(log, -1.0f);
  // Appends `bucket` at the position kept on the device, advances it, and returns a buffer
  // holding the position it wrote (an output the cache must hand back for the first call too).
  auto append = [&](int bucket) {
    DeviceBuffer<float> wrote(1);
    append_at<<<1, 1, 0, cugraphs::current_stream()>>>(log.data(), pos.data(), static_cast<float>(bucket),
                                                      wrote.data());
    cugraphs::check_launch("append_at");
    return wrote;
  };
  // Keys 1, 1, 5, 1, 8, 2 run buckets 1, 1, 8, 1, 8, 8. With one warm-up call (the default)
  // every call writes once; with two, each bucket's first call writes once more before.
  struct Case {
    int warmup;
    std::vector<float> log;   // the values appended, in order
    std::vector<float> seen;  // the position each call returned
  };
  for (const Case& c : {Case{1, {1, 1, 8, 1, 8, 8}, {0, 1, 2, 3, 4, 5}},
                        Case{2, {1, 1, 1, 8, 8, 1, 8, 8}, {1, 2, 4, 5, 6, 7}}}) {
    INFO("warmup_iters " << c.warmup);
    put_all(pos, 0);
    put_all(log, -1.0f);
    cugraphs::GraphCacheOptions opts;
    opts.warmup_iters = c.warmup;
    auto cache = cugraphs::make_graph_cache(std::vector<int>{1, 8}, append, opts);
    std::vector<float> seen;
    for (const int key : {1, 1, 5, 1, 8, 2}) seen.push_back(host(cache(key))[0]);
    CHECK(get(pos) == static_cast<int>(c.log.size()));
    const auto got = host(log);
    CHECK(std::vector<float>(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(c.log.size())) == c.log);
    CHECK(got[c.log.size()] == -1.0f);
    CHECK(seen == c.seen);  // the first call of each bucket returned its own write too
    CHECK(cache.stats().calls == 6);
    CHECK(cache.stats().captures == 2);
  }
}

// An engine's bucket of no entities queues nothing. Its capture is an Error by default (the
// usual cause is work on another stream, which would run once), and the cache stays usable;
// GraphCacheOptions::allow_empty keeps the bucket as an empty graph.
TEST_CASE("GraphCache: a bucket whose capture records no work is an Error unless allow_empty, which keeps it",
          "[cache][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto x = filled(1, 1), acc = filled(1, 0);
  put_all(x, 2.0f);
  put_all(acc, 0.0f);
  auto step = [&](int entities) {
    for (int i = 0; i < entities; ++i) accumulate<<<1, 1, 0, cugraphs::current_stream()>>>(acc.data(), x.data());
    cugraphs::check_launch("accumulate");
  };
  cugraphs::GraphCacheOptions opts;
  opts.warmup_iters = 0;
  auto strict = cugraphs::make_graph_cache(std::vector<int>{0, 3}, step, opts);
  const auto e = expect_error([&] { (void)strict(0); });
  CHECK(contains(e.what(), "recorded no work"));
  CHECK(contains(e.what(), "GraphCacheOptions"));
  CHECK(strict.stats().entries == 0);
  (void)strict(3);  // still usable: 3 additions of 2
  (void)strict(3);
  stream.synchronize();
  CHECK(host(acc.span())[0] == 12.0f);

  opts.allow_empty = true;
  auto lenient = cugraphs::make_graph_cache(std::vector<int>{0, 3}, step, opts);
  (void)lenient(0);
  (void)lenient(0);  // a replay of the empty graph
  (void)lenient(2);  // bucket 3: 3 additions
  stream.synchronize();
  CHECK(host(acc.span())[0] == 18.0f);
  CHECK(lenient.stats().captures == 2);
  CHECK(lenient.stats().hits == 1);
}
