// Graph-safe random numbers: Generator hands out Philox (seed, offset) arguments; inside a
// capture they point at a graph-owned buffer that every replay refreshes from the
// generator, so each replay draws fresh numbers, exactly those the same calls would draw
// eagerly.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>
#include <cugraphs/detail/launch_ring.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/memory.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

namespace cugraphs {

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

  explicit Generator(std::uint64_t seed = kDefaultSeed) : state_(std::make_shared<detail::GeneratorState>()) {
    state_->seed = seed;
  }
  Generator(Generator&&) noexcept = default;
  Generator& operator=(Generator&&) noexcept = default;
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  /// Reseeds: offset back to 0. Refused while a capture that draws from this generator is
  /// open (the capture has recorded the generator; its replays follow the new seed).
  void manual_seed(std::uint64_t seed) {
    auto& s = state("Generator::manual_seed");
    std::lock_guard lock(s.m);
    if (s.open_captures != 0)
      detail::throw_misuse("Generator::manual_seed", "a capture that draws from this generator is "
                                                     "still open; reseed before capture_begin or "
                                                     "after capture_end (replays then follow the new seed)");
    s.seed = seed;
    s.offset = 0;
  }

  [[nodiscard]] std::uint64_t seed() const {
    auto& s = state("Generator::seed");
    std::lock_guard lock(s.m);
    return s.seed;
  }
  [[nodiscard]] std::uint64_t offset() const {
    auto& s = state("Generator::offset");
    std::lock_guard lock(s.m);
    return s.offset;
  }

  /// Arguments for a kernel whose threads each draw `increment` 32-bit values. Outside a
  /// capture they carry the numbers and the generator advances now. While a capture is open
  /// on this thread they refer to the graph's buffer, the generator does not advance, and
  /// every replay advances it by what the whole graph draws. Refused inside a conditional
  /// body, whose kernels may run several times per replay.
  [[nodiscard]] PhiloxArgs philox(std::uint64_t increment) {
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
      return PhiloxArgs{0, d.offset, d.words};
    }
    std::lock_guard lock(s.m);
    if (reserved > max - s.offset)
      detail::throw_misuse(op, "drawing {} more values per thread would overflow the 64-bit Philox "
                               "offset (now {}) and repeat numbers; manual_seed() starts again at 0",
                           reserved, s.offset);
    const PhiloxArgs args{s.seed, s.offset, nullptr};
    s.offset += reserved;
    return args;
  }

private:
  // The state; a moved-from Generator has none.
  [[nodiscard]] detail::GeneratorState& state(std::string_view op) const {
    if (!state_) [[unlikely]]
      detail::throw_misuse(op, "this Generator was moved from and has no state; use the Generator it "
                               "was moved to");
    return *state_;
  }

  std::shared_ptr<detail::GeneratorState> state_;
};

/// The default generator of `device` (seeded with Generator::kDefaultSeed).
[[nodiscard]] inline Generator& default_generator(int device) {
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

/// The default generator of the current device.
[[nodiscard]] inline Generator& default_generator() { return default_generator(detail::current_device()); }

}  // namespace cugraphs
