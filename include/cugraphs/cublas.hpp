// cuBLAS handles that follow the capture (optional: needs cuBLAS, links -lcublas, and is not
// part of the umbrella header). A cuBLAS handle is bound to one stream and one workspace; a
// GEMM issued through a handle still bound to the enclosing stream lands outside the
// conditional body it was written in, and cuBLAS's own workspace cannot be allocated inside
// a captured body. Handle and Follow keep a handle bound to this thread's current_stream(),
// with a workspace of their own for each stream, through every capture and body change.
#pragma once

#if !__has_include(<cublas_v2.h>)
#  error "cugraphs/cublas.hpp needs cuBLAS's cublas_v2.h; build with cuBLAS, or leave this header out"
#endif

#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/stream.hpp>

#include <cublas_v2.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace cugraphs::cublas {

/// How a Handle or a Follow provisions the workspace it gives cuBLAS on each stream.
struct HandleOptions {
  /// Bytes of device memory per stream followed (32 MiB, cuBLAS's advice for Hopper); 0 gives
  /// cuBLAS no workspace, so it picks algorithms that need none.
  std::size_t workspace_bytes = std::size_t{32} << 20;
};

/// Throws cugraphs::Error naming `op` and cuBLAS's status name and text when `s` is not
/// CUBLAS_STATUS_SUCCESS. code() stays cudaSuccess: the failure is cuBLAS's, named in the text.
inline void check(cublasStatus_t s, std::string_view op) {
  if (s == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  detail::raise(Error(detail::format("cugraphs: {} failed: {} ({})", op, cublasGetStatusName(s), cublasGetStatusString(s))));
}

namespace detail_cublas {

using cugraphs::detail::format;
using cugraphs::detail::RelaxedCaptureMode;

// A failure met while following a stream change, kept (the listener cannot throw) until the
// next get() reports it. Plain values: recording one allocates nothing.
struct Failure {
  const char* step = nullptr;  // null: none pending
  cudaError_t cuda = cudaSuccess;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  cudaStream_t stream = nullptr;
};

// The cuBLAS handles that a Handle or Follow binds now, process-wide: two binders on one
// handle would each overwrite the other's stream and workspace. A Claim holds one.
class Claim {
public:
  Claim(cublasHandle_t h, std::string_view owner) : handle_(h) {
    std::lock_guard lock(mutex());
    auto& c = claimed();
    if (std::find(c.begin(), c.end(), h) != c.end())
      cugraphs::detail::throw_misuse(owner, "this cuBLAS handle is already bound by another cugraphs::cublas::Handle "
                                            "or Follow, and the two would overwrite each other's stream and "
                                            "workspace; keep one Handle or Follow per cuBLAS handle");
    c.push_back(h);
  }
  ~Claim() { release(); }
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;

  void release() noexcept {
    if (handle_ == nullptr) return;
    std::lock_guard lock(mutex());
    std::erase(claimed(), std::exchange(handle_, nullptr));
  }

private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<cublasHandle_t>& claimed() {
    static std::vector<cublasHandle_t> c;
    return c;
  }
  cublasHandle_t handle_;
};

// Makes `device` current for a scope without throwing (the listener's path); error() says
// whether that worked.
class QuietDeviceGuard {
public:
  explicit QuietDeviceGuard(int device) noexcept {
    error_ = cudaGetDevice(&previous_);
    if (error_ == cudaSuccess && previous_ != device) {
      error_ = cudaSetDevice(device);
      switched_ = error_ == cudaSuccess;
    }
  }
  ~QuietDeviceGuard() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

  [[nodiscard]] cudaError_t error() const noexcept { return error_; }

private:
  cudaError_t error_ = cudaSuccess;
  int previous_ = 0;
  bool switched_ = false;
};

// The device `s` runs on: the current device for a default stream, and for a capturing
// stream, which cudaStreamGetDevice refuses (and the refusal would invalidate the capture);
// a capture runs with its device current (Graph::capture_begin checks it). Never throws.
[[nodiscard]] inline cudaError_t device_of(cudaStream_t s, int& dev) noexcept {
  if (cugraphs::detail::is_default_stream(s)) return cudaGetDevice(&dev);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (const cudaError_t e = cudaStreamIsCapturing(s, &status); e != cudaSuccess) return e;
  if (status != cudaStreamCaptureStatusNone) return cudaGetDevice(&dev);
  RelaxedCaptureMode relaxed;
  return cudaStreamGetDevice(s, &dev);
}

// One block of plain device memory (cudaMalloc, outside every graph pool) for each stream
// followed, freed when the set is. cudaMalloc runs in relaxed capture mode: legal while a
// capture is open on this thread, and never part of the graph.
class Workspaces {
public:
  Workspaces(int dev, std::size_t bytes) noexcept : device_(dev), bytes_(bytes) {}
  ~Workspaces() { release(); }
  Workspaces(const Workspaces&) = delete;
  Workspaces& operator=(const Workspaces&) = delete;

  // The workspace of `s`, allocated on first use (null when bytes() is 0). A failure is
  // returned, not thrown.
  [[nodiscard]] cudaError_t for_stream(cudaStream_t s, void*& memory) noexcept {
    memory = nullptr;
    for (const Entry& e : entries_)
      if (e.stream == s) {
        memory = e.memory.get();
        return cudaSuccess;
      }
    if (bytes_ != 0) {
      QuietDeviceGuard on(device_);
      if (on.error() != cudaSuccess) return on.error();
      RelaxedCaptureMode relaxed;
      if (const cudaError_t e = cudaMalloc(&memory, bytes_); e != cudaSuccess) {
        memory = nullptr;
        return e;
      }
    }
    CUGRAPHS_TRY {
      // Shared: a graph whose capture used the block keeps it (keep_alive_with_capture).
      const int dev = device_;
      std::shared_ptr<void> block(memory, [dev](void* p) {
        if (p == nullptr) return;
        QuietDeviceGuard on(dev);
        RelaxedCaptureMode relaxed;
        cugraphs::detail::report_in_destructor(cudaFree(p), "cudaFree (a cuBLAS workspace)");
      });
      entries_.push_back({s, std::move(block)});
    } CUGRAPHS_CATCH_ALL {  // out of host memory: the deleter gave the block back
      memory = nullptr;
      return cudaErrorMemoryAllocation;
    }
    return cudaSuccess;
  }

  // The block of `s`, shared (null when none).
  [[nodiscard]] std::shared_ptr<void> shared(cudaStream_t s) const noexcept {
    for (const Entry& e : entries_)
      if (e.stream == s) return e.memory;
    return nullptr;
  }

  // Lets go of every block: freed now (cudaFree waits for the work that may still use
  // them), or when the last graph whose capture used it goes.
  void release() noexcept { entries_.clear(); }

  // Whether `s` has been followed before (its device was checked then).
  [[nodiscard]] bool known(cudaStream_t s) const noexcept {
    return std::any_of(entries_.begin(), entries_.end(), [s](const Entry& e) { return e.stream == s; });
  }
  [[nodiscard]] std::size_t count() const noexcept { return entries_.size(); }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

private:
  struct Entry {
    cudaStream_t stream;
    std::shared_ptr<void> memory;
  };
  int device_;
  std::size_t bytes_;
  std::vector<Entry> entries_;
};

// Keeps one cuBLAS handle bound to its thread's current_stream() and to that stream's
// workspace: at construction, on every change of the current stream (a listener), and in
// get() whenever the stream differs from the one bound. Not movable: the listener holds its
// address. `owner` names the public type in messages ("cublas::Handle", "cublas::Follow").
class Binder {
public:
  // Owning (cublas::Handle): cublasDestroy at the end. Otherwise the handle is put back on
  // `restore` (with cuBLAS's default workspace) at the end.
  Binder(cublasHandle_t handle, bool owning, cudaStream_t restore, const HandleOptions& opts, std::string_view owner)
      : handle_(handle), owning_(owning), restore_(restore), owner_(owner), thread_(std::this_thread::get_id()),
        device_(cugraphs::detail::current_device()), workspaces_(device_, opts.workspace_bytes),
        claim_(handle, owner), listener_(&Binder::on_change, this) {
    check_device(current_stream(), owner_);
    bind(current_stream());
    if (failure_.step != nullptr) {
      if (!owning_) (void)cublasSetStream(handle_, restore_);  // as it was: the Follow never began
      report(owner_);
    }
  }

  ~Binder() {
    if (!orphaned_.load(std::memory_order_acquire)) finish();
  }
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;

  // The handle bound to this thread's current stream: reports a failure remembered since the
  // last call, and re-binds first when the current stream is not the one bound (a cheap
  // comparison; it differs only after a failure or a stream of another device).
  [[nodiscard]] cublasHandle_t get(std::string_view op) {
    if (std::this_thread::get_id() != thread_) [[unlikely]]
      wrong_thread(op);
    if (failure_.step != nullptr) [[unlikely]]
      report(op);
    if (const cudaStream_t s = current_stream(); !bound_ || s != stream_) [[unlikely]] {
      if (!workspaces_.known(s)) check_device(s, op);
      bind(s);
      if (failure_.step != nullptr) report(op);
      if (bound_) (void)cugraphs::detail::keep_alive_with_capture(workspaces_.shared(stream_));
    }
    return handle_;
  }

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] std::size_t workspace_count() const noexcept { return workspaces_.count(); }
  [[nodiscard]] bool on_owner_thread() const noexcept { return std::this_thread::get_id() == thread_; }

  // Ends the binding from a thread other than the one that made it. The listener is
  // registered on that thread and only there can it be removed, so this object is left
  // behind (a few bytes, never freed) with its listener disabled; the cuBLAS handle, the
  // workspaces and the claim are released now.
  void orphan() noexcept {
    orphaned_.store(true, std::memory_order_release);
    finish();
    cugraphs::detail::report_in_destructor(owner_, [] {
      return std::string("destroyed on another thread than the one that made it: its listener of that thread's "
                         "current stream stays registered there, disabled (a few bytes leak). Destroy it on the "
                         "thread that made it");
    });
  }

private:
  // The listener: follows the change, remembering a failure for the next get().
  static void on_change(void* self, cudaStream_t s) noexcept {
    auto* b = static_cast<Binder*>(self);
    if (b->orphaned_.load(std::memory_order_acquire)) return;
    if (!(b->bound_ && s == b->stream_)) b->follow(s);
    // Inside a capture (a scope or body opening), the graph keeps the workspace its GEMMs
    // will use, so that destroying the handle first cannot free it under a replay.
    if (b->bound_) (void)cugraphs::detail::keep_alive_with_capture(b->workspaces_.shared(b->stream_));
  }

  void follow(cudaStream_t s) noexcept {
    Binder* b = this;
    // A stream of another device: the handle serves its own device only. It keeps its last
    // stream, and get() refuses while such a stream is current. A stream followed before was
    // checked then.
    if (!b->workspaces_.known(s)) {
      int dev = 0;
      if (device_of(s, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        b->bound_ = false;
        return;
      }
      if (dev != b->device_) {
        b->bound_ = false;
        return;
      }
    }
    b->bind(s);
  }

  // cublasSetStream, then cublasSetWorkspace (cublasSetStream resets the workspace to
  // cuBLAS's own, which a captured conditional body cannot allocate). The stream is set even
  // when the workspace could not be had, so that no GEMM lands on the previous stream.
  void bind(cudaStream_t s) noexcept {
    bound_ = false;
    void* memory = nullptr;
    const cudaError_t e = workspaces_.for_stream(s, memory);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // leave no stale error for the next unrelated check
      remember({"allocating the stream's workspace (cudaMalloc of HandleOptions::workspace_bytes)", e,
                CUBLAS_STATUS_SUCCESS, s});
    }
    if (const cublasStatus_t st = cublasSetStream(handle_, s); st != CUBLAS_STATUS_SUCCESS) {
      remember({"cublasSetStream", cudaSuccess, st, s});
      return;
    }
    if (e != cudaSuccess) return;
    if (const cublasStatus_t st = cublasSetWorkspace(handle_, memory, memory != nullptr ? workspaces_.bytes() : 0);
        st != CUBLAS_STATUS_SUCCESS) {
      remember({"cublasSetWorkspace", cudaSuccess, st, s});
      return;
    }
    stream_ = s;
    bound_ = true;
  }

  void remember(const Failure& f) noexcept {
    if (failure_.step == nullptr) failure_ = f;  // the first failure is the cause
  }

  // Throws the remembered failure and forgets it: the next get() binds afresh.
  [[noreturn]] void report(std::string_view op) {
    const Failure f = std::exchange(failure_, Failure{});
    bound_ = false;
    const bool set_stream = std::string_view(f.step) == "cublasSetStream";
    const std::string what = f.cuda != cudaSuccess
                                 ? format("{} ({})", cudaGetErrorName(f.cuda), cudaGetErrorString(f.cuda))
                                 : format("{} ({})", cublasGetStatusName(f.status), cublasGetStatusString(f.status));
    const std::string_view consequence =
        set_stream ? "The handle may still be bound to the previous stream, where its GEMMs would land outside "
                     "the capture or body they were meant for."
                   : "The handle was bound to the stream without a workspace of its own: cuBLAS's default one "
                     "cannot be allocated inside a captured conditional body.";
    std::string remedy;
    if (f.cuda == cudaErrorMemoryAllocation)
      remedy = format(" Likely cause: the device is out of memory; each stream the handle follows (your streams, "
                      "the capture stream, each conditional body's stream) gets a workspace of {} bytes. Remedy: "
                      "free device memory, or make the {} with a smaller HandleOptions::workspace_bytes (0: none).",
                      workspaces_.bytes(), owner_);
    else if (f.cuda != cudaSuccess)
      remedy = cugraphs::detail::error_hint(f.cuda);
    else
      remedy = format(" Likely cause: the cuBLAS handle is no longer valid (the handle a Follow follows must "
                      "outlive it) or the stream was destroyed. Remedy: keep the handle and the stream alive while "
                      "the {} follows them.",
                      owner_);
    cugraphs::detail::raise(Error(f.cuda, format("cugraphs: {}: following the current stream ({}) failed: {} "
                                                 "failed: {}. {}{}",
                                                 op, static_cast<const void*>(f.stream), f.step, what, consequence,
                                                 remedy)));
  }

  void check_device(cudaStream_t s, std::string_view op) const {
    int dev = 0;
    if (const cudaError_t e = device_of(s, dev); e != cudaSuccess)
      cugraphs::detail::throw_cuda(e, format("{}: the current stream's device (cudaStreamGetDevice; is the stream "
                                             "alive?)",
                                             op));
    if (dev != device_)
      cugraphs::detail::throw_misuse(op, "the current stream belongs to device {}, but this handle was made on "
                                         "device {}; make one {} per device, and use each while a stream of its "
                                         "device is current",
                                     dev, device_, owner_);
  }

  [[noreturn]] void wrong_thread(std::string_view op) const {
    cugraphs::detail::throw_misuse(op, "used on another thread than the one that made it, whose current stream it "
                                       "follows; make one {} per thread",
                                   owner_);
  }

  // Unbinds: the owned handle is destroyed, a followed one put back on the stream it had;
  // then the workspaces are freed and the claim released.
  void finish() noexcept {
    if (owning_) {
      if (const cublasStatus_t st = cublasDestroy(handle_); st != CUBLAS_STATUS_SUCCESS)
        cugraphs::detail::report_in_destructor(
            owner_, [st] { return format("cublasDestroy failed: {}", cublasGetStatusName(st)); });
    } else if (const cublasStatus_t st = cublasSetStream(handle_, restore_); st != CUBLAS_STATUS_SUCCESS) {
      cugraphs::detail::report_in_destructor(owner_, [st] {
        return format("putting the handle back on the stream it had (cublasSetStream) failed: {}",
                      cublasGetStatusName(st));
      });
    }
    if (failure_.step != nullptr) {
      const Failure f = failure_;
      cugraphs::detail::report_in_destructor(owner_, [f] {
        return format("a failure while following the current stream was never reported (no get() came after "
                      "it): {} failed: {}",
                      f.step, f.cuda != cudaSuccess ? cudaGetErrorName(f.cuda) : cublasGetStatusName(f.status));
      });
    }
    workspaces_.release();
    claim_.release();
  }

  cublasHandle_t handle_;
  bool owning_;
  cudaStream_t restore_;
  std::string_view owner_;
  std::thread::id thread_;
  int device_;
  Workspaces workspaces_;
  Claim claim_;
  Failure failure_{};
  cudaStream_t stream_ = nullptr;  // the stream bound now, when bound_
  bool bound_ = false;
  std::atomic<bool> orphaned_{false};
  CurrentStreamListener listener_;  // last: registered once everything else is ready
};

// Owns the Binder of a Handle or a Follow: destroys it on the thread that made it, or
// orphans it there (see Binder::orphan) when destroyed on another.
class BinderOwner {
public:
  BinderOwner() = default;
  explicit BinderOwner(std::unique_ptr<Binder> binder) noexcept : binder_(std::move(binder)) {}
  ~BinderOwner() { release(); }
  BinderOwner(BinderOwner&&) noexcept = default;
  BinderOwner& operator=(BinderOwner&& other) noexcept {
    if (this != &other) {
      release();
      binder_ = std::move(other.binder_);
    }
    return *this;
  }
  BinderOwner(const BinderOwner&) = delete;
  BinderOwner& operator=(const BinderOwner&) = delete;

  // The binder; `moved_from` is the Error's text when there is none.
  [[nodiscard]] Binder& get(std::string_view op, std::string_view moved_from) const {
    if (!binder_) [[unlikely]]
      cugraphs::detail::throw_misuse(op, "{}", moved_from);
    return *binder_;
  }

private:
  void release() noexcept {
    if (!binder_) return;
    if (binder_->on_owner_thread()) {
      binder_.reset();
    } else {
      binder_->orphan();
      (void)binder_.release();  // its listener stays registered on the owner thread: see orphan()
    }
  }

  std::unique_ptr<Binder> binder_;
};

}  // namespace detail_cublas

