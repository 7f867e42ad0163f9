// The bodies of the functions <cugraphs/verify.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/verify.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/executable.hpp>  // the executable's taken nodes and generators
#include <cugraphs/detail/format.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/rng.hpp>  // take_back_draws, which verify_replay's eager run calls

#include <algorithm>
#include <bit>
#include <functional>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>

namespace cugraphs::detail {

namespace verify_detail {

constexpr std::string_view kOp = "verify_replay";

// What replay_and_compare says where the replay differs from the step run eagerly, or from a
// fresh capture of it.
constexpr std::string_view kEagerLead = "the replay and the step run eagerly from the same state differ";
constexpr std::string_view kEagerCause =
    "The capture froze or missed something the step does now: a host value read at capture and changed since (a kernel "
    "argument: set_kernel_arg before each replay, or keep it in device memory; a cuBLAS scalar in "
    "host pointer mode), a branch taken on the host, work that ran once at capture; or the step "
    "writes memory not given as state (give every buffer it writes and reads back), or its results "
    "depend on the order of atomics (VerifyOptions::atol, rtol). The state is the replay's";
constexpr std::string_view kFreshLead =
    "the replay and a fresh capture of the step, replayed from the same state, differ (\"eager\" below is the fresh "
    "capture's)";
constexpr std::string_view kFreshCause =
    "The graph's capture froze something the step records differently now: a host value read at capture and changed "
    "since (a kernel argument, in a conditional body too: keep it in device memory, written by a top-level kernel "
    "whose argument set_kernel_arg sets each step; a cuBLAS scalar in host pointer mode), a branch taken on the host; "
    "or the step writes memory not given as state (give every buffer it writes and reads back), or its results depend "
    "on the order of atomics (VerifyOptions::atol, rtol). The state is the replay's";


// An IEEE half's value.
inline double half_value(std::uint16_t h) noexcept {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double v = 0;
  if (exponent == 0) v = std::ldexp(mantissa, -24);  // zero or subnormal
  else if (exponent == 31) v = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(mantissa + 1024, exponent - 25);
  return (h & 0x8000) != 0 ? -v : v;
}

template <class T>
T load(const std::byte* p) noexcept {
  T v{};
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An element's value as a number, for the floating-point kinds.
inline double number(StateKind kind, const std::byte* p) noexcept {
  switch (kind) {
    case StateKind::Half: return half_value(load<std::uint16_t>(p));
    case StateKind::BFloat16: return std::bit_cast<float>(std::uint32_t{load<std::uint16_t>(p)} << 16);
    case StateKind::Float: return load<float>(p);
    case StateKind::Double: return load<double>(p);
    default: return 0;
  }
}

inline bool floating(StateKind kind) noexcept {
  return kind == StateKind::Half || kind == StateKind::BFloat16 || kind == StateKind::Float ||
         kind == StateKind::Double;
}

// An element in words: its number, else its bytes in memory order.
inline std::string element_text(const StateRegion& r, const std::byte* p) {
  if (floating(r.kind)) return format("{}", number(r.kind, p));
  if (r.kind == StateKind::Bool) return std::to_integer<unsigned>(p[0]) != 0 ? "true" : "false";
  if (r.kind == StateKind::Signed || r.kind == StateKind::Unsigned) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, p, r.element);  // little-endian: the low bytes
    const unsigned spare = 64 - 8 * static_cast<unsigned>(r.element);
    if (r.kind == StateKind::Unsigned || spare == 0) {
      return r.kind == StateKind::Signed ? format("{}", static_cast<std::int64_t>(bits)) : format("{}", bits);
    }
    return format("{}", static_cast<std::int64_t>(bits << spare) >> spare);  // sign-extended
  }
  std::string out = "bytes";
  constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < r.element && i < 16; ++i) {
    const auto b = std::to_integer<unsigned>(p[i]);
    out += ' ';
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  if (r.element > 16) out += " ...";
  return out;
}

inline std::string type_text(const StateRegion& r) {
  switch (r.kind) {
    case StateKind::Half: return "__half";
    case StateKind::BFloat16: return "__nv_bfloat16";
    case StateKind::Float: return "float";
    case StateKind::Double: return "double";
    case StateKind::Bool: return "bool";
    case StateKind::Signed: return format("{}-byte signed integer", r.element);
    case StateKind::Unsigned: return format("{}-byte unsigned integer", r.element);
    default: return format("{}-byte element", r.element);
  }
}

}  // namespace verify_detail

