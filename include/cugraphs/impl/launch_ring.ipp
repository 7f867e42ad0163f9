// The bodies of the functions <cugraphs/detail/launch_ring.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/launch_ring.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE std::pair<std::uint64_t, std::uint64_t> GeneratorState::take(std::uint64_t increment) {
  std::lock_guard lock(m);
  const auto now = std::pair{seed, offset};
  offset += increment;
  return now;
}

CUGRAPHS_INLINE LaunchRing::~LaunchRing() {
  end_capture();
  // Before the device words and what the owner holds go: launches in flight use them.
  wait_all("Graph: waiting for launches in flight (per-launch values)");
}

CUGRAPHS_INLINE auto LaunchRing::draw(const std::shared_ptr<GeneratorState>& g, std::uint64_t reserved,
    std::string_view op) -> Draw {
  const unsigned i = index_of(g, op);
  if (reserved > ~std::uint64_t{0} - uses_[i].increment)
    throw_misuse(op, "this graph would draw more than 2^64 values per thread from the generator; the "
                     "64-bit Philox offset would overflow");
  const Draw d{reinterpret_cast<const std::uint64_t*>(values()) + 2 * i, uses_[i].increment, captured_seed(i)};
  draws_.push_back({i, d.offset});
  uses_[i].increment += reserved;
  return d;
}

CUGRAPHS_INLINE auto LaunchRing::stage(std::span<const StageTarget> statics, bool in_place, bool unread_is_error,
    std::string_view op) -> Staging {
  if (sources_) throw_misuse(op, "this capture already stages a graphed callable's inputs");
  const std::size_t leaves = statics.size();
  leaves_ = static_cast<unsigned>(leaves);
  statics_.assign(statics.begin(), statics.end());
  in_place_ = in_place;
  unread_is_error_ = unread_is_error;
  sources_ = private_device_memory(std::max<std::size_t>(leaves, 1) * sizeof(void*), op);
  return {control(), static_cast<const void* const*>(sources_.get())};
}

CUGRAPHS_INLINE void LaunchRing::end_capture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  for (auto& u : uses_) {
    std::lock_guard lock(u.generator->m);
    --u.generator->open_captures;
  }
}

