// GraphedCallable<F, Args...>: a callable captured once into a graph, called with inputs
// that are staged onto its static buffers inside the graph itself, so that a call costs
// about one graph launch whatever the number of inputs.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/flatten.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/per_launch.hpp>
#include <cugraphs/stream.hpp>
#include <cugraphs/verify.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cugraphs {

/// How graphed callables are made.
struct GraphedOptions {
  int warmup_iters = 3;            ///< eager calls on the capture stream before capturing
  std::optional<PoolHandle> pool;  ///< none: a fresh private pool
  CaptureMode mode = CaptureMode::Global;
  /// The stream the warm-up calls and the capture run on; nullptr: capture_stream() of the
  /// current device. Calls run on current_stream() (or the stream passed to them) regardless.
  cudaStream_t stream = nullptr;
  /// How each call hands the graph its input addresses and random-number offsets (PerLaunch).
  PerLaunch per_launch = PerLaunch::Auto;
  /// Whether calls copy their inputs onto the static inputs (Copy) or f's kernels read them
  /// where they are (InPlace: no copy, a call as fast as f's graph; see InputMode).
  InputMode inputs = InputMode::Copy;
  /// Whether f may leave an input unread. By default a capture in which no node reaches some
  /// input (its address in no kernel's arguments, no copy of it) is an Error: the usual cause
  /// is f's work launched on a stream other than current_stream(), which runs once while f is
  /// captured and never in a call. Set it for an f that ignores an input on purpose.
  bool allow_unused_input = false;
  /// Whether f's capture may record no work at all (CaptureOptions::allow_empty): by default
  /// it is an Error, for the same reason (f's work went to another stream and ran once). A
  /// callable with inputs always records its staging node, so this matters only without inputs.
  bool allow_empty = false;
  /// Whether f may write an input in InputMode::Copy. A call copies each input onto a static
  /// buffer and f works on that copy, so what f writes there never reaches the buffer the
  /// caller passed (an optimizer's step on parameters handed in as inputs would be lost at
  /// every call). By default the warm-up watches every writable input leaf (a DeviceSpan of
  /// non-const elements): one whose bytes f changed is an Error naming it. Set it for an f
  /// that uses an input as scratch; use InputMode::InPlace for one whose writes matter. With
  /// warmup_iters = 0 nothing runs before the capture, and nothing is watched.
  bool allow_written_input = false;
  /// Whether a call refuses a graph that names a DeviceBuffer freed since f was captured
  /// (CaptureOptions::watch_buffers): weights f refers to, reloaded into a new buffer.
  bool watch_buffers = true;
};

namespace detail {

// std::invoke without <functional> (a costly header to parse, docs/performance.md): the
// same call, through std::apply.
template <class F, class... A>
decltype(auto) invoke(F&& f, A&&... args) {
  return std::apply(std::forward<F>(f), std::forward_as_tuple(std::forward<A>(args)...));
}

using Owners = std::vector<std::shared_ptr<void>>;

// The leaf map of a graphed callable's results: a DeviceBuffer is moved into `owners` (its
// bytes added to `*bytes` where given) and replaced by its span; a DeviceSpan stays.
struct TakeOutput {
  Owners* owners;
  std::size_t* bytes;

