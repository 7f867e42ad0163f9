// The bodies of the functions <cugraphs/detail/capture_session.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE CaptureSession::CaptureSession(std::shared_ptr<Pool> p, cudaStream_t s, cudaStreamCaptureMode m,
    std::string_view mode_name_, int device_, bool instantiate_, bool device_launch_, bool guard, Graph* owner_,
    std::uint64_t graph_key, std::string_view op)
    : pool(std::move(p)), id(next_capture_id()), stream(s), mode(m), mode_name(mode_name_), device(device_),
        instantiate(instantiate_), device_launch(device_launch_), owner(owner_),
        frames(s, device_, m, mode_name_, streams) {
  workspace_key = graph_key;
  pool->begin_capture(id);
  if (guard) guard_.prepare(tls_current_stream, stream, device);
  if (const cudaError_t e = cudaStreamBeginCapture(stream, mode); e != cudaSuccess) {
    pool->end_capture(id);
    throw_cuda(e, format("{} (cudaStreamBeginCapture)", op), mode_name);
  }
  tls_captures.push_back(this);
  open_ = true;
  share.attach(pool);
  log.mark();
  CUGRAPHS_TRY {
    streams.push(stream);  // current_stream() is the capture stream until the capture ends
    if (guard) guard_.fork(stream, device, static_cast<std::size_t>(tls_captures.size() - 1), op);
  } CUGRAPHS_CATCH_ALL {
    abort();
    CUGRAPHS_RETHROW;
  }
}

CUGRAPHS_INLINE CaptureSession* CaptureSession::find(std::uint64_t capture_id) noexcept {
  for (CaptureSession* s : tls_captures)
    if (s->id == capture_id) return s;
  return nullptr;
}

CUGRAPHS_INLINE LaunchRing& CaptureSession::launch_ring(std::string_view op) {
  if (!ring) ring = std::make_unique<LaunchRing>(op, per_launch, device_launch);
  return *ring;
}

