// The conditional nodes being captured inside one capture: where each node's condition
// comes from, the open nodes (frames) innermost last, the stream capturing each body, and
// the checks that keep work inside the body it was meant for.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cugraphs::detail {

// Ids of captures and of conditional frames: unique in the process, never 0.
[[nodiscard]] std::uint64_t next_capture_id() noexcept;

enum class ConditionalKind { If, While, IfElse, Switch };

[[nodiscard]] constexpr std::string_view name(ConditionalKind k) noexcept {
  switch (k) {
    case ConditionalKind::If: return "If";
    case ConditionalKind::While: return "While";
    case ConditionalKind::IfElse: return "IfElse";
    default: return "Switch";
  }
}

// Where a conditional node's condition comes from on every launch: a device flag read just
// before the node (a bool for If/While/IfElse, an unsigned index for Switch), kernels inside
// the graph (Condition::set) starting from `initial`, or a handle made earlier in the same
// graph (CaptureScope::make_condition), which kernels set before or inside the node.
struct ConditionSource {
  enum class Type : unsigned char { SetByKernels, Bool, Index, Handle };
  Type type = Type::SetByKernels;
  const void* flag = nullptr;
  unsigned initial = 0;
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  cudaGraphConditionalHandle handle{};  // Type::Handle: made in `graph`
#endif
  cudaGraph_t graph = nullptr;

  [[nodiscard]] static ConditionSource device_flag(const bool* f) noexcept { return {Type::Bool, f, 0}; }
  [[nodiscard]] static ConditionSource device_index(const unsigned* i) noexcept { return {Type::Index, i, 0}; }
  [[nodiscard]] static ConditionSource set_by_kernels(unsigned initial) noexcept {
    return {Type::SetByKernels, nullptr, initial};
  }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  [[nodiscard]] static ConditionSource made_handle(cudaGraphConditionalHandle h, cudaGraph_t g) noexcept {
    ConditionSource c{Type::Handle, nullptr, 0};
    c.handle = h;
    c.graph = g;
    return c;
  }
#endif
  [[nodiscard]] bool from_flag() const noexcept { return type == Type::Bool || type == Type::Index; }
  // The flag's size, which is also the alignment a kernel reading it needs.
  [[nodiscard]] unsigned flag_bytes() const noexcept { return type == Type::Index ? 4u : 1u; }
};

// One open conditional node of a capture: the body being captured and how it ends.
struct ConditionalFrame {
  std::uint64_t id = 0;  // identifies the scope that opened it
  ConditionalKind kind = ConditionalKind::If;
  bool set_by_kernels = false;          // no flag: kernels set the condition
  cudaGraphConditionalHandle handle{};  // the node's condition
  cudaGraph_t* bodies = nullptr;        // owned by the node
  unsigned body_count = 0;
  int active = -1;                      // index of the body being captured, -1 for none
  std::vector<bool> captured;           // which bodies have been captured
  cudaStream_t parent = nullptr;        // the stream capturing the graph that holds the node
  cudaStream_t stream = nullptr;        // the stream capturing the active body
  cudaGraphNode_t node = nullptr;       // the conditional node: the parent's only dependency while open
  const void* refresh = nullptr;        // While: flag re-read at the end of each iteration
};

// The open conditional nodes of one capture, innermost last. A step that fails after a node
// was started leaves it half built (broken()): its capture must then be aborted, which
// abandon() begins.
class ConditionalFrames {
public:
  ConditionalFrames(cudaStream_t top, int device, cudaStreamCaptureMode mode, std::string_view mode_name,
                    CurrentStreamStack& streams) noexcept
      : top_(top), device_(device), mode_(mode), mode_name_(mode_name), streams_(streams) {}

  [[nodiscard]] const std::vector<ConditionalFrame>& open_frames() const noexcept { return frames_; }
  // Every conditional node this capture made, open or closed, with its bodies.
  [[nodiscard]] std::vector<ConditionalMade>& made() noexcept { return made_; }
  [[nodiscard]] bool broken() const noexcept { return broken_; }
  void mend() noexcept { broken_ = false; }