  template <class T>
  DeviceSpan<T> operator()(DeviceBuffer<T>&& buffer) const {
    auto owned = std::make_shared<DeviceBuffer<T>>(std::move(buffer));
    const DeviceSpan<T> span = owned->span();
    if (bytes != nullptr) *bytes += owned->bytes();
    owners->push_back(std::move(owned));
    return span;
  }
  template <class T>
  DeviceSpan<T> operator()(DeviceSpan<T> span) const {
    return span;
  }
};

// The structure a graphed callable returns: DeviceBuffer leaves become DeviceSpans (void:
// an empty tuple).
template <class T>
using span_tree_t = typename std::conditional_t<std::is_void_v<T>, std::type_identity<std::tuple<>>,
                                                tree_map<TakeOutput, std::remove_cvref_t<T>>>::type;

// Moves every DeviceBuffer of `tree` into `owners` and returns the tree with spans. Where
// `bytes` is given, the buffers' bytes are added to it.
template <class T>
span_tree_t<T> take_outputs(T&& tree, Owners& owners, std::size_t* bytes = nullptr) {
  constexpr bool keeps_types = map_keeps_custom_v<TakeOutput, T>;
  static_assert(keeps_types,
                "cugraphs: a result type opted in through tree_traits holds DeviceBuffer leaves, which "
                "a graphed callable cannot take over (it would have to rebuild the type with "
                "DeviceSpans). Return the buffers in std::tuple, std::pair or std::array, or keep them "
                "elsewhere and return their spans.");
  if constexpr (keeps_types) {
    return map_tree(TakeOutput{&owners, bytes}, std::forward<T>(tree));
  } else {
    return {};
  }
}

struct BuildTag {};

// How a graphed callable's errors name the call, the object and what it stages.
struct CallNames {
  std::string_view op = "GraphedCallable";
  std::string_view owner = "GraphedCallable";
  std::string_view leaf = "input leaf";
};

// Whether arguments of types Given bind to parameters Params (same count, each convertible).
template <class Params, class Given>
inline constexpr bool accepts_v = false;
template <class... P, class... G>
  requires(sizeof...(P) == sizeof...(G))
inline constexpr bool accepts_v<std::tuple<P...>, std::tuple<G...>> = (std::is_convertible_v<G, P> && ...);

void check_sample_leaf(std::string_view op, std::size_t i, const void* data, std::size_t size, int device);

// What a warm-up needs before f runs eagerly on the samples: a sane count, no open capture,
// and samples kernels can read.
template <class... Args>
void check_warm_up(std::string_view op, int iterations, const Args&... samples) {
  if (iterations < 0)
    throw_misuse(op, "warmup_iters is {}; it must be 0 or more", iterations);
  // The warm-up synchronizes and the capture would nest: either would break an open capture.
  if (innermost_capture() != nullptr)
    throw_misuse(op, "a capture is open on this thread; make graphed callables before capture_begin "
                     "or after capture_end");
  // f runs on the samples eagerly: a sample kernels cannot read would fault the device.
  const int device = current_device();
  [[maybe_unused]] auto check = [&](std::size_t i, auto leaf) { check_sample_leaf(op, i, leaf.data(), leaf.size(), device); };
  [[maybe_unused]] std::size_t next = 0;  // unused without samples
  (visit_leaves(samples, next, check), ...);
}

// The writable inputs a warm-up watches (InputMode::Copy, GraphedOptions::allow_written_input
// off). The warm-up runs f eagerly on the samples, so a write of f to an input shows as a
// sample whose bytes changed, fingerprinted before the first warm-up call and after the last;
// in a call the same write would land on the static copy and never reach the caller's buffer.
// A write that leaves the bytes as they were goes unseen, and so does one the samples did not
// lead f to make (a pair's optimizer step driven by the zero incoming gradients of its
// warm-up); nothing is watched where the warm-up could not wait for the caller's stream (its
// writes to the samples could then land between the fingerprints).
class WriteWatch {
public:
  // `owner` says what f is ("f", "the forward or the backward") and `remedy` how to keep its
  // writes, for the Error.
  WriteWatch(std::string_view op, std::string_view owner, std::string_view leaf, std::string_view remedy) noexcept
      : op_(op), owner_(owner), leaf_(leaf), remedy_(remedy) {}
  WriteWatch(const WriteWatch&) = delete;
  WriteWatch& operator=(const WriteWatch&) = delete;
  ~WriteWatch() {
    // The warm-up's stream, never capturing; a failure is reported and cleared, not left for
    // the next launch's cudaGetLastError to find.
    if (sums_ != nullptr) {
      report_in_destructor(cudaFreeAsync(sums_, stream_), "freeing the inputs' fingerprints: cudaFreeAsync");
      static_cast<void>(cudaGetLastError());
    }
  }
  // Watches every writable leaf of `samples` that has bytes (the leaves numbered in order).
  template <class... Args>
  void add_writable(const Args&... samples) {
    [[maybe_unused]] std::size_t next = 0;  // unused without samples
    [[maybe_unused]] auto add = [this](std::size_t i, auto leaf) {
      if constexpr (!std::is_const_v<typename decltype(leaf)::element_type>)
        if (leaf.size_bytes() != 0) leaves_.push_back({i, leaf.data(), leaf.size_bytes()});
    };
    (visit_leaves(samples, next, add), ...);
  }
  // The fingerprints before the warm-up calls, queued on `s`.
  void before(cudaStream_t s);
  // The fingerprints after them, on `s`, then an Error naming the first leaf whose bytes changed.
  void judge(cudaStream_t s);

private:
  struct Leaf {
    std::size_t index;
    const void* data;
    std::size_t bytes;
  };
  std::string_view op_, owner_, leaf_, remedy_;
  std::vector<Leaf> leaves_;
  unsigned long long* sums_ = nullptr;  // device: before and after, per leaf (stream-ordered on stream_)
  cudaStream_t stream_ = nullptr;
};

// The stream a graphed callable's warm-up and capture run on.
[[nodiscard]] inline cudaStream_t work_stream(const GraphedOptions& opts) {
  return opts.stream != nullptr ? opts.stream : capture_stream();
}

// Whether work on `s` can be ordered after the work queued on `after` (an event on `after`
// that `s` waits for): not across devices, and not on the legacy default stream while some
// thread's capture has its escape check on (the event would fail that capture).
[[nodiscard]] inline bool can_order_after(cudaStream_t s, cudaStream_t after, std::string_view op) {
  if (after == s) return true;
  const bool guarded_legacy = is_default_stream(after) && after != cudaStreamPerThread && escape_guards_open();
  return !guarded_legacy && stream_device(after, op) == stream_device(s, op);
}

// The warm-up of graphed callables, pairs and caches: `iterations` eager calls of `step`
// with `s` as the current stream, which let libraries initialise lazily before a capture,
// then a wait for their work. Whatever a call returns (buffers) is freed right after it.
// Random numbers the calls draw are taken back at the end (tls_warm_up_draws), also when a
// call throws. The calls (and whatever `s` does next: the capture, copying the samples onto
// the static inputs) come after the work queued so far on `after`, the caller's stream, where
// the samples may still be on their way (a kernel that fills an input, a cudaMemsetAsync of an
// optimizer's moments); a stream of another device is left alone, and so is the legacy
// default stream while some thread's capture guards it (an event recorded there would fail
// that capture). Where `watch` is given, it fingerprints its inputs before the first call and
// judges them after the last.
template <class Step>
void warm_up(std::string_view op, cudaStream_t s, int iterations, Step&& step, cudaStream_t after,
             WriteWatch* watch = nullptr) {
  TakeBackDraws take_back(EagerRun::WarmUp);
  const bool ordered = can_order_after(s, after, op);
  if (after != s && ordered) wait_for_stream(s, after, op);
  // Nothing runs, or the samples may still change under the fingerprints: nothing to watch.
  if (iterations <= 0 || !ordered) watch = nullptr;
  if (watch != nullptr) watch->before(s);
  StreamGuard on(s);
  for (int i = 0; i < iterations; ++i) static_cast<void>(step());
  check(cudaStreamSynchronize(s), "{}: waiting for the warm-up calls", op);
  if (watch != nullptr) watch->judge(s);
}

// A graphed callable's warm-up: f(samples...), once the samples are checked.
template <class F, class... Args>
void warm_up_callable(F& f, const GraphedOptions& opts, const Args&... samples) {
  constexpr std::string_view op = "make_graphed_callable";
  check_warm_up(op, opts.warmup_iters, samples...);
  WriteWatch watch(op, "f", "input leaf",
                   "Make the callable with InputMode::InPlace (f reads and writes your buffers), or pass the "
                   "input as a DeviceSpan<const T> if f should not write it; set "
                   "GraphedOptions::allow_written_input where f uses the input as scratch whose changes you "
                   "do not need");
  if (opts.inputs == InputMode::Copy && !opts.allow_written_input) watch.add_writable(samples...);
  warm_up(op, work_stream(opts), opts.warmup_iters, [&] { return detail::invoke(f, samples...); }, current_stream(),
          &watch);
}

}  // namespace detail

