// The bodies of the functions <cugraphs/detail/pause.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/pause.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void yield_thread() noexcept {
#if defined(_WIN32)
  std::this_thread::yield();
#else
  (void)sched_yield();
#endif
}

CUGRAPHS_INLINE void sleep_microseconds(unsigned us) noexcept {
#if defined(_WIN32)
  std::this_thread::sleep_for(std::chrono::microseconds(us));
#else
  timespec t{0, static_cast<long>(us) * 1000L};
  (void)nanosleep(&t, nullptr);
#endif
}

CUGRAPHS_INLINE std::int64_t monotonic_ns() noexcept {
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
