// Graph (capture, instantiate, replay), CaptureScope and capture(): the core of cugraphs.
#pragma once

#include <cugraphs/condition.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/detail/native_graph.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/flatten.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/stream.hpp>
#include <cugraphs/update.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cugraphs {

/// Which CUDA calls a capture forbids, and on which threads (cudaStreamCaptureMode).
/// Global: unsafe calls (cudaMalloc, synchronous copies, synchronizes) are refused on every
/// thread; ThreadLocal: only on the capturing thread; Relaxed: nowhere.
enum class CaptureMode { Global, ThreadLocal, Relaxed };

/// Whether a capture refuses work that escapes it through the legacy default stream (a
/// kernel launched with <<<grid, block>>> and no stream, a synchronous cudaMemcpy or
/// cudaMemset, a library call on stream 0) while it is open. Such work would run once,
/// eagerly, at capture time and be missing from every replay. On: a blocking stream joins
/// the capture, so CUDA refuses the work (cudaErrorStreamCaptureImplicit) and the capture
/// fails with an Error that names the legacy default stream; this also refuses legacy-stream
/// work of other threads while the capture is open. Auto: On in CaptureMode::Global, Off in
/// ThreadLocal and Relaxed (whose point is to let other threads go on).
enum class EscapeCheck { Auto, On, Off };

/// How a capture begins. The defaults capture on this thread's capture_stream() of the
/// current device, into a fresh private pool, in Global mode, refusing work that escapes to
/// the legacy default stream.
struct CaptureOptions {
  std::optional<PoolHandle> pool;  ///< none: a fresh private pool
  CaptureMode mode = CaptureMode::Global;
  cudaStream_t stream = nullptr;  ///< nullptr: capture_stream(current device)
  /// false: capture_end leaves the graph captured but not instantiated, for instantiate()
  /// later or for Graph::update, which applies it to another graph's executable.
  bool instantiate = true;
  /// Whether legacy-default-stream work during the capture is refused (see EscapeCheck).
  EscapeCheck escapes = EscapeCheck::Auto;
};

namespace detail {

// Whether V converts to P as P{v} would, without narrowing.
template <class V, class P>
concept converts_without_narrowing = requires(const V& v) { P{v}; };

[[nodiscard]] constexpr cudaStreamCaptureMode to_cuda(CaptureMode m) noexcept {
  switch (m) {
    case CaptureMode::ThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed: return cudaStreamCaptureModeRelaxed;
    default: return cudaStreamCaptureModeGlobal;
  }
}

[[nodiscard]] constexpr std::string_view name(CaptureMode m) noexcept {
  switch (m) {
    case CaptureMode::ThreadLocal: return "ThreadLocal";
    case CaptureMode::Relaxed: return "Relaxed";
    default: return "Global";
  }
}

// The run-time checks of an input leaf before staging (Graph::stage_and_launch and
// GraphedCallable): done for every leaf before anything is enqueued.
// `leaf` names what is staged ("input leaf"; a graphed pair's backward stages "incoming
// gradient leaf"s).
inline void check_input_leaf(std::size_t i, const void* data, std::size_t size, std::size_t static_size,
                             std::string_view op, std::string_view leaf = "input leaf") {
  if (size != static_size)
    throw_misuse(op, "{} {} has {} elements but its static leaf has {}; nothing was staged or launched", leaf, i,
                 size, static_size);
  if (data == nullptr && size != 0) [[unlikely]]
    throw_misuse(op, "{} {} is a null pointer with {} elements; nothing was staged or launched", leaf, i, size);
}

}  // namespace detail

class CaptureScope;

/// A captured CUDA graph and its executable. RAII and move-only: destroying it resets it.
/// A Graph captures once; reset() empties it for another capture, and update() applies a
/// new capture to its executable.
class Graph {
public:
  Graph() noexcept = default;
  ~Graph() { reset_noexcept(); }