/// A callable captured into a graph with static input and output surfaces. Calling it
/// checks every input's size (before anything is enqueued), stages the inputs onto the
/// static buffers (inputs already at their static buffer's address are not copied; with
/// InputMode::InPlace, f's kernels are handed the inputs' addresses instead) and
/// replays the graph, all in about one graph launch's host cost, and returns the static
/// outputs (overwritten by the next call). Calls come from one thread at a time and may go
/// to any streams: CUDA runs the launches of one executable one after another, so each call
/// stages its own inputs. Ordering across streams is only for the caller's data (inputs
/// ready on the call's stream, outputs read before the next call overwrites them).
template <class F, class... Args>
class GraphedCallable {
public:
  using Result = std::invoke_result_t<F&, const Args&...>;
  /// What calls return: f's result with every DeviceBuffer leaf as a DeviceSpan.
  using Outputs = detail::span_tree_t<Result>;
  static constexpr std::size_t input_leaves = (std::size_t{0} + ... + detail::count_leaves<Args>());

  static_assert((detail::only_spans<Args>() && ...),
                "cugraphs: graphed callable inputs must be DeviceSpan<T> leaves (pass buffer.span() "
                "for a DeviceBuffer)");
  static_assert(input_leaves <= 65535, "cugraphs: a graphed callable stages at most 65,535 input leaves per "
                                      "call (its staging copy runs one grid row per leaf)");