CUGRAPHS_INLINE void LaunchRing::attach(cudaGraph_t g, cudaStream_t stream, const GraphFacts& facts,
    std::string_view op) {
  device_ = facts.device;
  DeviceGuard on(device_);  // the kernel functions found for node updates are this device's
  {
    // Done before any launch, on whatever stream: the stream is idle, and the wait runs in
    // relaxed mode for a capture that may be open on this thread.
    RelaxedCaptureMode relaxed;
    check(cudaMemsetAsync(control(), 0, kControlWords * sizeof(unsigned long long), stream), "{}: cudaMemsetAsync", op);
    check(cudaStreamSynchronize(stream), "{}: cudaStreamSynchronize", op);
  }
  // f's work launched on a stream of its own ran once, eagerly, while f was captured: the
  // inputs it read are reached by no node, and no call would read them.
  if (sources_ && unread_is_error_) {
    const ArgumentSites probe({values(), uses_.size(), draws_, sources_.get(), leaves_, statics_, in_place_, {}});
    if (const auto leaf = probe.unread_leaf(g, facts.conditionals, facts.collective_buffers, op))
      throw_misuse(op, "f's graph never reads input leaf {} ({} bytes): no node of the capture takes its address, "
                       "copies it or names it otherwise. Work that f launches on a stream other than "
                       "current_stream() (a library handle bound to a stream of the program's, as "
                       "cublasSetStream(handle, my_stream) once at start-up; a stream saved before the capture) runs "
                       "once, while f is captured, and never in a call, whose results would then not follow this "
                       "input. Launch f's work on current_stream() (cugraphs::cublas::Handle follows it); if f "
                       "ignores this input on purpose (or reaches it only through memory written outside the "
                       "graph, such as a __constant__ pointer set by a synchronous cudaMemcpyToSymbol, or through "
                       "NCCL called directly rather than through cugraphs/nccl.hpp), set "
                       "GraphedOptions::allow_unused_input",
                   *leaf, statics_[*leaf].bytes);
  }
  // A kernel that took a draw's .seed and .offset as numbers (what a ported kernel taking
  // (seed, offset) gets) holds a place, not numbers: the same ones at every launch.
  if ((policy_ == PerLaunch::Auto || policy_ == PerLaunch::Parameters) && !draws_.empty()) {
    const ArgumentSites probe({values(), uses_.size(), draws_, sources_.get(), leaves_, statics_, in_place_, {}});
    // Under Auto, a draw no node reaches may be unused on purpose: refused where a kernel
    // takes its placeholder seed (Parameters refuses it anyway, for want of arguments).
    const auto gen = probe.unreached_generator(g, facts.conditionals, op);
    if (gen && (policy_ == PerLaunch::Parameters || probe.takes_placeholder(g, facts.conditionals, *gen, op))) {
      const auto first = std::ranges::find(draws_, *gen, &DrawMade::generator);
      throw_misuse(op, "the capture drew from a generator ({} of the graph; its first draw at offset {} within the "
                       "graph), but no node of the graph reaches its draws: no kernel's arguments hold a PhiloxArgs "
                       "it returned, and no copy carries one. A kernel given a draw's .seed and .offset as plain "
                       "numbers draws the same numbers at every replay (inside a capture a PhiloxArgs holds a place "
                       "in the graph's device words, not the numbers): pass the PhiloxArgs to the kernel by value "
                       "and call rng::unpack(args) in device code. Where its PhiloxArgs reach kernels through "
                       "memory the program wrote while the graph was captured, or a draw is unused on purpose, "
                       "capture with PerLaunch::{}",
                   *gen, first->offset,
                   !sources_ ? "Advance (or Ring)" : in_place_ ? "Ring (with InputMode::Copy: InPlace refuses Ring)" : "Ring");
    }
  }
  if (policy_ == PerLaunch::Advance) {
    if (sources_)
      throw_misuse(op, "the capture asked for PerLaunch::Advance, which refreshes a graph's random numbers on the "
                       "device, but it stages a graphed callable's inputs, which only the host knows at each call. "
                       "Capture with PerLaunch::Auto, Parameters or Ring");
    attach_advance(g, facts.updatable, op);
    return;
  }
  // Inputs read in place need node updates at every call: an Error where they cannot be had.
  const auto refuse_in_place = [&, this](std::string_view why) {
    if (in_place_)
      throw_misuse(op, "the graphed callable was made with InputMode::InPlace, which hands f's kernels the inputs' "
                       "addresses as kernel arguments at every call, but {}. Make it with InputMode::Copy",
                   why);
  };
  if (policy_ == PerLaunch::Ring) refuse_in_place("PerLaunch::Ring was asked for");
  // A captured NCCL plan may hold its buffers' addresses where no node update reaches them
  // (in work items NCCL writes to its own memory, not in its kernels' arguments): one over a
  // static input (or its pads) cannot read the caller's input. Collectives over f's own
  // buffers are no concern of the inputs'.
  if (in_place_)
    for (const auto& [at, bytes] : facts.collective_buffers)
      for (std::size_t i = 0; i < statics_.size(); ++i) {
        if (overlaps_padded(statics_[i], at, bytes))
          refuse_in_place(format("f's graph holds an NCCL collective over static input leaf {}, which keeps the "
                                 "address it was captured with outside any kernel's arguments",
                                 i));
      }
  if (policy_ != PerLaunch::Ring) {
    if (facts.updatable) {
      refuse_in_place("the graph holds device-updatable kernel nodes (launch_updatable)");
      (void)refuse_arguments(op, "the graph holds device-updatable kernel nodes (launch_updatable), whose updates "
                                 "from the device a node update from the host would overwrite");
    } else {
      if (in_place_) {
        shield_.insert(shield_.end(), facts.pool.begin(), facts.pool.end());
        for (const auto& r : graph_allocation_ranges(g, op)) shield_.push_back(r);
      }
      ArgumentSites sites({values(), uses_.size(), draws_, sources_.get(), leaves_, statics_, in_place_, shield_});
      if (const auto why = sites.find(g, facts.conditionals, op)) {
        refuse_in_place(*why);
        (void)refuse_arguments(op, *why);
      } else if (policy_ == PerLaunch::Parameters || in_place_ || sites.nodes() <= kAutoParameterNodes) {
        sites.ready(g, op);
        sites_.emplace(std::move(sites));
        return;
      }
    }
  }
  // Auto, where arguments cannot take the values or would cost too many node updates: a graph
  // that only draws advances its offsets (far less device time than the ring's head and tail).
  if (policy_ == PerLaunch::Auto && !sources_ && advance_kernel() != nullptr)
    attach_advance(g, facts.updatable, op);
  else
    attach_ring(g, op);
}

CUGRAPHS_INLINE void LaunchRing::wait_all(std::string_view op) noexcept {
  if (sites_) {
    sites_->wait(op);
  } else if (advancing_) {
    if (counted_) {
      // Nothing launched (a capture's ring taken over by Graph::update): nothing to wait for.
      // (A count back at 0 after 2^32 launches also skips the wait; freeing the words waits.)
      if (launches_ == 0 && !orphaned_) return;
      if (const cudaError_t e = wait_at_least(device_, launch_count(), launches_); e != cudaSuccess) {
        (void)cudaGetLastError();
        // Unless the context is lost, the whole device's work covers the launches.
        if (const cudaError_t d = synchronize_device(device_); d != cudaSuccess) {
          (void)cudaGetLastError();
          report_in_destructor(e, op);
        }
      }
      if (!orphaned_) return;
    }
    wait_end_event(advance_end_.get(), op);
  } else {
    ring_.wait_all(op);
  }
}

