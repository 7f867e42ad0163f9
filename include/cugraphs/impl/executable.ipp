// The bodies of the functions <cugraphs/detail/executable.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/executable.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE Executable& Executable::operator=(Executable&& o) noexcept {
  if (this != &o) {
    reset();
    take(o);
  }
  return *this;
}

CUGRAPHS_INLINE void Executable::hold(Captured&& c, const Pool* pool, std::uint64_t id, cudaStream_t stream,
                                      int device) {
  graph_ = std::make_shared<NativeGraph>(c.graph);
  upload_stream_ = stream;
  device_ = device;
  CUGRAPHS_TRY {
    if (c.ring) {
      // Where a graphed callable's inputs are read in place, an input in the pool's memory is copied.
      const auto segments = pool != nullptr && c.ring->stages_in_place() ? pool->segment_ranges()
                                                                         : std::vector<ArgumentSites::Range>{};
      c.ring->attach(graph_->graph, stream, {c.updatable_nodes, c.conditionals, device, segments, c.collective_buffers},
                     "Graph::capture_end (per-launch values)");
      graph_->keep = c.ring->end_event();  // named by the graph's last node: lives as long as the graph
    }
    // Read before the graph is searched: a buffer freed meanwhile is asked about at the first launch.
    named_seen_ = named_buffers_freed.load(std::memory_order_relaxed);
    if (c.watch_buffers) named_ = name_buffers(c);
  } CUGRAPHS_CATCH_ALL {
    graph_.reset();
    CUGRAPHS_RETHROW;
  }
  ring_ = std::move(c.ring);
  keep_alive_.insert(keep_alive_.end(), c.keep_alive.begin(), c.keep_alive.end());
  taken_ = std::move(c.taken);
  current_capture_ = id;
  device_launch_ = c.device_launch;
  updatable_nodes_ = c.updatable_nodes;
  per_launch_asked_ = c.per_launch;
  watch_buffers_ = c.watch_buffers;
  LastCapture::instance().set(graph_);
}

CUGRAPHS_INLINE std::vector<NamedBuffer> Executable::name_buffers(const Captured& c) const noexcept {
  CUGRAPHS_TRY {
    auto named = named_buffers(graph_->graph, c.conditionals, "Graph::capture_end (buffers named)");
    // The NCCL collectives' buffers, which their kernels' arguments do not hold.
    std::vector<std::uint64_t> words;
    for (const auto& [at, bytes] : c.collective_buffers) words.push_back(at);
    BufferRegistry::instance().name(words, NamedBuffer::kNested, named);
    return named;
  } CUGRAPHS_CATCH_ALL {
    (void)cudaGetLastError();
    return {};  // a search that failed (out of memory, a query refused) leaves the graph unwatched
  }
}