  Graph(Graph&& o) noexcept { take(o); }
  Graph& operator=(Graph&& o) noexcept {
    if (this != &o) {
      reset_noexcept();
      take(o);
    }
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Begins capturing on opts.stream (default: capture_stream() of the current device) into
  /// opts.pool (default: a fresh private pool). Until capture_end, DeviceBuffers made on
  /// this thread draw from that pool.
  void capture_begin(const CaptureOptions& opts = {}) {
    constexpr std::string_view op = "Graph::capture_begin";
    if (capture_)
      detail::throw_misuse(op, "this graph is already capturing; call capture_end() (or "
                               "capture_abort()) before beginning another capture");
    if (graph_)
      detail::throw_misuse(op, "this graph already holds a captured graph; call reset() "
                               "before capturing again");
    const int device = detail::current_device();
    if (opts.pool && opts.pool->device() != device)
      detail::throw_misuse(op, "the pool (id {}) belongs to device {} but device {} is current; "
                               "make the pool's device current, or use a pool of this device",
                           opts.pool->id(), opts.pool->device(), device);
    if (opts.stream == cudaStreamLegacy)
      detail::raise(Error(cudaErrorStreamCaptureImplicit,
                  detail::format("cugraphs: {}: the legacy default stream cannot capture. Remedy: leave "
                              "CaptureOptions::stream null to capture on capture_stream(), or pass "
                              "a Stream you created",
                              op)));
    const cudaStream_t stream = opts.stream != nullptr ? opts.stream : capture_stream(device);
    if (cugraphs::is_capturing(stream))
      detail::throw_misuse(op, "the stream is already capturing (captures cannot nest on one "
                               "stream); end that capture first, or capture on another stream");
    // Another capture may be open on this thread; the query does not invalidate it.
    const int stream_device = detail::stream_device(stream, op);
    if (stream_device != device)
      detail::throw_misuse(op, "the stream belongs to device {} but device {} is current; make "
                               "the stream's device current before capturing",
                           stream_device, device);

    auto pool = opts.pool ? opts.pool->impl() : std::make_shared<detail::Pool>(device);
    auto session = std::make_unique<detail::CaptureSession>(pool, stream, detail::to_cuda(opts.mode),
                                                            detail::name(opts.mode), device, opts.instantiate,
                                                            this, &abort_from_session);
    pool->begin_capture(session->id);
    if (const cudaError_t e = cudaStreamBeginCapture(stream, session->mode); e != cudaSuccess) {
      pool->end_capture(session->id);
      detail::throw_cuda(e, detail::format("{} (cudaStreamBeginCapture)", op), detail::name(opts.mode));
    }
    session->open();
    session->log.mark();
    pool->attach_graph();
    pool_ = std::move(pool);
    capture_ = std::move(session);
    mode_ = opts.mode;
    device_ = device;
    stream_checked_ = false;  // the device may have changed
    moved_from_ = false;
    if (opts.escapes == EscapeCheck::On || (opts.escapes == EscapeCheck::Auto && opts.mode == CaptureMode::Global)) {
      CUGRAPHS_TRY {
        capture_->fork_guard(op);
      } CUGRAPHS_CATCH_ALL {
        capture_abort();  // the graph is left empty, as before capture_begin
        CUGRAPHS_RETHROW;
      }
    }
  }

  /// Ends the capture, instantiates the graph and uploads it: the one-time costs are paid
  /// here, not on the first replay (unless CaptureOptions::instantiate was false). On failure (an invalidated capture, unjoined work) the
  /// graph is left empty and reusable, and the Error says why.
  void capture_end() {
    constexpr std::string_view op = "Graph::capture_end";
    if (!capture_) detail::throw_misuse(op, "no capture is open on this graph; call capture_begin() first");
    if (detail::innermost_capture() != capture_.get())
      detail::throw_misuse(op, "this capture is not the innermost capture open on this thread; end "
                               "captures on the thread that began them, innermost first");
    if (!capture_->conditionals.empty())
      detail::throw_misuse(op, "{} conditional scope(s) are still open; close them (innermost "
                               "first) before ending the capture",
                           capture_->conditionals.size());
    // The per-launch ring's tail is captured last, after all the capture's work (an
    // invalidated capture fails the launch; cudaStreamEndCapture then says why).
    // The escape guard joins back first (an invalidated capture fails here and in
    // cudaStreamEndCapture, which reports it). The error a refused legacy-stream call left
    // on this thread is read before anything else can replace it.
    const cudaError_t escaped = cudaPeekAtLastError();
    (void)capture_->join_guard();
    cudaError_t tail = cudaSuccess;
    if (capture_->ring) {
      CUGRAPHS_TRY {
        tail = capture_->ring->capture_tail(capture_->stream, op);
      } CUGRAPHS_CATCH_ALL {
        capture_abort();
        CUGRAPHS_RETHROW;
      }
    }
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(capture_->stream, &g);
    const cudaStream_t stream = capture_->stream;
    const std::uint64_t capture_id = capture_->id;
    const bool instantiate_now = capture_->instantiate;
    const std::string driver_said = e != cudaSuccess ? capture_->log.since() : std::string{};
    std::unique_ptr<detail::LaunchRing> ring = std::move(capture_->ring);
    std::vector<std::shared_ptr<void>> kept = std::move(capture_->keep_alive);
    if (ring) ring->end_capture();
    close_capture(e == cudaSuccess && g != nullptr && tail == cudaSuccess);
    if (e != cudaSuccess || g == nullptr || tail != cudaSuccess) {
      if (g != nullptr) detail::report_in_destructor(cudaGraphDestroy(g), "cudaGraphDestroy");
      release_pool();
      if (e == cudaSuccess && g != nullptr)
        detail::throw_cuda(tail, detail::format("{}: capturing the per-launch ring's tail kernel", op));
      const cudaError_t why = e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated;
      (void)cudaGetLastError();
      if (why == cudaErrorStreamCaptureInvalidated && escaped == cudaErrorStreamCaptureImplicit)
        detail::raise(Error(why, detail::format("cugraphs: {} failed: {} ({}). {}{}", op, cudaGetErrorName(why),
                                                cudaGetErrorString(why), detail::escape_message(), driver_said)));
      detail::raise(Error(why, detail::cuda_message(why, detail::format("{} (cudaStreamEndCapture)", op),
                                                    detail::name(mode_)) + driver_said));
    }
    graph_ = std::make_shared<detail::NativeGraph>(g);
    upload_stream_ = stream;
    CUGRAPHS_TRY {
      if (pool_->checked()) {
        pool_->register_graph(capture_id);
        checked_capture_ = capture_id;
      }
      if (ring) ring->attach_head(graph_->graph, stream, "Graph::capture_end (per-launch ring)");
    } CUGRAPHS_CATCH_ALL {
      graph_.reset();
      release_pool();  // forgets the graph in a checked pool too
      CUGRAPHS_RETHROW;
    }
    if (ring) ring_ = std::move(ring);
    keep_alive_.insert(keep_alive_.end(), kept.begin(), kept.end());
    current_capture_ = capture_id;
    detail::LastCapture::instance().set(graph_);
    if (instantiate_now) instantiate();
  }

  /// Ends an open capture and discards it: the stream stops capturing and the graph is
  /// empty and reusable. Does nothing when no capture is open.
  void capture_abort() noexcept {
    if (!capture_) return;
    if (!capture_->on_this_thread()) {  // that thread's list of sessions points at it
      detail::report_in_destructor(cudaErrorStreamCaptureWrongThread,
                                   "Graph::capture_abort (the capture belongs to another thread and stays open)");
      return;
    }
    capture_->abandon_conditionals();
    (void)capture_->join_guard();
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(capture_->stream, &g);
    if (g != nullptr) detail::report_in_destructor(cudaGraphDestroy(g), "cudaGraphDestroy");
    (void)cudaGetLastError();  // the capture's own failure is the caller's business
    close_capture();
    release_pool();
  }

  /// Instantiates and uploads the captured graph; does nothing once instantiated.
  void instantiate() {
    constexpr std::string_view op = "Graph::instantiate";
    if (exec_ != nullptr) return;
    if (!graph_) not_replayable(op);
    detail::DeviceGuard on(device_);
    // An enclosing capture may be open on this thread; instantiating and waiting for the
    // upload must not invalidate it.
    detail::RelaxedCaptureMode relaxed;
    cudaGraphInstantiateParams params{};
    params.flags = cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload;
    params.uploadStream = upload_stream_;
    cudaGraphExec_t exec = nullptr;
    {
      std::lock_guard lock(graph_->m);  // export_dot may be reading the graph on another thread
      const cudaError_t e = cudaGraphInstantiateWithParams(&exec, graph_->graph, &params);
      if (e != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
        if (e != cudaSuccess) (void)cudaGetLastError();
        detail::raise(Error(e != cudaSuccess ? e : cudaErrorInvalidValue, detail::instantiate_failure(e, params)));
      }
    }
    if (const cudaError_t s = cudaStreamSynchronize(upload_stream_); s != cudaSuccess) {
      detail::report_in_destructor(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
      detail::throw_cuda(s, detail::format("{}: waiting for the upload (cudaStreamSynchronize)", op));
    }
    exec_ = exec;
    instantiated_capture_ = current_capture_;  // graph_'s nodes name the executable's
  }

  /// Launches the executable on this thread's current_stream().
  void replay() { replay(current_stream()); }

  /// Launches the executable on `stream`, ordered after the work already queued there.
  void replay(cudaStream_t stream) { replay(stream, false); }

  /// The seed's stage_and_launch: copies every leaf of `inputs` onto the matching leaf of
  /// `static_inputs` (all sizes are checked first; leaves already in place are skipped), one
  /// cudaMemcpyAsync per leaf, then replays, all on `stream`. GraphedCallable stages inside
  /// the graph instead, for about the cost of one launch.
  template <class Statics, class Inputs>
  void stage_and_launch(const Statics& static_inputs, const Inputs& inputs, cudaStream_t stream) {
    constexpr std::string_view op = "Graph::stage_and_launch";
    static_assert(leaf_count_v<Statics> == leaf_count_v<Inputs>,
                  "cugraphs: stage_and_launch needs as many input leaves as static leaves");
    const auto to = flatten(static_inputs);
    const auto from = flatten(inputs);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      static_assert((std::is_same_v<typename std::tuple_element_t<I, decltype(to)>::value_type,
                                    typename std::tuple_element_t<I, decltype(from)>::value_type> && ...),
                    "cugraphs: stage_and_launch: every input leaf must have its static leaf's element type");
      if (exec_ == nullptr) not_replayable(op);  // before any copy: nothing is staged
      (detail::check_input_leaf(I, std::get<I>(from).data(), std::get<I>(from).size(), std::get<I>(to).size(), op),
       ...);
      (copy_leaf(std::get<I>(to), std::get<I>(from), stream, op), ...);
    }(std::make_index_sequence<leaf_count_v<Statics>>{});
    replay(stream);
  }
  template <class Statics, class Inputs>
  void stage_and_launch(const Statics& static_inputs, const Inputs& inputs) {
    stage_and_launch(static_inputs, inputs, current_stream());
  }

  /// Applies the capture `source` holds to this graph's executable (cudaGraphExecUpdate).
  /// Where the two captures have the same topology the executable is updated in place, for
  /// a fraction of an instantiation's cost, and keeps its handle; launches already queued
  /// run the old parameters. Otherwise the result says why (the failure, and the blocking
  /// node's type and index) and this graph is unchanged, unless
  /// opts.reinstantiate_on_failure, which instantiates the capture instead. Once applied,
  /// this graph runs source's capture with its pool share and random-number state, and
  /// `source` is left empty and reusable. Capture `source` with CaptureOptions::instantiate
  /// = false to skip its own instantiation.
  [[nodiscard]] UpdateResult update(Graph&& source, const UpdateOptions& opts = {}) {
    constexpr std::string_view op = "Graph::update";
    if (&source == this) detail::throw_misuse(op, "a graph cannot be updated from itself");
    if (exec_ == nullptr) not_replayable(op);
    if (source.capture_) detail::throw_misuse(op, "the source graph is still capturing; end its capture first");
    if (!source.graph_)
      detail::throw_misuse(op, "the source graph holds no capture{}", source.moved_from_ ? " (it was moved from)" : "");
    if (source.device_ != device_)
      detail::throw_misuse(op, "the source graph was captured on device {}, but this graph runs on device {}",
                           source.device_, device_);
    detail::DeviceGuard on(device_);
    std::optional<detail::RelaxedCaptureMode> relaxed;  // an enclosing capture on this thread must go on
    if (detail::innermost_capture() != nullptr) relaxed.emplace();
    cudaGraphExecUpdateResultInfo info{};
    cudaError_t e = cudaSuccess;
    {
      std::lock_guard lock(source.graph_->m);  // export_dot may be reading it on another thread
      e = cudaGraphExecUpdate(exec_, source.graph_->graph, &info);
    }
    UpdateResult result;
    if (e == cudaSuccess) {
      adopt(source, false);
      result.updated = true;
      return result;
    }
    (void)cudaGetLastError();  // the failure is answered in the result, not left behind
    if (e != cudaErrorGraphExecUpdateFailure) detail::throw_cuda(e, "Graph::update (cudaGraphExecUpdate)");
    describe_update_failure(result, info, source.graph_->graph);
    if (opts.reinstantiate_on_failure) {
      source.instantiate();  // on failure this graph is left as it was
      adopt(source, true);
      result.reinstantiated = true;
    }
    return result;
  }

  /// Captures `fn` as this graph's own capture was made (its pool, mode and device), without
  /// instantiating it, and applies it with update(Graph&&, opts). `fn` takes the
  /// CaptureScope (to open conditional scopes) or the capture stream.
  template <class F>
    requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
  [[nodiscard]] UpdateResult update(F&& fn, const UpdateOptions& opts = {});

  /// One call for a loop that captures the same step every time: the first call captures
  /// `fn` (with `opts`) and instantiates it; later calls capture it again as this graph's
  /// capture was made and apply it with update() (instantiating anew when the executable
  /// cannot take it in place). `fn` takes the CaptureScope or the capture stream.
  template <class F>
    requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
  UpdateResult capture_or_update(F&& fn, const CaptureOptions& opts = {});

  /// Changes the arguments of one kernel node in the executable
  /// (cudaGraphExecKernelNodeSetParams), without a new capture: later launches run the
  /// node's kernel with `args`, launches already queued the old ones. `node` comes from
  /// captured_kernel_node() in this graph's capture; arguments convert to the kernel's
  /// parameter types, checked at compile time. The captured graph itself (debug_dump) keeps
  /// the captured arguments.
  template <class... P, class... A>
  void set_kernel_args(const KernelNode<P...>& node, const A&... args) {
    static_assert(sizeof...(A) == sizeof...(P),
                  "cugraphs: Graph::set_kernel_args takes one argument per parameter of the node's kernel");
    static_assert((std::is_convertible_v<const A&, std::remove_cvref_t<P>> && ...),
                  "cugraphs: Graph::set_kernel_args: every argument must convert to its kernel parameter's type");
    apply_kernel_args(node, typename KernelNode<P...>::Arguments(static_cast<std::remove_cvref_t<P>>(args)...),
                      "Graph::set_kernel_args");
  }

  /// Changes arguments `I...` of one kernel node in the executable, in one call, and keeps
  /// the others as they run now (captured, or as set since): for per-step scalars such as
  /// an optimizer's bias corrections, `graph.set_kernel_arg<10, 11>(node, bc1, bc2)` before
  /// each replay. Launches already queued keep what they had. Each value must convert to its
  /// parameter without narrowing (a float for a size_t parameter is a compile error).
  template <std::size_t... I, class... P, class... V>
    requires(sizeof...(I) > 0)
  void set_kernel_arg(const KernelNode<P...>& node, const V&... values) {
    static_assert(sizeof...(I) == sizeof...(V), "cugraphs: Graph::set_kernel_arg<I...> takes one value per index");
    static_assert(((I < sizeof...(P)) && ...),
                  "cugraphs: Graph::set_kernel_arg<I...>: an index is not a parameter of the node's kernel");
    using Args = typename KernelNode<P...>::Arguments;
    static_assert((detail::converts_without_narrowing<V, std::tuple_element_t<I, Args>> && ...),
                  "cugraphs: Graph::set_kernel_arg<I...>: each value must convert to its kernel parameter's type "
                  "without narrowing (is the index right? write 1.0f for a float parameter)");
    auto args = node.arguments();
    ((std::get<I>(args) = static_cast<std::tuple_element_t<I, Args>>(values)), ...);
    apply_kernel_args(node, std::move(args), "Graph::set_kernel_arg");
  }

  /// Whether `node` was taken in the capture this graph runs (or was instantiated from).
  template <class... P>
  [[nodiscard]] bool holds(const KernelNode<P...>& node) const noexcept {
    return !node.empty() && (node.capture_ == current_capture_ || node.capture_ == instantiated_capture_);
  }

  /// Destroys the executable and the graph and lets go of the pool (whose memory returns
  /// to the device once nothing else holds it). An open capture is aborted. The graph can
  /// capture again afterwards.
  void reset() {
    if (capture_ && !capture_->on_this_thread())
      detail::throw_misuse("Graph::reset", "this graph's capture was begun on another thread; end or "
                                           "abort it on that thread first");
    capture_abort();
    destroy_exec_and_graph();
    release_pool();
    moved_from_ = false;
  }

  /// The id of the pool this graph captured into.
  [[nodiscard]] std::uint64_t pool_id() const { return pool().id(); }

  /// The pool this graph captured into; pass it to another capture to share its memory.
  [[nodiscard]] PoolHandle pool() const {
    if (!pool_) not_replayable("Graph::pool");
    return PoolHandle(pool_);
  }

  [[nodiscard]] cudaGraph_t native_graph() const noexcept { return graph_ ? graph_->graph : nullptr; }
  [[nodiscard]] cudaGraphExec_t native_exec() const noexcept { return exec_; }
  [[nodiscard]] bool is_capturing() const noexcept { return capture_ != nullptr; }
  /// How many conditional scopes are open in the current capture.
  [[nodiscard]] std::size_t open_conditionals() const noexcept {
    return capture_ ? capture_->conditionals.size() : 0;
  }
  [[nodiscard]] bool is_instantiated() const noexcept { return exec_ != nullptr; }
  /// How many nodes the captured graph has at its top level (a conditional node counts one;
  /// the per-launch ring's head and tail count too); 0 when nothing is captured.
  [[nodiscard]] std::size_t node_count() const {
    if (!graph_) return 0;
    std::lock_guard lock(graph_->m);
    std::size_t n = 0;
    detail::check(cudaGraphGetNodes(graph_->graph, nullptr, &n), "Graph::node_count: cudaGraphGetNodes");
    return n;
  }
  [[nodiscard]] CaptureMode mode() const noexcept { return mode_; }

  /// The stream capturing now: the innermost open conditional body, else the stream the
  /// capture began on (CaptureScope::stream() is the same); nullptr when not capturing.
  [[nodiscard]] cudaStream_t stream() const noexcept { return capture_ ? capture_->now() : nullptr; }

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  /// Adds an if-node reading `*pred` where the capture stands, and captures its body until
  /// end_capture_to_conditional_node(); current_stream() is the body's stream meanwhile.
  void begin_capture_to_if_node(const bool* pred) {
    constexpr std::string_view op = "Graph::begin_capture_to_if_node";
    (void)session(op).open_conditional(detail::ConditionalKind::If, detail::ConditionSource::device_flag(pred), 1, op);
  }

  /// Adds a while-node reading `*pred` before the first iteration and at the end of every
  /// iteration, and captures its body until end_capture_to_conditional_node().
  void begin_capture_to_while_node(const bool* pred) {
    constexpr std::string_view op = "Graph::begin_capture_to_while_node";
    (void)session(op).open_conditional(detail::ConditionalKind::While, detail::ConditionSource::device_flag(pred), 1,
                                       op);
  }

  /// Makes the innermost open while-node re-read its condition from `*pred` at the end of
  /// each iteration.
  void set_conditional_handle_for_current_node(const bool* pred) {
    constexpr std::string_view op = "Graph::set_conditional_handle_for_current_node";
    auto& s = session(op);
    s.set_refresh(s.innermost(op).id, pred, op);
  }

  /// Ends the body of the innermost open conditional node.
  void end_capture_to_conditional_node() {
    constexpr std::string_view op = "Graph::end_capture_to_conditional_node";
    auto& s = session(op);
    s.close_conditional(s.innermost(op).id, op);
  }
#endif

  /// Lets debug_dump write this graph.
  void enable_debug_mode() noexcept { debug_ = true; }

  /// Writes the captured graph as a Graphviz DOT file (needs enable_debug_mode()).
  void debug_dump(const std::string& path) const {
    constexpr std::string_view op = "Graph::debug_dump";
    if (!debug_)
      detail::throw_misuse(op, "debug mode is off; call enable_debug_mode() first");
    if (!graph_) not_replayable(op);
    std::lock_guard lock(graph_->m);
    detail::write_dot(graph_->graph, path, op);
  }

private:
  [[noreturn]] void not_replayable(std::string_view op) const {
    if (moved_from_)
      detail::throw_misuse(op, "this Graph was moved from; use the Graph it was moved to, or "
                               "capture into this one again");
    if (capture_)
      detail::throw_misuse(op, "the graph is still capturing; call capture_end() first");
    if (graph_)
      detail::throw_misuse(op, "the graph was captured but is not instantiated (CaptureOptions::instantiate "
                               "was false, or instantiation failed); call instantiate() or reset()");
    detail::throw_misuse(op, "nothing has been captured into this graph; capture it first "
                             "(capture_begin/capture_end, CaptureScope or capture())");
  }

  friend class CaptureScope;
  template <class, class...>
  friend class GraphedCallable;

  // The open capture, for the conditional machinery.
  detail::CaptureSession& session(std::string_view op) {
    if (!capture_)
      detail::throw_misuse(op, "no capture is open on this graph: a conditional scope must be opened inside a "
                               "capture (CaptureScope, or between capture_begin and capture_end)");
    return *capture_;
  }

  // How a session aborts its Graph's capture when a conditional node cannot be finished.
  static void abort_from_session(Graph& g) noexcept { g.capture_abort(); }

  // This graph takes over `source`'s capture (after an update in place, or with source's
  // executable when `instantiated`), its pool share and random-number state; `source` is
  // left empty.
  void adopt(Graph& source, bool instantiated) noexcept {
    ring_.reset();  // waits until launches in flight have finished with the old ring
    // The source's own launches may still use the ring taken over: this executable's
    // launches must not run beside them on the same words.
    if (source.ring_) source.ring_->wait_all("Graph::update: waiting for the source's launches");
    ring_ = std::move(source.ring_);
    // Launches already queued may use what the old capture kept: keep both.
    keep_alive_.insert(keep_alive_.end(), source.keep_alive_.begin(), source.keep_alive_.end());
    source.keep_alive_.clear();
    if (instantiated) {
      detail::report_in_destructor(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");  // freed once idle
      exec_ = std::exchange(source.exec_, nullptr);
      instantiated_capture_ = source.instantiated_capture_;
      identity_.reset();
      identity_nodes_.clear();
    } else {
      if (source.exec_ != nullptr)
        detail::report_in_destructor(cudaGraphExecDestroy(std::exchange(source.exec_, nullptr)), "cudaGraphExecDestroy");
      if (!identity_) identity_ = graph_;  // its nodes still name the executable's
    }
    graph_ = std::move(source.graph_);
    current_capture_ = std::exchange(source.current_capture_, 0);
    source.instantiated_capture_ = 0;
    source.identity_.reset();
    source.identity_nodes_.clear();
    release_pool();  // and this graph's record in a checked pool
    pool_ = std::move(source.pool_);
    checked_capture_ = std::exchange(source.checked_capture_, 0);
    upload_stream_ = source.upload_stream_;
    mode_ = source.mode_;
  }

  static void describe_update_failure(UpdateResult& r, const cudaGraphExecUpdateResultInfo& info, cudaGraph_t next) {
    constexpr std::string_view op = "Graph::update";
    r.failure = detail::to_failure(info.result);
    std::string node = "; CUDA names no node";
    if (info.errorNode != nullptr) {
      cudaGraphNodeType t{};
      if (cudaGraphNodeGetType(info.errorNode, &t) == cudaSuccess) r.node_type = t;
      r.node_index = detail::node_index(next, info.errorNode, op);
      node = detail::format("; the blocking node is a {} node", r.node_type ? detail::node_type_name(*r.node_type) : "unknown");
      if (r.node_index) detail::format_to(node, ", node {} of the new capture", *r.node_index);
    }
    r.message = detail::format("cugraphs: {}: the executable cannot take the new capture in place: {}{}", op,
                               detail::describe(r.failure), node);
  }

  template <class... P>
  void apply_kernel_args(const KernelNode<P...>& node, typename KernelNode<P...>::Arguments values,
                         std::string_view op) {
    if (exec_ == nullptr) [[unlikely]]
      not_replayable(op);
    const cudaGraphNode_t target = exec_node(node.capture_, node.index_, node.node_, op);
    std::apply(
        [&](auto&... value) {
          void* params[sizeof...(P) + 1] = {static_cast<void*>(std::addressof(value))..., nullptr};
          cudaKernelNodeParams p = node.launch_;
          p.kernelParams = params;
          if (const cudaError_t e = cudaGraphExecKernelNodeSetParams(exec_, target, &p); e != cudaSuccess) [[unlikely]]
            detail::throw_cuda(e, detail::format("{} (cudaGraphExecKernelNodeSetParams)", op));
        },
        values);
    *node.args_ = std::move(values);  // copies of the node share what the executable runs
  }

  // The node of the graph exec_ was instantiated from that a KernelNode taken in capture
  // `capture` (at `index`, as `node`) stands for.
  cudaGraphNode_t exec_node(std::uint64_t capture, std::size_t index, cudaGraphNode_t node, std::string_view op) {
    if (capture == instantiated_capture_) [[likely]]
      return node;
    if (capture == 0 || capture != current_capture_)
      detail::throw_misuse(op, "the KernelNode was not taken in the capture this graph runs (it is empty, "
                               "belongs to another graph, or to a capture replaced since): take it with "
                               "captured_kernel_node() in this graph's capture (the node's capture: {}; this "
                               "graph's executable was instantiated from capture {} and runs capture {})",
                           capture, instantiated_capture_, current_capture_);
    // A node of a capture applied by update(): the instantiated graph's node at its index.
    if (identity_nodes_.empty()) {
      std::lock_guard lock(identity_->m);
      identity_nodes_ = detail::graph_nodes(identity_->graph, op);
    }
    cudaGraphNodeType t{};
    if (index >= identity_nodes_.size() || cudaGraphNodeGetType(identity_nodes_[index], &t) != cudaSuccess ||
        t != cudaGraphNodeTypeKernel)
      detail::throw_misuse(op, "node {} of the executable is not a kernel node, although the update paired "
                               "the captures",
                           index);
    return identity_nodes_[index];
  }

  template <class To, class From>
  static void copy_leaf(To to, From from, cudaStream_t stream, std::string_view op) {
    if (from.size() == 0 || static_cast<const void*>(from.data()) == static_cast<const void*>(to.data())) return;
    detail::check(cudaMemcpyAsync(const_cast<void*>(static_cast<const void*>(to.data())), from.data(),
                                  from.size_bytes(), cudaMemcpyDefault, stream),
                  "{}: cudaMemcpyAsync", op);
  }

  // Takes the open capture off this thread's list (restoring the current stream it found)
  // and closes it on the pool.
  void close_capture(bool produced_graph = false) noexcept {
    capture_->close();
    capture_->pool->end_capture(capture_->id, produced_graph);
    capture_.reset();
    detail::DeferredFrees::instance().drain();
  }

  void release_pool() noexcept {
    if (!pool_) return;
    if (checked_capture_ != 0) pool_->forget_graph(std::exchange(checked_capture_, 0));
    pool_->detach_graph();
    pool_.reset();
  }

  void destroy_exec_and_graph() noexcept {
    ring_.reset();  // waits until launches in flight have finished with the ring
    if (exec_ != nullptr) {
      detail::report_in_destructor(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
      exec_ = nullptr;  // its graph memory (cudaMallocAsync in the capture) returns to CUDA's graph pool
    }
    graph_.reset();
    identity_.reset();
    identity_nodes_.clear();
    keep_alive_.clear();  // after the executable: its replays used them
    current_capture_ = instantiated_capture_ = 0;
  }

  // A replay; with `staged`, a graphed callable has written this launch's input addresses
  // into the ring's next slot (staging_slot).
  void replay(cudaStream_t stream, bool staged) {
    if (exec_ == nullptr) [[unlikely]]
      not_replayable("Graph::replay");
    if (stream != checked_stream_ || !stream_checked_) [[unlikely]]
      check_replay_stream(stream);
    if (checked_capture_ != 0) [[unlikely]] {
      // Checked pool: the check, the launch and its record happen under the pool's lock.
      // A full ring is waited for first, outside it: that wait lasts until the device
      // catches up, and must not lock every other thread out of the pool meanwhile (nor
      // deadlock with device work, such as a host function, that needs the pool).
      if (ring_) (void)ring_->staging_slot(stream, "Graph::replay");
      pool_->checked_launch(checked_capture_, stream, [&] { launch(stream, staged); });
      return;
    }
    launch(stream, staged);
  }

  // Refuses a stream of another device than the graph's, before anything is posted or
  // launched. A stream that passed is remembered, so that replays on it compare one handle;
  // the default streams, which follow the current device, are asked every time.
  void check_replay_stream(cudaStream_t stream) {
    constexpr std::string_view op = "Graph::replay";
    const bool follows_current = detail::is_default_stream(stream);
    const int device = detail::stream_device(stream, op);
    if (device != device_)
      detail::throw_misuse(op, "the stream belongs to device {} but this graph was captured on device {}; a graph "
                               "replays only on a stream of its own device{}",
                           device, device_,
                           follows_current ? " (a default stream belongs to the current device: make the "
                                             "graph's device current, or pass a stream made on it)"
                                           : "");
    checked_stream_ = stream;
    stream_checked_ = !follows_current;
  }

  void launch(cudaStream_t stream, bool staged) {
    if (ring_) [[unlikely]]
      ring_->post(stream, staged, "Graph::replay");  // this launch's (seed, offset) of every generator
    if (const cudaError_t e = cudaGraphLaunch(exec_, stream); e != cudaSuccess) [[unlikely]] {
      if (ring_) ring_->withdraw();  // no launch will take the post (the generators stay advanced)
      detail::throw_cuda(e, "Graph::replay (cudaGraphLaunch)");
    }
    if (ring_) [[unlikely]]
      ring_->launched(stream);
  }

  // The next launch's input-address words, once its slot is free; replay(stream, true)
  // then launches with them. For GraphedCallable, whose capture staged its inputs.
  [[nodiscard]] std::span<unsigned long long> staging_slot(cudaStream_t stream, std::string_view op) {
    return ring_->staging_slot(stream, op);
  }

  void reset_noexcept() noexcept {
    if (capture_ && !capture_->on_this_thread()) {
      // Destroyed on another thread while capturing: the capturing thread still refers to
      // the record, so it is left alive (a small leak) rather than freed under it.
      detail::report_in_destructor(cudaErrorStreamCaptureWrongThread,
                                   "Graph destroyed on another thread than its open capture's");
      (void)capture_.release();
    }
    capture_abort();
    destroy_exec_and_graph();
    release_pool();
  }

  void take(Graph& o) noexcept {
    exec_ = std::exchange(o.exec_, nullptr);
    graph_ = std::move(o.graph_);
    pool_ = std::move(o.pool_);
    checked_capture_ = std::exchange(o.checked_capture_, 0);
    capture_ = std::move(o.capture_);
    if (capture_) capture_->owner = this;  // scopes open on the capture follow the move
    ring_ = std::move(o.ring_);
    identity_ = std::move(o.identity_);
    identity_nodes_ = std::move(o.identity_nodes_);
    keep_alive_ = std::move(o.keep_alive_);
    current_capture_ = std::exchange(o.current_capture_, 0);
    instantiated_capture_ = std::exchange(o.instantiated_capture_, 0);
    upload_stream_ = o.upload_stream_;
    checked_stream_ = o.checked_stream_;
    stream_checked_ = std::exchange(o.stream_checked_, false);
    mode_ = o.mode_;
    device_ = o.device_;
    debug_ = o.debug_;
    moved_from_ = false;
    o.moved_from_ = true;
  }

  cudaGraphExec_t exec_ = nullptr;  // first: the replay path reads only this
  std::shared_ptr<detail::NativeGraph> graph_;
  std::shared_ptr<detail::Pool> pool_;
  std::unique_ptr<detail::CaptureSession> capture_;  // set while capturing
  std::unique_ptr<detail::LaunchRing> ring_;         // set when the graph draws random numbers or stages inputs
  std::uint64_t checked_capture_ = 0;                // its capture's id, when its pool is checked
  // After update(): the graph exec_ was instantiated from, whose nodes still name the
  // executable's nodes (graph_ is then the capture applied last); null when it is graph_.
  std::shared_ptr<detail::NativeGraph> identity_;
  std::vector<cudaGraphNode_t> identity_nodes_;  // its nodes, for KernelNodes of later captures
  std::vector<std::shared_ptr<void>> keep_alive_;  // what captured work uses (keep_alive_with_capture)
  std::uint64_t current_capture_ = 0;            // the capture graph_ holds
  std::uint64_t instantiated_capture_ = 0;       // the capture exec_ was instantiated from
  cudaStream_t upload_stream_ = nullptr;
  // A stream replays were checked to belong to device_ (the default streams are never
  // remembered: they follow the current device).
  cudaStream_t checked_stream_ = nullptr;
  bool stream_checked_ = false;
  CaptureMode mode_ = CaptureMode::Global;
  int device_ = 0;
  bool debug_ = false;
  bool moved_from_ = false;
};

/// Captures for the lifetime of a scope. Inside it, current_stream() is the capture
/// stream. The normal end of the scope ends the capture and instantiates (prefer end(),
/// which reports failures as an ordinary throw). If an exception leaves the scope, the
/// capture is aborted: the partial graph is discarded, the stream stops capturing, the
/// graph stays empty and reusable, and the original exception propagates. The scope
/// follows its capture: moving the Graph while the scope is open is fine.
class CaptureScope {
public:
  explicit CaptureScope(Graph& graph, const CaptureOptions& opts = {})
      : graph_(&graph), uncaught_(std::uncaught_exceptions()) {
    graph.capture_begin(opts);
    detail::CaptureSession& s = *graph.capture_;
    capture_id_ = s.id;
    s.push_current(s.stream);
  }

  ~CaptureScope() noexcept(false) {
    if (!open_) return;
    if (std::uncaught_exceptions() > uncaught_) {
      abort();
    } else {
      end();
    }
  }

  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  /// The stream capturing now: the innermost open conditional body, else the capture stream
  /// (nullptr once the capture has ended).
  [[nodiscard]] cudaStream_t stream() const noexcept {
    const auto* s = session();
    return s != nullptr ? s->now() : nullptr;
  }
  /// The graph capturing (the one it was moved to, if it moved).
  [[nodiscard]] Graph& graph() const noexcept {
    const auto* s = session();
    return s != nullptr ? *s->owner : *graph_;
  }
  [[nodiscard]] PoolHandle pool() const { return graph().pool(); }

  /// Ends the capture and instantiates now. After a failure the scope is closed and the
  /// graph empty and reusable.
  void end() {
    constexpr std::string_view op = "CaptureScope::end";
    if (!open_) detail::throw_misuse(op, "the scope has already ended");
    detail::CaptureSession* s = session();
    if (s == nullptr) {
      open_ = false;
      detail::throw_misuse(op, "the capture was aborted or ended outside the scope (an exception left a "
                               "conditional scope, or capture_abort(), capture_end() or reset() was called)");
    }
    if (const std::size_t n = s->conditionals.size(); n != 0)  // the scope stays open
      detail::throw_misuse(op, "{} conditional scope(s) are still open; close them (innermost first) "
                               "before ending the capture",
                           n);
    open_ = false;
    s->pop_current();
    graph_ = s->owner;
    graph_->capture_end();
  }

  /// Aborts the capture now: the partial graph is discarded and the graph left empty.
  void abort() noexcept {
    if (!open_) return;
    detail::CaptureSession* s = session();
    open_ = false;
    if (s != nullptr) {
      graph_ = s->owner;
      graph_->capture_abort();  // restores the current stream this scope found
    }
  }

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  /// A condition made now, before its node: kernels captured from here on set it
  /// (Condition::set), and a ConditionalScope opened later at the same nesting level takes
  /// it, adding no node of its own. It is reset to `initial` at every launch of the graph.
  [[nodiscard]] Condition make_condition(unsigned initial = 0) {
    constexpr std::string_view op = "CaptureScope::make_condition";
    detail::CaptureSession* s = session();
    if (s == nullptr) detail::throw_misuse(op, "the scope's capture has ended or was aborted");
    const auto c = s->make_condition(initial, op);
    return Condition(c.handle, c.graph);
  }
#endif

  /// Identifies the capture this scope began (ConditionalScope finds it by this id).
  [[nodiscard]] std::uint64_t capture_id() const noexcept { return capture_id_; }

private:
  // The session of this scope's capture while it is open on this thread, else null.
  [[nodiscard]] detail::CaptureSession* session() const noexcept {
    return open_ ? detail::CaptureSession::find(capture_id_) : nullptr;
  }

  Graph* graph_;  // the graph when the scope opened, or when it last saw its capture
  std::uint64_t capture_id_ = 0;
  int uncaught_;
  bool open_ = true;
};

/// Captures `fn(stream)` into `graph` and instantiates it; exception-safe like CaptureScope.
template <class F>
void capture(Graph& graph, F&& fn, const CaptureOptions& opts = {}) {
  CaptureScope scope(graph, opts);
  std::forward<F>(fn)(scope.stream());
  scope.end();
}

namespace detail {
// Captures `fn` into `graph` with `opts` and ends the capture; `fn` takes the CaptureScope
// (to open conditional scopes) or the capture stream.
template <class F>
void capture_step(Graph& graph, F& fn, const CaptureOptions& opts) {
  CaptureScope scope(graph, opts);
  if constexpr (std::invocable<F&, CaptureScope&>) {
    fn(scope);
  } else {
    fn(scope.stream());
  }
  scope.end();
}
}  // namespace detail

template <class F>
  requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
UpdateResult Graph::update(F&& fn, const UpdateOptions& opts) {
  if (exec_ == nullptr) not_replayable("Graph::update");
  Graph next;
  {
    detail::DeviceGuard on(device_);
    CaptureOptions co;
    co.pool = pool();
    co.mode = mode_;
    co.instantiate = false;
    detail::capture_step(next, fn, co);
  }
  return update(std::move(next), opts);
}

template <class F>
  requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
UpdateResult Graph::capture_or_update(F&& fn, const CaptureOptions& opts) {
  if (exec_ != nullptr) {
    UpdateOptions uo;
    uo.reinstantiate_on_failure = true;
    return update(std::forward<F>(fn), uo);
  }
  if (graph_ != nullptr || capture_)
    detail::throw_misuse("Graph::capture_or_update", "the graph holds a capture that is not instantiated, or is "
                                                     "capturing; reset() it first");
  detail::capture_step(*this, fn, opts);
  UpdateResult r;
  r.reinstantiated = true;  // a first capture: instantiated
  return r;
}

/// The kernel node just captured on `stream`, a capture stream open on this thread: the
/// handle Graph::set_kernel_args changes that node's arguments with. Call it right after
/// the launch; an Error says what went wrong when the stream's last node is not a launch of
/// `kernel` (another node type, another kernel, several nodes joined from other streams),
/// and for streams that capture conditional bodies, whose nodes cannot be changed this way.
template <class... P>
[[nodiscard]] KernelNode<P...> captured_kernel_node(void (*kernel)(P...), cudaStream_t stream) {
  constexpr std::string_view op = "captured_kernel_node";
  const detail::CaptureSession* capture = nullptr;
  for (const auto* c : detail::tls_captures) {
    if (c->stream == stream) capture = c;
    for (const auto& f : c->conditionals)
      if (f.stream == stream && f.active >= 0)
        detail::throw_misuse(op, "the stream captures a conditional body; nodes inside conditional bodies "
                                 "cannot be changed in the executable: take nodes of the top-level capture");
  }
  const auto info = detail::capture_info(stream, op);
  if (capture == nullptr && info.status == cudaStreamCaptureStatusActive) {
    // A stream forked from a capture's stream (it waited on an event recorded there): it
    // captures into that capture's graph.
    for (const auto* c : detail::tls_captures)
      if (detail::capture_info(c->stream, op).graph == info.graph) capture = c;
  }
  if (capture == nullptr)
    detail::throw_misuse(op, "the stream is not capturing for a capture open on this thread (CaptureScope::"
                             "stream(), or a stream forked from it); take the node right after its launch is "
                             "captured");
  if (info.status != cudaStreamCaptureStatusActive)
    detail::throw_cuda(cudaErrorStreamCaptureInvalidated, op);
  if (info.count != 1)
    detail::throw_misuse(op, "the capture does not end in one node on this stream (it ends in {}: nothing "
                             "captured yet, or work joined from other streams); take the node right after "
                             "the kernel's launch",
                         info.count);
  const cudaGraphNode_t node = info.deps[0];
  cudaGraphNodeType type{};
  detail::check(cudaGraphNodeGetType(node, &type), "{}: cudaGraphNodeGetType", op);
  if (type != cudaGraphNodeTypeKernel)
    detail::throw_misuse(op, "the last node captured on the stream is a {} node, not a kernel launch",
                         detail::node_type_name(type));
  cudaKernelNodeParams p{};
  detail::check(cudaGraphKernelNodeGetParams(node, &p), "{}: cudaGraphKernelNodeGetParams", op);
  if (!detail::same_kernel(p.func, reinterpret_cast<const void*>(kernel)))
    detail::throw_misuse(op, "the last kernel node captured on the stream runs another kernel than the one given");
  const auto index = detail::node_index(info.graph, node, op);
  if (!index) detail::throw_misuse(op, "the node is not among its graph's nodes");
  KernelNode<P...> k;
  k.node_ = node;
  k.capture_ = capture->id;
  k.index_ = *index;
  k.launch_.func = reinterpret_cast<void*>(kernel);  // the form the runtime takes back
  k.launch_.gridDim = p.gridDim;
  k.launch_.blockDim = p.blockDim;
  k.launch_.sharedMemBytes = p.sharedMemBytes;
  k.args_ = std::make_shared<typename KernelNode<P...>::Arguments>(
      detail::read_kernel_args<std::remove_cvref_t<P>...>(p.kernelParams, std::index_sequence_for<P...>{}));
  return k;
}

/// The same on current_stream(), which is the capture stream inside a CaptureScope.
template <class... P>
[[nodiscard]] KernelNode<P...> captured_kernel_node(void (*kernel)(P...)) {
  return captured_kernel_node(kernel, current_stream());
}

/// Writes the most recently completed capture (on any thread) as a Graphviz DOT file.
inline void export_dot(const std::string& path) {
  const auto g = detail::LastCapture::instance().get();
  if (!g) detail::throw_misuse("export_dot", "no capture has completed yet");
  std::lock_guard lock(g->m);  // its Graph may be instantiating it on another thread
  detail::write_dot(g->graph, path, "export_dot");
}

}  // namespace cugraphs
