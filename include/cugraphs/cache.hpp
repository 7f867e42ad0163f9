// GraphCache<Key, F>: one callable captured per bucket of a shape (a batch size, say), all
// into one shared pool, replayed for any key up to the largest bucket: the graph cache
// inference engines build by hand for dynamic shapes, with least-recently-used eviction
// under a budget and executables reused through in-place updates.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/graphed.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/stream.hpp>
#include <cugraphs/verify.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cugraphs {

/// How a GraphCache captures, keeps and evicts its graphs.
struct GraphCacheOptions {
  /// false (as vLLM does): the graphs' outputs share the pool's memory like their
  /// temporaries, so the cache holds about the largest bucket's memory whatever the number
  /// of graphs; a call's outputs stay valid until the next call of the cache, and every
  /// replay must write its outputs whole. true: each cached graph keeps its outputs (valid
  /// until it is evicted), and they count against byte_budget.
  bool keep_outputs = false;
  /// With keep_outputs: the most bytes of outputs (the DeviceBuffer leaves the callable
  /// returns) the cached graphs may keep together; least recently used graphs are evicted
  /// to stay under it.
  std::size_t byte_budget = std::numeric_limits<std::size_t>::max();
  /// The most graphs cached at once.
  std::size_t max_entries = std::numeric_limits<std::size_t>::max();
  /// Capture every bucket when the cache is made, largest first (the pool then grows once,
  /// to the largest bucket's needs); otherwise each bucket is captured on its first call.
  bool capture_all = false;
  /// A bucket captured after an eviction takes over the evicted graph's executable with an
  /// in-place update (Graph::update) where the topology allows, instead of instantiating.
  bool update_in_place = true;
  /// Eager calls of the callable before a bucket's first capture (lazy initialisation of
  /// libraries, as for graphed callables), run on the capture stream after the work queued
  /// on the call's stream. The last of them is the call itself: its work, its effects beyond
  /// the outputs (a counter, a KV cache it appends to) and its random numbers stand, its
  /// outputs are copied onto the graph's, and that call does not replay, so with the default
  /// of 1 every call runs f once. Those before it are warm-ups whose draws are taken back;
  /// an f with effects beyond its outputs sees them warmup_iters - 1 times more. With
  /// capture_all the calls happen when the cache is made, all of them warm-ups.
  int warmup_iters = 1;
  std::optional<PoolHandle> pool;  ///< none: a fresh pool
  CaptureMode mode = CaptureMode::Global;
  /// Whether a bucket whose capture records no work (f(bucket) queues nothing: an engine's
  /// bucket of no entities) is kept as an empty graph (CaptureOptions::allow_empty). By
  /// default it is an Error (the cache stays usable): the usual cause is f's work queued on a stream
  /// other than current_stream(), which ran once at the capture and never in a replay.
  bool allow_empty = false;
  /// Whether a call refuses a bucket's graph that names a DeviceBuffer freed since its
  /// capture (CaptureOptions::watch_buffers); clear() lets every bucket capture again.
  bool watch_buffers = true;
};

/// What a GraphCache has done so far, and holds now.
struct GraphCacheStats {
  std::uint64_t calls = 0;
  std::uint64_t hits = 0;            ///< calls that found their bucket's graph cached
  std::uint64_t captures = 0;        ///< buckets captured
  std::uint64_t updates = 0;         ///< captures applied to an evicted graph's executable in place
  std::uint64_t instantiations = 0;  ///< captures instantiated as executables of their own
  std::uint64_t evictions = 0;
  std::size_t entries = 0;  ///< graphs cached now
  std::size_t bytes = 0;    ///< bytes of outputs they keep in the pool (keep_outputs)
};

namespace detail {

// The index of the smallest bucket >= key in the sorted `buckets`; none past the largest.
template <class Key>
[[nodiscard]] std::optional<std::size_t> bucket_index(const std::vector<Key>& buckets, const Key& key) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), key);
  if (it == buckets.end()) return std::nullopt;
  return static_cast<std::size_t>(it - buckets.begin());
}

