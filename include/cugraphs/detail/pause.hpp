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

void yield_thread() noexcept;

void sleep_microseconds(unsigned us) noexcept;

// Nanoseconds on a clock that never jumps.
[[nodiscard]] std::int64_t monotonic_ns() noexcept;

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/pause.ipp>
#endif