CUGRAPHS_INLINE std::optional<std::string> state_difference(std::string_view what, std::size_t index,
                                                            const StateRegion& region,
                                                            std::span<const std::byte> replay,
                                                            std::span<const std::byte> eager, double atol,
                                                            double rtol) {
  using namespace verify_detail;
  const std::size_t element = region.element == 0 ? 1 : region.element;
  const std::size_t n = std::min(replay.size(), eager.size()) / element;
  const bool tolerant = floating(region.kind) && (atol > 0 || rtol > 0);
  std::size_t differing = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* a = replay.data() + i * element;
    const std::byte* b = eager.data() + i * element;
    if (std::memcmp(a, b, element) == 0) continue;
    if (tolerant) {
      const double x = number(region.kind, a), y = number(region.kind, b);
      if ((std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= atol + rtol * std::fabs(y)) continue;
    }
    if (differing++ == 0) first = i;
  }
  if (differing == 0) return std::nullopt;
  return format("{} {} ({} x {} at {}): {} of {} differ{}; the first, element {}: replay {}, eager {}", what,
                index, n, type_text(region), region.data, differing, n,
                tolerant ? format(" beyond atol {} + rtol {} x |eager|", atol, rtol) : std::string(" bitwise"), first,
                element_text(region, replay.data() + first * element),
                element_text(region, eager.data() + first * element));
}

CUGRAPHS_INLINE void check_tolerances(const VerifyOptions& opts, std::string_view op) {
  if (!std::isfinite(opts.atol) || !std::isfinite(opts.rtol) || opts.atol < 0 || opts.rtol < 0)
    throw_misuse(op, "the tolerances must be finite and not negative (atol {}, rtol {})", opts.atol, opts.rtol);
}

CUGRAPHS_INLINE std::vector<std::byte> read_back(const StateRegion& region, cudaStream_t stream, std::string_view op) {
  std::vector<std::byte> out(region.bytes);
  if (region.bytes == 0) return out;
  check(cudaMemcpyAsync(out.data(), region.data, region.bytes, cudaMemcpyDefault, stream), "{}: reading results back",
        op);
  check(cudaStreamSynchronize(stream), "{}: waiting for the results", op);
  return out;
}

CUGRAPHS_INLINE void compare_results(std::string_view op, std::string_view what, std::span<const StateRegion> regions,
                                     std::span<const std::vector<std::byte>> replay,
                                     std::span<const std::vector<std::byte>> eager, const VerifyOptions& opts,
                                     std::string_view lead, std::string_view cause) {
  std::optional<std::string> first;
  std::string others;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    auto d = state_difference(what, i, regions[i], replay[i], eager[i], opts.atol, opts.rtol);
    if (!d) continue;
    if (!first) first = std::move(d);
    else format_to(others, "{}{}", others.empty() ? format("; {} ", what) : std::string(", "), i);
  }
  if (first) throw_misuse(op, "{}: {}{}{}. {}", lead, *first, others, others.empty() ? "" : " differ too", cause);
}

CUGRAPHS_INLINE ReplayCheck::ReplayCheck(Graph& graph, const VerifyOptions& opts, std::vector<StateRegion> state)
    : graph_(graph), opts_(opts), stream_(opts.stream != nullptr ? opts.stream : current_stream()),
      state_(std::move(state)), listed_(state_.size()) {
  using verify_detail::kOp;
  if (innermost_capture() != nullptr || is_capturing(stream_))
    throw_misuse(kOp, "a capture is open {}: the step's eager run and the replay would be captured instead of "
                      "run; verify between replays, outside any capture",
                 innermost_capture() != nullptr ? "on this thread" : "on the stream");
  if (graph.is_capturing() || !graph.is_instantiated())
    throw_misuse(kOp, "the graph has no executable to replay: capture the step first (capture(), a CaptureScope, "
                      "capture_or_update), or instantiate() a capture made with CaptureOptions::instantiate = "
                      "false");
  check_tolerances(opts, kOp);
  for (std::size_t i = 0; i < state_.size(); ++i)
    if (state_[i].data == nullptr && state_[i].bytes > 0)
      throw_misuse(kOp, "state {} is a null pointer with {} bytes", i, state_[i].bytes);
  // The buffers the graph names that the state does not hold: run twice (the step, then the
  // replay) they would be two steps on, and a step count or a scale left out would drift.
  for (const StateRegion& named : opts.put_back_named ? VerifyAccess::named_buffers(graph) : std::vector<StateRegion>{}) {
    const auto inside = [&](const StateRegion& r) {
      const auto* at = static_cast<const std::byte*>(named.data);
      const auto* from = static_cast<const std::byte*>(r.data);
      return r.data != nullptr && std::less_equal<>{}(from, at) && std::less_equal<>{}(at + named.bytes, from + r.bytes);
    };
    if (std::none_of(state_.begin(), state_.begin() + static_cast<std::ptrdiff_t>(listed_), inside))
      state_.push_back(named);
  }
  // The state as it is now, copied on the device, in the stream's order.
  saved_.reserve(state_.size());
  CUGRAPHS_TRY {
    for (const StateRegion& r : state_) {
      void* copy = nullptr;
      if (r.bytes > 0) {
        check(cudaMallocAsync(&copy, r.bytes, stream_), "{}: a copy of the state ({} bytes)", kOp, r.bytes);
        saved_.push_back(copy);
        check(cudaMemcpyAsync(copy, r.data, r.bytes, cudaMemcpyDefault, stream_), "{}: copying the state", kOp);
      } else {
        saved_.push_back(nullptr);
      }
    }
  } CUGRAPHS_CATCH_ALL {
    free_saved();
    CUGRAPHS_RETHROW;
  }
}