template <class Key>
[[nodiscard]] std::string key_text(const Key& key) {
  if constexpr (std::is_arithmetic_v<Key>) {
    return detail::format("{}", key);
  } else {
    return "this key";
  }
}

}  // namespace detail

/// A callable captured into one graph per bucket of a key (a batch size, say). A call with
/// `key` replays the graph of the smallest bucket not below it, capturing it first if it
/// is not cached; the callable, called as f(bucket) inside the capture, must do the work
/// of that bucket's size (inputs padded to it), reading inputs from memory that outlives
/// the call. All graphs share one pool, so their temporaries (and, unless
/// GraphCacheOptions::keep_outputs, their outputs) take the memory of the largest bucket
/// once. The outputs a call returns stay valid until the next call of the cache; graphs are
/// evicted least recently used first, under GraphCacheOptions' limits, and a capture after
/// an eviction takes over the evicted executable by an in-place update where it can. Calls
/// must be ordered (one stream, or streams the caller orders), and made from one thread at
/// a time.
template <class Key, class F>
class GraphCache {
  static_assert(std::totally_ordered<Key> && std::copyable<Key>,
                "cugraphs: a GraphCache key must be copyable and totally ordered (a batch size, say)");
  static_assert(std::is_invocable_v<F&, const Key&>,
                "cugraphs: a GraphCache's callable is called as f(bucket), with the bucket as a const Key&");

public:
  using Result = std::invoke_result_t<F&, const Key&>;
  /// What calls return: f's result with every DeviceBuffer leaf as a DeviceSpan.
  using Outputs = detail::span_tree_t<Result>;

  /// A cache over `buckets` (any order, no duplicates). With opts.capture_all every bucket
  /// is captured now, largest first.
  GraphCache(std::vector<Key> buckets, F f, const GraphCacheOptions& opts = {})
      : f_(std::move(f)), opts_(opts), pool_(opts.pool ? *opts.pool : graph_pool_handle()) {
    if (buckets.empty()) detail::throw_misuse(kOp, "the bucket list is empty; give at least one bucket");
    std::sort(buckets.begin(), buckets.end());
    if (const auto twin = std::adjacent_find(buckets.begin(), buckets.end()); twin != buckets.end())
      detail::throw_misuse(kOp, "bucket {} is listed twice", detail::key_text(*twin));
    if (opts.max_entries == 0) detail::throw_misuse(kOp, "max_entries is 0: the cache could hold no graph");
    if (opts.warmup_iters < 0) detail::throw_misuse(kOp, "warmup_iters is {}; it must be 0 or more", opts.warmup_iters);
    buckets_ = std::move(buckets);
    warmed_.assign(buckets_.size(), false);
    known_bytes_.assign(buckets_.size(), std::nullopt);
    if (opts.capture_all)
      for (std::size_t b = buckets_.size(); b-- > 0;) (void)admit(b, current_stream());
  }

  GraphCache(GraphCache&&) noexcept = default;
  GraphCache& operator=(GraphCache&&) noexcept = default;
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() = default;

  /// Replays the graph of `key`'s bucket on current_stream() (capturing it first if it is
  /// not cached) and returns its outputs.
  const Outputs& operator()(const Key& key) { return call(current_stream(), key); }
  /// The same on `stream`, which is this thread's current_stream() while f runs for a bucket
  /// not cached (its warm-up and capture): the escape check watches it, as it watches the
  /// current stream, so that f's work left there (a library handle bound to `stream` at
  /// start-up) is refused instead of running once.
  const Outputs& operator()(cudaStream_t stream, const Key& key) { return call(stream, key); }