/// An owning cuBLAS handle (cublasCreate / cublasDestroy) that is bound, at all times, to
/// the current_stream() of the thread that made it: a CaptureScope, a conditional body or
/// a StreamGuard re-binds it, so GEMMs issued through it land where the current stream is,
/// inside conditional bodies too. Each stream gets a workspace of its own (HandleOptions),
/// which each graph captured through the Handle keeps alive as long as the graph lives (the
/// Handle may go first); replay graphs that share a stream's workspace in order, never
/// concurrently. Use and destroy it on the thread that made it, with its device current.
/// Move-only.
class Handle {
public:
  /// A new handle on the current device, bound to current_stream() with its workspace.
  explicit Handle(const HandleOptions& opts = {}) {
    cublasHandle_t h = nullptr;
    {
      detail::RelaxedCaptureMode relaxed;  // legal while a capture is open, too
      check(cublasCreate(&h), "cublas::Handle: cublasCreate");
    }
    CUGRAPHS_TRY {
      binder_ = detail_cublas::BinderOwner(
          std::make_unique<detail_cublas::Binder>(h, true, nullptr, opts, "cublas::Handle"));
    } CUGRAPHS_CATCH_ALL {
      (void)cublasDestroy(h);
      CUGRAPHS_RETHROW;
    }
  }

