// The bodies of the functions <cugraphs/capture.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/executable.hpp>
#include <cugraphs/detail/native_graph.hpp>

#include <memory>

namespace cugraphs {

namespace detail {
CUGRAPHS_INLINE void destroy(GraphCore* c) noexcept { delete c; }

CUGRAPHS_INLINE void abort_capture(std::uint64_t capture) noexcept {
  if (CaptureSession* s = CaptureSession::find(capture)) s->owner->capture_abort();
}
}  // namespace detail

CUGRAPHS_INLINE detail::GraphCore& Graph::core() {
  if (!core_) core_.reset(new detail::GraphCore);
  return *core_;
}

CUGRAPHS_INLINE const detail::GraphCore& Graph::view() const noexcept {
  // Nothing captured: every query answers "none". Never destroyed, so that a Graph destroyed
  // late in the program's exit can still be asked.
  static const detail::GraphCore* const empty = new detail::GraphCore;
  return core_ ? *core_ : *empty;
}

CUGRAPHS_INLINE cudaGraph_t Graph::native_graph() const noexcept { return view().exec.graph(); }
CUGRAPHS_INLINE cudaGraphExec_t Graph::native_exec() const noexcept { return view().exec.hand_out(); }
CUGRAPHS_INLINE bool Graph::is_capturing() const noexcept { return capture_ && capture_->is_open(); }
CUGRAPHS_INLINE std::size_t Graph::open_conditionals() const noexcept {
  return is_capturing() ? capture_->frames.open_frames().size() : 0;
}
CUGRAPHS_INLINE bool Graph::is_instantiated() const noexcept { return view().exec.instantiated(); }
CUGRAPHS_INLINE PerLaunch Graph::per_launch() const noexcept { return view().exec.per_launch(); }
CUGRAPHS_INLINE cudaStream_t Graph::stream() const noexcept { return is_capturing() ? capture_->now() : nullptr; }
CUGRAPHS_INLINE bool Graph::holds_capture(std::uint64_t capture) const noexcept { return view().exec.holds(capture); }

CUGRAPHS_INLINE bool Graph::runs_capture(std::uint64_t capture) const noexcept { return view().exec.runs(capture); }

CUGRAPHS_INLINE void Graph::replaced_node(std::uint64_t capture, std::string_view op) const {
  detail::throw_misuse(op, "the KernelNode was taken in capture {}, which update() has replaced since (this graph "
                           "runs a later capture): the arguments it keeps are that capture's, and setting some of "
                           "them would bring the others back (the old capture's buffers, released since). Take the "
                           "node with captured_kernel_node() in the function you capture and update with, so that "
                           "every capture hands out its own, or set all its arguments with set_kernel_args",
                       capture);
}

CUGRAPHS_INLINE std::size_t Graph::launch_staged(cudaStream_t stream, detail::StageRef stage, std::string_view op) {
  if (!core_ || !core_->exec.instantiated() || !core_->exec.stages()) [[unlikely]]
    is_instantiated() ? detail::throw_misuse(op, "this graph's capture staged no inputs; use replay()")
                      : not_replayable(op);
  core_->exec.launch(stream, core_->pool, stage, op);
  return core_->exec.leaves_in_place();
}

CUGRAPHS_INLINE void Graph::set_kernel_params(std::uint64_t capture, std::size_t index, cudaGraphNode_t node,
                                              const cudaKernelNodeParams& p, std::string_view op) {
  core().exec.set_kernel_params(capture, index, node, p, op);
}

CUGRAPHS_INLINE CaptureOptions Graph::recapture_options(std::string_view op) const {
  if (!is_instantiated()) not_replayable(op);
  CaptureOptions co;
  co.pool = pool();
  co.mode = mode_;
  co.escapes = escapes_;
  co.stream = stream_;  // work the step queues on the stream it made current is captured again
  co.allow_empty = allow_empty_;
  co.instantiate = false;
  co.device_launch = view().exec.device_launch();
  co.per_launch = view().exec.per_launch_asked();  // the same choice, so that the topologies can match
  co.watch_buffers = view().exec.watches_buffers();
  return co;
}

CUGRAPHS_INLINE Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    reset_noexcept();
    take(o);
  }
  return *this;
}

