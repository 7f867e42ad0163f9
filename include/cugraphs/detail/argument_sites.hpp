// Per-launch values handed over as kernel arguments (PerLaunch::Parameters): the kernel nodes
// of a captured graph whose arguments hold a draw's PhiloxArgs (seed 0, the draw's offset,
// base at the graph's device words; also inside structs passed by value) or the staging
// copy's StageArgs, found once after the capture (KernelArgs), and set before each launch
// with this launch's values (cudaGraphExecKernelNodeSetParams, which leaves launches already
// queued as they were). find() also says why a graph cannot take its values that way: a draw
// that reaches the device otherwise (inside a conditional body or a child graph, through a
// kernel only the driver can read, through a copy from host memory) would be refreshed by
// nothing. LaunchRing (launch_ring.hpp) chooses between this and its ring.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/kernel_args.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs::detail {

// A draw a capture made: its generator (index in the graph) and its offset inside the graph.
struct DrawMade {
  unsigned generator;
  std::uint64_t offset;
};

class ArgumentSites {
public:
  // What the capture recorded: the generators' device words ((seed, offset) pairs), every
  // draw, and the staging copy's source table and width (null, 0: no staging).
  struct Recorded {
    const unsigned long long* words;
    std::size_t generators;
    std::span<const DrawMade> draws;
    const void* sources;
    unsigned leaves;
  };
  // Each generator's (seed, offset) for one launch.
  using Taken = std::span<const std::pair<std::uint64_t, std::uint64_t>>;

  explicit ArgumentSites(const Recorded& rec) : rec_(rec) {}

