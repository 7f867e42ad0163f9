// Graph (capture, instantiate, replay), the core of cugraphs; capture_scope.hpp, included at
// the end, adds CaptureScope, capture() and export_dot().
// Graph is a facade over three owned parts: the open capture (detail::CaptureSession, which
// ends or aborts itself), the executable with its update and kernel-node state
// (detail::Executable), and its share of a memory pool (detail::PoolShare).
#pragma once

#include <cugraphs/capture_options.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/detail/staging.hpp>
#include <cugraphs/device_launch.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/stream.hpp>
#include <cugraphs/update.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace cugraphs {

class CaptureScope;

/// A captured CUDA graph and its executable. RAII and move-only: destroying it resets it.
/// A Graph captures once; reset() empties it for another capture, and update() applies a
/// new capture to its executable.
class Graph {
public:
  Graph() noexcept = default;
  ~Graph() { reset_noexcept(); }
  Graph(Graph&& o) noexcept { take(o); }
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Begins capturing on opts.stream (default: capture_stream() of the current device) into
  /// opts.pool (default: a fresh private pool). Until capture_end (or capture_abort), that
  /// stream is this thread's current_stream(), as inside a CaptureScope, and DeviceBuffers
  /// made on this thread draw from that pool. A StreamGuard made after capture_begin must
  /// end before capture_end (it would make the capture stream current again).
  void capture_begin(const CaptureOptions& opts = {});

  /// Ends the capture, instantiates the graph and uploads it: the one-time costs are paid
  /// here, not on the first replay (unless CaptureOptions::instantiate was false). On
  /// failure (an invalidated capture, unjoined work, a capture that recorded no work unless
  /// CaptureOptions::allow_empty) the graph is left empty and reusable, and the Error says
  /// why. The current stream is again the one capture_begin found.
  void capture_end();

  /// Ends an open capture and discards it: the stream stops capturing and the graph is
  /// empty and reusable. Does nothing when no capture is open.
  void capture_abort() noexcept;

  /// Instantiates and uploads the captured graph; does nothing once instantiated.
  void instantiate();

  /// Launches the executable on this thread's current_stream().
  void replay() { replay(current_stream()); }

  /// Launches the executable on `stream`, ordered after the work already queued there.
  void replay(cudaStream_t stream);

  /// Replays with a graphed callable's inputs staged inside the graph: `stage(words)` writes
  /// this launch's input addresses, a word a leaf (0: the static input itself), and may throw
  /// first. Returns how many of the inputs it was handed (words other than 0) the launch reads
  /// in place (InputMode::InPlace) rather than copying them.
  template <class Stage>
  std::size_t replay_staged(cudaStream_t stream, Stage&& stage, std::string_view op) {
    return launch_staged(stream, detail::StageRef(stage), op);
  }

  /// The seed's stage_and_launch: copies every leaf of `inputs` onto the matching leaf of
  /// `static_inputs` (all sizes are checked first; leaves already in place are skipped), one
  /// cudaMemcpyAsync per leaf, then replays, all on `stream` (default: current_stream()).
  /// GraphedCallable stages inside the graph instead, for about the cost of one launch.
  template <class Statics, class Inputs>
  void stage_and_launch(const Statics& static_inputs, const Inputs& inputs, cudaStream_t stream = current_stream()) {
    constexpr std::string_view op = "Graph::stage_and_launch";
    detail::stage_copies(static_inputs, inputs, stream, op, [&, this] {  // before any copy: nothing is staged
      if (!is_instantiated()) not_replayable(op);
    });
    replay(stream);
  }

  /// Applies the capture `source` holds to this graph's executable (cudaGraphExecUpdate):
  /// with the same topology, in place, for a fraction of an instantiation's cost (launches
  /// already queued run the old parameters); otherwise the result says why (the failure, the
  /// blocking node's type and index) and this graph is unchanged, unless
  /// opts.reinstantiate_on_failure instantiates the capture instead. Once applied, this graph
  /// runs source's capture with its pool share and random-number state; `source` is left
  /// empty. Capture `source` with CaptureOptions::instantiate = false.
  [[nodiscard]] UpdateResult update(Graph&& source, const UpdateOptions& opts = {});

  /// Captures `fn` as this graph's own capture was made (its pool, mode, stream and device), without
  /// instantiating it, and applies it with update(Graph&&, opts). The stream the last capture
  /// used (CaptureOptions::stream, when one was given) must still exist. `fn` takes the
  /// CaptureScope (to open conditional scopes) or the capture stream.
  template <class F>
    requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
  [[nodiscard]] UpdateResult update(F&& fn, const UpdateOptions& opts = {});

