// The values a graph needs afresh at every launch: each replay's (seed, offset) of every
// generator it draws from, and a graphed callable's input addresses. Recorded while the
// capture is open; once it has ended, attach() chooses how launches get them (PerLaunch):
//
// - As kernel arguments: the kernel nodes whose arguments hold a draw's PhiloxArgs or the
//   staging copy's StageArgs are found (KernelArgs), and before each launch they are set to
//   this launch's values (cudaGraphExecKernelNodeSetParams applies to later launches only).
//   No device work is added.
// - Through a ring: one head kernel goes before the graph's first nodes and one tail kernel
//   after its last. The host writes launch k's values in slot k % slots of a pinned HostRing,
//   publishes the tag k + 1, then launches. The head takes the slot if its tag is there: the
//   generators' words go to the buffer the captured kernels read, the input addresses to the
//   table the staging copy reads. The tail counts the launch done, on the device and in
//   pinned memory, so the host knows the slot is free and that the launch has finished with
//   everything the ring's owner holds. A launch nothing was posted for (an executable
//   launched outside cugraphs) takes nothing: it keeps the last numbers and stages nothing.
//   A launch of the executable outside cugraphs, taking its values as arguments, repeats the
//   last launch's.
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/host_ring.hpp>
#include <cugraphs/detail/kernel_args.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/per_launch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
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

// A generator's state, shared by the Generator and the graphs that draw from it.
struct GeneratorState {
  std::mutex m;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  int open_captures = 0;  // captures that recorded this generator and are still open

  // The current (seed, offset), then advances the offset by `increment`.
  std::pair<std::uint64_t, std::uint64_t> take(std::uint64_t increment) {
    std::lock_guard lock(m);
    const auto now = std::pair{seed, offset};
    offset += increment;
    return now;
  }
};

inline constexpr unsigned kMaxGeneratorsPerGraph = 8;

// A graph's per-launch values: recorded while its capture is open (the generators drawn
// from, the staged inputs), readied once it has ended (attach), handed to every launch.
class LaunchRing {
public:
  static constexpr unsigned kSlots = 64;

  // What the captured staging copy reads (device memory): whether this launch took a slot,
  // and the taken slot's input addresses.
  struct Staging {
    const unsigned long long* control;  // [1]: this launch took a slot
    const void* const* sources;
  };

  // Made while the capture is open on this thread. The device words live outside the
  // graph's pool: another graph sharing the pool could reuse their blocks as temporaries.
  LaunchRing(std::string_view what, PerLaunch policy)
      : control_(private_device_memory(kControlWords * sizeof(unsigned long long), what)), policy_(policy) {}
  LaunchRing(const LaunchRing&) = delete;
  LaunchRing& operator=(const LaunchRing&) = delete;
  ~LaunchRing() {
    end_capture();
    // Before the device words and what the owner holds go: launches in flight use them.
    wait_all("Graph: waiting for launches in flight (per-launch values)");
  }

  // ---- while the capture is open

  // The device words (seed, offset) of generator `g`, recording it on first use, and how
  // far the graph has drawn from it so far; the graph then draws `reserved` more.
  struct Draw {
    const std::uint64_t* words;
    std::uint64_t offset;
  };
  [[nodiscard]] Draw draw(const std::shared_ptr<GeneratorState>& g, std::uint64_t reserved, std::string_view op) {
    const unsigned i = index_of(g, op);
    if (reserved > ~std::uint64_t{0} - uses_[i].increment)
      throw_misuse(op, "this graph would draw more than 2^64 values per thread from the generator; the "
                       "64-bit Philox offset would overflow");
    const Draw d{reinterpret_cast<const std::uint64_t*>(values()) + 2 * i, uses_[i].increment};
    draws_.push_back({i, d.offset});
    uses_[i].increment += reserved;
    return d;
  }

