// A shape-bucketed graph cache on examples/toy_model.cuh's step, with vLLM's capture sizes
// (1, 2, 4, 8, 16, ..., 512): the memory of the N largest buckets' graphs in one
// GraphCache against the largest bucket alone and against a pool per graph; per bucket,
// the time to make its graph ready and run it once, by capture + instantiate or by
// capture + in-place update of another bucket's executable; and a cache miss, with and
// without in-place updates.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include "../../examples/toy_model.cuh"

#include <array>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace cugraphs_bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::array<int, 7> kLargest{1, 2, 4, 8, 16, 32, 67};  // the N largest buckets
constexpr std::array<int, 5> kTimed{1, 8, 64, 256, 512};

using Cache = cugraphs::GraphCache<int, toy::Model>;

// The capture of `bucket` into `g` (instantiated and uploaded unless `deferred`).
void capture_bucket(cugraphs::Graph& g, const toy::Model& model, int bucket, const cugraphs::PoolHandle& pool,
                    bool deferred) {
  cugraphs::CaptureOptions co;
  co.pool = pool;
  co.instantiate = !deferred;
  cugraphs::CaptureScope scope(g, co);
  (void)model(bucket);  // outputs and temporaries go back to the pool inside the capture
  scope.end();
}

}  // namespace

