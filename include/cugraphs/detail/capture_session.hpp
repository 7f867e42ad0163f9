// One open capture: its stream, pool, mode, per-launch ring, escape guard, conditional
// frames and the current streams it set on its thread. A Graph owns its session while it
// captures; CaptureScope and ConditionalScope find it through this thread's list of open
// sessions (so they follow their Graph when it moves), and allocations made on the thread
// draw from the innermost session's pool. A session ends or aborts its own capture; its
// Graph only reads what an ended session produced.
#pragma once

#include <cugraphs/detail/captured.hpp>
#include <cugraphs/detail/conditional_frames.hpp>
#include <cugraphs/detail/deferred_frees.hpp>
#include <cugraphs/detail/driver_log.hpp>
#include <cugraphs/detail/escape_guard.hpp>
#include <cugraphs/detail/launch_ring.hpp>
#include <cugraphs/detail/pool.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cugraphs {
class Graph;
}  // namespace cugraphs

namespace cugraphs::detail {

class CaptureSession {
public:
  // Begins capturing on `stream` into `pool`, as this thread's innermost capture; `guard`
  // forks the escape guard in; `graph_key` is the workspace_key, set before the capture
  // stream is made current (listeners read it then). On failure nothing is left open and the
  // Error says why.
  CaptureSession(std::shared_ptr<Pool> p, cudaStream_t s, cudaStreamCaptureMode m, std::string_view mode_name_,
                 int device_, bool instantiate_, bool device_launch_, bool guard, Graph* owner_,
                 std::uint64_t graph_key, std::string_view op);
  ~CaptureSession() { abort(); }
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  std::shared_ptr<Pool> pool;
  PoolShare share;  // held while open (no trim meanwhile); handed to the graph by end()
  const std::uint64_t id;
  const cudaStream_t stream;  // the stream the capture began on
  const cudaStreamCaptureMode mode;
  const std::string_view mode_name;  // for error hints
  const int device;
  const bool instantiate;             // capture_end instantiates (CaptureOptions::instantiate)
  const bool device_launch;           // CaptureOptions::device_launch
  Graph* owner;                       // the Graph holding this session; kept current when it moves
  std::unique_ptr<LaunchRing> ring;   // once the graph draws random numbers or stages inputs
  std::vector<std::string> collectives;           // collectives captured, in order (cugraphs/nccl.hpp)
  std::vector<std::pair<std::uintptr_t, std::size_t>> collective_buffers;  // their send and receive buffers
  std::vector<std::shared_ptr<void>> keep_alive;  // resources captured work uses; the Graph keeps them
  std::vector<TakenNode> taken;                   // kernel nodes taken (captured_kernel_node), in order
  // The graph the capture is for (its GraphCore's address; for a recapture that update() or
  // verify_replay applies, the graph updated): libraries key per-graph resources by it.
  std::uint64_t workspace_key = 0;
  CurrentStreamStack streams;                     // the current streams this capture set on its thread
  ConditionalFrames frames;                       // open conditional nodes, innermost last
  DriverLog log;                                  // the driver's log position at capture_begin
  bool updatable_nodes = false;                   // launch_updatable captured a node here
  PerLaunch per_launch = PerLaunch::Auto;         // how launches get their values (CaptureOptions)
  bool check_copies = true;                       // refuse pageable copies, cuRAND host kernels (EscapeCheck)
  bool check_backing = true;                      // refuse copies of freed device memory (not EscapeCheck::Off)
  bool allow_empty = false;                       // keep a capture that recorded no work (CaptureOptions)
  bool watch_buffers = true;                      // launches check the buffers named (CaptureOptions)
  // The caller's stack pointer at the capture's begin and at its end (CaptureEntry; 0 where
  // unknown): the frames below both returned while the capture was open.
  std::uintptr_t begin_stack = 0;
  std::uintptr_t end_stack = 0;

  // Whether the capture is still open (end() and abort() close it).
  [[nodiscard]] bool is_open() const noexcept { return open_; }
  [[nodiscard]] bool on_this_thread() const noexcept { return std::ranges::find(tls_captures, this) != tls_captures.end(); }
  // The session of capture `id` open on this thread, or null.
  [[nodiscard]] static CaptureSession* find(std::uint64_t capture_id) noexcept;
  // The stream capturing now: the innermost open conditional body, else the capture stream.
  [[nodiscard]] cudaStream_t now() const noexcept { return frames.now(); }

  // The graph's per-launch values, recorded from their first use on.
  [[nodiscard]] LaunchRing& launch_ring(std::string_view op);

  // Runs `step` on the conditional frames; a step that left a node half built aborts the
  // capture (the session stays, closed) before the error propagates.
  template <class Step>
  decltype(auto) conditional(Step&& step) {
    CUGRAPHS_TRY {
      return step(frames);
    } CUGRAPHS_CATCH_ALL {
      if (frames.broken()) {
        abort();
        frames.mend();  // still open (another thread's capture): later steps start afresh
      }
      CUGRAPHS_RETHROW;
    }
  }

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // Opens a conditional node where the capture stands (ConditionalFrames::open); every body
  // open on this thread, in any capture, gets a stream of its own.
  std::uint64_t open_conditional(ConditionalKind kind, ConditionSource source, unsigned bodies, std::string_view op);
#endif

  // Ends the capture and closes the session. On failure (an invalidated capture, unjoined
  // work, work that escaped to the legacy or the per-thread default stream, a copy of
  // pageable host memory) the partial graph is destroyed and the Error says why.
  [[nodiscard]] Captured end(std::string_view op);

  // Ends the capture and discards it: the stream stops capturing, the session closes.
  // Does nothing once closed, or on another thread than the capture's (reported).
  void abort() noexcept;

private:
  // Leaves this thread's list, restores the current stream the capture found, closes the
  // capture on the pool and issues the frees that waited for the stream to stop capturing.
  void close(bool produced_graph) noexcept;

  EscapeGuard guard_;
  bool open_ = false;
};
}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/capture_session.ipp>
#endif
