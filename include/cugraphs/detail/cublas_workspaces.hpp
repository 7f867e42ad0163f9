// The workspaces a cuBLAS Handle or Follow gives cuBLAS, one block per stream followed, and
// the quiet device helpers its stream listener uses (they never throw). No cuBLAS here.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace cugraphs::cublas::detail_cublas {

using cugraphs::detail::RelaxedCaptureMode;

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

// The capture `s` records into now (CUDA's id of it), or 0 where it records into none. Never
// throws.
[[nodiscard]] inline unsigned long long capture_of(cudaStream_t s) noexcept {
  if (cugraphs::detail::is_default_stream(s)) return 0;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(s, &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return status == cudaStreamCaptureStatusActive ? id : 0;
}

// One block of plain device memory (cudaMalloc, outside every graph pool) for each stream
// followed outside captures, and for a capturing stream one for each graph (the key a
// capture gives, workspace_key in cublas_binder.hpp): graphs captured one after the other on
// the same stream (the thread's capture stream, a body's) would otherwise share a block, and
// replays of them on two streams at once would race in it (wrong dot products, silently). A
// graph's recaptures (capture_or_update, verify_replay) and bodies at one depth reuse its
// block. A graph keeps its blocks alive (keep_alive_with_capture); a block so kept is let go
// here once no graph holds it. Freed when the set is. cudaMalloc runs in relaxed capture
// mode: legal while a capture is open on this thread, and never part of the graph.
class Workspaces {
public:
  Workspaces(int dev, std::size_t bytes) noexcept : device_(dev), bytes_(bytes) {}
  ~Workspaces() { release(); }
  Workspaces(const Workspaces&) = delete;
  Workspaces& operator=(const Workspaces&) = delete;

  // The workspace of `s` under `key` (0 outside any capture), allocated on first use (null
  // when bytes() is 0). A failure is returned, not thrown.
  [[nodiscard]] cudaError_t for_stream(cudaStream_t s, std::uint64_t key, void*& memory) noexcept {
    memory = nullptr;
    for (const Entry& e : entries_)
      if (e.stream == s && e.key == key) {
        memory = e.memory.get();
        return cudaSuccess;
      }
    // The blocks of graphs that are gone: kept by a graph once, and held here only now.
    std::erase_if(entries_, [](const Entry& e) { return e.key != 0 && e.kept && e.memory.use_count() == 1; });
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
      entries_.push_back({s, key, false, std::move(block)});
    } CUGRAPHS_CATCH_ALL {  // out of host memory: the deleter gave the block back
      memory = nullptr;
      return cudaErrorMemoryAllocation;
    }
    return cudaSuccess;
  }

  // The block of `s` under `key`, shared (null when none).
  [[nodiscard]] std::shared_ptr<void> shared(cudaStream_t s, std::uint64_t key) const noexcept {
    for (const Entry& e : entries_)
      if (e.stream == s && e.key == key) return e.memory;
    return nullptr;
  }
  // Notes that a graph keeps the block of `s` under `key` alive.
  void kept(cudaStream_t s, std::uint64_t key) noexcept {
    for (Entry& e : entries_)
      if (e.stream == s && e.key == key) e.kept = true;
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
    std::uint64_t key;  // 0: outside any capture
    bool kept;          // a graph keeps it alive (it may go once no graph does)
    std::shared_ptr<void> memory;
  };
  int device_;
  std::size_t bytes_;
  std::vector<Entry> entries_;
};

}  // namespace cugraphs::cublas::detail_cublas