CUGRAPHS_INLINE std::shared_ptr<void> LaunchRing::refuse_device_launch(bool device_launch, std::string_view op) {
  if (device_launch)
    throw_misuse(op, "this capture is for device launch (CaptureOptions::device_launch): a graph that draws "
                     "random numbers or stages inputs takes fresh values from the host at every launch, which "
                     "its launches from the device would not get. Capture it without device_launch, or pass the "
                     "values through device memory");
  return private_device_memory(kControlWords * sizeof(unsigned long long), op);
}

CUGRAPHS_INLINE unsigned LaunchRing::index_of(const std::shared_ptr<GeneratorState>& g, std::string_view op) {
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

CUGRAPHS_INLINE bool LaunchRing::refuse_arguments(std::string_view op, std::string_view why) const {
  if (policy_ == PerLaunch::Parameters)
    throw_misuse(op, "the capture asked for PerLaunch::Parameters, but {}, so launches could not hand their "
                     "values over as kernel arguments. Pass each PhiloxArgs to its kernel by value, or capture "
                     "with PerLaunch::Auto or PerLaunch::Ring",
                 why);
  return false;
}

CUGRAPHS_INLINE void LaunchRing::attach_ring(cudaGraph_t g, std::string_view op) {
  const void* head_kernel = ring_head_kernel();
  const void* tail_kernel = ring_tail_kernel();
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

CUGRAPHS_INLINE void LaunchRing::attach_advance(cudaGraph_t g, bool updatable, std::string_view op) {
  const void* kernel = advance_kernel();
  if (kernel == nullptr) throw_needs_nvcc(op, "a graph that draws random numbers");
  // Counting launches where streams can wait for the count; else an event record node.
  counted_ = stream_waits();
  AdvanceArgs args{values(), counted_ ? launch_count() : nullptr, static_cast<unsigned>(uses_.size()), {}};
  for (std::size_t i = 0; i < uses_.size(); ++i) args.increments[i] = uses_[i].increment;
  const auto sinks = graph_sinks(g, op);
  void* params[] = {&args};
  cudaKernelNodeParams kp{};
  kp.func = const_cast<void*>(kernel);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(32);
  kp.kernelParams = params;
  cudaGraphNode_t advance = nullptr;
  check(cudaGraphAddKernelNode(&advance, g, nullptr, 0, &kp), "{}: cudaGraphAddKernelNode (advance)", op);
  // Programmatic edges from the last kernels: the advance kernel is scheduled as they end (it
  // waits for their completion itself, griddepcontrol.wait, before it writes the words), which
  // took about 0.5 us off a one-kernel graph's launch (docs/performance.md). Only where its
  // code has that wait (PTX for sm_90+), and from plain kernel nodes: not from device-updatable
  // ones (CUDA restricts what such nodes may be connected to, and kernels change them), nor
  // cooperative ones; a programmatic edge CUDA refuses is made plain.
  const bool waits = !updatable && kernel_ptx_version(kernel, op) >= 90;
  for (cudaGraphNode_t sink : sinks)
    if (!(waits && plain_kernel_node(sink) && add_programmatic_edge(g, sink, advance))) add_edge(g, sink, advance, op);
  advance_end_ = counted_ ? new_event(op) : add_end_event(g, std::span(&advance, 1), op);
  advancing_ = true;
}

CUGRAPHS_INLINE void LaunchRing::post_words(cudaStream_t stream, std::string_view op) {
  // The last launch may still be reading the words, on this stream or another (an event never
  // recorded is complete, a count of 0 reached: the first launch waits for nothing).
  if (counted_) {
    if (orphaned_)
      check(cudaStreamWaitEvent(stream, advance_end_.get(), 0), "{}: cudaStreamWaitEvent (an earlier set-words kernel)",
            op);
    check(stream_wait_at_least(stream, launch_count(), launches_), "{}: cuStreamWaitValue32 (the last launch's end)",
          op);
  } else {
    check(cudaStreamWaitEvent(stream, advance_end_.get(), 0), "{}: cudaStreamWaitEvent (the last launch's end)", op);
  }
  SetWordsArgs a{values(), static_cast<unsigned>(2 * taken_.size()), {}};
  for (std::size_t i = 0; i < taken_.size(); ++i) {
    a.w[2 * i] = taken_[i].first;
    a.w[2 * i + 1] = taken_[i].second;
  }
  launch_set_words(a, stream, op);
}

CUGRAPHS_INLINE void LaunchRing::take_values() {
  taken_.resize(uses_.size());
  for (std::size_t i = 0; i < uses_.size(); ++i) taken_[i] = uses_[i].generator->take(uses_[i].increment);
}

}  // namespace cugraphs::detail
