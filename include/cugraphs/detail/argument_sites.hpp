// Per-launch values handed over as kernel arguments (PerLaunch::Parameters): the kernel nodes
// of a captured graph whose arguments hold a draw's PhiloxArgs (captured_seed, the draw's offset,
// base at the graph's device words; also inside structs passed by value) or the staging
// copy's StageArgs, found once after the capture (KernelArgs), and set before each launch
// with this launch's values (cudaGraphExecKernelNodeSetParams, which leaves launches already
// queued as they were). find() also says why a graph cannot take its values that way: a draw
// that reaches the device otherwise (inside a conditional body or a child graph, through a
// kernel only the driver can read, through a copy from host memory) would be refreshed by
// nothing. LaunchRing (launch_ring.hpp) chooses between this and its ring.
//
// A graphed callable made with InputMode::InPlace goes further: the static inputs' addresses
// found in the arguments of f's kernel nodes (any 8-byte word from a leaf's first byte to one
// past its last, the leaf padded so that no other buffer starts there) are rebound at every
// call to the inputs' own, and the staging copy's node is disabled (cudaGraphNodeSetEnabled),
// so that f reads the caller's buffers and nothing is copied; a library's kernels (cuBLAS's),
// which this runtime cannot name, are read and set through the driver. find() refuses a graph
// that reaches a static input any other way (a copy, a memset, a kernel whose arguments
// cannot be read, one in a conditional body or a child graph). An input that lies in memory
// the graph uses itself (its pool's segments and allocation nodes, which f's temporaries and
// the outputs of this and earlier callables of the pool occupy), in an output, or is
// misaligned is copied for that call, alone: the staging node enabled with it as its only
// source, and f's arguments for it set back to its static input.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/buffer_registry.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/kernel_args.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/detail/session_api.hpp>
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

// A new event (timing off), destroyed with its last holder.
[[nodiscard]] std::shared_ptr<CUevent_st> new_event(std::string_view op);
// An event that a graph records at the end of every launch, through an event record node
// added after `after` (the node stands for the launch that queued it; no call of its own). The
// graph's holder keeps the event as long as the graph that names it.
[[nodiscard]] std::shared_ptr<CUevent_st> add_end_event(cudaGraph_t g, std::span<const cudaGraphNode_t> after,
                                                        std::string_view op);
// Waits until the last launch has recorded `e` (nothing for null); reports a failure, never throws.
void wait_end_event(cudaEvent_t e, std::string_view op) noexcept;

// A draw a capture made: its generator (index in the graph) and its offset inside the graph.
struct DrawMade {
  unsigned generator;
  std::uint64_t offset;
};

class ArgumentSites {
public:
  // What the capture recorded: the generators' device words ((seed, offset) pairs), every
  // draw, and the staging copy's source table and width (null, 0: no staging); for inputs read
  // in place, the static inputs and the memory (address, bytes) where an input is copied
  // instead (the graph's pool and allocations, the callable's outputs; LaunchRing keeps it).
  using Range = std::pair<std::uintptr_t, std::size_t>;
  struct Recorded {
    const unsigned long long* words;
    std::size_t generators;
    std::span<const DrawMade> draws;
    const void* sources;
    unsigned leaves;
    std::span<const StageTarget> statics = {};
    bool in_place = false;
    std::span<const Range> shield = {};
  };
  // Each generator's (seed, offset) for one launch.
  using Taken = std::span<const std::pair<std::uint64_t, std::uint64_t>>;

  explicit ArgumentSites(const Recorded& rec) : rec_(rec) {}

  // Finds the kernel nodes of `g` that take the graph's per-launch values as arguments.
  // Returns why launches cannot hand the values over that way, or none (then nodes() says
  // how many nodes would be set at every launch). Changes nothing in `g`.
  [[nodiscard]] std::optional<std::string> find(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                                std::string_view op);