  GraphedCallable(detail::BuildTag, F f, const GraphedOptions& opts, const PoolHandle& pool,
                  const Args&... samples)
      : f_(std::move(f)), checked_pool_(pool.checked() ? pool.impl() : nullptr),
        in_place_(opts.inputs == InputMode::InPlace) {
    constexpr std::string_view op = "make_graphed_callable";
    std::array<detail::StageTarget, input_leaves> targets{};
    std::size_t max_bytes = 0;
    // The staging table persists across calls, so it stays out of the pool: a graph captured
    // earlier into a shared pool may use the same blocks as temporaries.
    targets_ = detail::PrivateArray<detail::StageTarget>(std::max<std::size_t>(input_leaves, 1), "make_graphed_callable: staging table");
    make_static_inputs(samples...);
    {
      CaptureOptions co;
      co.pool = pool;
      co.mode = opts.mode;
      co.stream = opts.stream;
      co.per_launch = opts.per_launch;
      co.allow_empty = opts.allow_empty;
      co.watch_buffers = opts.watch_buffers;
      CaptureScope scope(graph_, co);
      [[maybe_unused]] std::size_t next = 0;  // unused without inputs
      [[maybe_unused]] auto record = [&, this](std::size_t i, auto leaf) {
        targets[i] = {const_cast<void*>(static_cast<const void*>(leaf.data())), leaf.size_bytes()};
        static_ptrs_[i] = leaf.data();
        static_sizes_[i] = leaf.size();
        static_bytes_[i] = leaf.size_bytes();
        const auto at = reinterpret_cast<std::uintptr_t>(leaf.data());
        static_hull_ = {std::min(static_hull_.first, at), std::max(static_hull_.second, at + leaf.size_bytes())};
        max_bytes = std::max(max_bytes, leaf.size_bytes());
      };
      next = 0;
      std::apply([&, this](const auto&... statics) { (detail::visit_leaves(statics, next, record), ...); }, *static_inputs_);
      unsigned order = 0;  // a range-for: without inputs a counted loop compares with 0, which nvcc warns of
      for (unsigned& o : static_order_) o = order++;
      std::ranges::sort(static_order_, {}, [this](unsigned i) { return reinterpret_cast<std::uintptr_t>(static_ptrs_[i]); });
      // Each call hands the graph its input addresses (as the copy's arguments, or through
      // the ring's head); this copy, captured before f, moves them onto the static inputs.
      const auto staging = detail::stage_in_capture(std::span<const detail::StageTarget>(targets), in_place_,
                                                    !opts.allow_unused_input, op);
      args_ = {targets_.data(), staging.sources, staging.control, static_cast<unsigned>(input_leaves),
               static_cast<unsigned>(std::clamp<std::size_t>(max_bytes / (256 * 16 * 4), 1, 64)), {}};
      if constexpr (input_leaves > 0) detail::launch_stage(args_, scope.stream(), op);
      if constexpr (std::is_void_v<Result>) {
        std::apply(f_, *static_inputs_);
        outputs_.emplace();
      } else {
        outputs_.emplace(detail::take_outputs(std::apply(f_, *static_inputs_), owners_));
      }
      if (in_place_) shield_outputs(targets, op);
      scope.end();
    }
    // The table the staging copy reads, and the samples' values in the static inputs.
    const cudaStream_t s = detail::work_stream(opts);
    if constexpr (input_leaves > 0)
      detail::check(cudaMemcpyAsync(targets_.data(), targets.data(), sizeof(targets), cudaMemcpyHostToDevice, s),
                    "{}: staging table", op);
    [[maybe_unused]] std::size_t next = 0;
    [[maybe_unused]] auto copy_sample = [&, this](std::size_t i, auto leaf) {
      detail::copy_leaf(targets[i].dst, leaf.data(), leaf.size_bytes(), s, op, "copying a sample into its static input");
    };
    (detail::visit_leaves(samples, next, copy_sample), ...);
    detail::check(cudaStreamSynchronize(s), "{}: initialising the static inputs", op);
  }