CUGRAPHS_INLINE Captured CaptureSession::end(std::string_view op) {
  // The error a refused legacy-stream call left on this thread is read first.
  const cudaError_t escaped = cudaPeekAtLastError();
  (void)guard_.join(stream, true);
  Captured c;
  const cudaError_t e = cudaStreamEndCapture(stream, &c.graph);
  // Work on the per-thread default stream that the capture stream never waited for: without
  // the guard it would have run once, eagerly; in the graph it would float free of the rest.
  const bool per_thread_escape = e == cudaSuccess && !guard_.per_thread_escape().empty();
  // The same for the stream current before the capture (a library handle bound to it, a
  // launch naming it): without the guard that work would have run once, eagerly.
  const bool watched_escape = e == cudaSuccess && !per_thread_escape && !guard_.watched_escape().empty();
  // Each check below runs only while no check before it has refused the capture.
  bool clean = e == cudaSuccess && c.graph != nullptr && !per_thread_escape && !watched_escape;
  // A copy of pageable host memory: every replay would read (or write) that address when it
  // runs, long after the eager call would have staged it, when a stack variable is gone.
  // A kernel of cuRAND's host API (curandGenerate* called inside the capture) of a generator
  // that does not advance on the device: every replay would draw the numbers drawn here.
  // A host function handed an address in the frame of a function that has returned (below the
  // stack pointers of the capture's begin and end): every replay would hand it a dead frame.
  const std::uintptr_t gone_below = begin_stack != 0 && end_stack != 0 ? std::min(begin_stack, end_stack) : 0;
  // A copy of device memory that nothing backs any more (made and freed inside a Relaxed
  // capture): CUDA would crash the process instantiating it. Looked for in every mode. A kernel
  // handed such memory, in a Relaxed capture (the one mode that lets cudaFree through): every
  // replay would write freed memory, silently.
  CaptureAudit audit;
  if (clean && (check_copies || check_backing))
    audit = audit_capture(c.graph, frames.made(), gone_below, check_copies,
                          check_backing && mode == cudaStreamCaptureModeRelaxed);
  const std::optional<std::string>& unbacked = audit.unbacked;
  const std::optional<std::string>& unbacked_kernel = audit.unbacked_kernel;
  const std::optional<std::string>& pageable = audit.pageable;
  const std::optional<std::string>& curand = audit.curand;
  const std::optional<std::string>& stack_data = audit.stack_data;
  clean = clean && !unbacked && !unbacked_kernel && !pageable && !curand && !stack_data;
  // Random numbers drawn before the capture and handed to one of its kernels: every replay
  // would draw the same numbers.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> frozen;
  if (clean && check_copies) frozen = eager_draw_taken(c.graph, frames.made(), op);
  clean = clean && !frozen;
  // A capture that recorded nothing: its work went to another stream and ran once, now.
  const bool empty = clean && !allow_empty && [&] {
    std::size_t n = 0;
    return cudaGraphGetNodes(c.graph, nullptr, &n) == cudaSuccess && n == 0;
  }();
  const bool ok = clean && !empty;
  const std::string driver_said = e != cudaSuccess ? log.since() : std::string{};
  if (ring) ring->end_capture();
  // A good capture, judged and outermost on this thread, ends what the next capture judges:
  // the draws made after it. (A refused one leaves them, so a retry is refused again.)
  if (ok && check_copies && tls_captures.size() == 1) tls_eager_draws = {};
  close(ok);
  if (ok) {
    c.device_launch = device_launch;
    c.updatable_nodes = updatable_nodes;
    c.collective_buffers = std::move(collective_buffers);
    c.per_launch = per_launch;
    c.watch_buffers = watch_buffers;
    c.conditionals = std::move(frames.made());
    c.share = std::move(share);
    c.ring = std::move(ring);
    c.keep_alive = std::move(keep_alive);
    c.taken = std::move(taken);
    return c;
  }
  if (c.graph != nullptr) report_in_destructor(cudaGraphDestroy(c.graph), "cudaGraphDestroy");
  if (per_thread_escape)
    throw_error(cudaErrorStreamCaptureUnjoined, op, "{}", per_thread_escape_message(guard_.per_thread_escape()));
  if (watched_escape)
    throw_error(cudaErrorStreamCaptureUnjoined, op, "{}", watched_escape_message(guard_.watched(), guard_.watched_escape()));
  if (unbacked) throw_error(cudaErrorInvalidValue, op, "{}", unbacked_copy_message(*unbacked));
  if (unbacked_kernel) throw_error(cudaErrorInvalidValue, op, "{}", unbacked_kernel_message(*unbacked_kernel));
  if (pageable) throw_error(cudaErrorInvalidValue, op, "{}", pageable_copy_message(*pageable));
  if (curand) {
    if (audit.curand_seeds)
      throw_misuse(op, "{}, the kernel with which cuRAND's host API seeds a generator's states (the generator was "
                       "seeded or its offset set inside the capture, curandSetPseudoRandomGeneratorSeed or "
                       "curandSetGeneratorOffset, or its first draw was captured): every replay would seed the states "
                       "again with the capture's seed and draw the numbers drawn at capture. Seed and set offsets "
                       "outside the graph (between replays), and warm the generator with an eager draw before the "
                       "capture; or draw with cugraphs::Generator (docs/rng.md), whose replays draw afresh and whose "
                       "manual_seed between replays applies to the next; EscapeCheck::Off keeps the fixed numbers",
                   *curand);
    throw_misuse(op, "{}, a kernel of cuRAND's host API (curandGenerate* called inside the capture) whose "
                     "generator does not advance on the device (a quasi-random Sobol generator, which passes "
                     "its position as the kernel's argument; MT19937, which generates at the call and captures "
                     "only a conversion): every replay would draw the numbers drawn at capture. Draw with "
                     "cugraphs::Generator (Generator::philox in the captured step, rng::unpack and curand_init "
                     "in the kernel: docs/rng.md), or with a cuRAND generator that keeps its states on the "
                     "device (XORWOW, the default; Philox; MRG32K3A; MTGP32); EscapeCheck::Off keeps the fixed "
                     "numbers",
                 *curand);
  }
  if (stack_data)
    throw_misuse(op, "{}, an address on this thread's stack in the frame of a function that returned while the "
                     "capture was open: every replay would call the callback with that address, where other "
                     "calls' frames (or nothing) lie by then. Hand the callback a pointer to state that outlives "
                     "the graph (a member, a heap object, a static), which it reads when it runs; EscapeCheck::Off "
                     "keeps the address",
                 *stack_data);
  if (frozen)
    throw_misuse(op, "a kernel of the capture takes random numbers drawn outside it (a PhiloxArgs of seed {} and "
                     "offset {}, drawn by Generator::philox on this thread before the capture began): every replay "
                     "would hand the kernel those same numbers (a dropout mask, a noise sample frozen for good). "
                     "Draw inside the capture (Generator::philox in the captured step), where each replay gets "
                     "fresh numbers; EscapeCheck::Off keeps the fixed numbers",
                 frozen->first, frozen->second);
  if (empty)
    throw_misuse(op, "the capture recorded no work: nothing was queued on its stream {} (current_stream() while "
                     "the capture is open). Work queued on another stream of the program's ran once, now, and "
                     "would be missing from every replay; queue it on current_stream() (CaptureScope::stream(), "
                     "Graph::stream()), or set allow_empty to keep an empty graph (CaptureOptions, GraphedOptions, "
                     "GraphCacheOptions or GraphSetOptions: whichever began this capture)",
                 static_cast<const void*>(stream));
  const cudaError_t why = e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated;
  (void)cudaGetLastError();
  const bool escape = why == cudaErrorStreamCaptureInvalidated && escaped == cudaErrorStreamCaptureImplicit;
  const std::string_view per_thread_note =
      !escape && why == cudaErrorStreamCaptureInvalidated && guard_.forked_per_thread()
          ? " The escape check had also forked this thread's per-thread default stream into the capture "
            "(CaptureOptions::escapes): a synchronize or query of that stream (cudaStreamSynchronize(0) or a "
            "synchronous cudaMemcpy in a unit built with --default-stream per-thread, "
            "cudaStreamQuery(cudaStreamPerThread)) meets a capturing stream and fails the capture too; make such "
            "calls after capture_end, or capture with EscapeCheck::Off."
          : "";
  const std::string watched_note =
      !escape && why == cudaErrorStreamCaptureInvalidated && guard_.watched() != nullptr
          ? format(" The escape check had also forked stream {} (this thread's current stream when the capture "
                   "began) into the capture (CaptureOptions::escapes): a synchronize or query of that stream "
                   "(Stream::synchronize, cudaStreamQuery, a DeviceBuffer copy to or from the host on it) meets a "
                   "capturing stream and fails the capture too; make such calls after capture_end, or capture "
                   "with EscapeCheck::Off.",
                   static_cast<const void*>(guard_.watched()))
          : std::string{};
  raise(Error(why, cuda_message(why, escape ? std::string(op) : format("{} (cudaStreamEndCapture)", op), mode_name,
                                escape ? escape_message() : std::string{}) +
                       std::string(per_thread_note) + watched_note + driver_said));
}