  // The first static input leaf that no node of `g` reaches (at any depth, the staging copy
  // aside): no kernel argument word (runtime's or driver's; nor a texture or parameter block
  // it names) lies in it or its pads, no copy or memset touches it, no copy from pinned host
  // memory carries its address, no NCCL collective of `collectives` spans it (a word counts
  // from kBaseSlack bytes before the input to one past its end). f's work on
  // another stream than the capture's (a library handle bound to a stream of its own) leaves
  // the inputs it reads so. None when every leaf is reached, or when some node cannot be read
  // (which leaves it reaches cannot be told). Capture time only: changes nothing.
  static constexpr std::uintptr_t kBaseSlack = 16;  // a one-based base of up to 16-byte elements
  [[nodiscard]] std::optional<unsigned> unread_leaf(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                                    std::span<const Range> collectives, std::string_view op) const;

  // A generator of the graph whose draws reach no node: its device words' address (every
  // draw's PhiloxArgs::base) in no kernel's arguments (top-level, nested, the runtime's or
  // the driver's) and in no host memory a copy carries to the device. A kernel that took a
  // draw's .seed and .offset as plain numbers draws the same numbers at every launch. None
  // when every generator is reached, or when some node cannot be read. Capture time only.
  [[nodiscard]] std::optional<unsigned> unreached_generator(cudaGraph_t g,
                                                            const std::vector<ConditionalMade>& conditionals,
                                                            std::string_view op) const;
  // Whether some kernel of `g` takes what a draw of `generator` holds inside a capture as its
  // .seed (captured_seed(generator), as 8 bytes or its low 4, a parameter or within one): the
  // sign of a kernel given the draw's numbers rather than the PhiloxArgs.
  [[nodiscard]] bool takes_placeholder(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                       unsigned generator, std::string_view op) const;

  // How many kernel nodes each launch sets.
  [[nodiscard]] std::size_t nodes() const noexcept { return patched_.size(); }

  // Once chosen: the staging copy of `g` reads its addresses from its arguments from now on,
  // none to begin with (a launch outside cugraphs before any call stages nothing), and a graph
  // that stages gets an event and a node at its end that records it: every launch then
  // records the event with no call of its own (the node stands for the launch that queued
  // it), so that the event tells when the owner's buffers are free.
  void ready(cudaGraph_t g, std::string_view op);

  // ---- every launch

  // Names the executable's nodes for the patched nodes, once per executable.
  template <class Resolve>
  void bind(cudaGraphExec_t exec, const Resolve& resolve) {
    if (bound_ == exec) [[likely]]
      return;
    for (PatchedNode& n : patched_) {
      if (n.node != nullptr) n.target = resolve(n.index, n.node);  // else added by set_node_params for exec
      n.current = false;
    }
    staging_enabled_.reset();
    bound_ = exec;
  }

  // Where `stage` writes this launch's input addresses (one a leaf, 0: not copied).
  [[nodiscard]] std::span<unsigned long long> staged() noexcept { return staged_; }

  // Sets every patched node of `exec` with this launch's values; a node that already holds
  // them (a graphed callable called again with the same inputs, and no draw) is left as it is.
  // With inputs read in place, this launch's inputs are first judged one by one (read in
  // place, or copied when it lies in the graph's own memory) and the staging node enabled
  // (copying those alone) or disabled to match. The order keeps the executable right for a
  // launch outside cugraphs after a failure midway: all read in place, f's nodes first, then
  // the copy disabled; some copied, the copy's arguments first, then the copy enabled, then
  // f's nodes.
  void set_nodes(cudaGraphExec_t exec, Taken taken, std::string_view op);

  // How many input leaves the last launch read in place (InputMode::InPlace; the rest of
  // those it was handed, other than the static inputs themselves, it copied).
  [[nodiscard]] std::size_t leaves_in_place() const noexcept { return leaves_in_place_; }