  // Readies staging of `leaves` input addresses per launch (once per graph).
  [[nodiscard]] Staging stage(std::size_t leaves, std::string_view op) {
    if (sources_) throw_misuse(op, "this capture already stages a graphed callable's inputs");
    leaves_ = static_cast<unsigned>(leaves);
    sources_ = private_device_memory(std::max<std::size_t>(leaves, 1) * sizeof(void*), op);
    return {control(), static_cast<const void* const*>(sources_.get())};
  }

  // Once the capture has ended: the generators may advance again outside captures.
  void end_capture() noexcept {
    if (!capturing_) return;
    capturing_ = false;
    for (auto& u : uses_) {
      std::lock_guard lock(u.generator->m);
      --u.generator->open_captures;
    }
  }

  // ---- once the capture has ended

  // Readies `g`, the graph the capture made, for its launches' values: as kernel arguments
  // where the policy allows and every value reaches its kernel as one, else through the ring
  // (its head before every root node, its tail after every last node). Zeroes the device
  // words on `stream` first.
  struct GraphFacts {
    bool updatable;  // the graph holds device-updatable kernel nodes, which node updates from the host would overwrite
    const std::vector<ConditionalMade>& conditionals;  // the conditional nodes its capture made
  };
  void attach(cudaGraph_t g, cudaStream_t stream, const GraphFacts& facts, std::string_view op) {
    {
      // Done before any launch, on whatever stream: the stream is idle, and the wait runs in
      // relaxed mode for a capture that may be open on this thread.
      RelaxedCaptureMode relaxed;
      check(cudaMemsetAsync(control(), 0, kControlWords * sizeof(unsigned long long), stream), "{}: cudaMemsetAsync", op);
      check(cudaStreamSynchronize(stream), "{}: cudaStreamSynchronize", op);
    }
    if (policy_ != PerLaunch::Ring) {
      if (facts.updatable)
        (void)refuse_arguments(op, "the graph holds device-updatable kernel nodes (launch_updatable), whose updates "
                                   "from the device a node update from the host would overwrite");
      else if (find_argument_sites(g, facts.conditionals, op))
        return;
    }
    patched_.clear();
    attach_ring(g, op);
  }

  // Whether launches take their values as kernel arguments (else through the ring).
  [[nodiscard]] bool by_arguments() const noexcept { return by_arguments_; }

  // ---- every launch

  // One launch of `exec`, as one transaction: waits until the ring's next slot is free; lets
  // `stage` write the launch's input-address words (one a leaf, 0 for an input not copied;
  // `stage` may throw, and then nothing is posted); then, inside `guard` (which runs what it
  // is given, for a checked pool under the pool's lock and checks), takes each generator's
  // (seed, offset), advancing it by what a launch draws, hands the values over (sets the
  // nodes that take them as arguments, or publishes the slot, its tag last) and calls `go`,
  // which launches or throws. A launch that throws takes its post back (the generators stay
  // advanced). `resolve(index, node)` names the executable's node for a node of the capture.
  template <class Resolve, class Stage, class Guard, class Go>
  void launch(cudaStream_t stream, cudaGraphExec_t exec, Resolve&& resolve, Stage&& stage, Guard&& guard, Go&& go,
              std::string_view op) {
    if (by_arguments_) {
      bind(exec, resolve);
      stage(std::span<unsigned long long>(staged_.data(), leaves_));
      guard([&] {
        take_values();
        for (PatchedNode& n : patched_) set_node(exec, n, op);
        go();
        // A graph that stages reads its owner's buffers: an event recorded after every launch
        // tells when they are free (the executable's launches run in order, so the last
        // record's completion is all of theirs; an event completes even after its stream goes).
        if (done_) [[unlikely]] {
          if (const cudaError_t e = cudaEventRecord(done_.get(), stream); e != cudaSuccess) [[unlikely]] {
            // The launch is queued and the event cannot tell when it ends: wait for it here,
            // before anything it reads can go.
            RelaxedCaptureMode relaxed;
            (void)cudaStreamSynchronize(stream);
            throw_cuda(e, format("{}: recording the launch's end (cudaEventRecord)", op));
          }
          launched_ = true;
        }
      });
      return;
    }
    unsigned long long* slot = ring_.next_slot(stream, op);
    stage(std::span<unsigned long long>(slot + 1 + 2 * uses_.size(), leaves_));
    guard([&] {
      take_values();
      for (std::size_t i = 0; i < uses_.size(); ++i) {
        slot[1 + 2 * i] = taken_[i].first;
        slot[2 + 2 * i] = taken_[i].second;
      }
      ring_.publish(slot);
      CUGRAPHS_TRY {
        go();
      } CUGRAPHS_CATCH_ALL {
        ring_.withdraw();
        CUGRAPHS_RETHROW;
      }
      ring_.launched(stream);
    });
  }