CUGRAPHS_INLINE void Executable::instantiate() {
  constexpr std::string_view op = "Graph::instantiate";
  if (exec_ != nullptr) return;
  DeviceGuard on(device_);
  // An enclosing capture may be open on this thread; instantiating and waiting for the
  // upload must not invalidate it.
  RelaxedCaptureMode relaxed;
  cudaGraphInstantiateParams params{};
  // A graph for device launch cannot free its allocations on relaunch (and holds none).
  params.flags = cudaGraphInstantiateFlagUpload |
                 (device_launch_ ? cudaGraphInstantiateFlagDeviceLaunch : cudaGraphInstantiateFlagAutoFreeOnLaunch);
  params.uploadStream = upload_stream_;
  cudaGraphExec_t exec = nullptr;
  std::shared_ptr<void> status;
  {
    std::lock_guard lock(graph_->m);  // export_dot may be reading the graph on another thread
    if (device_launch_) status = check_device_launchable(op);
    const cudaError_t e = cudaGraphInstantiateWithParams(&exec, graph_->graph, &params);
    if (e != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
      if (e != cudaSuccess) (void)cudaGetLastError();
      raise(Error(e != cudaSuccess ? e : cudaErrorInvalidValue, instantiate_failure(e, params, graph_->graph)));
    }
  }
  if (const cudaError_t s = cudaStreamSynchronize(upload_stream_); s != cudaSuccess) {
    report_in_destructor(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    throw_cuda(s, format("{}: waiting for the upload (cudaStreamSynchronize)", op));
  }
  exec_ = exec;
  status_ = std::move(status);
  instantiated_capture_ = current_capture_;  // graph_'s nodes name the executable's
}

CUGRAPHS_INLINE DeviceGraph Executable::device_graph() const noexcept {
  handed_out_ = true;
  return {exec_, static_cast<int*>(status_.get())};
}

CUGRAPHS_INLINE cudaError_t Executable::take_device_status(std::string_view op) {
  if (!status_) return cudaSuccess;
  int word = 0;
  take_words(static_cast<int*>(status_.get()), &word, 1, device_, op);
  return static_cast<cudaError_t>(word);
}

CUGRAPHS_INLINE UpdateResult Executable::update(Executable& source, const UpdateOptions& opts) {
  constexpr std::string_view op = "Graph::update";
  if (updatable_nodes_ || source.updatable_nodes_)
    throw_misuse(op, "a graph that holds device-updatable kernel nodes (launch_updatable) cannot be updated: CUDA "
                     "refuses cudaGraphExecUpdate on it, and kernels hold its nodes' handles. Capture anew into a "
                     "new Graph");
  DeviceGuard on(device_);
  std::optional<RelaxedCaptureMode> relaxed;  // an enclosing capture on this thread must go on
  if (innermost_capture() != nullptr) relaxed.emplace();
  cudaGraphExecUpdateResultInfo info{};
  cudaError_t e = cudaSuccess;
  {
    std::lock_guard lock(source.graph_->m);  // export_dot may be reading it on another thread
    e = cudaGraphExecUpdate(exec_, source.graph_->graph, &info);
  }
  UpdateResult result;
  if (e == cudaSuccess) {
    adopt(source, false);
    upload_if_device_launched(op);
    result.updated = true;
    return result;
  }
  (void)cudaGetLastError();  // the failure is answered in the result, not left behind
  if (e != cudaErrorGraphExecUpdateFailure) throw_cuda(e, "Graph::update (cudaGraphExecUpdate)");
  result.failure = to_failure(info.result);
  std::string node = "; CUDA names no node";
  if (info.errorNode != nullptr) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(info.errorNode, &t) == cudaSuccess) result.node_type = t;
    result.node_index = node_index(source.graph_->graph, info.errorNode, op);
    node = format("; the blocking node is a {} node", result.node_type ? node_type_name(*result.node_type) : "unknown");
    if (result.node_index) detail::format_to(node, ", node {} of the new capture", *result.node_index);
  }
  result.message = format("cugraphs: {}: the executable cannot take the new capture in place: {}{}", op,
                          describe(result.failure), node);
  if (opts.reinstantiate_on_failure) {
    if (handed_out_)
      throw_misuse(op, "{}; and this graph's device handle (device_graph()) was given out, so its executable is "
                       "not replaced (kernels and DeviceDispatch would launch a destroyed one). Capture into a new "
                       "Graph",
                   result.message);
    // CUDA orders the launches of one executable only: the new one's launches would not wait for
    // this one's, which may still be queued on other streams and use the pool blocks the new
    // capture's temporaries were given. Reinstantiation is rare: wait for the device once (not
    // inside an enclosing capture on this thread, which a device-wide wait would break).
    if (launched_ && !relaxed)
      check(synchronize_device(device_), "{}: waiting for the replaced executable's launches", op);
    source.instantiate();  // on failure this is left as it was
    adopt(source, true);
    result.reinstantiated = true;
  }
  return result;
}