void buckets_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  const toy::Shape shape;
  const toy::Weights weights(shape, 3);
  cugraphs::DeviceBuffer<int> tokens(static_cast<std::size_t>(shape.max_rows));
  std::vector<int> host_tokens(tokens.size());
  for (std::size_t i = 0; i < host_tokens.size(); ++i) host_tokens[i] = static_cast<int>((i * 37) % 512);
  tokens.copy_from_host(host_tokens);
  const toy::Model model{shape, &weights, tokens.data()};
  const std::vector<int> buckets = toy::vllm_buckets(shape.max_rows);
  for (int i = 0; i < 3; ++i) (void)model(shape.max_rows);  // warm the kernels up
  cugraphs::check(cudaStreamSynchronize(stream), "sync");

  // Memory: the N largest buckets in one cache (outputs shared, as vLLM does), the largest
  // alone, and a private pool per graph (outputs kept, as separate captures keep them).
  std::printf("\n== graph cache memory: the N largest of %zu buckets (1, 2, 4, 8, ..., %d), reserved MiB\n",
              buckets.size(), shape.max_rows);
  std::printf("%8s %12s %14s %12s %10s\n", "graphs", "one cache", "largest alone", "pool each", "cache/alone");
  double alone = 0;
  {
    Cache largest(std::vector<int>{shape.max_rows}, model);
    (void)largest(shape.max_rows);
    alone = static_cast<double>(largest.pool().reserved_bytes()) / kMiB;
  }
  std::vector<double> counts, cache_mib, separate_mib;
  for (const int n : kLargest) {
    const std::vector<int> chosen(buckets.end() - n, buckets.end());
    cugraphs::GraphCacheOptions all;
    all.capture_all = true;
    Cache cache(chosen, model, all);
    const double shared = static_cast<double>(cache.pool().reserved_bytes()) / kMiB;
    std::vector<cugraphs::Graph> own(chosen.size());
    std::vector<cugraphs::DeviceBuffer<float>> kept;
    double separate = 0;
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      cugraphs::CaptureScope scope(own[i]);
      auto [logits, next] = model(chosen[i]);
      kept.push_back(std::move(logits));  // its outputs stay, as a graph's outputs would
      scope.end();
      separate += static_cast<double>(own[i].pool().reserved_bytes()) / kMiB;
    }
    const std::string v = n == kLargest.back()
                              ? report.goal({"buckets", "cache_vs_largest",
                                           fmt::format("{} bucket graphs in one cache / the largest alone, memory",
                                                       n),
                                           "graphs", n},
                                            shared / alone, "<=", 1.2)
                              : "";
    std::printf("%8d %9.1f MiB %11.1f MiB %9.1f MiB %10.3f %s\n", n, shared, alone, separate, shared / alone, v.c_str());
    counts.push_back(n);
    cache_mib.push_back(shared);
    separate_mib.push_back(separate);
  }

  // Per bucket: ready and run once, by a new executable or by an update of another bucket's.
  std::printf("\n== per bucket, capture and first replay to completion (us, medians)\n");
  std::printf("%8s %12s %18s %18s %8s\n", "bucket", "capture", "+ instantiate", "+ update in place", "ratio");
  cugraphs::Graph updated;
  const cugraphs::PoolHandle pool = cugraphs::graph_pool_handle();
  capture_bucket(updated, model, buckets.front(), pool, false);
  std::vector<double> timed, capture_us, instantiate_us, update_us;
  for (const int b : kTimed) {
    std::vector<double> cap, inst, upd;
    const int count = reps(21);
    for (int rep = 0; rep < count + 1; ++rep) {
      for (int which = 0; which < 2; ++which) {
        const bool update_now = (which == 0) == (rep % 2 == 0);
        cugraphs::check(cudaStreamSynchronize(stream), "sync");
        cugraphs::Graph g;
        const auto t0 = Clock::now();
        capture_bucket(g, model, b, pool, update_now);
        const double captured = us_since(t0);
        if (update_now) {
          const auto r = updated.update(std::move(g));
          if (!r.updated) throw std::runtime_error("the bucket's update failed: " + r.message);
          updated.replay();
        } else {
          g.replay();
        }
        cugraphs::check(cudaStreamSynchronize(stream), "sync");
        const double total = us_since(t0);
        if (rep == 0) continue;
        (update_now ? upd : inst).push_back(total);
        if (update_now) cap.push_back(captured);  // the capture alone (deferred)
      }
    }
    const double mc = median(cap), mi = median(inst), mu = median(upd);
    std::printf("%8d %9.1f us %15.1f us %15.1f us %8.3f\n", b, mc, mi, mu, mu / mi);
    timed.push_back(b);
    capture_us.push_back(mc);
    instantiate_us.push_back(mi);
    update_us.push_back(mu);
  }

  // A cache that holds one graph, called with two buckets in turn: every call a miss.
  std::vector<double> miss_update, miss_instantiate;
  for (const bool in_place : {true, false}) {
    cugraphs::GraphCacheOptions one;
    one.max_entries = 1;
    one.update_in_place = in_place;
    Cache cache(buckets, model, one);
    std::vector<double> us;
    for (int rep = 0; rep < reps(41) + 2; ++rep) {
      const int key = rep % 2 == 0 ? 256 : 64;
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      const auto t0 = Clock::now();
      (void)cache(key);
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      if (rep >= 2) us.push_back(us_since(t0));
    }
    const auto& st = cache.stats();
    std::printf("cache miss (buckets 256 and 64 in turn, one graph cached), %s: %.1f us a call; %llu captures, %llu "
                "updates, %llu instantiations\n",
                in_place ? "in-place updates" : "new executables", median(us),
                static_cast<unsigned long long>(st.captures), static_cast<unsigned long long>(st.updates),
                static_cast<unsigned long long>(st.instantiations));
    (in_place ? miss_update : miss_instantiate).push_back(median(us));
  }

  Json& sec = report.section("buckets");
  sec["buckets"] = static_cast<double>(buckets.size());
  sec["graphs"] = counts;
  sec["cache_mib"] = cache_mib;
  sec["largest_alone_mib"] = alone;
  sec["separate_mib"] = separate_mib;
  sec["timed_buckets"] = timed;
  sec["capture_us"] = capture_us;
  sec["capture_instantiate_us"] = instantiate_us;
  sec["capture_update_us"] = update_us;
  sec["miss_update_us"] = miss_update.front();
  sec["miss_instantiate_us"] = miss_instantiate.front();
}

}  // namespace cugraphs_bench