  // Sets `target`, a node of `exec`, to `p` (Graph::set_kernel_args). With values as
  // arguments, the values in `p` are found afresh and the node is set with the last launch's
  // (so that later launches keep the change, and a launch outside cugraphs repeats the last
  // values); a node that took no values when captured cannot start taking them (nothing
  // would refresh them): an Error. Nothing changes when it throws.
  template <class Resolve>
  void set_node_params(cudaGraphExec_t exec, Resolve&& resolve, cudaGraphNode_t target, const cudaKernelNodeParams& p,
                       std::string_view op) {
    const auto set = [&](const cudaKernelNodeParams& q) {
      if (const cudaError_t e = cudaGraphExecKernelNodeSetParams(exec, target, &q); e != cudaSuccess) [[unlikely]]
        throw_cuda(e, format("{} (cudaGraphExecKernelNodeSetParams)", op));
    };
    if (!by_arguments_) {
      set(p);
      return;
    }
    bind(exec, resolve);
    auto layout = KernelArgs::layout(p.func);
    const auto it = std::ranges::find(patched_, target, &PatchedNode::target);
    if (!layout) {
      if (it != patched_.end())
        throw_misuse(op, "this node takes per-launch values as kernel arguments, and CUDA cannot lay out the new "
                         "kernel's parameters (cudaFuncGetParamInfo), so later launches could not hand them over");
      set(p);
      return;
    }
    PatchedNode next{it != patched_.end() ? it->index : 0, it != patched_.end() ? it->node : nullptr, target,
                     KernelArgs(p, std::move(*layout)), {}, {}};
    find_sites(next);
    if (it == patched_.end()) {
      if (!next.draws.empty())
        throw_misuse(op, "the new arguments hand this node the PhiloxArgs of a draw, but it drew nothing when "
                         "captured, and this graph refreshes its offsets as the drawing nodes' kernel arguments "
                         "(PerLaunch::Parameters), so nothing would refresh them here. Draw in this node when "
                         "capturing, or capture with PerLaunch::Ring");
      set(p);
      return;
    }
    if (!taken_.empty()) write_values(next);
    set(next.args.launch());
    *it = std::move(next);
  }

  // Whether launches stage a graphed callable's inputs.
  [[nodiscard]] bool stages() const noexcept { return sources_ != nullptr; }

  // Waits until every launch so far has finished: through the ring, until its tail has run;
  // with values as arguments, until the event recorded after the last one has completed (a
  // graph that only draws records none: like any graph, its launches read nothing that its
  // owner frees).
  void wait_all(std::string_view op) noexcept {
    if (!by_arguments_) {
      ring_.wait_all(op);
      return;
    }
    if (!launched_) return;
    RelaxedCaptureMode relaxed;  // a capture open on this thread must go on
    if (const cudaError_t e = cudaEventSynchronize(done_.get()); e != cudaSuccess) {
      (void)cudaGetLastError();
      report_in_destructor(e, op);
    }
    launched_ = false;
  }

private:
  // control_: [0] launches taken, [1] whether this launch took a slot, then the generators'
  // (seed, offset) pairs.
  static constexpr std::size_t kControlWords = 2 + 2 * kMaxGeneratorsPerGraph;