CUGRAPHS_INLINE ReplayCheck::~ReplayCheck() { free_saved(); }

CUGRAPHS_INLINE void ReplayCheck::free_saved() noexcept {
  for (void* p : saved_)
    if (p != nullptr) report_in_destructor(cudaFreeAsync(p, stream_), "verify_replay: cudaFreeAsync");
}

CUGRAPHS_INLINE cudaError_t ReplayCheck::queue_put_back() noexcept {
  cudaError_t e = cudaSuccess;
  for (std::size_t i = 0; i < state_.size() && e == cudaSuccess; ++i)
    if (state_[i].bytes > 0)
      e = cudaMemcpyAsync(const_cast<void*>(state_[i].data), saved_[i], state_[i].bytes, cudaMemcpyDefault, stream_);
  return e;
}

CUGRAPHS_INLINE void ReplayCheck::after_eager() {
  using verify_detail::kOp;
  eager_.reserve(listed_);
  for (std::size_t i = 0; i < listed_; ++i) eager_.push_back(read_back(state_[i], stream_, kOp));
  check(queue_put_back(), "{}: putting the state back", kOp);
  check(cudaStreamSynchronize(stream_), "{}: waiting for the eager step", kOp);
}

CUGRAPHS_INLINE void ReplayCheck::put_back() noexcept {
  cudaError_t e = queue_put_back();
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    report_in_destructor(e, "verify_replay: putting the state back after the step threw");
  }
}

CUGRAPHS_INLINE void ReplayCheck::replay_and_compare(VerifyAgainst against) {
  using verify_detail::kOp;
  graph_.replay(stream_);
  std::vector<std::vector<std::byte>> replayed;
  replayed.reserve(listed_);
  for (std::size_t i = 0; i < listed_; ++i) replayed.push_back(read_back(state_[i], stream_, kOp));
  const std::span<const StateRegion> listed(state_.data(), listed_);
  const bool fresh = against == VerifyAgainst::FreshCapture;
  compare_results(kOp, "state", listed, replayed, eager_, opts_,
                  fresh ? verify_detail::kFreshLead : verify_detail::kEagerLead,
                  fresh ? verify_detail::kFreshCause : verify_detail::kEagerCause);
}

CUGRAPHS_INLINE std::vector<StateRegion> VerifyAccess::named_buffers(Graph& graph) {
  graph.check_buffers(verify_detail::kOp);
  std::vector<StateRegion> out;
  std::vector<std::uint64_t> seen;
  for (const NamedBuffer& b : graph.view().exec.buffers_named()) {
    if (std::ranges::find(seen, b.id) != seen.end()) continue;
    seen.push_back(b.id);
    out.push_back({reinterpret_cast<const void*>(b.base), b.bytes, 1, StateKind::Bytes});
  }
  return out;
}

CUGRAPHS_INLINE const std::vector<TakenNode>& VerifyAccess::taken_nodes(const Graph& graph) {
  return graph.view().exec.taken_nodes();
}

CUGRAPHS_INLINE void VerifyAccess::replay_drawing_again(Graph& fresh, cudaStream_t stream) {
  // Each generator as it is now and as the launch will leave it: taken back as a warm-up's
  // draws are (take_back_draws), also when the launch throws after the draws were taken.
  std::vector<DrawnInWarmUp> drawn;
  for (auto& [state, increment] : fresh.view().exec.generators()) {
    std::lock_guard lock(state->m);
    drawn.push_back({state, state->seed, state->offset, state->seed, state->offset + increment});
  }
  struct TakeBack {
    const std::vector<DrawnInWarmUp>& drawn;
    ~TakeBack() { take_back_draws(drawn); }
  } take_back{drawn};
  fresh.replay(stream);
}

}  // namespace cugraphs::detail
