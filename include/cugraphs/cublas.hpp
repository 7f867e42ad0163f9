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

#include <cugraphs/detail/cublas_binder.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/format.hpp>
#include <cugraphs/error.hpp>

#include <cublas_v2.h>

#include <cstddef>
#include <memory>
#include <string_view>

namespace cugraphs::cublas {

/// How a Handle or a Follow provisions the workspace it gives cuBLAS on each stream.
struct HandleOptions {
  /// Bytes of device memory per stream followed, and per stream a graph's capture uses (each
  /// graph holds its own: 32 MiB, cuBLAS's advice for Hopper, for each such stream); 0 gives
  /// cuBLAS no workspace, so it picks algorithms that need none.
  std::size_t workspace_bytes = std::size_t{32} << 20;
};

/// Throws cugraphs::Error naming `op` and cuBLAS's status name and text when `s` is not
/// CUBLAS_STATUS_SUCCESS. code() stays cudaSuccess: the failure is cuBLAS's, named in the text.
inline void check(cublasStatus_t s, std::string_view op) {
  if (s == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  detail::throw_library(op, cublasGetStatusName(s), cublasGetStatusString(s));
}

/// An owning cuBLAS handle (cublasCreate / cublasDestroy) that is bound, at all times, to
/// the current_stream() of the thread that made it: a CaptureScope, a conditional body or
/// a StreamGuard re-binds it, so GEMMs issued through it land where the current stream is,
/// inside conditional bodies too. Each stream gets a workspace of its own (HandleOptions),
/// and each graph one of its own on every stream its capture uses (its recaptures and its
/// bodies at one depth reuse it), which the graph keeps alive as long as it lives (the
/// Handle may go first): graphs share no workspace, so their replays may run at the same
/// time on different streams. Use and destroy it on the thread
/// that made it, with its device current. Move-only.
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
          std::make_unique<detail_cublas::Binder>(h, true, nullptr, opts.workspace_bytes, "cublas::Handle"));
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
  /// How many workspaces the handle holds: one per stream it has followed outside captures,
  /// and one per stream and graph inside them (a gone graph's until the next workspace is made).
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
    binder_ = detail_cublas::BinderOwner(std::make_unique<detail_cublas::Binder>(handle, false, original, opts.workspace_bytes, op));
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
  /// How many workspaces the Follow holds: one per stream it has followed outside captures,
  /// and one per stream and graph inside them (a gone graph's until the next workspace is made).
  [[nodiscard]] std::size_t workspace_count() const { return binder("cublas::Follow::workspace_count").workspace_count(); }

private:
  detail_cublas::Binder& binder(std::string_view op) const {
    return binder_.get(op, "this Follow was moved from and follows no handle; use the Follow it was moved to");
  }

  detail_cublas::BinderOwner binder_;
};

}  // namespace cugraphs::cublas