  // Waits for the event the last launch records at its end (the executable's launches run in
  // order, so its completion is all of theirs; a graph that only draws has none: like any
  // graph, its launches read nothing that its owner frees).
  void wait(std::string_view op) noexcept;

  // The event the graph's last node records (null for a graph that does not stage).
  [[nodiscard]] std::shared_ptr<void> end_event() const noexcept { return done_; }

  // Sets `target`, a node of `exec`, to `p` (Graph::set_kernel_args): the values in `p` are
  // found afresh and the node is set with the last launch's (so that later launches keep the
  // change, and a launch outside cugraphs repeats the last values); a node that took no
  // values when captured cannot start taking them (nothing would refresh them): an Error.
  // Nothing changes when it throws. `function` is p's kernel's (kernel_function), kept by the
  // caller.
  template <class Resolve>
  void set_node_params(cudaGraphExec_t exec, const Resolve& resolve, cudaGraphNode_t target,
                       const cudaKernelNodeParams& p, cudaFunction_t& function, Taken taken, std::string_view op) {
    const auto set = [&](const cudaKernelNodeParams& q) {
      if (const cudaError_t e = set_exec_kernel_node(exec, target, q, function); e != cudaSuccess) [[unlikely]]
        throw_cuda(e, format("{} (cudaGraphExecKernelNodeSetParams)", op));
    };
    bind(exec, resolve);
    auto layout = KernelArgs::layout(p.func);
    const auto it = std::ranges::find(patched_, target, &PatchedNode::target);
    if (!layout) {
      if (rec_.in_place)
        throw_misuse(op, "this graphed callable reads its inputs in place, and CUDA cannot lay out the new "
                         "kernel's parameters (cudaFuncGetParamInfo), so a static input's address among them "
                         "could not be rebound at each call");
      if (it != patched_.end())
        throw_misuse(op, "this node takes per-launch values as kernel arguments, and CUDA cannot lay out the new "
                         "kernel's parameters (cudaFuncGetParamInfo), so later launches could not hand them over");
      set(p);
      return;
    }
    PatchedNode next{it != patched_.end() ? it->index : 0, it != patched_.end() ? it->node : nullptr, target,
                     KernelArgs(p, std::move(*layout)), {}, {}, {}};
    next.function = function;
    find_sites(next);
    if (it == patched_.end()) {
      if (!next.draws.empty())
        throw_misuse(op, "the new arguments hand this node the PhiloxArgs of a draw, but it drew nothing when "
                         "captured, and this graph refreshes its offsets as the drawing nodes' kernel arguments "
                         "(PerLaunch::Parameters), so nothing would refresh them here. Draw in this node when "
                         "capturing, or capture with PerLaunch::Ring");
      if (next.leaves.empty()) {
        set(p);
        return;
      }
      // Else a node that now takes a static input's address: rebound at every launch from now on.
    }
    (void)write_values(next, taken);
    if (it != patched_.end()) it->current = false;  // unknown once set() has failed
    set(next.args.launch());
    next.current = true;
    if (it != patched_.end())
      *it = std::move(next);
    else
      patched_.push_back(std::move(next));
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
    struct LeafSite {
      std::size_t at;       // byte of the address in the arguments
      unsigned leaf;        // the static input it points into
      std::uint64_t delta;  // how far past the leaf's first byte (modulo 2^64: a pad's word lies before it)
    };
    std::vector<LeafSite> leaves;      // inputs read in place: the static inputs' addresses
    std::optional<std::size_t> stage;  // byte of the StageArgs
    bool current = false;  // the executable's node holds `args` as they are
    cudaFunction_t function = nullptr;  // the kernel's (kernel_function when readied; a library kernel's from the driver)
  };

  // The draw whose PhiloxArgs, as a capture handed them out (its generator's captured_seed,
  // this draw's offset, base at that generator's words), start at `at`, if they do.
  [[nodiscard]] std::optional<DrawMade> draw_at(const std::byte* at) const noexcept;

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
  // StageArgs (its table of sources is this ring's, whatever it reads them from), and with
  // inputs read in place, the static inputs' addresses (not in the staging node).
  void find_sites(PatchedNode& n) const;

