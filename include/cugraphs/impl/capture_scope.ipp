// The bodies of the functions <cugraphs/capture_scope.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/capture_scope.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/native_graph.hpp>

#include <mutex>

namespace cugraphs {

CUGRAPHS_NOINLINE CUGRAPHS_INLINE CaptureScope::CaptureScope(Graph& graph, const CaptureOptions& opts)
    : graph_(&graph), uncaught_(std::uncaught_exceptions()) {
  const detail::CaptureEntry entry(CUGRAPHS_CALLER_STACK());  // the scope's owner's frame, not this one's
  graph.capture_begin(opts);  // makes the capture stream current until the capture ends
  capture_id_ = detail::innermost_capture()->id;  // the capture just begun
}

CUGRAPHS_INLINE detail::CaptureSession* CaptureScope::session() const noexcept {
  return open_ ? detail::CaptureSession::find(capture_id_) : nullptr;
}

CUGRAPHS_NOINLINE CUGRAPHS_INLINE CaptureScope::~CaptureScope() noexcept(false) {
  if (!open_) return;
  const detail::CaptureEntry entry(CUGRAPHS_CALLER_STACK());
  if (std::uncaught_exceptions() > uncaught_) {
    abort();
  } else {
    end();
  }
}

CUGRAPHS_INLINE cudaStream_t CaptureScope::stream() const noexcept {
  const auto* s = session();
  return s != nullptr ? s->now() : nullptr;
}

CUGRAPHS_INLINE Graph& CaptureScope::graph() const noexcept {
  const auto* s = session();
  return s != nullptr ? *s->owner : *graph_;
}

CUGRAPHS_NOINLINE CUGRAPHS_INLINE void CaptureScope::end() {
  constexpr std::string_view op = "CaptureScope::end";
  const detail::CaptureEntry entry(CUGRAPHS_CALLER_STACK());
  if (!open_) detail::throw_misuse(op, "the scope has already ended");
  detail::CaptureSession* s = session();
  if (s == nullptr) {
    open_ = false;
    detail::throw_misuse(op, "the capture was aborted or ended outside the scope (an exception left a "
                             "conditional scope, or capture_abort(), capture_end() or reset() was called)");
  }
  if (const std::size_t n = s->frames.open_frames().size(); n != 0)  // the scope stays open
    detail::throw_misuse(op, "{} conditional scope(s) are still open; close them (innermost first) "
                             "before ending the capture",
                         n);
  open_ = false;
  graph_ = s->owner;
  graph_->capture_end();
}

CUGRAPHS_INLINE void CaptureScope::abort() noexcept {
  if (!open_) return;
  detail::CaptureSession* s = session();
  open_ = false;
  if (s != nullptr) {
    graph_ = s->owner;
    graph_->capture_abort();  // restores the current stream this scope found
  }
}

CUGRAPHS_INLINE void export_dot(const std::string& path) {
  const auto g = detail::LastCapture::instance().get();
  if (!g) detail::throw_misuse("export_dot", "no capture has completed yet");
  std::lock_guard lock(g->m);  // its Graph may be instantiating it on another thread
  detail::write_dot(g->graph, path, "export_dot");
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE Condition CaptureScope::make_condition(unsigned initial) {
  constexpr std::string_view op = "CaptureScope::make_condition";
  detail::CaptureSession* s = session();
  if (s == nullptr) detail::throw_misuse(op, "the scope's capture has ended or was aborted");
  const auto c = s->conditional([&](detail::ConditionalFrames& f) { return f.make_condition(initial, op); });
  return Condition(c.handle, c.graph);
}
#endif

}  // namespace cugraphs