  /// One call for a loop that captures the same step every time: the first call captures
  /// `fn` (with `opts`) and instantiates it; later calls capture it again as this graph's
  /// capture was made, on opts.stream where it is given (else on the stream the last capture
  /// used, which must still exist), and apply it with update() (instantiating anew when the executable
  /// cannot take it in place). `fn` takes the CaptureScope or the capture stream.
  template <class F>
    requires(std::invocable<F&, CaptureScope&> || std::invocable<F&, cudaStream_t>)
  UpdateResult capture_or_update(F&& fn, const CaptureOptions& opts = {});

  /// Changes the arguments of one kernel node in the executable
  /// (cudaGraphExecKernelNodeSetParams), without a new capture: later launches run the
  /// node's kernel with `args`, launches already queued the old ones. `node` comes from
  /// captured_kernel_node() in this graph's capture; arguments convert to the kernel's
  /// parameter types, checked at compile time. The captured graph itself (debug_dump) keeps
  /// the captured arguments.
  template <class... P, class... A>
  void set_kernel_args(const KernelNode<P...>& node, const A&... args) {
    apply_kernel_args(node, detail::all_kernel_args<P...>(args...), "Graph::set_kernel_args");
  }

  /// Changes arguments `I...` of one kernel node in the executable, in one call, and keeps
  /// the others as they run now (captured, or as set since): for per-step scalars such as
  /// an optimizer's bias corrections, `graph.set_kernel_arg<10, 11>(node, bc1, bc2)` before
  /// each replay. Launches already queued keep what they had. Each value must convert to its
  /// parameter without narrowing (a float for a size_t parameter is a compile error). A node
  /// taken in a capture that update() has replaced since is an Error: the arguments it keeps
  /// are that capture's, which would come back (take the node again in the capture applied).
  template <std::size_t... I, class... P, class... V>
    requires(sizeof...(I) > 0)
  void set_kernel_arg(const KernelNode<P...>& node, const V&... values) {
    if (!node.empty() && !runs_capture(node.capture_) && holds_capture(node.capture_)) [[unlikely]]
      replaced_node(node.capture_, "Graph::set_kernel_arg");
    apply_kernel_args(node, detail::some_kernel_args<I...>(node, values...), "Graph::set_kernel_arg");
  }

  /// The handle kernels launch this graph with (device_launch.hpp), for a graph captured with
  /// CaptureOptions::device_launch and instantiated.
  [[nodiscard]] DeviceGraph device_graph() const;

  /// Throws the first failure of a launch of this graph from the device since the last call
  /// (DeviceGraph records it), and forgets it: call it after synchronizing.
  void check_device_launches();

  /// Whether `node` was taken in the capture this graph runs (or was instantiated from).
  template <class... P>
  [[nodiscard]] bool holds(const KernelNode<P...>& node) const noexcept {
    return !node.empty() && holds_capture(node.capture_);
  }

  /// Destroys the executable and the graph and lets go of the pool (whose memory returns
  /// to the device once nothing else holds it). An open capture is aborted. The graph can
  /// capture again afterwards.
  void reset();

  /// The id of the pool this graph captured into.
  [[nodiscard]] std::uint64_t pool_id() const { return pool().id(); }

  /// The pool this graph captured into; pass it to another capture to share its memory.
  [[nodiscard]] PoolHandle pool() const;

  [[nodiscard]] cudaGraph_t native_graph() const noexcept;
  [[nodiscard]] cudaGraphExec_t native_exec() const noexcept;
  [[nodiscard]] bool is_capturing() const noexcept;
  /// How many conditional scopes are open in the current capture.
  [[nodiscard]] std::size_t open_conditionals() const noexcept;
  [[nodiscard]] bool is_instantiated() const noexcept;
  /// How launches hand the graph its fresh random-number offsets and staged inputs:
  /// Parameters, Ring or Advance (see PerLaunch); Auto when it takes none.
  [[nodiscard]] PerLaunch per_launch() const noexcept;
  /// How many nodes the captured graph has at its top level (a conditional node counts one;
  /// the per-launch ring's head and tail count too, and so do the event record node that
  /// marks the end of a launch of a graph that stages by arguments and the advance kernel of a
  /// graph that advances its offsets, with an event record node where streams cannot wait for its
  /// launch count: CUDA before 12.5, or a driver without cuStreamWaitValue32); 0 when
  /// nothing is captured.
  [[nodiscard]] std::size_t node_count() const;
  [[nodiscard]] CaptureMode mode() const noexcept { return mode_; }

