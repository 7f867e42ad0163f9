// The bodies of the functions <cugraphs/rng.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/rng.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/launch_ring.hpp>

#include <algorithm>
#include <limits>
#include <mutex>
#include <span>

namespace cugraphs {

CUGRAPHS_INLINE Generator::Generator(std::uint64_t seed) : state_(std::make_shared<detail::GeneratorState>()) {
  state_->seed = seed;
}

CUGRAPHS_INLINE void Generator::manual_seed(std::uint64_t seed) {
  auto& s = state("Generator::manual_seed");
  std::lock_guard lock(s.m);
  if (s.open_captures != 0)
    detail::throw_misuse("Generator::manual_seed", "a capture that draws from this generator is "
                                                   "still open; reseed before capture_begin or "
                                                   "after capture_end (replays then follow the new seed)");
  auto* const noted = note_warm_up_draw(s);
  s.seed = seed;
  s.offset = 0;
  if (noted != nullptr) noted->left(s.seed, s.offset);
}

CUGRAPHS_INLINE std::uint64_t Generator::seed() const {
  auto& s = state("Generator::seed");
  std::lock_guard lock(s.m);
  return s.seed;
}

CUGRAPHS_INLINE std::uint64_t Generator::offset() const {
  auto& s = state("Generator::offset");
  std::lock_guard lock(s.m);
  return s.offset;
}

CUGRAPHS_INLINE PhiloxArgs Generator::philox(std::uint64_t increment) {
  constexpr std::string_view op = "Generator::philox";
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  auto& s = state(op);
  if (increment > max - 3)
    detail::throw_misuse(op, "the increment {} cannot be rounded up to Philox's block of 4 values "
                             "without overflowing 64 bits",
                         increment);
  const std::uint64_t reserved = detail::round_up(increment == 0 ? 1 : increment, 4);
  if (auto* ctx = detail::innermost_capture()) {
    if (!ctx->frames.open_frames().empty())
      detail::throw_misuse(op, "random numbers cannot be drawn inside a conditional body: its "
                               "kernels may run several times per replay with the same arguments "
                               "and would repeat numbers; draw outside the conditional scope");
    const auto d = ctx->launch_ring(op).draw(state_, reserved, op);
    return PhiloxArgs{d.seed, d.offset, d.words};
  }
  std::lock_guard lock(s.m);
  if (reserved > max - s.offset)
    detail::throw_misuse(op, "drawing {} more values per thread would overflow the 64-bit Philox "
                             "offset (now {}) and repeat numbers; manual_seed() starts again at 0",
                         reserved, s.offset);
  const PhiloxArgs args{s.seed, s.offset, nullptr};
  // A warm-up's draws are given back (and its f draws again in the capture): not noted.
  if (detail::tls_warm_up_draws == nullptr) detail::tls_eager_draws.note(s.seed, s.offset);
  auto* const noted = note_warm_up_draw(s);
  s.offset += reserved;
  if (noted != nullptr) noted->left(s.seed, s.offset);
  return args;
}

CUGRAPHS_INLINE detail::DrawnInWarmUp* Generator::note_warm_up_draw(const detail::GeneratorState& s) const {
  auto* drawn = detail::tls_warm_up_draws;
  if (drawn == nullptr) return nullptr;
  const auto d = std::ranges::find_if(*drawn, [this](const auto& x) { return x.state == state_; });
  if (d == drawn->end()) {
    drawn->push_back({state_, s.seed, s.offset, s.seed, s.offset});
    return &drawn->back();
  }
  if (s.seed != d->seed_after || s.offset != d->offset_after)
    d->moved = true;  // another thread's draws or a replay since the last one: theirs stay theirs
  return &*d;
}

CUGRAPHS_INLINE detail::GeneratorState& Generator::state(std::string_view op) const {
  if (!state_) [[unlikely]]
    detail::throw_misuse(op, "this Generator was moved from and has no state; use the Generator it "
                             "was moved to");
  return *state_;
}

CUGRAPHS_INLINE Generator& default_generator(int device) {
  static std::mutex m;
  // Never destroyed; each Generator keeps its address.
  static auto* generators = new std::vector<std::unique_ptr<Generator>>;
  std::lock_guard lock(m);
  if (device < 0 || device >= detail::device_count())
    detail::throw_cuda(cudaErrorInvalidDevice, detail::format("default_generator({}): no such device", device));
  const auto index = static_cast<std::size_t>(device);
  if (generators->size() <= index) generators->resize(index + 1);
  if (!(*generators)[index]) (*generators)[index] = std::make_unique<Generator>();
  return *(*generators)[index];
}

}  // namespace cugraphs

namespace cugraphs::detail {

CUGRAPHS_INLINE void take_back_draws(std::span<const DrawnInWarmUp> drawn) noexcept {
  for (const auto& d : drawn) {
    std::lock_guard lock(d.state->m);
    if (d.moved || d.state->seed != d.seed_after || d.state->offset != d.offset_after) continue;  // moved by others too
    d.state->seed = d.seed;
    d.state->offset = d.offset;
  }
}

CUGRAPHS_INLINE TakeBackDraws::~TakeBackDraws() {
  tls_warm_up_draws = outer_;
  tls_eager_run = outer_why_;
  take_back_draws(drawn_);
}

}  // namespace cugraphs::detail
