// One open capture: its stream, pool, mode and per-launch ring, the conditional nodes
// being captured inside it, and the one stack of current streams the capture has set on its
// thread. Graph owns a session while it captures; CaptureScope and ConditionalScope find it
// through this thread's list of open sessions (so they follow their Graph when it moves),
// and allocations made on the thread draw from the innermost session's pool. Also: the
// frees of stream-ordered memory that must wait until their stream stops capturing.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/detail/pool.hpp>
#include <cugraphs/detail/launch_ring.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cugraphs {
class Graph;
}  // namespace cugraphs

namespace cugraphs::detail {

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
// before the node (a bool for If/While/IfElse, an unsigned index for Switch), or kernels
// inside the graph (Condition::set), starting from `initial`.
struct ConditionSource {
  enum class Type : unsigned char { SetByKernels, Bool, Index };
  Type type = Type::SetByKernels;
  const void* flag = nullptr;
  unsigned initial = 0;

  [[nodiscard]] static ConditionSource device_flag(const bool* f) noexcept { return {Type::Bool, f, 0}; }
  [[nodiscard]] static ConditionSource device_index(const unsigned* i) noexcept { return {Type::Index, i, 0}; }
  [[nodiscard]] static ConditionSource set_by_kernels(unsigned initial) noexcept {
    return {Type::SetByKernels, nullptr, initial};
  }
  [[nodiscard]] bool from_flag() const noexcept { return type != Type::SetByKernels; }
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
  const void* refresh = nullptr;        // While: flag re-read at the end of each iteration
};

[[nodiscard]] inline std::uint64_t next_capture_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

// What a capturing stream will attach its next node to.
struct CaptureInfo {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  std::size_t count = 0;
};

[[nodiscard]] inline CaptureInfo capture_info(cudaStream_t s, std::string_view op) {
  CaptureInfo i;
#if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  check(cudaStreamGetCaptureInfo(s, &i.status, nullptr, &i.graph, &i.deps, &i.edges, &i.count),
        "{}: cudaStreamGetCaptureInfo", op);
#else
  check(cudaStreamGetCaptureInfo_v3(s, &i.status, nullptr, &i.graph, &i.deps, &i.edges, &i.count),
        "{}: cudaStreamGetCaptureInfo", op);
#endif
  return i;
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Adds a node after the stream's current dependencies and makes it the only one.
inline void add_node_to_capture(cudaStream_t s, const CaptureInfo& info, cudaGraphNodeParams& params,
                                std::string_view op) {
  cudaGraphNode_t node = nullptr;
#  if CUGRAPHS_CAPTURE_INFO_HAS_EDGES
  check(cudaGraphAddNode(&node, info.graph, info.deps, info.edges, info.count, &params), "{}: cudaGraphAddNode", op);
  check(cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies),
        "{}: cudaStreamUpdateCaptureDependencies", op);
#  else
  check(cudaGraphAddNode_v2(&node, info.graph, info.deps, info.edges, info.count, &params), "{}: cudaGraphAddNode", op);
  check(cudaStreamUpdateCaptureDependencies_v2(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies),
        "{}: cudaStreamUpdateCaptureDependencies", op);
#  endif
}
#endif

// The stream that captures conditional bodies at nesting depth `depth` on `device`; one per
// thread, since the enclosing levels keep capturing on their own streams meanwhile.
[[nodiscard]] inline cudaStream_t body_stream(int device, std::size_t depth) {
  thread_local std::vector<std::vector<std::unique_ptr<Stream>>> streams;
  const auto index = static_cast<std::size_t>(device);
  if (streams.size() <= index) streams.resize(index + 1);
  auto& level = streams[index];
  if (level.size() <= depth) level.resize(depth + 1);
  if (!level[depth]) level[depth] = std::make_unique<Stream>(device);
  return level[depth]->get();
}

class CaptureSession;

// The sessions open on this thread, innermost last.
inline thread_local std::vector<CaptureSession*> tls_captures;

[[nodiscard]] inline CaptureSession* innermost_capture() noexcept {
  return tls_captures.empty() ? nullptr : tls_captures.back();
}

class CaptureSession {
public:
  // Aborts the owner's capture (which destroys this session).
  using AbortFn = void (*)(Graph&) noexcept;