  /// The bucket a call with `key` runs: the smallest not below it. Past the largest
  /// bucket, an Error.
  [[nodiscard]] const Key& bucket_for(const Key& key) const { return buckets_[index_for(key)]; }
  /// The buckets, in increasing order.
  [[nodiscard]] const std::vector<Key>& buckets() const noexcept { return buckets_; }
  /// Whether `bucket`'s graph is cached now.
  [[nodiscard]] bool cached(const Key& bucket) const { return graph(bucket) != nullptr; }
  /// The cached graph of `bucket`, or null.
  [[nodiscard]] const Graph* graph(const Key& bucket) const {
    for (const auto& e : entries_)
      if (buckets_[e->bucket] == bucket) return &e->graph;
    return nullptr;
  }
  /// Checks the cached graph of `key`'s bucket against f(bucket) run eagerly from the same
  /// state, as verify_replay does for a Graph: the state (the DeviceBuffers or DeviceSpans the
  /// step writes: a KV cache, a position) is saved, f runs eagerly on it, the state is put
  /// back, the graph replays, and the two results are compared; the state then holds the
  /// replay's. It finds what a bucket's capture froze and a call would now do otherwise (a
  /// position, a temperature or a cache slot read from the host), which the cache's calls
  /// cannot take as arguments. An Error, before anything runs, where the bucket is not cached
  /// (call the cache with `key` first), and as verify_replay's.
  template <class... S>
    requires(detail::VerifiableState<S> && ...)
  void verify(const VerifyOptions& opts, const Key& key, const S&... state) {
    const std::size_t b = index_for(key);
    Entry* entry = cached_entry(b);
    if (entry == nullptr)
      detail::throw_misuse("GraphCache::verify", "bucket {} (of key {}) is not cached; call the cache with the key "
                                                 "first, so that its graph is captured",
                           detail::key_text(buckets_[b]), detail::key_text(key));
    const Key& bucket = buckets_[b];
    verify_replay(opts, entry->graph, [&, this] { static_cast<void>(f_(bucket)); }, state...);
  }
  /// verify with the default options.
  template <class... S>
    requires(detail::VerifiableState<S> && ...)
  void verify(const Key& key, const S&... state) {
    verify(VerifyOptions{}, key, state...);
  }

  [[nodiscard]] const GraphCacheStats& stats() const noexcept { return stats_; }
  /// The pool every graph of the cache captures into.
  [[nodiscard]] const PoolHandle& pool() const noexcept { return pool_; }
  /// Evicts every graph (their outputs go back to the pool; its memory stays reserved).
  void clear() noexcept {
    entries_.clear();
    stats_.entries = 0;
    stats_.bytes = 0;
  }

private:
  static constexpr std::string_view kOp = "GraphCache";

  struct Entry {
    std::size_t bucket = 0;  // index into buckets_
    Graph graph;
    std::optional<Outputs> outputs;
    detail::Owners owners;  // the DeviceBuffers among the outputs
    std::size_t bytes = 0;
    std::uint64_t last_use = 0;
  };

  [[nodiscard]] std::size_t index_for(const Key& key) const {
    const auto b = detail::bucket_index(buckets_, key);
    if (!b)
      detail::throw_misuse(kOp, "key {} is beyond the largest bucket, {}; add a larger bucket, or split the work",
                           detail::key_text(key), detail::key_text(buckets_.back()));
    return *b;
  }

  const Outputs& call(cudaStream_t stream, const Key& key) {
    // A capture would record one replay, and the cache's own captures cannot nest in it.
    if (detail::innermost_capture() != nullptr) [[unlikely]]
      detail::throw_misuse(kOp, "a capture is open on this thread; a GraphCache cannot be called inside a "
                                "capture. Call it before capture_begin or after capture_end");
    const std::size_t b = index_for(key);
    Entry* entry = cached_entry(b);
    bool ran = false;  // the call ran eagerly as the bucket's last warm-up call
    if (entry != nullptr) {
      ++stats_.hits;
    } else {
      // The call's stream is where f's caller means its work to go: the capture watches it.
      std::optional<StreamGuard> on;
      if (stream != current_stream()) on.emplace(stream);
      entry = &admit(b, stream, &ran);
    }
    ++stats_.calls;
    entry->last_use = ++tick_;
    if (!ran) entry->graph.replay(stream);
    return *entry->outputs;
  }

  // The cached entry of bucket `b`, or null.
  Entry* cached_entry(std::size_t b) const noexcept {
    for (const auto& e : entries_)
      if (e->bucket == b) return e.get();
    return nullptr;
  }