  // Finds the kernel nodes of `g` that take the graph's per-launch values as arguments.
  // Returns why launches cannot hand the values over that way, or none (then nodes() says
  // how many nodes would be set at every launch). Changes nothing in `g`.
  [[nodiscard]] std::optional<std::string> find(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                                std::string_view op) {
    if (rec_.sources != nullptr && rec_.leaves > StageArgs::kInlineLeaves)
      return format("the staging copy takes at most {} input leaves as arguments and this callable stages {}",
                    StageArgs::kInlineLeaves, rec_.leaves);
    const auto nodes = graph_nodes(g, op);
    std::vector<PatchedNode> found;
    std::vector<bool> seen(rec_.draws.size(), false);
    std::optional<std::string> elsewhere;  // how a draw may reach the device other than as patched arguments
    bool staged = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      cudaGraphNodeType t{};
      if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) continue;
      auto args = t == cudaGraphNodeTypeKernel ? KernelArgs::read(nodes[i]) : std::nullopt;
      if (!args) {
        if (!rec_.draws.empty() && !elsewhere) elsewhere = draw_elsewhere(nodes[i], false, conditionals, op);
        continue;
      }
      PatchedNode n{i, nodes[i], nullptr, std::move(*args), {}, {}};
      find_sites(n);
      if (n.draws.empty() && !n.stage) continue;
      for (const auto& site : n.draws)
        for (std::size_t d = 0; d < rec_.draws.size(); ++d)
          if (rec_.draws[d].generator == site.draw.generator && rec_.draws[d].offset == site.draw.offset) seen[d] = true;
      staged = staged || n.stage.has_value();
      found.push_back(std::move(n));
    }
    (void)cudaGetLastError();
    for (std::size_t d = 0; d < rec_.draws.size(); ++d)
      if (!seen[d])
        return format("draw {} of the capture (generator {} of the graph, offset {}) does not reach its kernel as a "
                      "kernel argument (it is passed through memory, to a kernel whose arguments CUDA cannot lay "
                      "out, or not used)",
                      d, rec_.draws[d].generator, rec_.draws[d].offset);
    if (elsewhere) return *elsewhere + ", which only the ring refreshes";
    if (rec_.sources != nullptr && rec_.leaves != 0 && !staged)
      return std::string("the staging copy's arguments were not found in the graph");
    patched_ = std::move(found);
    return std::nullopt;
  }

  // How many kernel nodes each launch sets.
  [[nodiscard]] std::size_t nodes() const noexcept { return patched_.size(); }

  // Once chosen: the staging copy of `g` reads its addresses from its arguments from now on,
  // none to begin with (a launch outside cugraphs before any call stages nothing), and a graph
  // that stages gets the event its launches record.
  void ready(std::string_view op) {
    if (rec_.sources != nullptr) {
      RelaxedCaptureMode relaxed;  // a capture may be open on this thread
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "{}: cudaEventCreateWithFlags", op);
      done_ = std::unique_ptr<CUevent_st, EventDeleter>(e);
    }
    for (PatchedNode& n : patched_) {
      if (!n.stage) continue;
      StageArgs a;
      std::memcpy(&a, n.args.bytes() + *n.stage, sizeof a);
      a.control = nullptr;
      for (auto& src : a.inline_sources) src = nullptr;
      std::memcpy(n.args.bytes() + *n.stage, &a, sizeof a);
      check(cudaGraphKernelNodeSetParams(n.node, &n.args.launch()), "{}: cudaGraphKernelNodeSetParams (staging copy)", op);
    }
    staged_.assign(rec_.leaves, 0);
  }

  // ---- every launch

  // Names the executable's nodes for the patched nodes, once per executable.
  template <class Resolve>
  void bind(cudaGraphExec_t exec, const Resolve& resolve) {
    if (bound_ == exec) [[likely]]
      return;
    for (PatchedNode& n : patched_) n.target = resolve(n.index, n.node);
    bound_ = exec;
  }

  // Where `stage` writes this launch's input addresses (one a leaf, 0: not copied).
  [[nodiscard]] std::span<unsigned long long> staged() noexcept { return staged_; }

  // Sets every patched node of `exec` with this launch's values.
  void set_nodes(cudaGraphExec_t exec, Taken taken, std::string_view op) {
    for (PatchedNode& n : patched_) set_node(exec, n, taken, op);
  }

  // After the launch on `stream`: a graph that stages reads its owner's buffers, so an event
  // recorded after every launch tells when they are free (the executable's launches run in
  // order, so the last record's completion is all of theirs; an event completes even after
  // its stream goes).
  void launched(cudaStream_t stream, std::string_view op) {
    if (!done_) return;
    if (const cudaError_t e = cudaEventRecord(done_.get(), stream); e != cudaSuccess) [[unlikely]] {
      // The launch is queued and the event cannot tell when it ends: wait for it here,
      // before anything it reads can go.
      RelaxedCaptureMode relaxed;
      (void)cudaStreamSynchronize(stream);
      throw_cuda(e, format("{}: recording the launch's end (cudaEventRecord)", op));
    }
    recorded_ = true;
  }

  // Waits for the event recorded after the last launch (a graph that only draws records
  // none: like any graph, its launches read nothing that its owner frees).
  void wait(std::string_view op) noexcept {
    if (!recorded_) return;
    RelaxedCaptureMode relaxed;  // a capture open on this thread must go on
    if (const cudaError_t e = cudaEventSynchronize(done_.get()); e != cudaSuccess) {
      (void)cudaGetLastError();
      report_in_destructor(e, op);
    }
    recorded_ = false;
  }

  // Sets `target`, a node of `exec`, to `p` (Graph::set_kernel_args): the values in `p` are
  // found afresh and the node is set with the last launch's (so that later launches keep the
  // change, and a launch outside cugraphs repeats the last values); a node that took no
  // values when captured cannot start taking them (nothing would refresh them): an Error.
  // Nothing changes when it throws.
  template <class Resolve>
  void set_node_params(cudaGraphExec_t exec, const Resolve& resolve, cudaGraphNode_t target,
                       const cudaKernelNodeParams& p, Taken taken, std::string_view op) {
    const auto set = [&](const cudaKernelNodeParams& q) {
      if (const cudaError_t e = cudaGraphExecKernelNodeSetParams(exec, target, &q); e != cudaSuccess) [[unlikely]]
        throw_cuda(e, format("{} (cudaGraphExecKernelNodeSetParams)", op));
    };
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
    if (!taken.empty()) write_values(next, taken);
    set(next.args.launch());
    *it = std::move(next);
  }