  CaptureSession(std::shared_ptr<Pool> p, cudaStream_t s, cudaStreamCaptureMode m, std::string_view mode_name_,
                 int device_, bool instantiate_, Graph* owner_, AbortFn abort_owner)
      : pool(std::move(p)), id(next_capture_id()), stream(s), mode(m), mode_name(mode_name_), device(device_),
        instantiate(instantiate_), owner(owner_), abort_owner_(abort_owner) {}
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  std::shared_ptr<Pool> pool;
  const std::uint64_t id;
  const cudaStream_t stream;  // the stream the capture began on
  const cudaStreamCaptureMode mode;
  const std::string_view mode_name;  // for error hints
  const int device;
  const bool instantiate;       // capture_end instantiates (CaptureOptions::instantiate)
  Graph* owner;                 // the Graph holding this session; kept current when it moves
  std::unique_ptr<LaunchRing> ring;  // once the graph draws random numbers or stages inputs
  std::vector<ConditionalFrame> conditionals;  // open conditional nodes, innermost last
  std::vector<std::string> collectives;        // collectives captured, in order (cugraphs/nccl.hpp)

  // The graph's per-launch ring, made on first use.
  [[nodiscard]] LaunchRing& launch_ring(std::string_view op) {
    if (!ring) ring = std::make_unique<LaunchRing>(op);
    return *ring;
  }

  // Registers the session as this thread's innermost; close() undoes it.
  void open() { tls_captures.push_back(this); }
  // Leaves this thread's list and restores the current stream it found.
  void close() noexcept {
    restore_current_streams();
    std::erase(tls_captures, this);
  }
  [[nodiscard]] bool on_this_thread() const noexcept {
    return std::find(tls_captures.begin(), tls_captures.end(), this) != tls_captures.end();
  }
  // The session of capture `id` open on this thread, or null. Only live sessions are looked
  // at, so a scope whose capture ended (or moved to another Graph) finds it or learns it ended.
  [[nodiscard]] static CaptureSession* find(std::uint64_t capture_id) noexcept {
    for (CaptureSession* s : tls_captures)
      if (s->id == capture_id) return s;
    return nullptr;
  }

  // -- The one stack of current streams: a CaptureScope pushes the capture stream, each
  // conditional body its body stream; popping restores what the push found.
  void push_current(cudaStream_t s) {
    saved_.push_back(tls_current_stream);
    tls_current_stream = s;
  }
  void pop_current() noexcept {
    if (saved_.empty()) return;
    tls_current_stream = saved_.back();
    saved_.pop_back();
  }
  void restore_current_streams() noexcept {
    if (!saved_.empty()) tls_current_stream = saved_.front();
    saved_.clear();
  }