  GraphedCallable(GraphedCallable&& o) noexcept
      : f_(std::move(o.f_)), owners_(std::move(o.owners_)), targets_(std::move(o.targets_)),
        graph_(std::move(o.graph_)), static_inputs_(std::move(o.static_inputs_)), outputs_(std::move(o.outputs_)),
        static_ptrs_(o.static_ptrs_), static_sizes_(o.static_sizes_), static_bytes_(o.static_bytes_),
        static_hull_(o.static_hull_), static_order_(o.static_order_), args_(o.args_), copies_(o.copies_),
        calls_(o.calls_), checked_pool_(std::move(o.checked_pool_)), names_(o.names_), in_place_(o.in_place_) {}
  GraphedCallable& operator=(GraphedCallable&&) = delete;
  GraphedCallable(const GraphedCallable&) = delete;
  GraphedCallable& operator=(const GraphedCallable&) = delete;
  // The graph (declared after the staging table) waits for calls in flight when it goes.
  ~GraphedCallable() = default;

  /// Stages `inputs` and replays on current_stream(); returns the static outputs.
  const Outputs& operator()(const Args&... inputs) { return stage_and_launch(current_stream(), inputs...); }
  /// The same on `stream`.
  const Outputs& operator()(cudaStream_t stream, const Args&... inputs) { return stage_and_launch(stream, inputs...); }
  const Outputs& stage_and_launch(const Args&... inputs) { return stage_and_launch(current_stream(), inputs...); }

  /// Any other argument list is a compile-time error that says so.
  template <class... Other>
    requires(!detail::accepts_v<std::tuple<const Args&...>, std::tuple<Other...>> &&
             !detail::accepts_v<std::tuple<cudaStream_t, const Args&...>, std::tuple<Other...>>)
  const Outputs& operator()(Other&&...) {
    static_assert(detail::always_false_v<std::tuple<Other...>>,
                  "cugraphs: this GraphedCallable was called with arguments that do not match its "
                  "Args... (the types of the sample arguments it was made with): the number or the "
                  "types differ. Pass DeviceSpans of the same element types and nesting, optionally "
                  "after a cudaStream_t.");
    return *outputs_;
  }

  const Outputs& stage_and_launch(cudaStream_t stream, const Args&... inputs) {
    const std::string_view op = names_.op;
    if (moved_from()) detail::throw_misuse(op, "this {} was moved from", names_.owner);
    // A capture would record the launch once, with this call's slot, and every replay of
    // the enclosing graph would then find no post of its own: calls belong outside captures.
    if (detail::innermost_capture() != nullptr) [[unlikely]]
      detail::throw_misuse(op, "a capture is open on this thread; a {} cannot be called inside a capture "
                               "(of another graph): each call posts its inputs for one launch, which a "
                               "capture would record once. Call it before capture_begin or after capture_end",
                           names_.owner);
    // One pass over the leaves checks each and writes its address into the next launch's
    // slot. A leaf that fails its check throws before the slot is published, so the slot,
    // written in part, is never seen by the device: the next call writes it afresh.
    std::uint64_t copies = 0;
    const std::size_t in_place = graph_.replay_staged(stream, [&, this](std::span<unsigned long long> slot) {
      [[maybe_unused]] auto stage_leaf = [&, this](std::size_t i, auto leaf) {
        detail::check_input_leaf(i, leaf.data(), leaf.size(), static_sizes_[i], op, names_.leaf);
        if (checked_pool_) [[unlikely]]
          detail::check_buffer_read(*checked_pool_, leaf.data(), leaf.size_bytes(), op);
        const void* src = leaf.data();
        const bool copy = src != static_ptrs_[i] && leaf.size() != 0;
        if constexpr (!std::is_const_v<typename decltype(leaf)::element_type>)
          if (in_place_ && copy && reinterpret_cast<std::uintptr_t>(src) % detail::kInPlaceAlignment != 0) [[unlikely]]
            detail::refuse_unaligned_writable(i, src, op, names_.leaf);
        slot[i] = copy ? reinterpret_cast<std::uintptr_t>(src) : 0;
        copies += copy ? 1 : 0;
      };
      [[maybe_unused]] std::size_t next = 0;  // unused without inputs
      (detail::visit_leaves(inputs, next, stage_leaf), ...);
      if (copies > 1 && !in_place_)
        detail::check_staged_overlap(slot.first(input_leaves), static_ptrs_, static_bytes_, static_order_,
                                     static_hull_, op, names_.leaf);
    }, op);
    ++calls_;
    copies_ += copies - in_place;
    return *outputs_;
  }