private:
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

  // The draw whose PhiloxArgs, as a capture handed them out (seed 0, this draw's offset, base
  // at one of the generators' words), start at `at`, if they do.
  [[nodiscard]] std::optional<DrawMade> draw_at(const std::byte* at) const noexcept {
    std::uint64_t w[3];
    std::memcpy(w, at, sizeof w);
    const auto words = reinterpret_cast<std::uintptr_t>(rec_.words);
    if (w[0] != 0 || w[2] < words || w[2] >= words + 16 * rec_.generators || (w[2] - words) % 16 != 0) return std::nullopt;
    return DrawMade{static_cast<unsigned>((w[2] - words) / 16), w[1]};
  }

  // Calls `each(at, draw)` for every draw's PhiloxArgs found in `bytes` (at 8-byte steps from
  // its start, where a struct of 64-bit members passed by value can start) until it returns
  // true; returns whether it did.
  template <class Each>
  bool each_draw(std::span<const std::byte> bytes, Each&& each) const {
    for (std::size_t at = 0; at + 24 <= bytes.size(); at += 8)
      if (const auto d = draw_at(bytes.data() + at); d && each(at, *d)) return true;
    return false;
  }
  [[nodiscard]] bool holds_draw(std::span<const std::byte> bytes) const {
    return each_draw(bytes, [](std::size_t, DrawMade) { return true; });
  }

  // Where `n`'s arguments hold a PhiloxArgs of this graph's draws or the staging copy's
  // StageArgs (its table of sources is this ring's, whatever it reads them from).
  void find_sites(PatchedNode& n) const {
    n.draws.clear();
    n.stage.reset();
    for (const auto& q : n.args.params())
      (void)each_draw({n.args.bytes() + q.offset, q.size}, [&](std::size_t at, DrawMade d) {
        n.draws.push_back({q.offset + at, d});
        return false;
      });
    if (rec_.sources == nullptr) return;
    for (const auto& q : n.args.params()) {
      if (q.size != sizeof(StageArgs)) continue;
      StageArgs a;
      std::memcpy(&a, n.args.bytes() + q.offset, sizeof a);
      if (a.sources == rec_.sources && a.leaves == rec_.leaves) n.stage = q.offset;
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
    const std::size_t skip = std::min<std::size_t>((8 - reinterpret_cast<std::uintptr_t>(first) % 8) % 8, bytes);
    std::optional<DrawMade> found;
    (void)each_draw({first + skip, bytes - skip}, [&](std::size_t, DrawMade d) {
      found = d;
      return true;
    });
    return found;
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
    const auto inside = [&, this](cudaGraph_t body) -> std::optional<std::string> {
      for (cudaGraphNode_t n : graph_nodes(body, op))
        if (auto why = draw_elsewhere(n, true, conditionals, op)) return why;
      return std::nullopt;
    };
    switch (t) {
      case cudaGraphNodeTypeKernel: {
        const auto args = nested ? KernelArgs::read(node) : std::nullopt;
        const auto blobs = args ? std::nullopt : driver_kernel_args(node);
        if (!args && !blobs) return std::string("a kernel node whose arguments CUDA cannot read (which might hold a draw)");
        bool holds = false;
        if (args)
          for (const auto& q : args->params()) holds = holds || holds_draw({args->bytes() + q.offset, q.size});
        else
          for (const auto& b : *blobs) holds = holds || holds_draw(b);
        if (holds)
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

  // Writes this launch's values into `n`'s arguments and sets its node in `exec`.
  void set_node(cudaGraphExec_t exec, PatchedNode& n, Taken taken, std::string_view op) {
    write_values(n, taken);
    if (const cudaError_t e = cudaGraphExecKernelNodeSetParams(exec, n.target, &n.args.launch()); e != cudaSuccess)
      [[unlikely]]
      throw_cuda(e, format("{}: handing a launch its values (cudaGraphExecKernelNodeSetParams)", op));
  }

  // Writes the values taken last (`taken`, staged_) into `n`'s arguments.
  void write_values(PatchedNode& n, Taken taken) noexcept {
    for (const auto& site : n.draws) {
      const auto [seed, offset] = taken[site.draw.generator];
      n.args.set_word(site.at, seed);
      n.args.set_word(site.at + 8, offset + site.draw.offset);
      n.args.set_word(site.at + 16, 0);  // rng::unpack takes the numbers themselves
    }
    if (n.stage && rec_.leaves != 0)
      std::memcpy(n.args.bytes() + *n.stage + offsetof(StageArgs, inline_sources), staged_.data(),
                  rec_.leaves * sizeof(unsigned long long));
  }

  struct EventDeleter {
    void operator()(cudaEvent_t e) const noexcept {
      RelaxedCaptureMode relaxed;
      report_in_destructor(cudaEventDestroy(e), "cudaEventDestroy (per-launch values)");
    }
  };

  Recorded rec_;
  std::vector<PatchedNode> patched_;
  std::vector<unsigned long long> staged_;  // this launch's input addresses
  cudaGraphExec_t bound_ = nullptr;         // the executable patched_'s targets name
  std::unique_ptr<CUevent_st, EventDeleter> done_;  // recorded after every launch of a graph that stages
  bool recorded_ = false;                           // since the last wait
};

}  // namespace cugraphs::detail