  // Whether `bytes` (one parameter) are the staging copy's StageArgs: its table of sources is
  // this ring's, whatever it reads them from.
  [[nodiscard]] bool is_stage_args(std::span<const std::byte> bytes) const noexcept;
  // The static input whose bytes (first to one past the last) hold address `w`, if one does;
  // read in place, its pads too (kInPlacePad bytes before and after it).
  [[nodiscard]] std::optional<unsigned> leaf_at(std::uint64_t w) const noexcept;
  // The first static input whose address a word (at 8-byte steps) of `bytes` holds.
  [[nodiscard]] std::optional<unsigned> leaf_in(std::span<const std::byte> bytes) const noexcept;
  // The static input that a texture object among `bytes` (a word at 8-byte steps that CUDA
  // knows as one, over linear or pitched memory) reads, if one does: the texture holds the
  // address it was made with, which no call can rebind.
  [[nodiscard]] std::optional<unsigned> texture_leaf(std::span<const std::byte> bytes) const noexcept;
  // The static input whose address a block of pinned host or managed memory that `w` points
  // to holds, if one does: a table of addresses that the host wrote while f was captured and a
  // kernel reads, which no call can rebind. Searched from `w` to the end of its allocation, at
  // most kTableSearched bytes (to the end of its page where CUDA does not say); managed memory
  // only where the host may read it while the device works.
  static constexpr std::size_t kTableSearched = std::size_t{64} << 10;
  [[nodiscard]] std::optional<unsigned> table_leaf(std::uint64_t w) const noexcept;
  // The first static input that a block some word of `bytes` (at 8-byte steps) points to holds
  // the address of (table_leaf).
  [[nodiscard]] std::optional<unsigned> table_in(std::span<const std::byte> bytes) const noexcept;
  // How a kernel argument of `bytes` reaches a static input some way that no call can rebind
  // (texture_leaf, then table_in), in words that follow the node's name; none otherwise. Top
  // level and nested kernels alike.
  [[nodiscard]] std::optional<std::string> hidden_reach(std::span<const std::byte> bytes) const;
  // The first static input that [p, p + bytes) overlaps.
  [[nodiscard]] std::optional<unsigned> leaf_overlapped(const void* p, std::size_t bytes) const noexcept;

  // Calls `each` on every node of the graphs nested in `node` (of type `t`: a child graph's
  // nodes, a conditional's bodies', at any depth through `each`) until one gives a reason, and
  // gives that; or why they cannot be read (prefixed by `where`).
  template <class Each>
  [[nodiscard]] static std::optional<std::string> first_nested(cudaGraphNode_t node, cudaGraphNodeType t,
                                                               const std::vector<ConditionalMade>& conditionals,
                                                               std::string_view op, const std::string& where,
                                                               Each&& each) {
    std::vector<cudaGraph_t> graphs;
    if (t == cudaGraphNodeTypeGraph) {
      cudaGraph_t child = nullptr;
      if (cudaGraphChildGraphNodeGetGraph(node, &child) != cudaSuccess) return where + "a child graph CUDA cannot read";
      graphs.push_back(child);
    } else {
      const auto made = std::ranges::find(conditionals, node, &ConditionalMade::node);
      if (made == conditionals.end())
        return where + "a conditional node that cugraphs did not make (its bodies cannot be read)";
      graphs.assign(made->bodies.begin(), made->bodies.end());
    }
    for (cudaGraph_t g : graphs)
      for (cudaGraphNode_t n : graph_nodes(g, op))
        if (auto why = each(n)) return why;
    return std::nullopt;
  }

