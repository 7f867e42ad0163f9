// A Graph's executable side: the captured graph it holds, the executable instantiated from
// it, the per-launch ring, what captured work keeps alive, updates (a new capture applied in
// place) and per-node argument changes, and the launch itself.
#pragma once

#include <cugraphs/detail/buffer_registry.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/launch_ring.hpp>
#include <cugraphs/detail/native_graph.hpp>
#include <cugraphs/detail/pool.hpp>
#include <cugraphs/device_launch.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/update.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs::detail {

// A launch that stages no inputs: a graph that stages (a graphed callable's, replayed as a
// plain graph) copies nothing.
inline constexpr auto no_inputs = [](std::span<unsigned long long> words) noexcept {
  if (!words.empty()) std::memset(words.data(), 0, words.size_bytes());
};

class Executable {
public:
  Executable() = default;
  ~Executable() { reset(); }
  Executable(Executable&& o) noexcept { take(o); }
  Executable& operator=(Executable&& o) noexcept;
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  [[nodiscard]] bool captured() const noexcept { return graph_ != nullptr; }
  [[nodiscard]] bool instantiated() const noexcept { return exec_ != nullptr; }
  [[nodiscard]] cudaGraph_t graph() const noexcept { return graph_ ? graph_->graph : nullptr; }
  [[nodiscard]] cudaGraphExec_t exec() const noexcept { return exec_; }
  // The executable for launches cugraphs does not see (Graph::native_exec): from then on it
  // counts as launched (a reinstantiation waits for the device).
  [[nodiscard]] cudaGraphExec_t hand_out() const noexcept {
    if (exec_ != nullptr) launched_ = true;  // (an empty Graph's view is shared: left alone)
    return exec_;
  }
  // Whether a node taken in capture `capture` names a node of this executable.
  [[nodiscard]] bool runs(std::uint64_t capture) const noexcept { return capture != 0 && capture == current_capture_; }
  [[nodiscard]] bool holds(std::uint64_t capture) const noexcept {
    return capture != 0 && (capture == current_capture_ || capture == instantiated_capture_);
  }

  // Takes the graph capture `id` produced on `stream` (device `device`) into `pool` (its
  // share, which the Graph took from `c`; null for none), readied for its per-launch values
  // (LaunchRing::attach: inputs read in place that lie in the pool's segments are copied).
  // On failure this holds nothing.
  void hold(Captured&& c, const Pool* pool, std::uint64_t id, cudaStream_t stream, int device);

  // Instantiates and uploads the graph held; does nothing once instantiated.
  void instantiate();

  [[nodiscard]] bool device_launch() const noexcept { return device_launch_; }
  // The handle kernels launch this executable with (instantiated for device launch).
  // Kernels and DeviceDispatch keep it: from then on this executable is never replaced.
  [[nodiscard]] DeviceGraph device_graph() const noexcept;
  // The first failure of a device-side launch since the last call (cudaSuccess for none),
  // cleared. Call it once the launches in question have been waited for.
  [[nodiscard]] cudaError_t take_device_status(std::string_view op);

  // Applies the capture `source` holds to this executable (cudaGraphExecUpdate); where it
  // cannot be updated in place, says why and, with opts.reinstantiate_on_failure, takes
  // source's capture instantiated instead. Applied: this runs source's capture, ring and
  // kept resources, and `source` is left empty.
  [[nodiscard]] UpdateResult update(Executable& source, const UpdateOptions& opts);

  // Sets the parameters of the executable's node that a node taken in capture `capture` (at
  // `index`, as `node`) stands for.
  void set_kernel_params(std::uint64_t capture, std::size_t index, cudaGraphNode_t node, const cudaKernelNodeParams& p,
                         std::string_view op);