  // Captures bucket `b` and caches its graph, evicting as the limits require: before the
  // capture where its size is known from an earlier capture (so that it can use the memory
  // freed), after it otherwise. The last graph evicted lends it its executable. The warm-up
  // runs f eagerly after the work queued on `stream` (the call's: its inputs may be on their
  // way there). For a call (`ran` given), the last warm-up call is the call itself (*ran set):
  // its effects and draws stand, and its outputs are copied onto the graph's, ordered before
  // the work queued next on `stream`; otherwise the call replays after the warm-up.
  Entry& admit(std::size_t b, cudaStream_t stream, bool* ran = nullptr) {
    const Key& bucket = buckets_[b];
    if (known_bytes_[b] && *known_bytes_[b] > opts_.byte_budget) too_large(b, *known_bytes_[b]);
    std::optional<Graph> victim;
    make_room(known_bytes_[b].value_or(0), victim);
    std::optional<Outputs> eager;  // the call's own outputs, run eagerly
    detail::Owners eager_owners;
    // Should what follows the eager call throw, the call's stream still comes after its work.
    struct OrderOnUnwind {
      cudaStream_t waiter = nullptr, producer = nullptr;
      OrderOnUnwind() = default;
      OrderOnUnwind(const OrderOnUnwind&) = delete;
      OrderOnUnwind& operator=(const OrderOnUnwind&) = delete;
      ~OrderOnUnwind() {
        if (producer != nullptr && waiter != producer) static_cast<void>(detail::try_wait_for_stream(waiter, producer));
      }
    } order_on_unwind;
    if (!warmed_[b] && opts_.warmup_iters > 0) {
      // Where the call's stream cannot be ordered with the capture stream both ways (the
      // legacy stream while a capture guards it, another device's), the call replays.
      const bool as_call = ran != nullptr && detail::can_order_after(capture_stream(), stream, kOp);
      const int warm_ups = opts_.warmup_iters - (as_call ? 1 : 0);
      if (warm_ups > 0)
        detail::warm_up(kOp, capture_stream(), warm_ups, [&, this] { return f_(bucket); }, stream);
      if (as_call) {
        order_on_unwind.waiter = stream;
        order_on_unwind.producer = capture_stream();
        eager = run_eagerly(bucket, stream, eager_owners);
      }
    }
    warmed_[b] = true;

    auto entry = std::make_unique<Entry>();
    entry->bucket = b;
    Graph next;
    {
      CaptureOptions co;
      co.pool = pool_;
      co.mode = opts_.mode;
      co.allow_empty = opts_.allow_empty;
      co.watch_buffers = opts_.watch_buffers;
      co.instantiate = false;  // an evicted executable may take it in place
      CaptureScope scope(next, co);
      if constexpr (std::is_void_v<Result>) {
        f_(bucket);
        entry->outputs.emplace();
      } else {
        entry->outputs.emplace(detail::take_outputs(f_(bucket), entry->owners, &entry->bytes));
      }
      scope.end();
    }
    ++stats_.captures;
    if (!opts_.keep_outputs) {  // back to the pool: later captures may place their work there
      entry->owners.clear();
      entry->bytes = 0;
    }
    known_bytes_[b] = entry->bytes;
    if (entry->bytes > opts_.byte_budget) too_large(b, entry->bytes);
    make_room(entry->bytes, victim);
    if (victim && opts_.update_in_place) {
      UpdateOptions fallback;
      fallback.reinstantiate_on_failure = true;
      const UpdateResult r = victim->update(std::move(next), fallback);
      ++(r.updated ? stats_.updates : stats_.instantiations);
      entry->graph = std::move(*victim);
    } else {
      next.instantiate();
      ++stats_.instantiations;
      entry->graph = std::move(next);
    }
    stats_.bytes += entry->bytes;
    entries_.push_back(std::move(entry));
    stats_.entries = entries_.size();
    Entry& admitted = *entries_.back();
    if (eager) {  // cached first: should the copy be refused, the next call replays the graph
      copy_outputs(*eager, *admitted.outputs, stream);
      order_on_unwind.producer = nullptr;  // copy_outputs ordered the call's stream
      *ran = true;  // eager only for a call
    }
    return admitted;
  }

