// What the public templates ask of an open capture, through non-template functions: the
// capture session, the executable and the pool are defined only where the compiled part (or,
// header-only, the implementation files) needs them, so a translation unit that includes
// the public headers does not parse their machinery (docs/performance.md, Compile cost).
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/condition_source.hpp>
#include <cugraphs/detail/launchers.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cugraphs::detail {

class CaptureSession;
struct GraphCore;
struct GeneratorState;

// A warm-up (graphed callables, pairs, caches) runs f eagerly to let libraries initialise;
// its draws are taken back at its end, so that the calls after it draw what the eager
// program's calls would. While one runs on a thread, this is its list: each generator drawn
// from (or reseeded) there, once, with its (seed, offset) from before and as this thread's
// last draw left it.
struct DrawnInWarmUp {
  std::shared_ptr<GeneratorState> state;
  std::uint64_t seed;
  std::uint64_t offset;
  std::uint64_t seed_after;
  std::uint64_t offset_after;
  bool moved = false;  // something else moved the generator between the warm-up's draws

  // What this thread's change (a draw or a reseed) left: what a take-back expects to find.
  void left(std::uint64_t seed_now, std::uint64_t offset_now) noexcept {
    seed_after = seed_now;
    offset_after = offset_now;
  }
};
inline thread_local std::vector<DrawnInWarmUp>* tls_warm_up_draws = nullptr;
// Puts each generator of `drawn` back where it was, where nothing else has moved it since
// the warm-up's first draw (another thread's draws, a replay): those stay (rng.ipp).
CUGRAPHS_INLINE void take_back_draws(std::span<const DrawnInWarmUp> drawn) noexcept;

// Why a step runs eagerly with its draws taken back: a warm-up, or verify_replay's eager run
// (whose replay then draws the same numbers). Read while tls_warm_up_draws is set.
enum class EagerRun : unsigned char { WarmUp, Verify };
inline thread_local EagerRun tls_eager_run = EagerRun::WarmUp;

// A kernel node taken with captured_kernel_node() in a capture, as the KernelNode handed out
// holds it (its arguments type-erased, shared with it). The executable keeps those of the
// capture it runs: verify_replay's fresh capture of a step hands the same KernelNodes back,
// so that the handles the step stores stay the graph's.
struct TakenNode {
  cudaGraphNode_t node = nullptr;
  std::uint64_t capture = 0;
  std::size_t index = 0;
  cudaKernelNodeParams launch{};  // function, grid, block, shared memory (no arguments)
  std::shared_ptr<void> args;     // the KernelNode's arguments
};

// While verify_replay captures a step afresh on this thread (the outermost capture): the
// nodes the graph's own capture took, to hand back in the order they were taken.
struct FreshCaptureNodes {
  const std::vector<TakenNode>* graph_nodes = nullptr;
  std::size_t next = 0;
};
inline thread_local FreshCaptureNodes* tls_fresh_capture = nullptr;
// Set by Graph::recapture for the capture it begins: the graph that capture is made for (its
// CaptureSession::workspace_key), so that library resources kept per graph are reused.
inline thread_local std::uint64_t tls_recapture_of = 0;
// The caller's stack pointer (CUGRAPHS_CALLER_STACK) at the outermost of the nested entry
// points beginning or ending a capture on this thread (a CaptureScope's constructor, then
// Graph::capture_begin), while that call runs; 0 outside them.
inline thread_local std::uintptr_t tls_capture_entry_stack = 0;
// Held by each entry point: the outermost one's stack pointer is the one kept.
class CaptureEntry {
public:
  explicit CaptureEntry(std::uintptr_t caller_stack) noexcept
      : set_(tls_capture_entry_stack == 0 && caller_stack != 0) {
    if (set_) tls_capture_entry_stack = caller_stack;
  }
  ~CaptureEntry() {
    if (set_) tls_capture_entry_stack = 0;
  }
  CaptureEntry(const CaptureEntry&) = delete;
  CaptureEntry& operator=(const CaptureEntry&) = delete;
  [[nodiscard]] static std::uintptr_t stack() noexcept { return tls_capture_entry_stack; }

private:
  bool set_;
};
class VerifyAccess;  // verify.hpp: what verify_replay reads of a Graph, and its fresh capture

// Notes `taken`, just taken in capture `capture`, with that capture. In verify_replay's fresh
// capture, returns the node the graph's own capture took in its place (as many nodes before
// it, the same kernel), whose KernelNode captured_kernel_node then hands out; an Error where
// the step took another kernel there, or more nodes (session_api.ipp).
[[nodiscard]] CUGRAPHS_INLINE const TakenNode* note_taken_node(std::uint64_t capture, TakenNode taken,
                                                               std::string_view op);

// While it lives, this thread's draws are noted (tls_warm_up_draws); its end, also by an
// exception, takes them back.
class TakeBackDraws {
public:
  explicit TakeBackDraws(EagerRun why) noexcept
      : outer_(std::exchange(tls_warm_up_draws, &drawn_)), outer_why_(std::exchange(tls_eager_run, why)) {}
  CUGRAPHS_INLINE ~TakeBackDraws();  // rng.ipp, beside take_back_draws
  TakeBackDraws(const TakeBackDraws&) = delete;
  TakeBackDraws& operator=(const TakeBackDraws&) = delete;

private:
  std::vector<DrawnInWarmUp> drawn_;
  std::vector<DrawnInWarmUp>* outer_;
  EagerRun outer_why_;
};

