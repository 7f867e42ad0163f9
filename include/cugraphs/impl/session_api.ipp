// The bodies of the functions <cugraphs/detail/session_api.hpp> declares: included at the
// end of the public headers that use them in header-only builds, compiled once into the
// cugraphs library when CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/session_api.hpp>

namespace cugraphs::detail {

// The session of capture `capture` while it is open on this thread, else the misuse `op` names.
CUGRAPHS_INLINE CaptureSession& open_session(std::uint64_t capture, std::string_view op) {
  CaptureSession* s = CaptureSession::find(capture);
  if (s == nullptr || !s->is_open())
    throw_misuse(op, "this conditional scope is closed (or its capture was aborted): no capture is open on "
                     "this graph");
  return *s;
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE std::uint64_t open_conditional(std::uint64_t capture, ConditionalKind kind, ConditionSource source,
                                               unsigned bodies, std::string_view op) {
  return open_session(capture, op).open_conditional(kind, source, bodies, op);
}

CUGRAPHS_INLINE void conditional_step(std::uint64_t capture, std::uint64_t frame, ConditionalStep step,
                                      unsigned index, const bool* pred, std::string_view op) {
  open_session(capture, op).conditional([&](ConditionalFrames& f) {
    switch (step) {
      case ConditionalStep::Close: f.close(frame, op); break;
      case ConditionalStep::SwitchBody: f.switch_body(frame, index, op); break;
      case ConditionalStep::SetRefresh: f.set_refresh(frame, pred, op); break;
    }
  });
}

CUGRAPHS_INLINE FrameView conditional_frame(std::uint64_t capture, std::uint64_t frame, std::string_view op) {
  const ConditionalFrame& f = open_session(capture, op).frames.frame(frame, op);
  return {f.stream, f.handle, f.set_by_kernels, f.captured.size() > 1 && f.captured[1]};
}

CUGRAPHS_INLINE bool conditional_is_open(std::uint64_t capture, std::uint64_t frame) noexcept {
  const CaptureSession* s = CaptureSession::find(capture);
  return s != nullptr && s->frames.is_open(frame);
}
#endif

CUGRAPHS_INLINE std::uint64_t capture_of_stream(cudaStream_t stream, cudaGraph_t graph, bool active,
                                                std::string_view op) {
  const CaptureSession* capture = nullptr;
  for (const CaptureSession* c : tls_captures) {
    if (c->stream == stream) capture = c;
    for (const auto& f : c->frames.open_frames())
      if (f.stream == stream && f.active >= 0)
        throw_misuse(op, "the stream captures a conditional body; nodes inside conditional bodies cannot be "
                         "changed in the executable: take nodes of the top-level capture. A value the body needs "
                         "each replay goes into device memory, written by a top-level kernel whose argument you "
                         "set, and read there by the body's kernels");
  }
  if (capture == nullptr && active) {
    // A stream forked from a capture's stream (it waited on an event recorded there): it
    // captures into that capture's graph.
    for (const CaptureSession* c : tls_captures)
      if (capture_info(c->stream, op).graph == graph) capture = c;
  }
  if (capture == nullptr)
    throw_misuse(op, "the stream is not capturing for a capture open on this thread (CaptureScope::stream(), or "
                     "a stream forked from it); take the node right after its launch is captured{}",
                 tls_warm_up_draws == nullptr ? ""
                 : tls_eager_run == EagerRun::Verify
                     ? ". This call came from verify_replay's eager run of the step: take the node only where "
                       "is_current_stream_capturing()"
                     : ". This call came from a warm-up (the eager calls of f that a graphed callable, pair or "
                       "cache makes before capturing it, GraphedOptions::warmup_iters): take the node only where "
                       "is_current_stream_capturing(), or set warmup_iters = 0");
  return capture->id;
}

CUGRAPHS_INLINE const TakenNode* note_taken_node(std::uint64_t capture, TakenNode taken, std::string_view op) {
  CaptureSession* s = CaptureSession::find(capture);
  if (s == nullptr) return nullptr;  // found open a moment ago, by capture_of_stream
  const bool fresh = tls_fresh_capture != nullptr && !tls_captures.empty() && tls_captures.front() == s;
  const void* func = taken.launch.func;
  s->taken.push_back(std::move(taken));
  if (!fresh) return nullptr;
  FreshCaptureNodes& f = *tls_fresh_capture;
  const std::size_t i = f.next++;
  if (i >= f.graph_nodes->size())
    throw_misuse(op, "verify_replay captured the step again, and it took {} kernel nodes there where the graph's "
                     "capture took {}: a step must take the same nodes each time it is captured",
                 i + 1, f.graph_nodes->size());
  const TakenNode& same = (*f.graph_nodes)[i];
  if (same.launch.func != func)
    throw_misuse(op, "verify_replay captured the step again, and kernel node {} it took there (counting from 0) runs "
                     "another kernel than node {} the graph's capture took: a step must take the same nodes each "
                     "time it is captured",
                 i, i);
  return &same;
}

CUGRAPHS_INLINE void destroy(CaptureSession* s) noexcept { delete s; }

CUGRAPHS_INLINE void mark_updatable_nodes() noexcept {
  if (CaptureSession* s = innermost_capture()) s->updatable_nodes = true;
}

CUGRAPHS_INLINE StagingWords stage_in_capture(std::span<const StageTarget> statics, bool in_place,
                                              bool unread_is_error, std::string_view op) {
  return innermost_capture()->launch_ring(op).stage(statics, in_place, unread_is_error, op);
}

CUGRAPHS_INLINE void shield_in_capture(std::span<const std::pair<std::uintptr_t, std::size_t>> ranges,
                                       std::string_view op) {
  innermost_capture()->launch_ring(op).shield(ranges);
}

CUGRAPHS_INLINE void record_collective(cudaStream_t stream, std::string line,
                                       std::span<const std::pair<std::uintptr_t, std::size_t>> buffers) {
  CaptureSession* s = innermost_capture();
  if (s == nullptr || !is_capturing(stream)) return;
  s->collectives.push_back(std::move(line));
  s->collective_buffers.insert(s->collective_buffers.end(), buffers.begin(), buffers.end());
}

}  // namespace cugraphs::detail