  // A bucket's first call, run eagerly as the warm-up's last call: f(bucket) on the capture
  // stream (where libraries initialise what the capture will use), after the work queued on
  // `stream`. Its DeviceBuffers go to `owners`, freed once their copy is queued.
  std::optional<Outputs> run_eagerly(const Key& bucket, cudaStream_t stream, detail::Owners& owners) {
    const cudaStream_t s = capture_stream();
    if (stream != s) detail::wait_for_stream(s, stream, kOp);
    StreamGuard on(s);
    if constexpr (std::is_void_v<Result>) {
      f_(bucket);
      return Outputs{};
    } else {
      return detail::take_outputs(f_(bucket), owners);
    }
  }

  // The eager call's outputs onto the graph's (a leaf already there is left), on the capture
  // stream after the eager work, every size checked first; `stream` then waits, so the caller
  // reads them in order.
  void copy_outputs(const Outputs& from, const Outputs& to, cudaStream_t stream) {
    const cudaStream_t s = capture_stream();
    std::vector<std::pair<const void*, std::size_t>> leaves;
    [[maybe_unused]] auto note = [&](std::size_t, auto leaf) { leaves.emplace_back(leaf.data(), leaf.size_bytes()); };
    [[maybe_unused]] auto check = [&](std::size_t i, auto leaf) {
      if (leaves[i].second != leaf.size_bytes())
        detail::throw_misuse(kOp, "output leaf {} of the bucket's first call, run eagerly, has {} bytes, but the "
                                  "capture's has {}: f(bucket) must return outputs of the same sizes every time",
                             i, leaves[i].second, leaf.size_bytes());
    };
    [[maybe_unused]] auto copy = [&](std::size_t i, auto leaf) {
      detail::copy_leaf(leaf.data(), leaves[i].first, leaf.size_bytes(), s, kOp,
                        "copying the first call's outputs onto the graph's");
    };
    [[maybe_unused]] std::size_t next = 0;  // unused without outputs
    detail::visit_leaves(from, next, note);
    next = 0;
    detail::visit_leaves(to, next, check);
    next = 0;
    detail::visit_leaves(to, next, copy);
    if (stream != s) detail::wait_for_stream(stream, s, kOp);
  }

  // Evicts least recently used graphs until one more of `bytes` fits; the last one evicted
  // is kept in `victim` for its executable.
  void make_room(std::size_t bytes, std::optional<Graph>& victim) {
    while (!entries_.empty() &&
           (entries_.size() >= opts_.max_entries || stats_.bytes + bytes > opts_.byte_budget)) {
      const auto lru = std::min_element(entries_.begin(), entries_.end(),
                                        [](const auto& x, const auto& y) { return x->last_use < y->last_use; });
      victim.emplace(std::move((*lru)->graph));
      stats_.bytes -= (*lru)->bytes;
      entries_.erase(lru);  // its outputs go back to the pool
      ++stats_.evictions;
      stats_.entries = entries_.size();
    }
  }

  [[noreturn]] void too_large(std::size_t b, std::size_t bytes) const {
    detail::throw_misuse(kOp, "bucket {}'s graph keeps {} bytes of outputs, more than the byte budget of {} "
                              "bytes, so it cannot be cached; raise GraphCacheOptions::byte_budget, or return "
                              "outputs in memory of your own (DeviceSpans)",
                         detail::key_text(buckets_[b]), bytes, opts_.byte_budget);
  }

  F f_;
  GraphCacheOptions opts_;
  PoolHandle pool_;
  std::vector<Key> buckets_;
  std::vector<bool> warmed_;                            // per bucket: warmed up once
  std::vector<std::optional<std::size_t>> known_bytes_;  // per bucket: output bytes when last captured
  std::vector<std::unique_ptr<Entry>> entries_;
  GraphCacheStats stats_;
  std::uint64_t tick_ = 0;
};

/// Deduces the cache's types: make_graph_cache(buckets, f, opts).
template <class Key, class F>
[[nodiscard]] GraphCache<Key, std::decay_t<F>> make_graph_cache(std::vector<Key> buckets, F&& f,
                                                                const GraphCacheOptions& opts = {}) {
  return GraphCache<Key, std::decay_t<F>>(std::move(buckets), std::forward<F>(f), opts);
}

}  // namespace cugraphs