  // With inputs read in place: why `node` (index `i` of the graph, or inside a body or child
  // graph when `nested`) reaches a static input some way that a launch cannot rebind, or none.
  // A top-level kernel node the runtime can read is judged by find_sites instead.
  [[nodiscard]] std::optional<std::string> reaches_statics(cudaGraphNode_t node, std::size_t i, bool nested,
                                                           const std::vector<ConditionalMade>& conditionals,
                                                           std::string_view op) const;

  // Judges this launch's inputs (committed_) one by one into stage_sources_: an input is
  // copied that lies in the graph's own memory, or is not aligned as its static input is (to
  // 256 bytes: f's capture may have chosen its kernels by the static inputs' alignment); the
  // others are read in place (leaves_in_place_). Returns whether any is copied.
  bool judge_inputs() noexcept;
  // Enables or disables the staging node of `exec` (nothing when it already is).
  void enable_staging(cudaGraphExec_t exec, bool enabled, std::string_view op);

  // The bytes a copy spans from pointer `q` (its position `at` included) to its last byte; a
  // slice taken as at least `height` rows of the pitch (an over-estimate where the pointer's
  // ysize is not given, which only widens a search).
  [[nodiscard]] static std::size_t copy_extent(const cudaMemcpy3DParms& p, const cudaPitchedPtr& q,
                                               const cudaPos& at) noexcept;
  // The source of a copy from pinned or managed host memory, as the host holds it now: its
  // words from the first 8-byte boundary, unless it spans more than kHostSearched bytes (then
  // not searched). None for other sources: pageable memory (refused by the escape check, and
  // with inputs read in place by reaches_statics) is not read, since it may no longer be mapped.
  struct HostSource {
    std::span<const std::byte> words;
    std::size_t bytes = 0;
    bool searched = false;
  };
  static constexpr std::size_t kHostSearched = std::size_t{64} << 20;
  [[nodiscard]] static std::optional<HostSource> host_source(const cudaMemcpy3DParms& p);

  // Why `node` may hand a draw to the device some way that node updates of the executable
  // cannot refresh, or none: a kernel inside a conditional body or a child graph (`nested`),
  // or one this runtime cannot read, that takes a draw's PhiloxArgs, or whose arguments
  // cannot be read at all; a memcpy from host memory holding them; the same inside bodies
  // and child graphs, at any depth.
  [[nodiscard]] std::optional<std::string> draw_elsewhere(cudaGraphNode_t node, bool nested,
                                                          const std::vector<ConditionalMade>& conditionals,
                                                          std::string_view op) const;

  // Writes this launch's values into `n`'s arguments and sets its node in `exec`.
  void set_node(cudaGraphExec_t exec, PatchedNode& n, Taken taken, std::string_view op);

  // Writes the values taken last (`taken`, committed_) into `n`'s arguments; returns whether
  // that changed them. Before the first launch (`taken` empty) the draws are left as they are.
  bool write_values(PatchedNode& n, Taken taken) noexcept;

  Recorded rec_;
  std::optional<bool> staging_enabled_;  // the executable's staging node's state, once set
  std::size_t leaves_in_place_ = 0;      // how many inputs the last launch read in place
  // Inputs read in place: the staging copy's sources for the last launch, one a leaf: the
  // address of an input that is copied, 0 for one read in place (or the static input itself).
  std::vector<unsigned long long> stage_sources_;
  std::vector<PatchedNode> patched_;
  // This launch's input addresses, as `stage` writes them (every word, every launch), and the
  // last launch's, once its nodes are being set: swapped, not copied.
  std::vector<unsigned long long> staged_;
  std::vector<unsigned long long> committed_;
  cudaGraphExec_t bound_ = nullptr;         // the executable patched_'s targets name
  // For a graph that stages: recorded by the graph's last node at the end of every launch;
  // shared with the graph's holder (NativeGraph::keep), since the node names it.
  std::shared_ptr<CUevent_st> done_;
};

