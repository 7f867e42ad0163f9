// The binding behind cugraphs::cublas::Handle and Follow (cublas.hpp): a Binder keeps one
// cuBLAS handle bound to its thread's current_stream() and that stream's workspace, through
// a listener of stream changes; a Claim keeps two binders off one handle; a BinderOwner
// destroys the Binder on the thread that made it.
#pragma once

#include <cugraphs/detail/keep_alive.hpp>
#include <cugraphs/detail/cublas_workspaces.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/format.hpp>
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

namespace cugraphs::cublas::detail_cublas {

using cugraphs::detail::format;

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

// Keeps one cuBLAS handle bound to its thread's current_stream() and to that stream's
// workspace: at construction, on every change of the current stream (a listener), and in
// get() whenever the stream differs from the one bound. Not movable: the listener holds its
// address. `owner` names the public type in messages ("cublas::Handle", "cublas::Follow").
class Binder {
public:
  // Owning (cublas::Handle): cublasDestroy at the end. Otherwise the handle is put back on
  // `restore` (with cuBLAS's default workspace) at the end.
  Binder(cublasHandle_t handle, bool owning, cudaStream_t restore, std::size_t workspace_bytes, std::string_view owner)
      : handle_(handle), owning_(owning), restore_(restore), owner_(owner), thread_(std::this_thread::get_id()),
        device_(cugraphs::detail::current_device()), workspaces_(device_, workspace_bytes),
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
      keep_with_capture();
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
    // The same stream in another graph's capture (or in none now) takes that key's workspace.
    if (!(b->bound_ && s == b->stream_ && workspace_key(s) == b->key_)) b->follow(s);
    // Inside a capture (a scope or body opening), the graph keeps the workspace its GEMMs
    // will use, so that destroying the handle first cannot free it under a replay.
    b->keep_with_capture();
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
    const std::uint64_t key = workspace_key(s);
    const cudaError_t e = workspaces_.for_stream(s, key, memory);
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
    key_ = key;
    bound_ = true;
    keep_with_capture();
  }

  // The workspace key of `s`: 0 outside any capture; in a capture cugraphs made, the graph
  // it is for (capture_graph_key), so that a graph's bodies and recaptures share its block
  // and no two graphs share one; in a capture cugraphs does not know, CUDA's id of it (high
  // bit set). Never throws.
  [[nodiscard]] static std::uint64_t workspace_key(cudaStream_t s) noexcept {
    const unsigned long long capture = capture_of(s);
    if (capture == 0) return 0;
    if (const std::uint64_t graph = cugraphs::detail::capture_graph_key(); graph != 0) return graph;
    return capture | (std::uint64_t{1} << 63);
  }

  // Inside a capture, the graph keeps the block bound (once per capture).
  void keep_with_capture() noexcept {
    if (!bound_ || key_ == 0) return;
    if (cugraphs::detail::keep_alive_with_capture(workspaces_.shared(stream_, key_))) workspaces_.kept(stream_, key_);
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
    cugraphs::detail::throw_error(f.cuda, op, "following the current stream ({}) failed: {} failed: {}. {}{}",
                                  static_cast<const void*>(f.stream), f.step, what, consequence, remedy);
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
  std::uint64_t key_ = 0;          // the workspace key of the stream when bound (workspace_key)
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

}  // namespace cugraphs::cublas::detail_cublas