  // The stream capturing now: the innermost open body, else the capture's own stream.
  [[nodiscard]] cudaStream_t now() const noexcept;

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // Adds a conditional node where the capture stands and begins capturing its first body
  // (Switch: none until switch_body); its body stream is this thread's at nesting `depth`.
  // `innermost`: the capture is the innermost open on this thread. Returns the new frame's id.
  std::uint64_t open(ConditionalKind kind, ConditionSource source, unsigned bodies, std::size_t depth,
                     bool innermost, std::string_view op) {
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
    }
    ConditionalFrame f;
    f.id = next_capture_id();
    f.kind = kind;
    f.set_by_kernels = !source.from_flag();
    f.body_count = bodies;
    f.captured.assign(bodies, false);
    f.parent = now();
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
      made_.push_back({f.node, std::vector<cudaGraph_t>(f.bodies, f.bodies + bodies)});
      frames_.push_back(std::move(f));
      if (kind != ConditionalKind::Switch) begin_body(frames_.back(), 0, op);
    });
    return frames_.back().id;
  }

  // A conditional handle of the graph being captured where the capture stands now (the
  // innermost open body, else the top-level graph), reset to `initial` at every launch.
  [[nodiscard]] ConditionSource make_condition(unsigned initial, std::string_view op) {
    require_open_case(op);
    const auto info = live_capture(now(), op);
    cudaGraphConditionalHandle h{};
    check(cudaGraphConditionalHandleCreate(&h, info.graph, initial, cudaGraphCondAssignDefault),
          "{}: cudaGraphConditionalHandleCreate", op);
    return ConditionSource::made_handle(h, info.graph);
  }

  // Ends the active body of frame `id` (which must be innermost) and captures body `index`.
  void switch_body(std::uint64_t id, unsigned index, std::string_view op) {
    auto& f = innermost_open(id, op);
    if (index >= f.body_count) throw_misuse(op, "body {} is out of range: this node has {}", index, f.body_count);
    if (f.captured[index]) throw_misuse(op, "body {} was already captured", index);
    building([&, this] {
      if (f.active >= 0) end_body(f, op);
      check_parent_untouched(f, op);
      begin_body(f, index, op);
    });
  }

  // Closes frame `id`, which must be the innermost open one.
  void close(std::uint64_t id, std::string_view op) {
    auto& f = innermost_open(id, op);
    building([&, this] {
      if (f.active >= 0) end_body(f, op);
      check_parent_untouched(f, op);
    });
    frames_.pop_back();
  }

  // The While node of frame `id` re-reads its condition from `*pred` at the end of every
  // iteration.
  void set_refresh(std::uint64_t id, const bool* pred, std::string_view op) {
    if (pred == nullptr) throw_misuse(op, "the flag pointer is null");
    auto& f = frame(id, op);
    if (f.kind != ConditionalKind::While)
      throw_misuse(op, "the conditional node is {}, which does not re-read its condition; only a While node does",
                   name(f.kind));
    check_flag_readable(pred, op);
    f.refresh = pred;
  }

  [[nodiscard]] bool is_open(std::uint64_t id) const noexcept {
    return std::any_of(frames_.begin(), frames_.end(), [&](const auto& f) { return f.id == id; });
  }

  [[nodiscard]] ConditionalFrame& frame(std::uint64_t id, std::string_view op) {
    for (auto& f : frames_)
      if (f.id == id) return f;
    throw_misuse(op, "this conditional scope is closed (or its capture was aborted)");
  }

  [[nodiscard]] ConditionalFrame& innermost(std::string_view op) {
    if (frames_.empty()) throw_misuse(op, "no conditional scope is open in this capture");
    return frames_.back();
  }
#endif

  // Ends every open body capture (their graphs belong to their nodes) and forgets the frames:
  // the first step of aborting the capture.
  void abandon() noexcept;

private:
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  template <class Fn>
  void building(Fn&& fn) {
    CUGRAPHS_TRY {
      fn();
    } CUGRAPHS_CATCH_ALL {
      broken_ = true;
      CUGRAPHS_RETHROW;
    }
  }

  void require_open_case(std::string_view op) const {
    if (!frames_.empty() && frames_.back().active < 0)
      throw_misuse(op, "the enclosing Switch scope has no open case; call case_(i) first");
  }

  [[nodiscard]] CaptureInfo live_capture(cudaStream_t s, std::string_view op) const {
    auto info = capture_info(s, op);
    if (info.status != cudaStreamCaptureStatusActive) throw_cuda(cudaErrorStreamCaptureInvalidated, op, mode_name_);
    return info;
  }

  ConditionalFrame& innermost_open(std::uint64_t id, std::string_view op) {
    if (!is_open(id)) throw_misuse(op, "this conditional scope has already ended (or its capture was aborted)");
    auto& f = frames_.back();
    if (f.id != id)
      throw_misuse(op, "conditional scopes must be closed innermost first: another scope was opened inside "
                       "this one and is still open");
    return f;
  }

  // Refuses a flag kernels cannot read (host memory), accepting memory that this capture
  // allocated with cudaMallocAsync: its graph, or a body of an open conditional node,
  // holds the allocation node.
  void check_flag_readable(const void* flag, std::string_view op) {
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

  // Refuses work captured on the enclosing stream (the one that was current when the scope
  // opened) while a body was open: it would run after the conditional node, outside the
  // body, on every replay. The node must still be the enclosing stream's only dependency.
  void check_parent_untouched(const ConditionalFrame& f, std::string_view op) const {
    const auto info = capture_info(f.parent, op);
    if (info.status != cudaStreamCaptureStatusActive) return;  // capture_end reports the invalidation
    if (info.count == 1 && info.deps[0] == f.node) return;
    throw_misuse(op, "work was launched on the enclosing stream ({}: {}) while the conditional body was open; it "
                     "would run after the conditional node, outside the body, on every replay (and the body with a "
                     "stale condition). Inside a conditional scope launch on current_stream() or the scope's "
                     "stream() ({}), which capture the body; the capture was aborted",
                 f.parent == top_ ? "the capture stream" : "the stream of the enclosing conditional body",
                 static_cast<const void*>(f.parent), static_cast<const void*>(f.stream));
  }

  void begin_body(ConditionalFrame& f, unsigned index, std::string_view op) {
    check(cudaStreamBeginCaptureToGraph(f.stream, f.bodies[index], nullptr, nullptr, 0, mode_),
          "{}: cudaStreamBeginCaptureToGraph (body {})", op, index);
    f.active = static_cast<int>(index);
    f.captured[index] = true;
    streams_.push(f.stream);
  }

  void end_body(ConditionalFrame& f, std::string_view op) {
    if (f.refresh != nullptr) launch_set_condition(f.handle, f.refresh, 1, f.stream, op);
    cudaGraph_t body = nullptr;
    const cudaError_t e = cudaStreamEndCapture(f.stream, &body);
    f.active = -1;
    streams_.pop();
    if (e != cudaSuccess) throw_cuda(e, format("{} (ending the capture of a conditional body)", op), mode_name_);
  }
#endif

  std::vector<ConditionalFrame> frames_;
  std::vector<ConditionalMade> made_;
  cudaStream_t top_;
  int device_;
  cudaStreamCaptureMode mode_;
  std::string_view mode_name_;  // for error hints
  CurrentStreamStack& streams_;
  bool broken_ = false;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/conditional_frames.ipp>
#endif