  // The stream capturing now: the innermost open conditional body, else the capture stream.
  [[nodiscard]] cudaStream_t now() const noexcept {
    if (conditionals.empty()) return stream;
    return conditionals.back().active < 0 ? conditionals.back().parent : conditionals.back().stream;
  }

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // Adds a conditional node where the capture stands and begins capturing its first body
  // (Switch: none until switch_body). Returns the new frame's id. On a failure after the
  // node was started the caller must abort the capture: a half-built node cannot be finished.
  std::uint64_t open_conditional(ConditionalKind kind, ConditionSource source, unsigned bodies,
                                 std::string_view op) {
    if (!conditionals.empty() && conditionals.back().active < 0)
      throw_misuse(op, "the enclosing Switch scope has no open case; call case_(i) first");
    if (bodies == 0) throw_misuse(op, "a Switch needs at least one case");
    if (innermost_capture() != this)
      throw_misuse(op, "this graph's capture is not the innermost capture open on this thread "
                       "(another capture began after it, or it belongs to another thread); open "
                       "conditional scopes in the innermost capture, on the thread that began it");
    if (source.from_flag()) {
      if (source.flag == nullptr) throw_misuse(op, "the flag pointer is null");
      if (reinterpret_cast<std::uintptr_t>(source.flag) % source.flag_bytes() != 0)
        throw_misuse(op, "the flag pointer ({}) is not aligned to {} bytes; a kernel reading it would fault",
                     source.flag, source.flag_bytes());
      check_flag_readable(source.flag, op);
    }
    const cudaStream_t parent = now();
    ConditionalFrame frame;
    frame.id = next_capture_id();
    frame.kind = kind;
    frame.set_by_kernels = !source.from_flag();
    frame.body_count = bodies;
    frame.captured.assign(bodies, false);
    frame.parent = parent;
    // Every conditional body open on this thread, in any capture, needs its own stream.
    std::size_t depth = 0;
    for (const auto* c : tls_captures) depth += c->conditionals.size();
    frame.stream = body_stream(device, depth);
    frame.refresh = kind == ConditionalKind::While ? source.flag : nullptr;
    const std::uint64_t frame_id = frame.id;
    or_abort([&] {
      auto info = capture_info(parent, op);
      if (info.status != cudaStreamCaptureStatusActive) throw_cuda(cudaErrorStreamCaptureInvalidated, op, mode_name);
      check(cudaGraphConditionalHandleCreate(&frame.handle, info.graph, source.initial,
                                             source.from_flag() ? 0u : unsigned{cudaGraphCondAssignDefault}),
            "{}: cudaGraphConditionalHandleCreate", op);
      if (source.from_flag()) {
        launch_set_condition(frame.handle, source.flag, source.flag_bytes(), parent, op);
        info = capture_info(parent, op);
      }
      cudaGraphNodeParams params{};
      params.type = cudaGraphNodeTypeConditional;
      params.conditional.handle = frame.handle;
      params.conditional.type = kind == ConditionalKind::While    ? cudaGraphCondTypeWhile
                                : kind == ConditionalKind::Switch ? cudaGraphCondTypeSwitch
                                                                  : cudaGraphCondTypeIf;
      params.conditional.size = bodies;
      add_node_to_capture(parent, info, params, op);
      frame.bodies = params.conditional.phGraph_out;
      conditionals.push_back(std::move(frame));
      if (kind != ConditionalKind::Switch) begin_body(conditionals.back(), 0, op);
    });
    return frame_id;
  }

  // Ends the active body of frame `frame_id` (which must be innermost) and captures body `index`.
  void switch_body(std::uint64_t frame_id, unsigned index, std::string_view op) {
    auto& f = innermost_open(frame_id, op);
    if (index >= f.body_count) throw_misuse(op, "body {} is out of range: this node has {}", index, f.body_count);
    if (f.captured[index]) throw_misuse(op, "body {} was already captured", index);
    or_abort([&] {
      if (f.active >= 0) end_body(f, op);
      begin_body(f, index, op);
    });
  }

  // Closes frame `frame_id`, which must be the innermost open one.
  void close_conditional(std::uint64_t frame_id, std::string_view op) {
    auto& f = innermost_open(frame_id, op);
    or_abort([&] {
      if (f.active >= 0) end_body(f, op);
    });
    conditionals.pop_back();
  }

  // The While node of frame `frame_id` re-reads its condition from `*pred` at the end of
  // every iteration.
  void set_refresh(std::uint64_t frame_id, const bool* pred, std::string_view op) {
    if (pred == nullptr) throw_misuse(op, "the flag pointer is null");
    auto& f = frame(frame_id, op);
    if (f.kind != ConditionalKind::While)
      throw_misuse(op, "the conditional node is {}, which does not re-read its condition; only a While node does",
                   name(f.kind));
    check_flag_readable(pred, op);
    f.refresh = pred;
  }

  [[nodiscard]] bool is_open(std::uint64_t frame_id) const noexcept {
    return std::any_of(conditionals.begin(), conditionals.end(), [&](const auto& f) { return f.id == frame_id; });
  }

  [[nodiscard]] ConditionalFrame& frame(std::uint64_t frame_id, std::string_view op) {
    for (auto& f : conditionals)
      if (f.id == frame_id) return f;
    throw_misuse(op, "this conditional scope is closed (or its capture was aborted)");
  }

  [[nodiscard]] ConditionalFrame& innermost(std::string_view op) {
    if (conditionals.empty()) throw_misuse(op, "no conditional scope is open in this capture");
    return conditionals.back();
  }
#endif