  /// One call checked against f run eagerly on the same inputs (verify_replay for a graphed
  /// callable): f runs first, on opts.stream (default current_stream()), with the random numbers
  /// it draws taken back, then the call runs (drawing them again), and f's result and the call's
  /// outputs are compared leaf by leaf, bitwise unless opts gives tolerances. Returns the
  /// call's outputs. An Error names the first output leaf that differs, with both values: the
  /// usual cause is a host value f's capture froze and that has changed since (a scalar f
  /// passes its kernels: set_kernel_arg on the callable before each call, or pass it in device
  /// memory; a cuBLAS scalar in host pointer mode). For an f that writes its inputs or other
  /// memory it reads (the call would find it written by the eager run), verify a graph of the
  /// step with verify_replay, which puts such state back. Inputs are checked as a call checks
  /// them, before f runs; inside a capture it is an Error.
  const Outputs& verify(const Args&... inputs) { return verify(VerifyOptions{}, inputs...); }
  const Outputs& verify(const VerifyOptions& opts, const Args&... inputs) {
    static_assert(!std::is_void_v<Result>, "cugraphs: verify compares f's results with the call's outputs, and this "
                                           "f returns nothing: verify a graph of the step with verify_replay");
    constexpr std::string_view op = "GraphedCallable::verify";
    if (moved_from()) detail::throw_misuse(op, "this {} was moved from", names_.owner);
    if (detail::innermost_capture() != nullptr)
      detail::throw_misuse(op, "a capture is open on this thread: f's eager run and the call would be captured "
                               "instead of run; verify outside any capture");
    detail::check_tolerances(opts, op);
    [[maybe_unused]] auto check_leaf = [&, this](std::size_t i, auto leaf) {
      detail::check_input_leaf(i, leaf.data(), leaf.size(), static_sizes_[i], op, names_.leaf);
    };
    [[maybe_unused]] std::size_t next = 0;  // unused without inputs
    (detail::visit_leaves(inputs, next, check_leaf), ...);
    const cudaStream_t s = opts.stream != nullptr ? opts.stream : current_stream();
    std::vector<std::vector<std::byte>> eager, called;
    std::vector<detail::StateRegion> regions;
    {
      detail::TakeBackDraws take_back(detail::EagerRun::Verify);  // the call draws the same numbers again
      StreamGuard on(s);
      detail::Owners owners;  // f's own result buffers, freed once read
      const auto result = detail::take_outputs(detail::invoke(f_, inputs...), owners);
      auto read = [&](std::size_t, auto leaf) { eager.push_back(detail::read_back(detail::state_region(leaf), s, op)); };
      next = 0;
      detail::visit_leaves(result, next, read);
    }
    const Outputs& out = stage_and_launch(s, inputs...);
    auto read = [&](std::size_t, auto leaf) {
      regions.push_back(detail::state_region(leaf));
      called.push_back(detail::read_back(regions.back(), s, op));
    };
    next = 0;
    detail::visit_leaves(out, next, read);
    detail::compare_results(op, "output leaf", regions, called, eager, opts,
                            "the call and f run eagerly on the same inputs differ",
                            "The capture froze something f does now: a host value f read at capture and changed "
                            "since (a kernel argument: set_kernel_arg on the callable before each call, or pass "
                            "it in device memory; a cuBLAS scalar in host pointer mode), a branch taken on the "
                            "host; or f writes memory it also reads, which its eager run left written for the "
                            "call (verify_replay puts such state back), or its results depend on the order of "
                            "atomics (VerifyOptions::atol, rtol). The outputs are the call's");
    return out;
  }

