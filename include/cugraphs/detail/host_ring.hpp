// A ring of slots in pinned, mapped host memory through which the host hands each launch of
// a graph its per-launch values (a graphed callable's input addresses, a replay's RNG
// seeds). The host fills post k's slot, then writes the tag k + 1 with release semantics,
// then launches; a kernel at the graph's head takes the slot when it sees that tag, and the
// device mirrors how many posts it has finished with into the word after the last slot, so
// the host knows which slots are free again. Its CUDA calls run in relaxed capture mode:
// a ring may be made or freed, and waited for, while a capture is open on the thread.
//
// A wait never spins for ever. A call waiting for a slot yields for a while, then sleeps
// between looks, and asks its stream now and then: a failed stream ends the wait with its
// error, and so does the last launch's stream once it has finished all its work with posts
// still not taken. CUDA runs the launches of one executable in order, so then no launch
// will take them: one was lost (a tool that runs the program may lose one) or the
// executable was changed outside cugraphs. Such posts are given up and the ring starts
// afresh, so its owner stays usable. The owner's final wait (wait_all) asks no stream,
// which may be gone by then: it waits for the device.
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/pause.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace cugraphs::detail {

class HostRing {
public:
  HostRing() = default;
  /// `slots` slots of `slot_words` words each (the tag first), all zero.
  HostRing(unsigned slots, std::size_t slot_words, std::string_view what);
  ~HostRing();
  HostRing(HostRing&& o) noexcept
      : words_(std::exchange(o.words_, nullptr)), slots_(o.slots_), slot_words_(o.slot_words_),
        posted_(std::exchange(o.posted_, 0)), last_stream_(o.last_stream_), device_(o.device_),
        abandoned_(o.abandoned_) {}
  HostRing& operator=(HostRing&& o) noexcept;
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
  /// Throws when the stream fails, or when the posts in flight can no longer be taken.
  [[nodiscard]] unsigned long long* next_slot(cudaStream_t stream, std::string_view op);

  /// Makes `slot` (from next_slot) visible to the device: its tag last.
  void publish(unsigned long long* slot) const noexcept {
    std::atomic_ref<unsigned long long>(slot[0]).store(posted_ + 1, std::memory_order_release);
  }

  /// Takes back the post published last and not launched (its launch failed): the tag goes,
  /// and the next post writes the same slot afresh.
  void withdraw() noexcept;

  /// Records that the post was launched on `stream`.
  void launched(cudaStream_t stream) noexcept;

  /// Waits until the device has finished with every post. The stream of the last launch is
  /// not asked (its owner may have destroyed it by now): the done count is watched for up to
  /// a second (yielding, then sleeping), and only then is the ring's device waited for as a
  /// whole (a device-wide wait fails captures open on other threads, so it is the last
  /// resort). A failure, or posts still not taken once the device is idle, is reported once,
  /// and the posts given up: the device will not finish them.
  void wait_all(std::string_view op) noexcept;

private:
  // Paces a wait: yields first (a slot usually frees within microseconds), then sleeps
  // between looks, so that a long wait leaves the core to other threads. due() says when
  // to ask the stream; stalled() when it has reported idle for long enough that posts
  // not yet taken never will be (once idle, a stream's writes are all visible).
  class Waiter {
  public:
    static constexpr unsigned kYields = 4096;
    [[nodiscard]] bool due() const noexcept { return spins_ % 256 == 0 || spins_ > kYields; }
    void pause() noexcept;
    [[nodiscard]] bool stalled(bool idle) noexcept;

  private:
    unsigned spins_ = 1;
    bool idle_ = false;  // the stream was idle at every look since idle_since_
    std::int64_t idle_since_ = 0;  // ns
  };

  [[nodiscard]] static std::string lost_message(std::uint64_t lost);

  // Gives up the posts not taken: clears every tag (no launch is in flight: the stream is
  // idle), and the next post continues from the device's count.
  void forget_posts() noexcept;

  [[nodiscard]] std::uint64_t done() const noexcept {
    return std::atomic_ref<unsigned long long>(*done_word()).load(std::memory_order_acquire);
  }
  static cudaError_t query(cudaStream_t stream) noexcept;

  unsigned long long* words_ = nullptr;
  unsigned slots_ = 0;
  std::size_t slot_words_ = 0;
  std::uint64_t posted_ = 0;
  cudaStream_t last_stream_ = nullptr;  // asked only while a call on it is waiting for a slot
  int device_ = 0;
  bool abandoned_ = false;
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/host_ring.ipp>
#endif