  // Ends every open body capture (their graphs belong to their nodes) and forgets the frames:
  // the first step of aborting the capture.
  void abandon_conditionals() noexcept {
    for (auto it = conditionals.rbegin(); it != conditionals.rend(); ++it) {
      if (it->active < 0) continue;
      cudaGraph_t body = nullptr;
      (void)cudaStreamEndCapture(it->stream, &body);
    }
    conditionals.clear();
  }

private:
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  ConditionalFrame& innermost_open(std::uint64_t frame_id, std::string_view op) {
    if (!is_open(frame_id)) throw_misuse(op, "this conditional scope has already ended (or its capture was aborted)");
    auto& f = conditionals.back();
    if (f.id != frame_id)
      throw_misuse(op, "conditional scopes must be closed innermost first: another scope was opened inside "
                       "this one and is still open");
    return f;
  }

  // Refuses a flag kernels cannot read (host memory), accepting memory that this capture
  // allocated with cudaMallocAsync: its graph, or a body of an open conditional node,
  // holds the allocation node.
  void check_flag_readable(const void* flag, std::string_view op) {
    check_device_readable(flag, device, op, "the flag pointer", [&] {
      // An invalidated capture has no graph to walk, and whether the flag is memory it
      // allocated cannot be told: the invalidation is the error to report.
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      check(cudaStreamIsCapturing(stream, &status), "{}: cudaStreamIsCapturing", op);
      if (status != cudaStreamCaptureStatusActive) throw_cuda(cudaErrorStreamCaptureInvalidated, op, mode_name);
      if (graph_allocates(capture_info(stream, op).graph, flag, op)) return true;
      for (const auto& f : conditionals)
        for (unsigned b = 0; b < f.body_count; ++b)
          if (f.bodies != nullptr && graph_allocates(f.bodies[b], flag, op)) return true;
      return false;
    });
  }

  void begin_body(ConditionalFrame& f, unsigned index, std::string_view op) {
    check(cudaStreamBeginCaptureToGraph(f.stream, f.bodies[index], nullptr, nullptr, 0, mode),
          "{}: cudaStreamBeginCaptureToGraph (body {})", op, index);
    f.active = static_cast<int>(index);
    f.captured[index] = true;
    push_current(f.stream);
  }

  void end_body(ConditionalFrame& f, std::string_view op) {
    if (f.refresh != nullptr) launch_set_condition(f.handle, f.refresh, 1, f.stream, op);
    cudaGraph_t body = nullptr;
    const cudaError_t e = cudaStreamEndCapture(f.stream, &body);
    f.active = -1;
    pop_current();
    if (e != cudaSuccess) throw_cuda(e, format("{} (ending the capture of a conditional body)", op), mode_name);
  }
#endif

  // Runs `fn`, a step that leaves a half-built conditional node if it fails; on failure the
  // whole capture is aborted (this session with it) and the error propagates.
  template <class Fn>
  void or_abort(Fn&& fn) {
    CUGRAPHS_TRY {
      fn();
    } CUGRAPHS_CATCH_ALL {
      abort_owner_(*owner);  // destroys *this: nothing of it is touched afterwards
      CUGRAPHS_RETHROW;
    }
  }

  AbortFn abort_owner_;
  std::vector<cudaStream_t> saved_;  // current streams before each push, oldest first
};

// Frees of stream-ordered allocations whose stream was capturing at the time: issuing
// cudaFreeAsync then would put the free into the graph. They run once the stream's
// capture has ended.
class DeferredFrees {
public:
  static DeferredFrees& instance() {
    static DeferredFrees* d = new DeferredFrees;  // outlives every static user at exit
    return *d;
  }

  void add(void* p, cudaStream_t stream) {
    std::lock_guard lock(m_);
    pending_.push_back({p, stream});
  }

  // Frees every pending pointer whose stream is no longer capturing.
  void drain() noexcept {
    std::lock_guard lock(m_);
    std::erase_if(pending_, [](const Entry& e) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(e.stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone)
        return false;
      report_in_destructor(cudaFreeAsync(e.ptr, e.stream), "cudaFreeAsync (deferred past a capture)");
      return true;
    });
  }

private:
  struct Entry {
    void* ptr;
    cudaStream_t stream;
  };
  std::mutex m_;
  std::vector<Entry> pending_;
};

}  // namespace cugraphs::detail
