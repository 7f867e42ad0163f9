// CaptureScope (a capture for the lifetime of a scope), capture(), export_dot(), and the
// members of Graph that capture through a scope (update(fn), capture_or_update). Included
// by capture.hpp.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/condition.hpp>
#include <cugraphs/detail/session_api.hpp>

#include <concepts>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace cugraphs {

/// Captures for the lifetime of a scope. Inside it, current_stream() is the capture
/// stream. The normal end of the scope ends the capture and instantiates (prefer end(),
/// which reports failures as an ordinary throw). If an exception leaves the scope, the
/// capture is aborted: the partial graph is discarded, the stream stops capturing, the
/// graph stays empty and reusable, and the original exception propagates. The scope
/// follows its capture: moving the Graph while the scope is open is fine.
class CaptureScope {
public:
  explicit CaptureScope(Graph& graph, const CaptureOptions& opts = {});

  ~CaptureScope() noexcept(false);

  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  /// The stream capturing now: the innermost open conditional body, else the capture stream
  /// (nullptr once the capture has ended).
  [[nodiscard]] cudaStream_t stream() const noexcept;
  /// The graph capturing (the one it was moved to, if it moved).
  [[nodiscard]] Graph& graph() const noexcept;
  [[nodiscard]] PoolHandle pool() const { return graph().pool(); }

  /// Ends the capture and instantiates now. After a failure the scope is closed and the
  /// graph empty and reusable.
  void end();

  /// Aborts the capture now: the partial graph is discarded and the graph left empty.
  void abort() noexcept;

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  /// A condition made now, before its node: kernels captured from here on set it
  /// (Condition::set), and a ConditionalScope opened later at the same nesting level takes
  /// it, adding no node of its own. It is reset to `initial` at every launch of the graph,
  /// and, made inside a conditional body, each time the body runs (a one-thread kernel here).
  [[nodiscard]] Condition make_condition(unsigned initial = 0);
#endif

  /// Identifies the capture this scope began (ConditionalScope finds it by this id).
  [[nodiscard]] std::uint64_t capture_id() const noexcept { return capture_id_; }

private:
  // The session of this scope's capture while it is open on this thread, else null.
  [[nodiscard]] detail::CaptureSession* session() const noexcept;

  Graph* graph_;  // the graph when the scope opened, or when it last saw its capture
  std::uint64_t capture_id_ = 0;
  int uncaught_;
  bool open_ = true;
};

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

/// Captures `fn(stream)` (or `fn(scope)`, to open conditional scopes) into `graph` and
/// instantiates it; exception-safe like CaptureScope.
template <class F>
  requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
void capture(Graph& graph, F&& fn, const CaptureOptions& opts = {}) {
  CaptureScope scope(graph, opts);
  if constexpr (std::invocable<F&, cudaStream_t>) {  // the stream first: `[](auto s)` gets the stream
    fn(scope.stream());
  } else {
    fn(scope);
  }
  scope.end();
}

template <class F>
  requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
UpdateResult Graph::update(F&& fn, const UpdateOptions& opts) {
  return update(recapture(fn, recapture_options("Graph::update")), opts);
}

template <class F>
Graph Graph::recapture(F& fn, const CaptureOptions& co) const {
  Graph next;
  detail::DeviceGuard on(device_);
  // The capture is made for this graph: library resources kept per graph (cuBLAS
  // workspaces) are this graph's (read and cleared by the capture's begin).
  struct ForThisGraph {
    ~ForThisGraph() { detail::tls_recapture_of = 0; }
  } for_this_graph;
  detail::tls_recapture_of = reinterpret_cast<std::uintptr_t>(core_.get());
  detail::capture_step(next, fn, co);
  return next;
}

template <class F>
  requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
UpdateResult Graph::capture_or_update(F&& fn, const CaptureOptions& opts) {
  if (is_instantiated()) {
    CaptureOptions co = recapture_options("Graph::capture_or_update");
    if (opts.stream != nullptr) co.stream = opts.stream;  // where the caller queues the step now
    UpdateOptions uo;
    uo.reinstantiate_on_failure = true;
    return update(recapture(fn, co), uo);  // once applied, later captures use co.stream too
  }
  if (native_graph() != nullptr || is_capturing())
    detail::throw_misuse("Graph::capture_or_update", "the graph holds a capture that is not instantiated, or is "
                                                     "capturing; reset() it first");
  detail::capture_step(*this, fn, opts);
  UpdateResult r;
  r.reinstantiated = true;  // a first capture: instantiated
  return r;
}

/// Writes the most recently completed capture (on any thread) as a Graphviz DOT file.
void export_dot(const std::string& path);

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/capture_scope.ipp>
#endif