CUGRAPHS_INLINE void Executable::set_kernel_params(std::uint64_t capture, std::size_t index, cudaGraphNode_t node,
    const cudaKernelNodeParams& p, std::string_view op) {
  DeviceGuard on(device_);  // the kernel's function is found in this graph's device's context
  const cudaGraphNode_t target = exec_node(capture, index, node, op);
  // p's kernel's function, found once for this executable.
  auto known = std::ranges::find(functions_, p.func, &KnownKernel::func);
  if (known == functions_.end())
    known = functions_.insert(functions_.end(), {p.func, kernel_function(p.func), KernelArgs::layout(p.func)});
  cudaFunction_t& function = known->function;
  if (ring_) {
    // Arguments taken in an earlier capture may hold that capture's per-launch state.
    if (capture != current_capture_)
      throw_misuse(op, "the KernelNode was taken in the capture this executable was instantiated from, and the "
                       "graph now runs a capture applied since by update(); in a graph that draws random numbers "
                       "or stages inputs, that capture's arguments may name per-launch state which is gone. Take "
                       "the node with captured_kernel_node() in the capture applied last");
    ring_->set_node_params(exec_, resolver(op), target, p, function, op);
  } else if (const cudaError_t e = set_exec_kernel_node(exec_, target, p, function); e != cudaSuccess)
    [[unlikely]] {
    throw_cuda(e, format("{} (cudaGraphExecKernelNodeSetParams)", op));
  }
  rename_node(index, p, known->layout);
  upload_if_device_launched(op);
}

CUGRAPHS_INLINE void Executable::rename_node(std::size_t index, const cudaKernelNodeParams& p,
    const std::optional<std::vector<KernelArgs::Param>>& layout) noexcept {
  if (!watch_buffers_) return;
  BufferRegistry& registry = BufferRegistry::instance();
  const auto by_node = [](const NamedBuffer& b, std::size_t n) { return b.node < n; };
  const auto first = std::lower_bound(named_.begin(), named_.end(), index, by_node);
  auto last = first;
  while (last != named_.end() && last->node == index) ++last;
  if (first == last && registry.empty()) return;
  // Scratch kept by the thread: a per-step scalar set this way allocates nothing.
  thread_local std::vector<std::uint64_t> words;
  thread_local std::vector<NamedBuffer> now;
  CUGRAPHS_TRY {
    words.clear();
    now.clear();
    if (layout && (p.kernelParams != nullptr || layout->empty())) {
      argument_words(p.kernelParams, *layout, words);
      registry.name(words, index, now);
    }
    // The same buffers (a scalar changed): nothing moves.
    if (std::equal(first, last, now.begin(), now.end(),
                   [](const NamedBuffer& a, const NamedBuffer& b) { return a.id == b.id; }))
      return;
    // In place where the node names as many buffers as before (a pointer swapped for
    // another): a graph of many nodes is not moved at every call.
    if (static_cast<std::size_t>(last - first) == now.size()) {
      std::copy(now.begin(), now.end(), first);
      return;
    }
    const auto at = named_.erase(first, last);
    named_.insert(at, now.begin(), now.end());
  } CUGRAPHS_CATCH_ALL {
    // Out of memory: the node is left unwatched rather than watched for buffers it no longer names.
    std::erase_if(named_, [&](const NamedBuffer& b) { return b.node == index; });
  }
}

CUGRAPHS_INLINE void Executable::check_named(std::string_view op) {
  const std::uint64_t seen = named_buffers_freed.load(std::memory_order_relaxed);
  const NamedBuffer* gone = BufferRegistry::instance().first_gone(named_);
  if (gone == nullptr) {
    named_seen_ = seen;
    return;
  }
  std::string node = "a node inside a child graph or a conditional body, or an NCCL collective";
  if (gone->node != NamedBuffer::kNested) {
    std::lock_guard lock(graph_->m);
    const auto nodes = graph_nodes(graph_->graph, op);
    node = format("node {} ({})", gone->node, gone->node < nodes.size() ? describe_node(nodes[gone->node]) : "a node");
  }
  throw_misuse(op, "the graph names a DeviceBuffer that has been freed since its capture ({} bytes at {}, named by "
                   "{}): its replays would read and write whatever the allocator has put there since (often the "
                   "buffer that replaced it, by chance). Keep the buffer alive as long as the graph and write new "
                   "values into it (copy_from_host, a copy on the replay's stream) instead of replacing it; or point "
                   "the node at the new buffer (Graph::set_kernel_args), or capture again (Graph::update, "
                   "capture_or_update; a graphed callable made again, a GraphCache cleared). Nothing was launched",
               gone->bytes, reinterpret_cast<const void*>(gone->base), node);
}

