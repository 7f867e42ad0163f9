// A ring of slots in pinned, mapped host memory through which the host hands each launch of
// a graph its per-launch values (a graphed callable's input addresses, a replay's RNG
// seeds). The host fills post k's slot, then writes the tag k + 1 with release semantics,
// then launches; a kernel at the graph's head takes the slot when it sees that tag, and the
// device mirrors how many posts it has finished with into the word after the last slot, so
// the host knows which slots are free again. Its CUDA calls run in relaxed capture mode:
// a ring may be made or freed, and waited for, while a capture is open on the thread.
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

namespace cugraphs::detail {

class HostRing {
public:
  HostRing() = default;
  /// `slots` slots of `slot_words` words each (the tag first), all zero.
  HostRing(unsigned slots, std::size_t slot_words, std::string_view what) : slots_(slots), slot_words_(slot_words) {
    const std::size_t bytes = (slots * slot_words + 1) * sizeof(unsigned long long);
    RelaxedCaptureMode relaxed;
    check(cudaHostAlloc(reinterpret_cast<void**>(&words_), bytes, cudaHostAllocMapped | cudaHostAllocPortable),
          fmt::format("{}: cudaHostAlloc", what));
    std::memset(words_, 0, bytes);
  }
  ~HostRing() {
    if (words_ == nullptr) return;
    wait_all("waiting for launches in flight before freeing a pinned ring");
    RelaxedCaptureMode relaxed;
    report_in_destructor(cudaFreeHost(words_), "cudaFreeHost (pinned ring)");
  }
  HostRing(HostRing&& o) noexcept
      : words_(std::exchange(o.words_, nullptr)), slots_(o.slots_), slot_words_(o.slot_words_),
        posted_(std::exchange(o.posted_, 0)), last_stream_(o.last_stream_), abandoned_(o.abandoned_) {}
  HostRing& operator=(HostRing&& o) noexcept {
    if (this != &o) {
      HostRing gone(std::move(*this));  // this ring's launches are waited for, then it is freed
      words_ = std::exchange(o.words_, nullptr);
      slots_ = o.slots_;
      slot_words_ = o.slot_words_;
      posted_ = std::exchange(o.posted_, 0);
      last_stream_ = o.last_stream_;
      abandoned_ = o.abandoned_;
    }
    return *this;
  }
  HostRing(const HostRing&) = delete;
  HostRing& operator=(const HostRing&) = delete;

  [[nodiscard]] explicit operator bool() const noexcept { return words_ != nullptr; }
  /// The first slot, for the kernels' arguments.
  [[nodiscard]] const unsigned long long* data() const noexcept { return words_; }
  /// The word the device writes its count of finished posts to.
  [[nodiscard]] unsigned long long* done_word() const noexcept { return words_ + slots_ * slot_words_; }
  [[nodiscard]] std::uint64_t posted() const noexcept { return posted_; }

  /// Waits until the next post's slot is free (the launch slots() posts ago has taken it)
  /// and returns it. Only one thread posts to a ring, so the slot stays free until publish().
  [[nodiscard]] unsigned long long* next_slot(cudaStream_t stream, std::string_view op) const {
    // Signed: a launch of the executable without a post may finish with a slot early.
    for (unsigned spins = 1; static_cast<std::int64_t>(posted_ - done()) >= slots_; ++spins) {
      if (spins % 256 == 0) {
        const cudaError_t e = query(stream);
        if (e != cudaSuccess && e != cudaErrorNotReady) throw_cuda(e, fmt::format("{}: waiting for a free slot", op));
      }
      std::this_thread::yield();
    }
    return words_ + (posted_ % slots_) * slot_words_;
  }

  /// Makes `slot` (from next_slot) visible to the device: its tag last.
  void publish(unsigned long long* slot) const noexcept {
    std::atomic_ref<unsigned long long>(slot[0]).store(posted_ + 1, std::memory_order_release);
  }

  /// Records that the post was launched on `stream`.
  void launched(cudaStream_t stream) noexcept {
    ++posted_;
    last_stream_ = stream;
  }

  /// Waits until the device has finished with every post, or the stream has failed (then
  /// reported once, and the posts are given up: the device will not finish them).
  void wait_all(std::string_view op) noexcept {
    if (words_ == nullptr || abandoned_) return;
    for (unsigned spins = 1; done() < posted_; ++spins) {
      if (spins % 256 == 0) {  // the stream is asked only now and then, as in next_slot
        const cudaError_t e = query(last_stream_);
        if (e != cudaSuccess && e != cudaErrorNotReady) {
          report_in_destructor(e, op);
          abandoned_ = true;
          return;
        }
      }
      std::this_thread::yield();
    }
  }

private:
  [[nodiscard]] std::uint64_t done() const noexcept {
    return std::atomic_ref<unsigned long long>(*done_word()).load(std::memory_order_acquire);
  }
  static cudaError_t query(cudaStream_t stream) noexcept {
    RelaxedCaptureMode relaxed;
    return cudaStreamQuery(stream);
  }

  unsigned long long* words_ = nullptr;
  unsigned slots_ = 0;
  std::size_t slot_words_ = 0;
  std::uint64_t posted_ = 0;
  cudaStream_t last_stream_ = nullptr;
  bool abandoned_ = false;
};

}  // namespace cugraphs::detail
