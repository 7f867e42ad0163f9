// Graph-safe random numbers: Generator hands out Philox (seed, offset) arguments; inside a
// capture they point at a graph-owned buffer that every replay refreshes from the
// generator, so each replay draws fresh numbers, exactly those the same calls would draw
// eagerly.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/memory.hpp>

#include <cstdint>
#include <memory>
#include <string_view>

namespace cugraphs {

namespace detail {
struct GeneratorState;
struct DrawnInWarmUp;
}  // namespace detail

/// What a kernel needs to draw from Philox; passed by value. Use rng::unpack in device code.
struct PhiloxArgs {
  std::uint64_t seed = 0;                 ///< eager: the seed
  /// eager: the offset; captured: this draw's offset inside the graph, added to the offset
  /// the graph's words hold at each launch
  std::uint64_t offset = 0;
  const std::uint64_t* base = nullptr;  ///< captured: the graph-owned (seed, offset) pair
};

namespace rng {

/// The seed and offset to feed curand_init(seed, thread_index, offset, &state).
struct SeedOffset {
  std::uint64_t seed;
  std::uint64_t offset;
};

/// The (seed, offset) of `args`: the numbers themselves when drawn eagerly, the graph's
/// current pair plus this draw's offset inside the graph when captured (device code only).
CUGRAPHS_HOST_DEVICE inline SeedOffset unpack(const PhiloxArgs& args) {
  if (args.base != nullptr) return {args.base[0], args.base[1] + args.offset};
  return {args.seed, args.offset};
}

}  // namespace rng

/// A Philox generator state (seed, offset). Each philox(increment) call reserves
/// `increment` 32-bit values per thread (rounded up to 4, Philox's block). Thread-safe.
class Generator {
public:
  static constexpr std::uint64_t kDefaultSeed = 0x5eedc0ffee;

  explicit Generator(std::uint64_t seed = kDefaultSeed);
  Generator(Generator&&) noexcept = default;
  Generator& operator=(Generator&&) noexcept = default;
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  /// Reseeds: offset back to 0. Refused while a capture that draws from this generator is
  /// open (the capture has recorded the generator; its replays follow the new seed).
  void manual_seed(std::uint64_t seed);

  [[nodiscard]] std::uint64_t seed() const;
  [[nodiscard]] std::uint64_t offset() const;

  /// Arguments for a kernel whose threads each draw `increment` 32-bit values. Outside a
  /// capture they carry the numbers and the generator advances now. While a capture is open
  /// on this thread they refer to the graph's buffer, the generator does not advance, and
  /// every replay advances it by what the whole graph draws. Refused inside a conditional
  /// body, whose kernels may run several times per replay.
  [[nodiscard]] PhiloxArgs philox(std::uint64_t increment);

private:
  // The state; a moved-from Generator has none.
  [[nodiscard]] detail::GeneratorState& state(std::string_view op) const;
  // During a warm-up on this thread, records `s` (this generator's state, locked) as it is
  // before the warm-up first changes it (detail::tls_warm_up_draws), and returns its entry, for
  // the caller to record what its change leaves (DrawnInWarmUp::left); null outside a warm-up.
  detail::DrawnInWarmUp* note_warm_up_draw(const detail::GeneratorState& s) const;

  std::shared_ptr<detail::GeneratorState> state_;
};

/// The default generator of `device` (seeded with Generator::kDefaultSeed).
[[nodiscard]] Generator& default_generator(int device);

/// The default generator of the current device.
[[nodiscard]] inline Generator& default_generator() { return default_generator(detail::current_device()); }

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/rng.ipp>
#endif
