// The bodies of the functions <cugraphs/detail/conditional_frames.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/conditional_frames.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/argument_sites.hpp>  // nodes_writing

namespace cugraphs::detail {

CUGRAPHS_INLINE std::uint64_t next_capture_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

CUGRAPHS_INLINE cudaStream_t ConditionalFrames::now() const noexcept {
  if (frames_.empty()) return top_;
  return frames_.back().active < 0 ? frames_.back().parent : frames_.back().stream;
}

CUGRAPHS_INLINE cudaStream_t ConditionalFrames::working() const noexcept {
  const cudaStream_t at = now();
  const cudaStream_t current = tls_current_stream;
  if (current == at || current == nullptr || current == cudaStreamLegacy || current == cudaStreamPerThread) return at;
  CaptureInfo here, there;
  if (try_capture_info(current, there) != cudaSuccess || try_capture_info(at, here) != cudaSuccess) {
    (void)cudaGetLastError();  // a stream CUDA cannot say: the capture's own
    return at;
  }
  return there.status == cudaStreamCaptureStatusActive && there.graph == here.graph ? current : at;
}

CUGRAPHS_INLINE void ConditionalFrames::abandon() noexcept {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (it->active < 0) continue;
    cudaGraph_t body = nullptr;
    (void)cudaStreamEndCapture(it->stream, &body);
  }
  frames_.clear();
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE ConditionSource ConditionSource::made_handle(cudaGraphConditionalHandle h, cudaGraph_t g) noexcept {
  ConditionSource c{Type::Handle, nullptr, 0};
  c.handle = h;
  c.graph = g;
  return c;
}

CUGRAPHS_INLINE std::uint64_t ConditionalFrames::open(ConditionalKind kind, ConditionSource source, unsigned bodies,
    std::size_t depth, bool innermost, std::string_view op) {
  require_open_case(op);
  if (bodies == 0) throw_misuse(op, "a Switch needs at least one case");
  if (!innermost)
    throw_misuse(op, "this graph's capture is not the innermost capture open on this thread (another capture "
                     "began after it, or it belongs to another thread); open conditional scopes in the innermost "
                     "capture, on the thread that began it");
  if (source.from_flag()) {
    if (source.flag == nullptr) throw_misuse(op, "the flag pointer is null");
    if (reinterpret_cast<std::uintptr_t>(source.flag) % source.flag_bytes() != 0)
      throw_misuse(op, "the flag pointer ({}) is not aligned to {} bytes; a kernel reading it would fault",
                   source.flag, source.flag_bytes());
    check_flag_readable(source.flag, op);
    check_flag_written_before(working(), source.flag, source.flag_bytes(), op);
  }
  // A condition made when its scope opens reaches only kernels inside the bodies, which run
  // after the node has decided, and it is reset to `initial` at every launch: outside a While
  // (whose next iteration sees what a body set) the node would decide `initial` every time.
  if (source.type == ConditionSource::Type::SetByKernels) {
    if (kind != ConditionalKind::While &&
        std::ranges::none_of(frames_, [](const ConditionalFrame& o) { return o.kind == ConditionalKind::While; }))
      throw_misuse(op, "a {} node whose condition is set by kernels (SetByKernels{{{}}}) decides before any kernel "
                       "can set it: the condition is made when the scope opens, so only kernels inside its bodies "
                       "get it, and those run after the node has decided; every replay would take {}. Make the "
                       "condition before the node with CaptureScope::make_condition({}), hand it to the kernel that "
                       "decides (captured before the scope) and open the scope with that Condition, or read a "
                       "device flag",
                   name(kind), source.initial,
                   kind == ConditionalKind::Switch ? format("case {}", source.initial)
                   : source.initial != 0           ? std::string("the then-body")
                                                   : std::string(kind == ConditionalKind::IfElse ? "the else-body"
                                                                                                 : "no body"),
                   source.initial);
    if (kind == ConditionalKind::While && source.initial == 0)
      throw_misuse(op, "a While node whose condition is set by kernels and starts at 0 (SetByKernels{{0}}) never "
                       "runs its body: only kernels inside the body get the condition. For a while loop (which may "
                       "run no iteration: a solve already converged), make the condition before the node with "
                       "CaptureScope::make_condition(), set it from a kernel captured before the scope and open the "
                       "scope with it; SetByKernels{{1}} makes a do-while instead (the body always runs once, then "
                       "as its kernels say)");
  }
  ConditionalFrame f;
  f.id = next_capture_id();
  f.kind = kind;
  f.set_by_kernels = !source.from_flag();
  f.body_count = bodies;
  f.captured.assign(bodies, false);
  // A stream forked into the same graph and current now (a StreamGuard's) holds the work the
  // node must follow, and the work after the scope must follow the node: the node goes on it.
  f.parent = working();
  f.stream = thread_stream(ThreadStream::Body, device_, depth);
  f.refresh = kind == ConditionalKind::While ? source.flag : nullptr;
  building([&, this] {  // from here on a failure aborts the capture (a node may be half built)
    auto info = live_capture(f.parent, op);
    if (source.type == ConditionSource::Type::Handle) {
      if (source.graph != info.graph)
        throw_misuse(op, "the Condition was made for another graph than the one this scope adds its node to "
                         "(another capture, or another nesting level: a conditional body is a graph of its "
                         "own); make it with make_condition() in the same capture, at the same level as the "
                         "scope");
      f.handle = source.handle;
    } else {
      check(cudaGraphConditionalHandleCreate(&f.handle, info.graph, source.initial,
                                             source.from_flag() ? 0u : unsigned{cudaGraphCondAssignDefault}),
            "{}: cudaGraphConditionalHandleCreate", op);
    }
    if (source.from_flag()) {
      launch_set_condition(f.handle, source.flag, source.flag_bytes(), f.parent, op);
      info = capture_info(f.parent, op);
    } else if (source.type == ConditionSource::Type::SetByKernels && kind == ConditionalKind::While &&
               !frames_.empty()) {
      // CUDA gives a handle its default value when the graph is launched, not each time a
      // body reaches the node: inside a body (a solve inside a time-step loop) a While would
      // find the 0 its last run left and not run again. Reset it here. (An If, IfElse or
      // Switch inside a While keeps what its body set for the next iteration, as documented.)
      launch_set_condition(f.handle, reinterpret_cast<const void*>(std::uintptr_t{source.initial}), 0, f.parent, op);
      info = capture_info(f.parent, op);
    }
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = f.handle;
    params.conditional.type = kind == ConditionalKind::While    ? cudaGraphCondTypeWhile
                              : kind == ConditionalKind::Switch ? cudaGraphCondTypeSwitch
                                                                : cudaGraphCondTypeIf;
    params.conditional.size = bodies;
    f.node = add_node_to_capture(f.parent, info, params, op);
    f.bodies = params.conditional.phGraph_out;
    f.parent_graph = info.graph;
    check(cudaGraphGetNodes(info.graph, nullptr, &f.parent_nodes), "{}: cudaGraphGetNodes", op);
    made_.push_back({f.node, std::vector<cudaGraph_t>(f.bodies, f.bodies + bodies)});
    frames_.push_back(std::move(f));
    if (kind != ConditionalKind::Switch) begin_body(frames_.back(), 0, op);
  });
  return frames_.back().id;
}

CUGRAPHS_INLINE ConditionSource ConditionalFrames::make_condition(unsigned initial, std::string_view op) {
  require_open_case(op);
  const auto info = live_capture(now(), op);
  cudaGraphConditionalHandle h{};
  check(cudaGraphConditionalHandleCreate(&h, info.graph, initial, cudaGraphCondAssignDefault),
        "{}: cudaGraphConditionalHandleCreate", op);
  // CUDA gives the handle its default value when the graph is launched, not each time a body
  // runs: made inside a body (a solve inside a time-step loop), a While would find the 0 its
  // last run left and not run again. So it is set here, each time the body reaches this point,
  // on the stream the program works on (before any kernel it hands the condition to).
  if (!frames_.empty())
    launch_set_condition(h, reinterpret_cast<const void*>(std::uintptr_t{initial}), 0, working(), op);
  return ConditionSource::made_handle(h, info.graph);
}

CUGRAPHS_INLINE void ConditionalFrames::switch_body(std::uint64_t id, unsigned index, std::string_view op) {
  auto& f = innermost_open(id, op);
  if (index >= f.body_count) throw_misuse(op, "body {} is out of range: this node has {}", index, f.body_count);
  if (f.captured[index]) throw_misuse(op, "body {} was already captured", index);
  building([&, this] {
    if (f.active >= 0) end_body(f, op);
    check_parent_untouched(f, op);
    begin_body(f, index, op);
  });
}

CUGRAPHS_INLINE void ConditionalFrames::close(std::uint64_t id, std::string_view op) {
  auto& f = innermost_open(id, op);
  building([&, this] {
    if (f.active >= 0) end_body(f, op);
    check_parent_untouched(f, op);
  });
  frames_.pop_back();
}

CUGRAPHS_INLINE void ConditionalFrames::check_flag_written_before(cudaStream_t stream, const void* flag,
                                                                  std::size_t bytes, std::string_view op) {
  CaptureInfo info;
  if (try_capture_info(stream, info) != cudaSuccess || info.status != cudaStreamCaptureStatusActive) {
    (void)cudaGetLastError();  // the scope's own checks say what is wrong with the stream
    return;
  }
  const auto from = reinterpret_cast<std::uintptr_t>(flag);
  const auto writers = nodes_writing(info.graph, from, from + bytes);
  if (writers.empty()) return;
  const auto loose = not_before(info.graph, std::span<const cudaGraphNode_t>(info.deps, info.count), writers);
  if (!loose || loose->empty()) return;
  const auto index = node_index(info.graph, loose->front(), op);
  throw_misuse(op, "the flag ({}) is named by {}{}, which the stream the node reads the flag on ({}) has not waited "
                   "for: that work was captured on another stream forked into the capture and not joined back, so "
                   "the node would read the flag before it runs (or while), silently. Join that stream first "
                   "(cudaEventRecord there, cudaStreamWaitEvent on this one), or open the scope with it current "
                   "(a StreamGuard); the capture goes on",
               flag, describe_node(loose->front()), index ? format(" (node {} of the graph)", *index) : std::string(),
               static_cast<const void*>(stream));
}

CUGRAPHS_INLINE void ConditionalFrames::set_refresh(std::uint64_t id, const bool* pred, std::string_view op) {
  if (pred == nullptr) throw_misuse(op, "the flag pointer is null");
  auto& f = frame(id, op);
  if (f.kind != ConditionalKind::While)
    throw_misuse(op, "the conditional node is {}, which does not re-read its condition; only a While node does",
                 name(f.kind));
  check_flag_readable(pred, op);
  f.refresh = pred;
}

CUGRAPHS_INLINE ConditionalFrame& ConditionalFrames::frame(std::uint64_t id, std::string_view op) {
  for (auto& f : frames_)
    if (f.id == id) return f;
  throw_misuse(op, "this conditional scope is closed (or its capture was aborted)");
}

CUGRAPHS_INLINE ConditionalFrame& ConditionalFrames::innermost(std::string_view op) {
  if (frames_.empty()) throw_misuse(op, "no conditional scope is open in this capture");
  return frames_.back();
}

CUGRAPHS_INLINE void ConditionalFrames::require_open_case(std::string_view op) const {
  if (!frames_.empty() && frames_.back().active < 0)
    throw_misuse(op, "the enclosing Switch scope has no open case; call case_(i) first");
}

CUGRAPHS_INLINE CaptureInfo ConditionalFrames::live_capture(cudaStream_t s, std::string_view op) const {
  auto info = capture_info(s, op);
  if (info.status != cudaStreamCaptureStatusActive) throw_cuda(cudaErrorStreamCaptureInvalidated, op, mode_name_);
  return info;
}

CUGRAPHS_INLINE ConditionalFrame& ConditionalFrames::innermost_open(std::uint64_t id, std::string_view op) {
  if (!is_open(id)) throw_misuse(op, "this conditional scope has already ended (or its capture was aborted)");
  auto& f = frames_.back();
  if (f.id != id)
    throw_misuse(op, "conditional scopes must be closed innermost first: another scope was opened inside "
                     "this one and is still open");
  return f;
}

CUGRAPHS_INLINE void ConditionalFrames::check_flag_readable(const void* flag, std::string_view op) {
  check_device_readable(flag, device_, op, "the flag pointer", [&, this] {
    // An invalidated capture has no graph to walk, and whether the flag is memory it
    // allocated cannot be told: the invalidation is the error to report.
    if (graph_allocates(live_capture(top_, op).graph, flag, op)) return true;
    for (const auto& f : frames_)
      for (unsigned b = 0; b < f.body_count; ++b)
        if (f.bodies != nullptr && graph_allocates(f.bodies[b], flag, op)) return true;
    return false;
  });
}

CUGRAPHS_INLINE void ConditionalFrames::check_parent_untouched(const ConditionalFrame& f, std::string_view op) const {
  const auto info = capture_info(f.parent, op);
  if (info.status != cudaStreamCaptureStatusActive) return;  // capture_end reports the invalidation
  if (info.count != 1 || info.deps[0] != f.node)
    throw_misuse(op, "work was launched on the enclosing stream ({}: {}) while the conditional body was open; it "
                     "would run after the conditional node, outside the body, on every replay (and the body with a "
                     "stale condition). Inside a conditional scope launch on current_stream() or the scope's "
                     "stream() ({}), which capture the body; a library handle bound to the enclosing stream "
                     "(cublasSetStream, cufftSetStream before the scope) must follow it too: cublas::Handle or "
                     "Follow, or a CurrentStreamListener. The capture was aborted",
                 f.parent == top_ ? "the capture stream" : "the stream of the enclosing conditional body",
                 static_cast<const void*>(f.parent), static_cast<const void*>(f.stream));
  // Another stream that captures into the enclosing graph (one forked from it before the scope
  // opened, joined after it ends) adds its work beside the node, not in the body.
  std::size_t nodes = 0;
  check(cudaGraphGetNodes(f.parent_graph, nullptr, &nodes), "{}: cudaGraphGetNodes", op);
  if (nodes != f.parent_nodes)
    throw_misuse(op, "{} node(s) were added to the enclosing graph ({}) while the conditional body was open, "
                     "by a stream other than the body's that captures into that graph (a stream forked from the "
                     "enclosing one before the scope opened; the stream current when the capture began is one, "
                     "joined in by the escape check, so a library handle still bound to it with cublasSetStream "
                     "lands here); they would run beside the conditional node, once a replay, not in the body. "
                     "Inside a conditional scope launch on current_stream() or the scope's stream() ({}), or fork "
                     "the other stream from it inside the scope; let library handles follow the current stream "
                     "(cugraphs::cublas::Follow, CurrentStreamListener); the capture was aborted",
                 nodes - std::min(nodes, f.parent_nodes),
                 f.parent == top_ ? "the capture's top-level graph" : "the enclosing conditional body",
                 static_cast<const void*>(f.stream));
}

CUGRAPHS_INLINE void ConditionalFrames::begin_body(ConditionalFrame& f, unsigned index, std::string_view op) {
  check(cudaStreamBeginCaptureToGraph(f.stream, f.bodies[index], nullptr, nullptr, 0, mode_),
        "{}: cudaStreamBeginCaptureToGraph (body {})", op, index);
  f.active = static_cast<int>(index);
  f.captured[index] = true;
  streams_.push(f.stream);
}

CUGRAPHS_INLINE void ConditionalFrames::end_body(ConditionalFrame& f, std::string_view op) {
  if (f.refresh != nullptr) launch_set_condition(f.handle, f.refresh, 1, f.stream, op);
  cudaGraph_t body = nullptr;
  const cudaError_t e = cudaStreamEndCapture(f.stream, &body);
  f.active = -1;
  streams_.pop();
  if (e != cudaSuccess) throw_cuda(e, format("{} (ending the capture of a conditional body)", op), mode_name_);
}
#endif

}  // namespace cugraphs::detail
