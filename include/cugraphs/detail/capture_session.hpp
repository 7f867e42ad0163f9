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
inline cudaGraphNode_t add_node_to_capture(cudaStream_t s, const CaptureInfo& info, cudaGraphNodeParams& params,
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
  return node;
}
#endif

// An event of this thread on `device` for forking the escape guard into a capture and
// joining it back (recorded and waited on at once, so one event serves every capture).
[[nodiscard]] inline cudaEvent_t guard_event(int device) {
  struct Events {
    std::vector<cudaEvent_t> events;
    ~Events() {
      for (cudaEvent_t e : events)
        if (e != nullptr) report_in_destructor(cudaEventDestroy(e), "cudaEventDestroy (escape guard)");
    }
  };
  thread_local Events cache;
  const auto index = static_cast<std::size_t>(device);
  if (cache.events.size() <= index) cache.events.resize(index + 1, nullptr);
  if (cache.events[index] == nullptr)
    check(cudaEventCreateWithFlags(&cache.events[index], cudaEventDisableTiming), "capture: cudaEventCreateWithFlags");
  return cache.events[index];
}

// Where the driver's log stood when a capture began, so that a failure can quote what the
// driver logged since (CUDA 12.9+: cudaLogsCurrent / cudaLogsDumpToMemory).
struct DriverLog {
#if CUGRAPHS_CTK_AT_LEAST(12, 9)
  cudaLogIterator start{};
  bool valid = false;
  void mark() noexcept {
    valid = cudaLogsCurrent(&start, 0) == cudaSuccess;
    if (!valid) (void)cudaGetLastError();  // an older driver: no log to quote
  }
  // What the driver logged since mark(), as " The driver said: ..." or nothing.
  [[nodiscard]] std::string since() {
    if (!valid) return {};
    char text[4096] = {};
    std::size_t size = sizeof(text) - 1;
    if (cudaLogsDumpToMemory(&start, text, &size, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return {};
    }
    // Lines read "[time][thread][CUDA][E] text": keep the texts, joined by "; ".
    const std::string_view all(text, std::min(size, sizeof(text) - 1));
    std::string said;
    for (std::size_t at = 0; at < all.size();) {
      std::size_t end = all.find('\n', at);
      if (end == std::string_view::npos) end = all.size();
      std::string_view line = all.substr(at, end - at);
      at = end + 1;
      while (line.size() > 1 && line.front() == '[') {
        const std::size_t close = line.find(']');
        if (close == std::string_view::npos) break;
        line.remove_prefix(close + 1);
      }
      while (!line.empty() && (line.front() == ' ' || line.back() == '\0' || line.back() == ' ' || line.back() == '\r')) {
        if (line.front() == ' ') line.remove_prefix(1);
        else line.remove_suffix(1);
      }
      if (line.empty()) continue;
      if (!said.empty()) said += "; ";
      said += line;
    }
    return said.empty() ? std::string{} : format(" The driver said: \"{}\".", said);
  }
#else
  void mark() noexcept {}
  [[nodiscard]] std::string since() { return {}; }
#endif
};

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
  std::vector<std::shared_ptr<void>> keep_alive;  // resources captured work uses; the Graph keeps them
  cudaStream_t guard = nullptr;                // the escape guard forked into the capture, if any
  DriverLog log;                               // the driver's log position at capture_begin

  // The graph's per-launch ring, made on first use.
  [[nodiscard]] LaunchRing& launch_ring(std::string_view op) {
    if (!ring) ring = std::make_unique<LaunchRing>(op);
    return *ring;
  }

  // Forks a blocking stream of this thread into the capture (an empty branch, joined back by
  // join_guard): while it captures, CUDA refuses work issued to the legacy default stream
  // (cudaErrorStreamCaptureImplicit), which would otherwise run once, eagerly, at capture
  // time and be missing from every replay. Call once the session is open.
  void fork_guard(std::string_view op) {
    std::size_t depth = 0;  // captures open on this thread before this one
    while (depth < tls_captures.size() && tls_captures[depth] != this) ++depth;
    const cudaStream_t g = thread_stream(ThreadStream::EscapeGuard, device, depth);
    const cudaEvent_t e = guard_event(device);
    check(cudaEventRecord(e, stream), "{}: forking the escape guard (cudaEventRecord)", op);
    check(cudaStreamWaitEvent(g, e, 0), "{}: forking the escape guard (cudaStreamWaitEvent)", op);
    guard = g;
    guard_event_ = e;
  }

