// bucketed_inference: a toy language-model step served at batch sizes 1..512 through a
// GraphCache with vLLM's capture sizes (1, 2, 4, 8, 16, ..., 512). Each request's batch is
// padded to its bucket and the bucket's graph replayed. Two configurations serve the same
// requests: every bucket captured at start-up, largest first (as vLLM does), and lazily
// with at most 16 graphs, where a bucket captured after an eviction takes over the evicted
// executable by an in-place update. Every request's next tokens and logits are checked
// against the eager step of its exact batch; then requests are timed, eager and graphed.
#include "toy_model.cuh"

#include <cugraphs/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Cache = cugraphs::GraphCache<int, toy::Model>;
constexpr int kRequests = 400;

struct Request {
  int rows;
  std::vector<int> tokens;  // max_rows of them: the request's rows, then padding (token 0)
};

std::vector<Request> make_requests(const toy::Shape& shape, int n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> rows(1, shape.max_rows), token(0, shape.vocab - 1);
  std::vector<Request> requests(static_cast<std::size_t>(n));
  for (auto& r : requests) {
    r.rows = rows(gen);
    r.tokens.assign(static_cast<std::size_t>(shape.max_rows), 0);
    for (int i = 0; i < r.rows; ++i) r.tokens[static_cast<std::size_t>(i)] = token(gen);
  }
  return requests;
}

// Serves every request from `cache`, checking each against the eager step. Returns
// whether all matched.
bool serve_and_check(Cache& cache, const toy::Model& model, cugraphs::DeviceBuffer<int>& tokens,
                     const std::vector<Request>& requests) {
  bool all = true;
  for (const auto& r : requests) {
    tokens.copy_from_host(r.tokens);
    const auto& [logits, next] = cache(r.rows);
    const auto n = static_cast<std::size_t>(r.rows);
    std::vector<int> got_next(n);
    std::vector<float> got_logits(n * static_cast<std::size_t>(model.shape.vocab));
    cugraphs::check(cudaMemcpyAsync(got_next.data(), next.data(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                    cugraphs::current_stream()), "read next tokens");
    cugraphs::check(cudaMemcpyAsync(got_logits.data(), logits.data(), got_logits.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost, cugraphs::current_stream()), "read logits");
    const auto [eager_logits, eager_next] = model(r.rows);
    const auto want_next = eager_next.to_host();
    const auto want_logits = eager_logits.to_host();
    all = all && got_next == want_next &&
          std::memcmp(got_logits.data(), want_logits.data(), got_logits.size() * sizeof(float)) == 0;
  }
  return all;
}

// Median microseconds per request, from its tokens' upload to its next tokens on the host.
template <class Step>
double time_requests(cugraphs::DeviceBuffer<int>& tokens, const std::vector<Request>& requests, Step&& step) {
  std::vector<double> us;
  std::vector<int> next(512);
  for (const auto& r : requests) {
    const auto t0 = Clock::now();
    tokens.copy_from_host(r.tokens);
    step(r.rows, next.data());
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("bucketed_inference: no CUDA device found; this example replays graphs on a GPU");
    return 1;
  }
  try {
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    const toy::Shape shape;
    const toy::Weights weights(shape, 7);
    cugraphs::DeviceBuffer<int> tokens(static_cast<std::size_t>(shape.max_rows));
    tokens.copy_from_host(std::vector<int>(static_cast<std::size_t>(shape.max_rows), 0));
    const toy::Model model{shape, &weights, tokens.data()};
    const auto buckets = toy::vllm_buckets(shape.max_rows);
    const auto requests = make_requests(shape, kRequests, 2026);

    // Every bucket at start-up, largest first.
    cugraphs::GraphCacheOptions all;
    all.capture_all = true;
    const auto t0 = Clock::now();
    Cache eager_capture(buckets, model, all);
    const double capture_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const bool all_ok = serve_and_check(eager_capture, model, tokens, requests);
    const auto& sa = eager_capture.stats();

    // Lazily, at most 16 graphs.
    cugraphs::GraphCacheOptions lazy;
    lazy.max_entries = 16;
    Cache bounded(buckets, model, lazy);
    const bool lazy_ok = serve_and_check(bounded, model, tokens, requests);
    const auto& sb = bounded.stats();

    // The largest bucket alone, for its memory.
    Cache largest(std::vector<int>{shape.max_rows}, model);
    (void)largest(shape.max_rows);

    const auto timed = make_requests(shape, kRequests, 7);
    const double eager_us = time_requests(tokens, timed, [&](int rows, int* next) {
      const auto [logits, out] = model(rows);
      cugraphs::check(cudaMemcpyAsync(next, out.data(), out.bytes(), cudaMemcpyDeviceToHost, stream), "read");
      stream.synchronize();
    });
    const double graphed_us = time_requests(tokens, timed, [&](int rows, int* next) {
      const auto& [logits, out] = eager_capture(rows);
      cugraphs::check(cudaMemcpyAsync(next, out.data(), static_cast<std::size_t>(rows) * sizeof(int),
                                      cudaMemcpyDeviceToHost, stream), "read");
      stream.synchronize();
    });

    const double mib = 1024.0 * 1024.0;
    const double shared = static_cast<double>(eager_capture.pool().reserved_bytes());
    const double alone = static_cast<double>(largest.pool().reserved_bytes());
    std::printf("bucketed_inference: toy step (vocab %d, dim %d, hidden %d), %zu buckets (1, 2, 4, 8, 16, ..., %d), "
                "%d requests of 1..%d rows\n",
                shape.vocab, shape.dim, shape.hidden, buckets.size(), shape.max_rows, kRequests, shape.max_rows);
    std::printf("bucketed_inference: all buckets at start-up, largest first: %llu captures in %.1f ms; %llu hits; "
                "pool %.1f MiB, the largest bucket alone %.1f MiB (%.2fx)\n",
                static_cast<unsigned long long>(sa.captures), capture_ms, static_cast<unsigned long long>(sa.hits),
                shared / mib, alone / mib, shared / alone);
    std::printf("bucketed_inference: lazily, at most 16 graphs: %llu hits, %llu captures (%llu updated in place, "
                "%llu instantiated), %llu evictions\n",
                static_cast<unsigned long long>(sb.hits), static_cast<unsigned long long>(sb.captures),
                static_cast<unsigned long long>(sb.updates), static_cast<unsigned long long>(sb.instantiations),
                static_cast<unsigned long long>(sb.evictions));
    std::printf("bucketed_inference: every request's next tokens and logits equal to its exact eager batch, bit for "
                "bit: %s (start-up cache), %s (bounded cache)\n",
                all_ok ? "yes" : "NO", lazy_ok ? "yes" : "NO");
    std::printf("bucketed_inference: median per request, upload to next tokens on the host: eager %.1f us, graph "
                "cache %.1f us (%.2fx)\n",
                eager_us, graphed_us, eager_us / graphed_us);
    const bool ok = all_ok && lazy_ok && sa.captures == buckets.size() && sb.updates > 0 && shared <= 1.2 * alone;
    std::puts(ok ? "bucketed_inference: ok" : "bucketed_inference: FAIL");
    return ok ? 0 : 1;
  } catch (const cugraphs::Error& e) {
    std::printf("bucketed_inference: %s\n", e.what());
    return 1;
  }
}