  /// Destroys the cuBLAS handle, then lets go of its workspaces (graphs may keep some).
  ~Handle() = default;

  Handle(Handle&&) noexcept = default;
  Handle& operator=(Handle&&) noexcept = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  /// The raw handle, bound to this thread's current_stream() and its workspace. Reports
  /// (as an Error naming cause and remedy) a failure met while following an earlier change
  /// of the current stream.
  [[nodiscard]] cublasHandle_t get() const { return binder("cublas::Handle::get").get("cublas::Handle::get"); }
  operator cublasHandle_t() const { return get(); }  // NOLINT: implicit by design

  /// The stream the handle is bound to now.
  [[nodiscard]] cudaStream_t stream() const { return binder("cublas::Handle::stream").stream(); }
  /// The device the handle was made on.
  [[nodiscard]] int device() const { return binder("cublas::Handle::device").device(); }
  /// How many workspaces the handle holds: one per stream it has followed.
  [[nodiscard]] std::size_t workspace_count() const { return binder("cublas::Handle::workspace_count").workspace_count(); }

private:
  detail_cublas::Binder& binder(std::string_view op) const {
    return binder_.get(op, "this Handle was moved from and owns no cuBLAS handle; use the Handle it was moved to");
  }

  detail_cublas::BinderOwner binder_;
};