  /// The static inputs f was captured with (library-owned memory outside every pool). With
  /// InputMode::InPlace each holds what the last call that copied it copied (the sample at first).
  [[nodiscard]] const std::tuple<Args...>& static_inputs() const noexcept { return *static_inputs_; }
  /// The static outputs every call overwrites.
  [[nodiscard]] const Outputs& static_outputs() const noexcept { return *outputs_; }
  /// The captured graph (replaying it directly would bypass staging, hence const).
  [[nodiscard]] const Graph& graph() const noexcept { return graph_; }

  /// Graph::set_kernel_args on the callable's graph, for a node f's capture took with
  /// captured_kernel_node(): later calls run the node with `args`.
  template <class... P, class... A>
  void set_kernel_args(const KernelNode<P...>& node, const A&... args) {
    graph_.set_kernel_args(node, args...);
  }
  /// Graph::set_kernel_arg<I...> on the callable's graph: per-call scalars, kept for later calls.
  template <std::size_t... I, class... P, class... V>
    requires(sizeof...(I) > 0)
  void set_kernel_arg(const KernelNode<P...>& node, const V&... values) {
    graph_.template set_kernel_arg<I...>(node, values...);
  }
  /// How many input leaves calls have copied so far (aliased inputs, and inputs read in place,
  /// are not copied).
  [[nodiscard]] std::uint64_t staged_copies() const noexcept { return copies_; }
  [[nodiscard]] std::uint64_t calls() const noexcept { return calls_; }

private:
  template <class, class, class...>
  friend class GraphedPair;

  [[nodiscard]] bool moved_from() const noexcept { return !graph_.is_instantiated(); }

  // The static inputs, shaped like the samples, in one allocation of library-owned memory
  // outside every pool (private_device_memory): in a pool shared with callables captured
  // before this one, they could take blocks those callables' replays use as temporaries, which
  // would overwrite static inputs written once and passed back. Each starts on a 512-byte
  // boundary, as a pool block does (cudaMalloc gives 256 or more); read in place, each has
  // detail::kInPlacePad bytes of its own on either side (see there).
  void make_static_inputs(const Args&... samples) {
    const std::size_t pad = in_place_ ? detail::kInPlacePad : 0;
    // At least one byte apart: the address one past a leaf's end (which the unread-input scan
    // counts as that leaf's) is never the next leaf's first, nor is an empty leaf's.
    const auto span_of = [pad](std::size_t bytes) { return (bytes + 2 * pad + 512) / 512 * 512; };
    std::size_t total = 0;
    [[maybe_unused]] std::size_t next = 0;  // unused without inputs
    [[maybe_unused]] auto measure = [&](std::size_t, auto leaf) { total += span_of(leaf.size_bytes()); };
    (detail::visit_leaves(samples, next, measure), ...);
    auto memory = detail::private_device_memory(std::max<std::size_t>(total, 1), "make_graphed_callable: static inputs");
    [[maybe_unused]] auto* at = static_cast<std::byte*>(memory.get());
    owners_.push_back(std::move(memory));
    [[maybe_unused]] auto place = [&](std::size_t, auto sample) {
      using Leaf = decltype(sample);
      Leaf leaf(reinterpret_cast<typename Leaf::value_type*>(at + pad), sample.size());
      at += span_of(sample.size_bytes());
      return leaf;
    };
    next = 0;
    static_inputs_.emplace(std::tuple<Args...>{detail::map_leaves(samples, next, place)...});  // braces: in order
  }

  // Read in place: an output that is a view of a static input would show what the static input
  // holds, which calls that read their inputs in place do not write (an Error); and an input
  // that lies in an output is copied (f overwrites the output while it reads).
  template <class Targets>
  void shield_outputs(const Targets& targets, std::string_view op) {
    std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
    [[maybe_unused]] auto each = [&](std::size_t k, auto leaf) {
      const auto a = reinterpret_cast<std::uintptr_t>(leaf.data());
      std::size_t i = 0;
      for (const detail::StageTarget& t : targets) {
        if (detail::overlaps_padded(t, a, leaf.size_bytes()))
          detail::throw_misuse(op, "the graphed callable was made with InputMode::InPlace, but output leaf {} lies in "
                                   "static input leaf {} (f returns a view of its input), which calls that read "
                                   "their inputs in place never write. Make it with InputMode::Copy",
                               k, i);
        ++i;
      }
      ranges.emplace_back(a, leaf.size_bytes());
    };
    std::size_t next = 0;
    detail::visit_leaves(*outputs_, next, each);
    detail::shield_in_capture(ranges, op);
  }