CUGRAPHS_INLINE void CaptureSession::abort() noexcept {
  if (!open_) return;
  if (!on_this_thread()) {  // that thread's list of sessions points at it
    report_in_destructor(cudaErrorStreamCaptureWrongThread,
                         "Graph::capture_abort (the capture belongs to another thread and stays open)");
    return;
  }
  frames.abandon();
  (void)guard_.join(stream, false);
  cudaGraph_t g = nullptr;
  (void)cudaStreamEndCapture(stream, &g);
  if (g != nullptr) report_in_destructor(cudaGraphDestroy(g), "cudaGraphDestroy");
  (void)cudaGetLastError();  // the capture's own failure is the caller's business
  ring.reset();              // its generators may advance again
  close(false);
  share.release();  // the Graph is left holding nothing of the capture
  keep_alive.clear();
  collectives.clear();
  collective_buffers.clear();
}

CUGRAPHS_INLINE void CaptureSession::close(bool produced_graph) noexcept {
  streams.restore();
  std::erase(tls_captures, this);
  open_ = false;
  pool->end_capture(id, produced_graph);
  DeferredFrees::instance().drain();
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE std::uint64_t CaptureSession::open_conditional(ConditionalKind kind, ConditionSource source,
    unsigned bodies, std::string_view op) {
  std::size_t depth = 0;
  for (const auto* c : tls_captures) depth += c->frames.open_frames().size();
  return conditional(
      [&, this](ConditionalFrames& f) { return f.open(kind, source, bodies, depth, innermost_capture() == this, op); });
}
#endif

}  // namespace cugraphs::detail