  // Launches on `stream`: `stage` writes the input-address words of a graph that stages
  // (see LaunchRing::launch). With a checked pool, the pool's check, the launch and its
  // record happen under the pool's lock; waiting for a free slot and staging do not (that
  // wait lasts until the device catches up, and must not lock other threads out).
  // `op` names the call in the errors of waiting for a slot and of staging.
  template <class Stage>
  void launch(cudaStream_t stream, PoolShare& pool, Stage&& stage, std::string_view op) {
    if (stream != checked_stream_ || !stream_checked_) [[unlikely]]
      check_stream(stream);
    check_buffers(op);
    launched_ = true;
    const auto go = [&, this] {
      if (const cudaError_t e = cudaGraphLaunch(exec_, stream); e != cudaSuccess) [[unlikely]]
        throw_cuda(e, "Graph::replay (cudaGraphLaunch)");
    };
    const auto guard = [&](auto&& run) {
      if (pool.checked()) [[unlikely]]
        pool.checked_launch(stream, run);
      else
        run();
    };
    if (ring_) [[unlikely]]
      ring_->launch(stream, exec_, resolver(op), stage, guard, go, op);
    else
      guard(go);
  }

  // Refuses (an Error; nothing launched) when a DeviceBuffer the graph names has been freed
  // since its capture; one compare while no named buffer was freed. Every host launch asks.
  void check_buffers(std::string_view op) {
    if (!named_.empty() && named_seen_ != named_buffers_freed.load(std::memory_order_relaxed)) [[unlikely]]
      check_named(op);
  }

  [[nodiscard]] bool stages() const noexcept { return ring_ && ring_->stages(); }
  // How many of a graphed callable's inputs the last launch read in place (InputMode::InPlace).
  [[nodiscard]] std::size_t leaves_in_place() const noexcept { return ring_ ? ring_->leaves_in_place() : 0; }
  // The PerLaunch its capture asked for (a recapture for update() asks the same).
  [[nodiscard]] PerLaunch per_launch_asked() const noexcept { return per_launch_asked_; }
  // Whether launches check the DeviceBuffers the graph names (CaptureOptions::watch_buffers).
  [[nodiscard]] bool watches_buffers() const noexcept { return watch_buffers_; }
  // The DeviceBuffers its graph's nodes name (watches_buffers()), by node.
  [[nodiscard]] const std::vector<NamedBuffer>& buffers_named() const noexcept { return named_; }
  // The kernel nodes taken (captured_kernel_node) in the capture it runs, in order.
  [[nodiscard]] const std::vector<TakenNode>& taken_nodes() const noexcept { return taken_; }
  // The generators its launches draw from, each with how far a launch advances it.
  [[nodiscard]] std::vector<std::pair<std::shared_ptr<GeneratorState>, std::uint64_t>> generators() const {
    return ring_ ? ring_->generators() : std::vector<std::pair<std::shared_ptr<GeneratorState>, std::uint64_t>>{};
  }
  // How launches get their per-launch values; Auto when the graph takes none.
  [[nodiscard]] PerLaunch per_launch() const noexcept {
    return !ring_                 ? PerLaunch::Auto
           : ring_->by_arguments() ? PerLaunch::Parameters
           : ring_->advancing()    ? PerLaunch::Advance
                                   : PerLaunch::Ring;
  }

  // The executable, its graph and what they kept go; the ring first waits until launches in
  // flight have finished with it.
  void reset() noexcept;

  // Runs `fn(graph)` with the graph held, locked against export_dot on other threads.
  template <class Fn>
  decltype(auto) with_graph(Fn&& fn) const {
    std::lock_guard lock(graph_->m);
    return fn(graph_->graph);
  }

private:
  // Before a device-launch instantiation: the device can launch graphs, and the graph holds
  // nothing a device graph cannot (named with its index). Returns the status word, zeroed.
  [[nodiscard]] std::shared_ptr<void> check_device_launchable(std::string_view op);

  // A graph launched from the device runs what was last uploaded: after a host-side change it
  // is uploaded again (and waited for), before any later launch.
  void upload_if_device_launched(std::string_view op);

  // Refuses a stream of another device than the graph's, before anything is posted or
  // launched. A stream that passed is remembered, so that replays on it compare one handle;
  // the default streams, which follow the current device, are asked every time.
  void check_stream(cudaStream_t stream);

  // Takes over `source`'s capture (after an update in place, or with source's executable
  // when `instantiated`), ring and kept resources; `source` is left empty.
  void adopt(Executable& source, bool instantiated) noexcept;