  /// The stream capturing now: the innermost open conditional body, else the stream the
  /// capture began on (CaptureScope::stream() is the same); nullptr when not capturing.
  [[nodiscard]] cudaStream_t stream() const noexcept;

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  /// Adds an if-node reading `*pred` where the capture stands, and captures its body until
  /// end_capture_to_conditional_node(); current_stream() is the body's stream meanwhile.
  void begin_capture_to_if_node(const bool* pred);

  /// Adds a while-node reading `*pred` before the first iteration and at the end of every
  /// iteration, and captures its body until end_capture_to_conditional_node().
  void begin_capture_to_while_node(const bool* pred);

  /// Makes the innermost open while-node re-read its condition from `*pred` at the end of
  /// each iteration.
  void set_conditional_handle_for_current_node(const bool* pred);

  /// Ends the body of the innermost open conditional node.
  void end_capture_to_conditional_node();
#endif

  /// Lets debug_dump write this graph.
  void enable_debug_mode() noexcept { debug_ = true; }

  /// Writes the captured graph as a Graphviz DOT file (needs enable_debug_mode()).
  void debug_dump(const std::string& path) const;

private:
  friend class GraphSet;        // checks every member's buffers before it launches any (check_buffers)
  friend class DeviceDispatch;  // checks its buckets' buffers, which the device launches
  friend class detail::VerifyAccess;  // verify_replay: the buffers it names, the step captured again

  [[noreturn]] void not_replayable(std::string_view op) const;
  // Refuses, as replay would, a graph that names a DeviceBuffer freed since its capture.
  void check_buffers(std::string_view op);

  // The open capture, for the seed's conditional members.
  detail::CaptureSession& session(std::string_view op);

  template <class... P>
  void apply_kernel_args(const KernelNode<P...>& node, typename KernelNode<P...>::Arguments values,
                         std::string_view op) {
    if (!is_instantiated()) [[unlikely]]
      not_replayable(op);
    detail::with_kernel_params(node.launch_, values, [&, this](const cudaKernelNodeParams& p) {
      set_kernel_params(node.capture_, node.index_, node.node_, p, op);
    });
    *node.args_ = std::move(values);  // copies of the node share what the executable runs
  }

  // The non-template steps of the templates above, in the compiled part.
  std::size_t launch_staged(cudaStream_t stream, detail::StageRef stage, std::string_view op);
  void set_kernel_params(std::uint64_t capture, std::size_t index, cudaGraphNode_t node,
                         const cudaKernelNodeParams& p, std::string_view op);
  [[nodiscard]] bool holds_capture(std::uint64_t capture) const noexcept;
  // Whether `capture` is the one the executable runs now (the last applied).
  [[nodiscard]] bool runs_capture(std::uint64_t capture) const noexcept;
  [[noreturn]] void replaced_node(std::uint64_t capture, std::string_view op) const;
  // The options of a capture for update(fn): as this graph's own capture was made.
  [[nodiscard]] CaptureOptions recapture_options(std::string_view op) const;
  // `fn` captured with `co` (recapture_options) into a new graph, on this graph's device, for
  // update(Graph&&).
  template <class F>
  [[nodiscard]] Graph recapture(F& fn, const CaptureOptions& co) const;

  // The executable and pool share, made on first capture; view() reads an empty one before.
  detail::GraphCore& core();
  [[nodiscard]] const detail::GraphCore& view() const noexcept;

  void reset_noexcept() noexcept;

  void take(Graph& o) noexcept;

  // The captured graph, its executable, ring and updates, and the share of the pool captured
  // into (detail/executable.hpp); null until the first capture.
  detail::Owned<detail::GraphCore> core_;
  detail::Owned<detail::CaptureSession> capture_;  // set while capturing (and after a self-aborted capture)
  CaptureMode mode_ = CaptureMode::Global;
  EscapeCheck escapes_ = EscapeCheck::Auto;  // as captured: recapture_options() repeats it
  cudaStream_t stream_ = nullptr;            // CaptureOptions::stream as asked (null: capture_stream()); repeated too
  bool allow_empty_ = false;                 // CaptureOptions::allow_empty; repeated too
  int device_ = 0;
  bool debug_ = false;
  bool moved_from_ = false;
};

}  // namespace cugraphs

#include <cugraphs/capture_scope.hpp>  // CaptureScope, capture(), export_dot, Graph's members that capture

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/capture.ipp>
#endif