CUGRAPHS_NOINLINE CUGRAPHS_INLINE void Graph::capture_begin(const CaptureOptions& opts) {
  constexpr std::string_view op = "Graph::capture_begin";
  const detail::CaptureEntry entry(CUGRAPHS_CALLER_STACK());
  if (is_capturing())
    detail::throw_misuse(op, "this graph is already capturing; call capture_end() (or capture_abort()) before "
                             "beginning another capture");
  capture_abort();  // a capture a failed conditional scope aborted: let go of it
  if (view().exec.captured())
    detail::throw_misuse(op, "this graph already holds a captured graph; call reset() before capturing again");
  (void)core();  // made now: capture_end cannot then fail for want of it
  const auto [stream, device] = detail::capture_target(opts, op);
  auto pool = opts.pool ? opts.pool->impl() : std::make_shared<detail::Pool>(device);
  const bool guard =
      opts.escapes == EscapeCheck::On || (opts.escapes == EscapeCheck::Auto && opts.mode == CaptureMode::Global);
  // The graph the capture is for: this one, or the one a recapture will update.
  const std::uint64_t recapture_of = std::exchange(detail::tls_recapture_of, 0);
  const std::uint64_t graph_key = recapture_of != 0 ? recapture_of : reinterpret_cast<std::uintptr_t>(core_.get());
  capture_.reset(new detail::CaptureSession(pool, stream, detail::to_cuda(opts.mode), detail::name(opts.mode),
                                            device, opts.instantiate, opts.device_launch, guard, this, graph_key, op));
  capture_->per_launch = opts.per_launch;
  capture_->check_copies = guard;
  capture_->check_backing = opts.escapes != EscapeCheck::Off;
  capture_->allow_empty = opts.allow_empty;
  capture_->watch_buffers = opts.watch_buffers;
  capture_->begin_stack = detail::CaptureEntry::stack();
  mode_ = opts.mode;
  escapes_ = opts.escapes;
  stream_ = opts.stream;
  allow_empty_ = opts.allow_empty;
  device_ = device;
  moved_from_ = false;
}

CUGRAPHS_NOINLINE CUGRAPHS_INLINE void Graph::capture_end() {
  constexpr std::string_view op = "Graph::capture_end";
  const detail::CaptureEntry entry(CUGRAPHS_CALLER_STACK());
  if (!is_capturing()) detail::throw_misuse(op, "no capture is open on this graph; call capture_begin() first");
  if (detail::innermost_capture() != capture_.get())
    detail::throw_misuse(op, "this capture is not the innermost capture open on this thread; end captures on the "
                             "thread that began them, innermost first");
  if (const std::size_t n = open_conditionals(); n != 0)
    detail::throw_misuse(op, "{} conditional scope(s) are still open; close them (innermost first) before ending "
                             "the capture",
                         n);
  const std::uint64_t id = capture_->id;
  const cudaStream_t stream = capture_->stream;
  const bool instantiate_now = capture_->instantiate;
  CUGRAPHS_TRY {
    capture_->end_stack = detail::CaptureEntry::stack();
    auto captured = capture_->end(op);
    capture_.reset();
    core_->pool = std::move(captured.share);
    core_->exec.hold(std::move(captured), core_->pool.get().get(), id, stream, device_);
    core_->pool.register_capture(id);
  } CUGRAPHS_CATCH_ALL {
    capture_.reset();
    core_->exec.reset();
    core_->pool.release();  // forgets the graph in a checked pool too
    CUGRAPHS_RETHROW;
  }
  if (instantiate_now) instantiate();
}

CUGRAPHS_INLINE void Graph::capture_abort() noexcept {
  if (!capture_) return;
  if (capture_->is_open() && !capture_->on_this_thread()) {
    capture_->abort();  // reports that the capture belongs to another thread, and leaves it open
    return;
  }
  capture_.reset();  // aborts it, if open
  if (core_) core_->pool.release();
}

CUGRAPHS_INLINE void Graph::instantiate() {
  if (!view().exec.captured()) not_replayable("Graph::instantiate");
  core_->exec.instantiate();
}

CUGRAPHS_INLINE void Graph::replay(cudaStream_t stream) {
  if (!core_ || !core_->exec.instantiated()) [[unlikely]]
    not_replayable("Graph::replay");
  core_->exec.launch(stream, core_->pool, detail::no_inputs, "Graph::replay");
}

CUGRAPHS_INLINE void Graph::check_buffers(std::string_view op) {
  if (core_ && core_->exec.instantiated()) core_->exec.check_buffers(op);
}

CUGRAPHS_INLINE UpdateResult Graph::update(Graph&& source, const UpdateOptions& opts) {
  constexpr std::string_view op = "Graph::update";
  if (&source == this) detail::throw_misuse(op, "a graph cannot be updated from itself");
  if (!is_instantiated()) not_replayable(op);
  if (source.is_capturing()) detail::throw_misuse(op, "the source graph is still capturing; end its capture first");
  if (!source.view().exec.captured())
    detail::throw_misuse(op, "the source graph holds no capture{}", source.moved_from_ ? " (it was moved from)" : "");
  if (source.device_ != device_)
    detail::throw_misuse(op, "the source graph was captured on device {}, but this graph runs on device {}",
                         source.device_, device_);
  UpdateResult r = core_->exec.update(source.core_->exec, opts);
  if (r.applied()) {
    core_->pool = std::move(source.core_->pool);
    mode_ = source.mode_;
    escapes_ = source.escapes_;
    stream_ = source.stream_;
    allow_empty_ = source.allow_empty_;
  }
  return r;
}

CUGRAPHS_INLINE DeviceGraph Graph::device_graph() const {
  constexpr std::string_view op = "Graph::device_graph";
  if (!is_instantiated()) not_replayable(op);
  if (!view().exec.device_launch())
    detail::throw_misuse(op, "the graph was not instantiated for launch from the device; capture it with "
                             "CaptureOptions::device_launch = true");
  return view().exec.device_graph();
}