  // For the per-launch values: the executable's node for node `index` (`node`) of the
  // capture graph_ holds.
  struct Resolver {
    Executable* self;
    std::string_view op;
    cudaGraphNode_t operator()(std::size_t index, cudaGraphNode_t node) const {
      return self->exec_node(self->current_capture_, index, node, op);
    }
  };
  [[nodiscard]] Resolver resolver(std::string_view op) noexcept { return {this, op}; }

  // The node of the graph exec_ was instantiated from that a node taken in capture `capture`
  // (at `index`, as `node`) stands for.
  cudaGraphNode_t exec_node(std::uint64_t capture, std::size_t index, cudaGraphNode_t node, std::string_view op);

  void take(Executable& o) noexcept;

  // The DeviceBuffers capture `c` (held in graph_) names; none where the search fails.
  [[nodiscard]] std::vector<NamedBuffer> name_buffers(const Captured& c) const noexcept;
  // Refuses the launch when a DeviceBuffer the graph names has been freed since its capture
  // (some named buffer was freed: named_buffers_freed moved); else notes the count seen.
  void check_named(std::string_view op);
  // Node `index`'s buffers are now those `p` names (its kernel's parameters laid out as
  // `layout` says; none where unknown; none where they cannot be found, out of memory).
  void rename_node(std::size_t index, const cudaKernelNodeParams& p,
                   const std::optional<std::vector<KernelArgs::Param>>& layout) noexcept;

  // A kernel set_kernel_args has set: its function (kernel_function) and parameters' layout.
  struct KnownKernel {
    const void* func;
    cudaFunction_t function;
    std::optional<std::vector<KernelArgs::Param>> layout;
  };

  cudaGraphExec_t exec_ = nullptr;  // first: the replay path reads only this
  std::shared_ptr<NativeGraph> graph_;
  std::unique_ptr<LaunchRing> ring_;  // set when the graph draws random numbers or stages inputs
  // After update(): the graph exec_ was instantiated from, whose nodes still name the
  // executable's nodes (graph_ is then the capture applied last); null when it is graph_.
  std::shared_ptr<NativeGraph> identity_;
  std::vector<cudaGraphNode_t> identity_nodes_;    // its nodes, for KernelNodes of later captures
  std::vector<KnownKernel> functions_;             // set_kernel_args' kernels
  // The DeviceBuffers the graph's nodes name, by node (in node order, nested last), and the
  // count of named buffers freed (named_buffers_freed) when they were last all alive.
  std::vector<NamedBuffer> named_;
  std::uint64_t named_seen_ = 0;
  std::vector<std::shared_ptr<void>> keep_alive_;  // what captured work uses (keep_alive_with_capture)
  std::vector<TakenNode> taken_;                   // the kernel nodes taken in the capture graph_ holds
  std::uint64_t current_capture_ = 0;              // the capture graph_ holds
  std::uint64_t instantiated_capture_ = 0;         // the capture exec_ was instantiated from
  cudaStream_t upload_stream_ = nullptr;
  // A stream replays were checked to belong to device_ (the default streams are never
  // remembered: they follow the current device).
  cudaStream_t checked_stream_ = nullptr;
  bool stream_checked_ = false;
  int device_ = 0;
  bool device_launch_ = false;    // instantiated (or to be) for launch from the device
  bool updatable_nodes_ = false;  // holds device-updatable kernel nodes: never updated
  mutable bool handed_out_ = false;  // device_graph() was given out: the executable is never replaced
  mutable bool launched_ = false;    // exec_ was launched from the host (launches may be queued)
  PerLaunch per_launch_asked_ = PerLaunch::Auto;  // what the capture asked for
  bool watch_buffers_ = true;                     // CaptureOptions::watch_buffers
  std::shared_ptr<void> status_;  // device launch: the first failed device-side launch
};

// What a Graph owns once it has captured: the executable side and the share of the pool
// captured into.
struct GraphCore {
  Executable exec;
  PoolShare pool;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/executable.ipp>
#endif
