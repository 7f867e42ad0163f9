// The bodies of the functions <cugraphs/detail/host_ring.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/host_ring.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE HostRing::HostRing(unsigned slots, std::size_t slot_words, std::string_view what)
    : slots_(slots), slot_words_(slot_words) {
  const std::size_t bytes = (slots * slot_words + 1) * sizeof(unsigned long long);
  device_ = current_device();
  RelaxedCaptureMode relaxed;
  check(cudaHostAlloc(reinterpret_cast<void**>(&words_), bytes, cudaHostAllocMapped | cudaHostAllocPortable), "{}: cudaHostAlloc", what);
  std::memset(words_, 0, bytes);
}

CUGRAPHS_INLINE HostRing::~HostRing() {
  if (words_ == nullptr) return;
  wait_all("waiting for launches in flight before freeing a pinned ring");
  RelaxedCaptureMode relaxed;
  report_in_destructor(cudaFreeHost(words_), "cudaFreeHost (pinned ring)");
}

CUGRAPHS_INLINE HostRing& HostRing::operator=(HostRing&& o) noexcept {
  if (this != &o) {
    HostRing gone(std::move(*this));  // this ring's launches are waited for, then it is freed
    words_ = std::exchange(o.words_, nullptr);
    slots_ = o.slots_;
    slot_words_ = o.slot_words_;
    posted_ = std::exchange(o.posted_, 0);
    last_stream_ = o.last_stream_;
    device_ = o.device_;
    abandoned_ = o.abandoned_;
  }
  return *this;
}

CUGRAPHS_INLINE unsigned long long* HostRing::next_slot(cudaStream_t stream, std::string_view op) {
  // Signed: a launch of the executable without a post may finish with a slot early.
  Waiter w;
  while (static_cast<std::int64_t>(posted_ - done()) >= slots_) {
    if (w.due()) {
      const cudaError_t e = query(stream);
      if (e != cudaSuccess && e != cudaErrorNotReady) throw_cuda(e, detail::format("{}: waiting for a free slot", op));
      // Only the stream the posts went to can say they are lost; another may be idle
      // while they still run.
      if (w.stalled(e == cudaSuccess && stream == last_stream_)) {
        const std::uint64_t lost = posted_ - done();
        forget_posts();
        throw_misuse(op, "{}", lost_message(lost));
      }
    }
    w.pause();
  }
  return words_ + (posted_ % slots_) * slot_words_;
}

CUGRAPHS_INLINE void HostRing::withdraw() noexcept {
  if (words_ == nullptr) return;
  std::atomic_ref<unsigned long long>(words_[(posted_ % slots_) * slot_words_]).store(0, std::memory_order_release);
}

CUGRAPHS_INLINE void HostRing::launched(cudaStream_t stream) noexcept {
  ++posted_;
  last_stream_ = stream;
}

CUGRAPHS_INLINE void HostRing::wait_all(std::string_view op) noexcept {
  if (words_ == nullptr || abandoned_) return;
  for (unsigned i = 0; i < Waiter::kYields && done() < posted_; ++i) yield_thread();
  for (const std::int64_t start = monotonic_ns(); done() < posted_ && monotonic_ns() - start < 1'000'000'000;)
    sleep_microseconds(50);
  if (done() >= posted_) return;
  if (const cudaError_t e = synchronize_device(device_); e != cudaSuccess) {
    (void)cudaGetLastError();
    report_in_destructor(e, op);
    abandoned_ = true;
    return;
  }
  if (done() < posted_) {
    report_in_destructor(op, [&, this] { return lost_message(posted_ - done()); });
    forget_posts();
  }
}

CUGRAPHS_INLINE void HostRing::Waiter::pause() noexcept {
  if (++spins_ <= kYields)
    yield_thread();
  else
    sleep_microseconds(50);
}

CUGRAPHS_INLINE bool HostRing::Waiter::stalled(bool idle) noexcept {
  if (!idle) {
    idle_ = false;
    return false;
  }
  const std::int64_t now = monotonic_ns();
  if (!idle_) idle_since_ = now;
  idle_ = true;
  return now - idle_since_ >= 20'000'000;  // 20 ms
}

CUGRAPHS_INLINE std::string HostRing::lost_message(std::uint64_t lost) {
  return detail::format(
      "{} posted launch{} never taken by the device, although the stream of the last launch "
      "has finished its work, and with it every earlier launch of the executable: a launch "
      "was lost (a tool that runs the program, such as compute-sanitizer, may lose one) or "
      "the executable was changed outside cugraphs. The posts are given up; later calls "
      "work as usual",
      lost, lost == 1 ? " was" : "es were");
}

CUGRAPHS_INLINE void HostRing::forget_posts() noexcept {
  for (unsigned i = 0; i < slots_; ++i)
    std::atomic_ref<unsigned long long>(words_[i * slot_words_]).store(0, std::memory_order_relaxed);
  posted_ = done();
}

CUGRAPHS_INLINE cudaError_t HostRing::query(cudaStream_t stream) noexcept {
  RelaxedCaptureMode relaxed;
  return cudaStreamQuery(stream);
}

}  // namespace cugraphs::detail