CUGRAPHS_INLINE void Executable::reset() noexcept {
  ring_.reset();
  if (exec_ != nullptr) {
    report_in_destructor(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
    exec_ = nullptr;  // its graph memory (cudaMallocAsync in the capture) returns to CUDA's graph pool
  }
  graph_.reset();
  identity_.reset();
  identity_nodes_.clear();
  functions_.clear();
  named_.clear();
  taken_.clear();
  keep_alive_.clear();  // after the executable: its replays used them
  status_.reset();
  device_launch_ = updatable_nodes_ = handed_out_ = launched_ = false;
  current_capture_ = instantiated_capture_ = 0;
  checked_stream_ = nullptr;  // the next capture may be on another device
  stream_checked_ = false;
}

CUGRAPHS_INLINE std::shared_ptr<void> Executable::check_device_launchable(std::string_view op) {
  int unified = 0;
  check(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device_), "{}: cudaDeviceGetAttribute", op);
  if (unified == 0)
    throw_error(cudaErrorNotSupported, op, "device {} cannot launch graphs from the device (it lacks unified "
                                           "addressing); capture without CaptureOptions::device_launch",
                device_);
  if (const auto bad = node_not_for_device_launch(graph_->graph, op))
    throw_misuse(op, "the graph was captured for device launch (CaptureOptions::device_launch), but node {} of the "
                     "capture is a {} node{}{}, which a graph launched from the device cannot hold (it holds "
                     "kernel, memcpy, memset and child-graph nodes only; conditional scopes cannot be used there). "
                     "Move that work out of the graph, or capture without device_launch",
                 bad->index, node_type_name(bad->type), bad->inside ? " holding a " : "",
                 bad->inside ? node_type_name(*bad->inside) : "");
  auto status = private_device_memory(sizeof(int), "Graph::instantiate (device launch status)");
  // Zeroed on the upload stream, which instantiate() waits for.
  check(cudaMemsetAsync(status.get(), 0, sizeof(int), upload_stream_), "{}: cudaMemsetAsync", op);
  return status;
}

CUGRAPHS_INLINE void Executable::upload_if_device_launched(std::string_view op) {
  if (!device_launch_) return;
  RelaxedCaptureMode relaxed;
  check(cudaGraphUpload(exec_, upload_stream_), "{}: cudaGraphUpload (a graph for device launch)", op);
  check(cudaStreamSynchronize(upload_stream_), "{}: waiting for the upload", op);
}

CUGRAPHS_INLINE void Executable::check_stream(cudaStream_t stream) {
  constexpr std::string_view op = "Graph::replay";
  const bool follows_current = is_default_stream(stream);
  const int device = stream_device(stream, op);
  if (device != device_)
    throw_misuse(op, "the stream belongs to device {} but this graph was captured on device {}; a graph "
                     "replays only on a stream of its own device{}",
                 device, device_,
                 follows_current ? " (a default stream belongs to the current device: make the graph's device "
                                   "current, or pass a stream made on it)"
                                 : "");
  checked_stream_ = stream;
  stream_checked_ = !follows_current;
}