// A PhiloxArgs this thread drew outside any capture (tls_eager_draws) that a kernel node of `g`
// (its child graphs, the bodies in `conditionals`) takes as a parameter of its own: its
// (seed, offset). Such a kernel would draw the same numbers at every replay. Queries in
// relaxed mode; leaves no error behind.
[[nodiscard]] std::optional<std::pair<std::uint64_t, std::uint64_t>> eager_draw_taken(
    cudaGraph_t g, const std::vector<ConditionalMade>& conditionals, std::string_view op) noexcept;

// Visits every node of `g`, its child graphs' and the bodies of the conditional nodes in
// `conditionals`: `kernel(params)` with a kernel node's arguments, one span a parameter (the
// runtime's reading, else the driver's), `copy(p)` with a memcpy node's parameters,
// `set(p)` with a memset node's. `kernel` and `copy` return false where they cannot judge
// the node. False where some node could not be read or judged (the walk stops there).
template <class Kernel, class Copy, class Set>
bool walk_nodes(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals, std::string_view op, Kernel&& kernel,
                Copy&& copy, Set&& set) {
  for (cudaGraphNode_t n : graph_nodes(g, op)) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(n, &t) != cudaSuccess) return false;
    if (t == cudaGraphNodeTypeKernel) {
      const auto bytes_of = kernel_param_bytes(n);
      if (!bytes_of || !kernel(std::span<const std::span<const std::byte>>(bytes_of->spans()))) return false;
    } else if (t == cudaGraphNodeTypeMemcpy) {
      cudaMemcpy3DParms p{};
      if (cudaGraphMemcpyNodeGetParams(n, &p) != cudaSuccess || !copy(p)) return false;
    } else if (t == cudaGraphNodeTypeMemset) {
      cudaMemsetParams p{};
      if (cudaGraphMemsetNodeGetParams(n, &p) != cudaSuccess) return false;
      set(p);
    } else if (cudaGraph_t child = nullptr; t == cudaGraphNodeTypeGraph) {
      if (cudaGraphChildGraphNodeGetGraph(n, &child) != cudaSuccess ||
          !walk_nodes(child, conditionals, op, kernel, copy, set))
        return false;
    }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    else if (t == cudaGraphNodeTypeConditional) {
      const auto made = std::ranges::find(conditionals, n, &ConditionalMade::node);
      if (made == conditionals.end()) return false;
      for (cudaGraph_t body : made->bodies)
        if (!walk_nodes(body, conditionals, op, kernel, copy, set)) return false;
    }
#endif
  }
  return true;
}

// The live DeviceBuffers (BufferRegistry) that the nodes of `g` name: a kernel argument word
// from a buffer's first byte to one past its last, a copy's source or destination, a memset's
// destination; named by the top-level node's index, or NamedBuffer::kNested for the nodes of
// child graphs and of the bodies in `conditionals`. A node that cannot be read names none.
// Nothing while no buffer is alive. In node order, nested last. Queries in relaxed capture
// mode; leaves no error behind.
[[nodiscard]] std::vector<NamedBuffer> named_buffers(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                                     std::string_view op);
// The top-level nodes of `g` that may write memory in [from, to): a kernel given an argument
// word there (it may read it only: a kernel's arguments do not say), a copy or memset whose
// destination starts there. Queries in relaxed capture mode; none where the graph cannot be
// read; leaves no error behind.
[[nodiscard]] std::vector<cudaGraphNode_t> nodes_writing(cudaGraph_t g, std::uintptr_t from, std::uintptr_t to);
// Appends the 8-byte words of `bytes` (a trailing part shorter than 8 bytes is left).
void append_words(std::span<const std::byte> bytes, std::vector<std::uint64_t>& out);
// Appends the 8-byte words of a kernel's arguments, `args` laid out as `params` says.
void argument_words(void* const* args, std::span<const KernelArgs::Param> params, std::vector<std::uint64_t>& out);

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/argument_sites.ipp>
#endif