  F f_;
  detail::Owners owners_;                              // static inputs and output buffers
  detail::PrivateArray<detail::StageTarget> targets_;  // outside the pool: see private_device_memory
  Graph graph_;  // after the buffers it reads: its ring waits for calls in flight first
  std::optional<std::tuple<Args...>> static_inputs_;
  std::optional<Outputs> outputs_;
  std::array<const void*, input_leaves> static_ptrs_{};
  std::array<std::size_t, input_leaves> static_sizes_{};
  std::array<std::size_t, input_leaves> static_bytes_{};
  // The bytes every static input lies in (first, one past the last), and the static inputs
  // by address.
  std::pair<std::uintptr_t, std::uintptr_t> static_hull_{~std::uintptr_t{0}, 0};
  std::array<unsigned, input_leaves> static_order_{};
  detail::StageArgs args_{};
  std::uint64_t copies_ = 0;
  std::uint64_t calls_ = 0;
  std::shared_ptr<detail::Pool> checked_pool_;  // set when the pool is checked
  detail::CallNames names_;                     // set by a GraphedPair for its two halves
  bool in_place_ = false;                       // InputMode::InPlace
};

/// Warms `f` up (opts.warmup_iters eager calls on the capture stream), captures
/// f(static inputs shaped like `samples`) and returns the callable.
template <class F, class... Args>
[[nodiscard]] GraphedCallable<std::decay_t<F>, Args...> make_graphed_callable(const GraphedOptions& opts, F&& f,
                                                                              const Args&... samples) {
  std::decay_t<F> fn(std::forward<F>(f));
  detail::warm_up_callable(fn, opts, samples...);
  const PoolHandle pool = opts.pool ? *opts.pool : graph_pool_handle();
  return GraphedCallable<std::decay_t<F>, Args...>(detail::BuildTag{}, std::move(fn), opts, pool, samples...);
}

/// The same with default options.
template <class F, class... Args>
  requires(!std::same_as<std::remove_cvref_t<F>, GraphedOptions>)
[[nodiscard]] GraphedCallable<std::decay_t<F>, Args...> make_graphed_callable(F&& f, const Args&... samples) {
  return make_graphed_callable(GraphedOptions{}, std::forward<F>(f), samples...);
}

/// Warms up every callable, then captures them in the given (live) order into one shared
/// pool. `samples` holds one tuple of sample arguments per callable.
template <class... Fs, class... Samples>
[[nodiscard]] auto make_graphed_callables(std::tuple<Fs...> fs, const std::tuple<Samples...>& samples,
                                          const GraphedOptions& opts = {}) {
  static_assert(sizeof...(Fs) == sizeof...(Samples), "make_graphed_callables: one tuple of sample "
                                                     "arguments per callable");
  constexpr auto indices = std::index_sequence_for<Fs...>{};
  auto warm = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    std::apply([&](const auto&... a) { detail::warm_up_callable(std::get<I>(fs), opts, a...); },
               std::get<I>(samples));
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (warm(std::integral_constant<std::size_t, I>{}), ...);
  }(indices);
  const PoolHandle pool = opts.pool ? *opts.pool : graph_pool_handle();
  auto make = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    return std::apply(
        [&](const auto&... a) {
          using G = GraphedCallable<std::tuple_element_t<I, std::tuple<Fs...>>, std::remove_cvref_t<decltype(a)>...>;
          return G(detail::BuildTag{}, std::move(std::get<I>(fs)), opts, pool, a...);
        },
        std::get<I>(samples));
  };
  // Braced initialisation runs left to right: the captures happen in the given order.
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple<decltype(make(std::integral_constant<std::size_t, I>{}))...>{
        make(std::integral_constant<std::size_t, I>{})...};
  }(indices);
}

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/graphed.ipp>
#endif