/// Makes an existing cuBLAS handle, owned by the caller, follow the current_stream() of
/// this thread the way a Handle does (for ports that keep their own handle): while the Follow
/// lives, every change of the current stream re-binds the raw handle, with a workspace of
/// the Follow's own for each stream; graphs captured under it keep the workspaces they use.
/// Keep the handle alive longer than the Follow. When the Follow ends, the handle
/// goes back to the stream it had, with cuBLAS's default workspace. One Handle or Follow per
/// cuBLAS handle at a time. Move-only; use and destroy it on the thread that made it.
class Follow {
public:
  /// Starts following: binds `handle` to current_stream() now.
  explicit Follow(cublasHandle_t handle, const HandleOptions& opts = {}) {
    constexpr std::string_view op = "cublas::Follow";
    if (handle == nullptr) detail::throw_misuse(op, "the cuBLAS handle is null; pass one made by cublasCreate");
    cudaStream_t original = nullptr;
    check(cublasGetStream(handle, &original), "cublas::Follow: cublasGetStream");
    binder_ = detail_cublas::BinderOwner(std::make_unique<detail_cublas::Binder>(handle, false, original, opts, op));
  }

  /// Puts the handle back on the stream it had, then lets go of the workspaces (graphs may
  /// keep some).
  ~Follow() = default;

  Follow(Follow&&) noexcept = default;
  Follow& operator=(Follow&&) noexcept = default;
  Follow(const Follow&) = delete;
  Follow& operator=(const Follow&) = delete;

  /// The followed handle, bound to this thread's current_stream() and its workspace. Reports
  /// a failure met while following an earlier change of the current stream.
  [[nodiscard]] cublasHandle_t get() const { return binder("cublas::Follow::get").get("cublas::Follow::get"); }
  operator cublasHandle_t() const { return get(); }  // NOLINT: implicit by design

  /// The stream the handle is bound to now.
  [[nodiscard]] cudaStream_t stream() const { return binder("cublas::Follow::stream").stream(); }
  /// How many workspaces the Follow holds: one per stream it has followed.
  [[nodiscard]] std::size_t workspace_count() const { return binder("cublas::Follow::workspace_count").workspace_count(); }

private:
  detail_cublas::Binder& binder(std::string_view op) const {
    return binder_.get(op, "this Follow was moved from and follows no handle; use the Follow it was moved to");
  }

  detail_cublas::BinderOwner binder_;
};

}  // namespace cugraphs::cublas