  struct Use {
    std::shared_ptr<GeneratorState> generator;
    std::uint64_t increment = 0;  // consumed by one launch
  };
  struct DrawMade {
    unsigned generator;
    std::uint64_t offset;  // inside the graph
  };
  // A kernel node whose arguments take per-launch values, and where.
  struct PatchedNode {
    std::size_t index;            // among the capture's nodes
    cudaGraphNode_t node;         // of the capture's graph
    cudaGraphNode_t target;       // of the executable, once bound
    KernelArgs args;
    struct Site {
      std::size_t at;  // byte of the PhiloxArgs in the arguments
      DrawMade draw;
    };
    std::vector<Site> draws;
    std::optional<std::size_t> stage;  // byte of the StageArgs
  };

  unsigned index_of(const std::shared_ptr<GeneratorState>& g, std::string_view op) {
    for (unsigned i = 0; i < uses_.size(); ++i)
      if (uses_[i].generator == g) return i;
    if (uses_.size() == kMaxGeneratorsPerGraph)
      throw_misuse(op, "a graph may draw from at most {} generators", kMaxGeneratorsPerGraph);
    {
      std::lock_guard lock(g->m);
      ++g->open_captures;
    }
    uses_.push_back({g, 0});
    return static_cast<unsigned>(uses_.size() - 1);
  }

  // The draw whose PhiloxArgs, as a capture handed them out (seed 0, this draw's offset, base
  // at one of the generators' words), start at `at`, if they do.
  [[nodiscard]] std::optional<DrawMade> draw_at(const std::byte* at) const noexcept {
    std::uint64_t w[3];
    std::memcpy(w, at, sizeof w);
    const auto words = reinterpret_cast<std::uintptr_t>(values());
    if (w[0] != 0 || w[2] < words || w[2] >= words + 16 * uses_.size() || (w[2] - words) % 16 != 0) return std::nullopt;
    return DrawMade{static_cast<unsigned>((w[2] - words) / 16), w[1]};
  }

  // Where `n`'s arguments hold a PhiloxArgs of this graph's draws or the staging copy's
  // StageArgs (its table of sources is this ring's, whatever it reads them from).
  void find_sites(PatchedNode& n) const {
    n.draws.clear();
    n.stage.reset();
    n.args.for_each_place(3, [&](std::size_t at) {
      if (const auto d = draw_at(n.args.bytes() + at)) n.draws.push_back({at, *d});
    });
    if (!sources_) return;
    for (const auto& q : n.args.params()) {
      if (q.size != sizeof(StageArgs)) continue;
      StageArgs a;
      std::memcpy(&a, n.args.bytes() + q.offset, sizeof a);
      if (a.sources == sources_.get() && a.leaves == leaves_) n.stage = q.offset;
    }
  }

