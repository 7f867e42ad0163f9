// Yielding, short sleeps and a monotonic clock for the host's waits, through the C
// library where it has them: <thread> and <chrono> would cost every translation unit that
// includes cugraphs about a second of compile time.
#pragma once

#include <cstdint>

#if defined(_WIN32)
#  include <chrono>
#  include <thread>
#else
#  include <sched.h>
#  include <time.h>
#endif

namespace cugraphs::detail {

inline void yield_thread() noexcept {
#if defined(_WIN32)
  std::this_thread::yield();
#else
  (void)sched_yield();
#endif
}

inline void sleep_microseconds(unsigned us) noexcept {
#if defined(_WIN32)
  std::this_thread::sleep_for(std::chrono::microseconds(us));
#else
  timespec t{0, static_cast<long>(us) * 1000L};
  (void)nanosleep(&t, nullptr);
#endif
}

// Nanoseconds on a clock that never jumps.
[[nodiscard]] inline std::int64_t monotonic_ns() noexcept {
#if defined(_WIN32)
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
#else
  timespec t{};
  (void)clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
#endif
}

}  // namespace cugraphs::detail