CUGRAPHS_INLINE void Graph::check_device_launches() {
  constexpr std::string_view op = "Graph::check_device_launches";
  if (!core_) return;  // never launched
  if (const cudaError_t e = core_->exec.take_device_status(op); e != cudaSuccess)
    detail::throw_error(e, op, "a launch of this graph from the device failed: {} ({}); a kernel inside a graph must "
                               "launch it, and not while it runs", cudaGetErrorName(e), cudaGetErrorString(e));
}

CUGRAPHS_INLINE void Graph::reset() {
  if (is_capturing() && !capture_->on_this_thread())
    detail::throw_misuse("Graph::reset", "this graph's capture was begun on another thread; end or abort it on "
                                         "that thread first");
  reset_noexcept();
  moved_from_ = false;
}

CUGRAPHS_INLINE PoolHandle Graph::pool() const {
  const auto& p = is_capturing() ? capture_->share.get() : view().pool.get();
  if (!p) not_replayable("Graph::pool");
  return PoolHandle(p);
}

CUGRAPHS_INLINE std::size_t Graph::node_count() const {
  if (!view().exec.captured()) return 0;
  return view().exec.with_graph([](cudaGraph_t g) { return detail::node_count(g, "Graph::node_count"); });
}

CUGRAPHS_INLINE void Graph::debug_dump(const std::string& path) const {
  constexpr std::string_view op = "Graph::debug_dump";
  if (!debug_) detail::throw_misuse(op, "debug mode is off; call enable_debug_mode() first");
  if (!view().exec.captured()) not_replayable(op);
  view().exec.with_graph([&](cudaGraph_t g) { detail::write_dot(g, path, op); });
}

CUGRAPHS_INLINE void Graph::not_replayable(std::string_view op) const {
  if (moved_from_)
    detail::throw_misuse(op, "this Graph was moved from; use the Graph it was moved to, or capture into this one "
                             "again");
  if (is_capturing()) detail::throw_misuse(op, "the graph is still capturing; call capture_end() first");
  if (view().exec.captured())
    detail::throw_misuse(op, "the graph was captured but is not instantiated (CaptureOptions::instantiate was "
                             "false, or instantiation failed); call instantiate() or reset()");
  detail::throw_misuse(op, "nothing has been captured into this graph; capture it first (capture_begin/"
                           "capture_end, CaptureScope or capture())");
}

CUGRAPHS_INLINE detail::CaptureSession& Graph::session(std::string_view op) {
  if (!is_capturing())
    detail::throw_misuse(op, "no capture is open on this graph: a conditional scope must be opened inside a "
                             "capture (CaptureScope, or between capture_begin and capture_end)");
  return *capture_;
}

CUGRAPHS_INLINE void Graph::reset_noexcept() noexcept {
  if (is_capturing() && !capture_->on_this_thread()) {
    // Destroyed on another thread while capturing: the capturing thread still refers to
    // the session, so it is left alive (a small leak) rather than freed under it.
    detail::report_in_destructor(cudaErrorStreamCaptureWrongThread,
                                 "Graph destroyed on another thread than its open capture's");
    (void)capture_.release();
  }
  capture_abort();
  if (core_) {
    core_->exec.reset();
    core_->pool.release();
  }
}

CUGRAPHS_INLINE void Graph::take(Graph& o) noexcept {
  core_ = std::move(o.core_);
  capture_ = std::move(o.capture_);
  if (capture_) capture_->owner = this;  // scopes open on the capture follow the move
  mode_ = o.mode_;
  escapes_ = o.escapes_;
  stream_ = o.stream_;
  allow_empty_ = o.allow_empty_;
  device_ = o.device_;
  debug_ = o.debug_;
  moved_from_ = false;
  o.moved_from_ = true;
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE void Graph::begin_capture_to_if_node(const bool* pred) {
  constexpr std::string_view op = "Graph::begin_capture_to_if_node";
  (void)session(op).open_conditional(detail::ConditionalKind::If, detail::ConditionSource::device_flag(pred), 1, op);
}

CUGRAPHS_INLINE void Graph::begin_capture_to_while_node(const bool* pred) {
  constexpr std::string_view op = "Graph::begin_capture_to_while_node";
  (void)session(op).open_conditional(detail::ConditionalKind::While, detail::ConditionSource::device_flag(pred), 1,
                                     op);
}

CUGRAPHS_INLINE void Graph::set_conditional_handle_for_current_node(const bool* pred) {
  constexpr std::string_view op = "Graph::set_conditional_handle_for_current_node";
  session(op).conditional([&](auto& frames) { frames.set_refresh(frames.innermost(op).id, pred, op); });
}

CUGRAPHS_INLINE void Graph::end_capture_to_conditional_node() {
  constexpr std::string_view op = "Graph::end_capture_to_conditional_node";
  session(op).conditional([&](auto& frames) { frames.close(frames.innermost(op).id, op); });
}
#endif

}  // namespace cugraphs