  // The first draw whose PhiloxArgs a memcpy node copies from pinned or managed memory (as the
  // host holds them now), which only the ring refreshes; none for other nodes, and for
  // sources over 64 MiB, which are not searched.
  [[nodiscard]] std::optional<DrawMade> draw_in_host_copy(cudaGraphNode_t node) const {
    cudaMemcpy3DParms p{};
    if (cudaGraphMemcpyNodeGetParams(node, &p) != cudaSuccess || p.srcPtr.ptr == nullptr) return std::nullopt;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p.srcPtr.ptr) != cudaSuccess) return std::nullopt;
    // Pinned or managed memory only: an address CUDA does not know may no longer be mapped.
    if (attr.type != cudaMemoryTypeHost && attr.type != cudaMemoryTypeManaged) return std::nullopt;
    const std::size_t rows = std::max<std::size_t>(p.extent.height, 1) * std::max<std::size_t>(p.extent.depth, 1);
    const std::size_t bytes = std::max(p.srcPtr.pitch, p.extent.width) * (rows - 1) + p.extent.width;
    if (bytes > (std::size_t{64} << 20)) return std::nullopt;
    const auto* first = static_cast<const std::byte*>(p.srcPtr.ptr);
    const std::size_t skip = (8 - reinterpret_cast<std::uintptr_t>(first) % 8) % 8;
    for (std::size_t at = skip; at + 24 <= bytes; at += 8)
      if (const auto d = draw_at(first + at)) return d;
    return std::nullopt;
  }

  // Whether some draw's PhiloxArgs are found in `blobs` (argument bytes), at any 8-byte step.
  [[nodiscard]] bool holds_draw(const std::vector<std::vector<std::byte>>& blobs) const noexcept {
    for (const auto& b : blobs)
      for (std::size_t at = 0; at + 24 <= b.size(); at += 8)
        if (draw_at(b.data() + at)) return true;
    return false;
  }

  // Why `node` may hand a draw to the device some way that node updates of the executable
  // cannot refresh, or none: a kernel inside a conditional body or a child graph (`nested`),
  // or one this runtime cannot read, that takes a draw's PhiloxArgs, or whose arguments
  // cannot be read at all; a memcpy from host memory holding them; the same inside bodies
  // and child graphs, at any depth.
  [[nodiscard]] std::optional<std::string> draw_elsewhere(cudaGraphNode_t node, bool nested,
                                                          const std::vector<ConditionalMade>& conditionals,
                                                          std::string_view op) const {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(node, &t) != cudaSuccess) return "a node whose type CUDA cannot say";
    const auto inside = [&](cudaGraph_t body) -> std::optional<std::string> {
      for (cudaGraphNode_t n : graph_nodes(body, op))
        if (auto why = draw_elsewhere(n, true, conditionals, op)) return why;
      return std::nullopt;
    };
    switch (t) {
      case cudaGraphNodeTypeKernel: {
        std::optional<std::vector<std::vector<std::byte>>> blobs;
        if (auto args = nested ? KernelArgs::read(node) : std::nullopt) {
          blobs.emplace();
          for (const auto& q : args->params()) blobs->emplace_back(args->bytes() + q.offset, args->bytes() + q.offset + q.size);
        } else {
          blobs = driver_kernel_args(node);
        }
        if (!blobs) return std::string("a kernel node whose arguments CUDA cannot read (which might hold a draw)");
        if (holds_draw(*blobs))
          return std::string(nested ? "a kernel inside a conditional body or a child graph takes the PhiloxArgs of a "
                                      "draw"
                                    : "a kernel that this CUDA runtime cannot name (launched through the driver API "
                                      "or by another library) takes the PhiloxArgs of a draw");
        return std::nullopt;
      }
      case cudaGraphNodeTypeMemcpy:
        if (const auto d = draw_in_host_copy(node))
          return format("a memcpy node copies the PhiloxArgs of a draw (generator {} of the graph, offset {}) from "
                        "host memory",
                        d->generator, d->offset);
        return std::nullopt;
      case cudaGraphNodeTypeGraph: {
        cudaGraph_t child = nullptr;
        if (cudaGraphChildGraphNodeGetGraph(node, &child) != cudaSuccess) return "a child graph CUDA cannot read";
        return inside(child);
      }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
      case cudaGraphNodeTypeConditional: {
        const auto made = std::ranges::find(conditionals, node, &ConditionalMade::node);
        if (made == conditionals.end()) return std::string("a conditional node that cugraphs did not make (its bodies cannot be read)");
        for (cudaGraph_t body : made->bodies)
          if (auto why = inside(body)) return why;
        return std::nullopt;
      }
#endif
      default:
        return std::nullopt;
    }
  }

  // Finds the kernel nodes of `g` that take the graph's per-launch values as arguments, and
  // whether they take them all; readies the staging copy to take its addresses as arguments.
  // False (nothing changed) where the ring must be used.
  bool find_argument_sites(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals, std::string_view op) {
    if (sources_ && leaves_ > StageArgs::kInlineLeaves)
      return refuse_arguments(op, format("the staging copy takes at most {} input leaves as arguments and this "
                                         "callable stages {}",
                                         StageArgs::kInlineLeaves, leaves_));
    const auto nodes = graph_nodes(g, op);
    std::vector<PatchedNode> found;
    std::vector<bool> seen(draws_.size(), false);
    std::optional<std::string> elsewhere;  // how a draw may reach the device other than as patched arguments
    bool staged = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      cudaGraphNodeType t{};
      if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) continue;
      auto args = t == cudaGraphNodeTypeKernel ? KernelArgs::read(nodes[i]) : std::nullopt;
      if (!args) {
        if (!draws_.empty() && !elsewhere) elsewhere = draw_elsewhere(nodes[i], false, conditionals, op);
        continue;
      }
      PatchedNode n{i, nodes[i], nullptr, std::move(*args), {}, {}};
      find_sites(n);
      if (n.draws.empty() && !n.stage) continue;
      for (const auto& site : n.draws)
        for (std::size_t d = 0; d < draws_.size(); ++d)
          if (draws_[d].generator == site.draw.generator && draws_[d].offset == site.draw.offset) seen[d] = true;
      staged = staged || n.stage.has_value();
      found.push_back(std::move(n));
    }
    (void)cudaGetLastError();
    for (std::size_t d = 0; d < draws_.size(); ++d)
      if (!seen[d])
        return refuse_arguments(op, format("draw {} of the capture (generator {} of the graph, offset {}) does not "
                                           "reach its kernel as a kernel argument (it is passed through memory, to "
                                           "a kernel whose arguments CUDA cannot lay out, or not used)",
                                           d, draws_[d].generator, draws_[d].offset));
    if (elsewhere)
      return refuse_arguments(op, *elsewhere + ", which only the ring refreshes");
    if (sources_ && leaves_ != 0 && !staged)
      return refuse_arguments(op, "the staging copy's arguments were not found in the graph");
    if (policy_ == PerLaunch::Auto && found.size() > kAutoParameterNodes) return false;
    if (sources_) {
      RelaxedCaptureMode relaxed;  // a capture may be open on this thread
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "{}: cudaEventCreateWithFlags", op);
      done_ = std::unique_ptr<CUevent_st, EventDeleter>(e);
    }
    // The staging copy reads its addresses from its arguments from now on, none to begin with
    // (a launch outside cugraphs before any call stages nothing).
    for (PatchedNode& n : found) {
      if (!n.stage) continue;
      StageArgs a;
      std::memcpy(&a, n.args.bytes() + *n.stage, sizeof a);
      a.control = nullptr;
      for (auto& src : a.inline_sources) src = nullptr;
      std::memcpy(n.args.bytes() + *n.stage, &a, sizeof a);
      check(cudaGraphKernelNodeSetParams(n.node, &n.args.launch()), "{}: cudaGraphKernelNodeSetParams (staging copy)", op);
    }
    patched_ = std::move(found);
    staged_.assign(leaves_, 0);
    by_arguments_ = true;
    return true;
  }

  // Under PerLaunch::Parameters, an Error saying `why` launches cannot hand their values over
  // as kernel arguments; under Auto, false (the ring is used).
  bool refuse_arguments(std::string_view op, std::string_view why) const {
    if (policy_ == PerLaunch::Parameters)
      throw_misuse(op, "the capture asked for PerLaunch::Parameters, but {}, so launches could not hand their "
                       "values over as kernel arguments. Pass each PhiloxArgs to its kernel by value, or capture "
                       "with PerLaunch::Auto or PerLaunch::Ring",
                   why);
    return false;
  }

  // The ring's head before every root node of `g` and its tail after every last one.
  void attach_ring(cudaGraph_t g, std::string_view op) {
    const void* head_kernel = ring_head_kernel.load(std::memory_order_acquire);
    const void* tail_kernel = ring_tail_kernel.load(std::memory_order_acquire);
    if (head_kernel == nullptr || tail_kernel == nullptr)
      throw_needs_nvcc(op, "a graph that draws random numbers or stages inputs");
    ring_ = HostRing(kSlots, width(), "the per-launch ring");
    args_ = {ring_.data(), kSlots, width(), static_cast<unsigned>(uses_.size()), leaves_, values(),
             static_cast<const void**>(sources_.get()), control(), ring_.done_word()};
    const auto roots = graph_nodes(g, op, true);
    auto sinks = graph_sinks(g, op);
    void* params[] = {&args_};
    cudaKernelNodeParams kp{};
    kp.func = const_cast<void*>(head_kernel);
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(head_threads(args_));
    kp.kernelParams = params;
    cudaGraphNode_t head = nullptr;
    check(cudaGraphAddKernelNode(&head, g, nullptr, 0, &kp), "{}: cudaGraphAddKernelNode (ring head)", op);
    for (cudaGraphNode_t root : roots) add_edge(g, head, root, op);
    if (sinks.empty()) sinks.push_back(head);  // an empty capture: the tail after the head alone
    kp.func = const_cast<void*>(tail_kernel);
    kp.blockDim = dim3(1);
    cudaGraphNode_t tail = nullptr;
    check(cudaGraphAddKernelNode(&tail, g, sinks.data(), sinks.size(), &kp), "{}: cudaGraphAddKernelNode (ring tail)", op);
  }

  // Names the executable's nodes for the patched nodes, once per executable.
  template <class Resolve>
  void bind(cudaGraphExec_t exec, const Resolve& resolve) {
    if (bound_ == exec) [[likely]]
      return;
    for (PatchedNode& n : patched_) n.target = resolve(n.index, n.node);
    bound_ = exec;
  }

  // Each generator's (seed, offset) for this launch, advancing it by what a launch draws.
  void take_values() {
    taken_.resize(uses_.size());
    for (std::size_t i = 0; i < uses_.size(); ++i) taken_[i] = uses_[i].generator->take(uses_[i].increment);
  }

  // Writes this launch's values into `n`'s arguments and sets its node in `exec`.
  void set_node(cudaGraphExec_t exec, PatchedNode& n, std::string_view op) {
    write_values(n);
    if (const cudaError_t e = cudaGraphExecKernelNodeSetParams(exec, n.target, &n.args.launch()); e != cudaSuccess)
      [[unlikely]]
      throw_cuda(e, format("{}: handing a launch its values (cudaGraphExecKernelNodeSetParams)", op));
  }

  // Writes the values taken last (taken_, staged_) into `n`'s arguments.
  void write_values(PatchedNode& n) noexcept {
    for (const auto& site : n.draws) {
      const auto [seed, offset] = taken_[site.draw.generator];
      n.args.set_word(site.at, seed);
      n.args.set_word(site.at + 8, offset + site.draw.offset);
      n.args.set_word(site.at + 16, 0);  // rng::unpack takes the numbers themselves
    }
    if (n.stage && leaves_ != 0)
      std::memcpy(n.args.bytes() + *n.stage + offsetof(StageArgs, inline_sources), staged_.data(),
                  leaves_ * sizeof(unsigned long long));
  }

  [[nodiscard]] unsigned long long* control() const noexcept { return static_cast<unsigned long long*>(control_.get()); }
  [[nodiscard]] unsigned long long* values() const noexcept { return control() + 2; }
  [[nodiscard]] unsigned width() const noexcept { return 1 + 2 * static_cast<unsigned>(uses_.size()) + leaves_; }

  std::shared_ptr<void> control_;
  std::shared_ptr<void> sources_;  // set when the graph stages inputs
  std::vector<Use> uses_;
  std::vector<DrawMade> draws_;    // every draw of the capture, in order
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken_;  // this launch's (seed, offset) a generator
  unsigned leaves_ = 0;
  bool capturing_ = true;
  PerLaunch policy_;
  // Values as kernel arguments:
  bool by_arguments_ = false;
  std::vector<PatchedNode> patched_;
  std::vector<unsigned long long> staged_;  // this launch's input addresses
  cudaGraphExec_t bound_ = nullptr;         // the executable patched_'s targets name
  struct EventDeleter {
    void operator()(cudaEvent_t e) const noexcept {
      RelaxedCaptureMode relaxed;
      report_in_destructor(cudaEventDestroy(e), "cudaEventDestroy (per-launch values)");
    }
  };
  std::unique_ptr<CUevent_st, EventDeleter> done_;  // recorded after every launch of a graph that stages
  bool launched_ = false;                           // since the last wait_all
  // Values through the ring:
  RingArgs args_{};
  HostRing ring_;  // last: waited for before the device words go
};

}  // namespace cugraphs::detail
