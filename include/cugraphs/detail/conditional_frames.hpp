// The conditional nodes being captured inside one capture: where each node's condition
// comes from, the open nodes (frames) innermost last, the stream capturing each body, and
// the checks that keep work inside the body it was meant for.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/condition_source.hpp>
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
  cudaGraph_t parent_graph = nullptr;   // the graph that holds the node
  std::size_t parent_nodes = 0;         // its node count once the node was added: unchanged while open
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
  // Where the program works now: the thread's current stream where it captures into the same
  // graph as now() (a StreamGuard's stream forked in), else now().
  [[nodiscard]] cudaStream_t working() const noexcept;

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // Adds a conditional node where the capture stands and begins capturing its first body
  // (Switch: none until switch_body); its body stream is this thread's at nesting `depth`.
  // `innermost`: the capture is the innermost open on this thread. Returns the new frame's id.
  std::uint64_t open(ConditionalKind kind, ConditionSource source, unsigned bodies, std::size_t depth,
                     bool innermost, std::string_view op);

  // A conditional handle of the graph being captured where the capture stands now (the
  // innermost open body, else the top-level graph), reset to `initial` at every launch.
  [[nodiscard]] ConditionSource make_condition(unsigned initial, std::string_view op);

  // Ends the active body of frame `id` (which must be innermost) and captures body `index`.
  void switch_body(std::uint64_t id, unsigned index, std::string_view op);

  // Closes frame `id`, which must be the innermost open one.
  void close(std::uint64_t id, std::string_view op);

  // The While node of frame `id` re-reads its condition from `*pred` at the end of every
  // iteration.
  void set_refresh(std::uint64_t id, const bool* pred, std::string_view op);

  [[nodiscard]] bool is_open(std::uint64_t id) const noexcept {
    return std::any_of(frames_.begin(), frames_.end(), [&](const auto& f) { return f.id == id; });
  }

  [[nodiscard]] ConditionalFrame& frame(std::uint64_t id, std::string_view op);

  [[nodiscard]] ConditionalFrame& innermost(std::string_view op);
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

  void require_open_case(std::string_view op) const;

  [[nodiscard]] CaptureInfo live_capture(cudaStream_t s, std::string_view op) const;

  ConditionalFrame& innermost_open(std::uint64_t id, std::string_view op);

  // Refuses a flag kernels cannot read (host memory), accepting memory that this capture
  // allocated with cudaMallocAsync: its graph, or a body of an open conditional node,
  // holds the allocation node.
  void check_flag_readable(const void* flag, std::string_view op);

  // Refuses a flag that a node of the graph may write (a kernel given its address, a copy or
  // memset into it) where `stream`, on which the node will read it, does not follow that
  // node: work on another stream forked into the capture and not joined back. The node would
  // read the flag before that work, silently.
  void check_flag_written_before(cudaStream_t stream, const void* flag, std::size_t bytes, std::string_view op);

  // Refuses work captured on the enclosing stream (the one that was current when the scope
  // opened) while a body was open: it would run after the conditional node, outside the
  // body, on every replay. The node must still be the enclosing stream's only dependency.
  void check_parent_untouched(const ConditionalFrame& f, std::string_view op) const;

  void begin_body(ConditionalFrame& f, unsigned index, std::string_view op);

  void end_body(ConditionalFrame& f, std::string_view op);
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