// The last draws this thread made outside any capture since its last good capture ended
// (outermost, with the escape check on): (seed, offset) of each PhiloxArgs handed out; a
// warm-up's, given back, are not noted. A capture whose kernels take one of them would hand
// them the same numbers at every replay, which capture_end refuses where the check is on.
struct EagerDraws {
  static constexpr std::size_t kKept = 16;
  std::array<std::pair<std::uint64_t, std::uint64_t>, kKept> kept{};
  std::size_t made = 0;  // of which the last min(made, kKept) are kept
  void note(std::uint64_t seed, std::uint64_t offset) noexcept { kept[made++ % kKept] = {seed, offset}; }
};
inline thread_local EagerDraws tls_eager_draws;

inline thread_local std::vector<CaptureSession*> tls_captures;  // open on this thread, innermost last

[[nodiscard]] inline CaptureSession* innermost_capture() noexcept {
  return tls_captures.empty() ? nullptr : tls_captures.back();
}

// Deleters of the parts Owned holds, defined beside the parts.
CUGRAPHS_INLINE void destroy(CaptureSession* s) noexcept;
CUGRAPHS_INLINE void destroy(GraphCore* c) noexcept;

// The sole owner of a part whose type stays incomplete here: `destroy(T*)`, found by
// argument-dependent lookup, deletes it where the type is complete.
template <class T>
class Owned {
public:
  Owned() noexcept = default;
  ~Owned() { reset(); }
  Owned(Owned&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  void reset(T* p = nullptr) noexcept {
    if (T* old = std::exchange(p_, p)) destroy(old);
  }
  // Gives up ownership without destroying (a part still in use elsewhere).
  [[nodiscard]] T* release() noexcept { return std::exchange(p_, nullptr); }
  [[nodiscard]] T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }

private:
  T* p_ = nullptr;
};

// ---- conditional scopes (ConditionalScope), on the frames of capture `capture`, open on this thread

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Opens a conditional node where the capture stands (ConditionalFrames::open); the error
// for a capture that is not open names `op`.
[[nodiscard]] CUGRAPHS_INLINE std::uint64_t open_conditional(std::uint64_t capture, ConditionalKind kind,
                                                             ConditionSource source, unsigned bodies,
                                                             std::string_view op);

enum class ConditionalStep : unsigned char { Close, SwitchBody, SetRefresh };

// One step on frame `frame`: close it, switch to body `index`, or (While) re-read `pred`.
CUGRAPHS_INLINE void conditional_step(std::uint64_t capture, std::uint64_t frame, ConditionalStep step,
                                      unsigned index, const bool* pred, std::string_view op);

// What a scope reads of its open frame.
struct FrameView {
  cudaStream_t stream = nullptr;  // capturing the active body
  cudaGraphConditionalHandle handle{};
  bool set_by_kernels = false;
  bool else_captured = false;  // IfElse: the else-body was begun
};
[[nodiscard]] CUGRAPHS_INLINE FrameView conditional_frame(std::uint64_t capture, std::uint64_t frame,
                                                          std::string_view op);

// Whether frame `frame` of capture `capture` is still open on this thread.
[[nodiscard]] CUGRAPHS_INLINE bool conditional_is_open(std::uint64_t capture, std::uint64_t frame) noexcept;
#endif

// Aborts capture `capture` (open on this thread) through the Graph that holds it.
CUGRAPHS_INLINE void abort_capture(std::uint64_t capture) noexcept;

// ---- other steps inside a capture

// The capture open on this thread that `stream` captures for (its own stream, or one forked
// from it, whose capture graph is `graph`), for captured_kernel_node; refuses a stream that
// captures a conditional body, and one of no capture open here.
[[nodiscard]] CUGRAPHS_INLINE std::uint64_t capture_of_stream(cudaStream_t stream, cudaGraph_t graph,
                                                              bool active, std::string_view op);

// The innermost capture holds a device-updatable kernel node: its graph is never updated.
CUGRAPHS_INLINE void mark_updatable_nodes() noexcept;

// What the captured staging copy of a graphed callable reads: whether a launch took a ring
// slot, and the slot's input addresses (LaunchRing::stage).
struct StagingWords {
  const unsigned long long* control;  // [1]: this launch took a slot
  const void* const* sources;
};
// Readies staging onto `statics` (one input address per static input per launch) in the
// innermost capture; `in_place`: InputMode::InPlace; `unread_is_error`: a graph that reaches
// some static input nowhere fails the capture's end (LaunchRing::stage).
[[nodiscard]] CUGRAPHS_INLINE StagingWords stage_in_capture(std::span<const StageTarget> statics, bool in_place,
                                                           bool unread_is_error, std::string_view op);
// Inputs read in place: where (address, bytes) the innermost capture's staging copies an
// input rather than reading it in place (a graphed callable's outputs).
CUGRAPHS_INLINE void shield_in_capture(std::span<const std::pair<std::uintptr_t, std::size_t>> ranges,
                                       std::string_view op);

// A collective captured by the innermost capture (cugraphs/nccl.hpp), when `stream` captures.
// `buffers`: its send and receive buffers (address, bytes).
CUGRAPHS_INLINE void record_collective(cudaStream_t stream, std::string line,
                                       std::span<const std::pair<std::uintptr_t, std::size_t>> buffers = {});

// A non-owning reference to a callable taking the input-address words of one launch: how a
// graphed call hands its staging to the executable without making the launch a template.
class StageRef {
public:
  // Refers to `f` (const or not); copying a StageRef copies the reference, never wraps it.
  template <class F>
    requires(!std::same_as<std::remove_cv_t<F>, StageRef>)
  StageRef(F& f) noexcept  // NOLINT(google-explicit-constructor): passed like a reference
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, std::span<unsigned long long> words) { (*static_cast<F*>(o))(words); }) {}

  void operator()(std::span<unsigned long long> words) const { call_(obj_, words); }

private:
  void* obj_;
  void (*call_)(void*, std::span<unsigned long long>);
};

}  // namespace cugraphs::detail