  // Joins the escape guard back into the capture stream (it added no node). Returns the
  // first failure (an invalidated capture fails here; cudaStreamEndCapture says why).
  [[nodiscard]] cudaError_t join_guard() noexcept {
    if (guard == nullptr) return cudaSuccess;
    const cudaEvent_t e = guard_event_;
    cudaError_t r = cudaEventRecord(e, guard);
    if (r == cudaSuccess) r = cudaStreamWaitEvent(stream, e, 0);
    guard = nullptr;
    return r;
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
    set_current_stream(s);
  }
  void pop_current() noexcept {
    if (saved_.empty()) return;
    set_current_stream(saved_.back());
    saved_.pop_back();
  }
  void restore_current_streams() noexcept {
    if (!saved_.empty()) set_current_stream(saved_.front());
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
    frame.stream = thread_stream(ThreadStream::Body, device, depth);
    frame.refresh = kind == ConditionalKind::While ? source.flag : nullptr;
    const std::uint64_t frame_id = frame.id;
    or_abort([&] {
      auto info = capture_info(parent, op);
      if (info.status != cudaStreamCaptureStatusActive) throw_cuda(cudaErrorStreamCaptureInvalidated, op, mode_name);
      if (source.type == ConditionSource::Type::Handle) {
        if (source.graph != info.graph)
          throw_misuse(op, "the Condition was made for another graph than the one this scope adds its node to "
                           "(another capture, or another nesting level: a conditional body is a graph of its "
                           "own); make it with make_condition() in the same capture, at the same level as the scope");
        frame.handle = source.handle;
      } else {
        check(cudaGraphConditionalHandleCreate(&frame.handle, info.graph, source.initial,
                                               source.from_flag() ? 0u : unsigned{cudaGraphCondAssignDefault}),
              "{}: cudaGraphConditionalHandleCreate", op);
      }
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
      frame.node = add_node_to_capture(parent, info, params, op);
      frame.bodies = params.conditional.phGraph_out;
      conditionals.push_back(std::move(frame));
      if (kind != ConditionalKind::Switch) begin_body(conditionals.back(), 0, op);
    });
    return frame_id;
  }

  // A conditional handle of the graph being captured where the capture stands now (the
  // innermost open body, else the top-level graph), reset to `initial` at every launch.
  [[nodiscard]] ConditionSource make_condition(unsigned initial, std::string_view op) {
    if (!conditionals.empty() && conditionals.back().active < 0)
      throw_misuse(op, "the enclosing Switch scope has no open case; call case_(i) first");
    const auto info = capture_info(now(), op);
    if (info.status != cudaStreamCaptureStatusActive) throw_cuda(cudaErrorStreamCaptureInvalidated, op, mode_name);
    cudaGraphConditionalHandle h{};
    check(cudaGraphConditionalHandleCreate(&h, info.graph, initial, cudaGraphCondAssignDefault),
          "{}: cudaGraphConditionalHandleCreate", op);
    return ConditionSource::made_handle(h, info.graph);
  }

  // Ends the active body of frame `frame_id` (which must be innermost) and captures body `index`.
  void switch_body(std::uint64_t frame_id, unsigned index, std::string_view op) {
    auto& f = innermost_open(frame_id, op);
    if (index >= f.body_count) throw_misuse(op, "body {} is out of range: this node has {}", index, f.body_count);
    if (f.captured[index]) throw_misuse(op, "body {} was already captured", index);
    or_abort([&] {
      if (f.active >= 0) end_body(f, op);
      check_parent_untouched(f, op);
      begin_body(f, index, op);
    });
  }

  // Closes frame `frame_id`, which must be the innermost open one.
  void close_conditional(std::uint64_t frame_id, std::string_view op) {
    auto& f = innermost_open(frame_id, op);
    or_abort([&] {
      if (f.active >= 0) end_body(f, op);
      check_parent_untouched(f, op);
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

  // Refuses work captured on the enclosing stream (the one that was current when the scope
  // opened) while a body was open: it would run after the conditional node, outside the
  // body, on every replay. The node must still be the enclosing stream's only dependency.
  void check_parent_untouched(const ConditionalFrame& f, std::string_view op) {
    const auto info = capture_info(f.parent, op);
    if (info.status != cudaStreamCaptureStatusActive) return;  // capture_end reports the invalidation
    if (info.count == 1 && info.deps[0] == f.node) return;
    const bool top = f.parent == stream;
    throw_misuse(op, "work was launched on the enclosing stream ({}: {}) while the conditional body was open; it "
                     "would run after the conditional node, outside the body, on every replay (and the body with a "
                     "stale condition). Inside a conditional scope launch on current_stream() or the scope's "
                     "stream() ({}), which capture the body; the capture was aborted",
                 top ? "the capture stream" : "the stream of the enclosing conditional body",
                 static_cast<const void*>(f.parent), static_cast<const void*>(f.stream));
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
  cudaEvent_t guard_event_ = nullptr;  // the event fork_guard recorded, for join_guard
  std::vector<cudaStream_t> saved_;  // current streams before each push, oldest first
};

// Keeps `resource` alive as long as the graph of the innermost capture open on this thread,
// and its executable, live: for memory captured work uses that cugraphs does not own (a
// cuBLAS workspace), so that it cannot be freed under a later replay. Returns false outside
// a capture (or when out of host memory).
inline bool keep_alive_with_capture(std::shared_ptr<void> resource) noexcept {
  CaptureSession* s = innermost_capture();
  if (s == nullptr) return false;
  CUGRAPHS_TRY {
    for (const auto& r : s->keep_alive)
      if (r == resource) return true;
    s->keep_alive.push_back(std::move(resource));
  } CUGRAPHS_CATCH_ALL {
    return false;
  }
  return true;
}

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