CUGRAPHS_INLINE void Executable::adopt(Executable& source, bool instantiated) noexcept {
  ring_.reset();  // waits until launches in flight have finished with the old ring
  // The source's own launches may still use the ring taken over: this executable's
  // launches must not run beside them on the same words.
  if (source.ring_) source.ring_->wait_all("Graph::update: waiting for the source's launches");
  ring_ = std::move(source.ring_);
  // Launches already queued may use what the old capture kept: keep both.
  keep_alive_.insert(keep_alive_.end(), source.keep_alive_.begin(), source.keep_alive_.end());
  source.keep_alive_.clear();
  if (instantiated) {
    report_in_destructor(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");  // freed once idle
    exec_ = std::exchange(source.exec_, nullptr);
    launched_ = std::exchange(source.launched_, false);
    status_ = std::move(source.status_);
    device_launch_ = source.device_launch_;
    updatable_nodes_ = source.updatable_nodes_;
    instantiated_capture_ = source.instantiated_capture_;
    identity_.reset();
    identity_nodes_.clear();
  } else if (!identity_) {
    identity_ = graph_;  // its nodes still name the executable's
  }
  graph_ = std::move(source.graph_);
  named_ = std::move(source.named_);
  named_seen_ = source.named_seen_;
  taken_ = std::move(source.taken_);
  watch_buffers_ = source.watch_buffers_;
  per_launch_asked_ = source.per_launch_asked_;
  current_capture_ = std::exchange(source.current_capture_, 0);
  upload_stream_ = source.upload_stream_;
  source.reset();
}

CUGRAPHS_INLINE cudaGraphNode_t Executable::exec_node(std::uint64_t capture, std::size_t index, cudaGraphNode_t node,
    std::string_view op) {
  if (capture == instantiated_capture_) [[likely]]
    return node;
  if (capture == 0 || capture != current_capture_)
    throw_misuse(op, "the KernelNode was not taken in the capture this graph runs (it is empty, belongs to another "
                     "graph, or to a capture replaced since): take it with captured_kernel_node() in this graph's "
                     "capture (the node's capture: {}; this graph's executable was instantiated from capture {} "
                     "and runs capture {})",
                 capture, instantiated_capture_, current_capture_);
  // A node of a capture applied by update(): the instantiated graph's node at its index.
  if (identity_nodes_.empty()) {
    std::lock_guard lock(identity_->m);
    identity_nodes_ = graph_nodes(identity_->graph, op);
  }
  cudaGraphNodeType t{};
  if (index >= identity_nodes_.size() || cudaGraphNodeGetType(identity_nodes_[index], &t) != cudaSuccess ||
      t != cudaGraphNodeTypeKernel)
    throw_misuse(op, "node {} of the executable is not a kernel node, although the update paired the captures",
                 index);
  return identity_nodes_[index];
}

CUGRAPHS_INLINE void Executable::take(Executable& o) noexcept {
  exec_ = std::exchange(o.exec_, nullptr);
  graph_ = std::move(o.graph_);
  ring_ = std::move(o.ring_);
  identity_ = std::move(o.identity_);
  identity_nodes_ = std::move(o.identity_nodes_);
  keep_alive_ = std::move(o.keep_alive_);
  functions_ = std::move(o.functions_);
  named_ = std::move(o.named_);
  named_seen_ = o.named_seen_;
  taken_ = std::move(o.taken_);
  current_capture_ = std::exchange(o.current_capture_, 0);
  instantiated_capture_ = std::exchange(o.instantiated_capture_, 0);
  upload_stream_ = o.upload_stream_;
  checked_stream_ = o.checked_stream_;
  stream_checked_ = std::exchange(o.stream_checked_, false);
  device_ = o.device_;
  status_ = std::move(o.status_);
  device_launch_ = std::exchange(o.device_launch_, false);
  updatable_nodes_ = std::exchange(o.updatable_nodes_, false);
  handed_out_ = std::exchange(o.handed_out_, false);
  launched_ = std::exchange(o.launched_, false);
  per_launch_asked_ = o.per_launch_asked_;
  watch_buffers_ = o.watch_buffers_;
}

}  // namespace cugraphs::detail
