// verify_replay: a graph's replay checked against the step it was captured from, run eagerly
// from the same state. It catches what no check at capture time can see, because the capture
// looks right and only the values differ: a host value the capture froze (a scalar passed by
// value that the program changes between steps, a cuBLAS scalar in host pointer mode, a branch
// taken on the host), work that ran once at capture instead of in the graph, a draw the graph
// makes differently. A step that opens conditional scopes is checked against a fresh capture of
// itself instead. A port runs it once or twice in its tests, or at its first steps.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/span.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// CUDA's 16-bit floating-point types (cuda_fp16.h, cuda_bf16.h), named here so that state
// of those types compares as numbers without this header including theirs.
struct __half;
struct __nv_bfloat16;

namespace cugraphs {

/// How verify_replay runs and compares.
struct VerifyOptions {
  /// The stream both runs use; nullptr: current_stream().
  cudaStream_t stream = nullptr;
  /// Floating-point state (float, double, __half, __nv_bfloat16) matches where every element
  /// has |replay - eager| <= atol + rtol * |eager| (NaN matching NaN). Both 0, the default:
  /// bitwise, which a replay gives (it runs the step's kernels with the step's arguments)
  /// unless the step's results depend on the order of its atomics. Other types compare
  /// bitwise always.
  double atol = 0;
  double rtol = 0;
  /// Copy and put back, beside `state`, every other DeviceBuffer the graph's nodes name
  /// (CaptureOptions::watch_buffers, on by default, records them), so that one the step
  /// writes is left one step on, not two. Off: only `state` (a graph that names a large
  /// read-only input, where the copy would not fit).
  bool put_back_named = true;
};

namespace detail {

// How a state region's elements compare.
enum class StateKind : unsigned char { Bytes, Signed, Unsigned, Bool, Half, BFloat16, Float, Double };

// A state region: `bytes` bytes at `data`, elements of `element` bytes.
struct StateRegion {
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::size_t element = 1;
  StateKind kind = StateKind::Bytes;
};

template <class T>
[[nodiscard]] constexpr StateKind state_kind() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return StateKind::Float;
  else if constexpr (std::is_same_v<U, double>) return StateKind::Double;
  else if constexpr (std::is_same_v<U, __half>) return StateKind::Half;
  else if constexpr (std::is_same_v<U, __nv_bfloat16>) return StateKind::BFloat16;
  else if constexpr (std::is_same_v<U, bool>) return StateKind::Bool;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) <= 8) return StateKind::Signed;
  else if constexpr (std::is_integral_v<U> && sizeof(U) <= 8) return StateKind::Unsigned;
  else return StateKind::Bytes;
}

template <class T>
[[nodiscard]] StateRegion state_region(DeviceSpan<T> s) noexcept {
  return {s.data(), s.size_bytes(), sizeof(T), state_kind<T>()};
}
template <class T>
[[nodiscard]] StateRegion state_region(const DeviceBuffer<T>& b) noexcept {
  return state_region(b.span());
}


template <class S>
concept VerifiableState = requires(const S& s) { detail::state_region(s); };

// Where region `index` (called `what`: "state", "output leaf") of the replay's bytes differs
// from the eager run's, in words (how many elements differ, the first one and both its
// values), or nothing where they match under the tolerances (VerifyOptions).
[[nodiscard]] std::optional<std::string> state_difference(std::string_view what, std::size_t index,
                                                          const StateRegion& region,
                                                          std::span<const std::byte> replay,
                                                          std::span<const std::byte> eager, double atol,
                                                          double rtol);
// Refuses tolerances that are negative or not finite.
void check_tolerances(const VerifyOptions& opts, std::string_view op);
// The bytes of `region`, read on `stream` once the work queued there is done.
[[nodiscard]] std::vector<std::byte> read_back(const StateRegion& region, cudaStream_t stream, std::string_view op);
// Throws an Error that says `lead`, names the first of `regions` (each a `what`) whose
// replayed bytes differ from the eager run's, and says `cause` (what may have made them
// differ); nothing where all match.
void compare_results(std::string_view op, std::string_view what, std::span<const StateRegion> regions,
                     std::span<const std::vector<std::byte>> replay, std::span<const std::vector<std::byte>> eager,
                     const VerifyOptions& opts, std::string_view lead, std::string_view cause);

// What verify_replay compared the replay with.
enum class VerifyAgainst : unsigned char { EagerRun, FreshCapture };

// verify_replay's steps around the user's step, not templates (verify.ipp): the checks and a
// device copy of the state at construction (with every DeviceBuffer the graph names that the
// state does not hold, put back too but not compared); after the eager step, its results read
// back and the state put back; then the replay, its results read back and compared.
class ReplayCheck {
public:
  ReplayCheck(Graph& graph, const VerifyOptions& opts, std::vector<StateRegion> state);
  ~ReplayCheck();
  ReplayCheck(const ReplayCheck&) = delete;
  ReplayCheck& operator=(const ReplayCheck&) = delete;

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  // Waits for the eager step, reads its results, and puts the state back as it was.
  void after_eager();
  // The state put back after a step that threw; failures reported, not thrown.
  void put_back() noexcept;
  // Replays the graph, reads its results and compares them with the eager step's (or the
  // fresh capture's replay): an Error naming the first difference.
  void replay_and_compare(VerifyAgainst against = VerifyAgainst::EagerRun);

private:
  // Queues the copies that put the state back as it was (no wait); the first failure.
  [[nodiscard]] cudaError_t queue_put_back() noexcept;
  // Frees the device copies (stream-ordered); failures reported.
  void free_saved() noexcept;

  Graph& graph_;
  VerifyOptions opts_;
  cudaStream_t stream_ = nullptr;
  std::vector<StateRegion> state_;  // the state given, then the unlisted buffers the graph names
  std::size_t listed_ = 0;          // how many regions were given (compared)
  std::vector<void*> saved_;        // device copies of the regions as they were, one a non-empty region
  std::vector<std::vector<std::byte>> eager_;
};

// What verify_replay reads of a Graph, and its fresh capture of a step that takes the
// CaptureScope (Graph's friend).
class VerifyAccess {
public:
  // The DeviceBuffers (allocated outside captures) that `graph`'s nodes name, once each,
  // after refusing, as replay would, a graph that names one freed since its capture.
  [[nodiscard]] static std::vector<StateRegion> named_buffers(Graph& graph);
  // `step` captured as `graph`'s own capture was made, and instantiated; the KernelNodes it
  // takes are handed back from the graph's capture (note_taken_node).
  template <class F>
  [[nodiscard]] static Graph of(Graph& graph, F& step) {
    CaptureOptions co = graph.recapture_options("verify_replay");
    co.instantiate = true;
    FreshCaptureNodes nodes{&taken_nodes(graph)};
    // The draws noted since the last capture stay for the next real one to judge.
    struct Restore {
      FreshCaptureNodes* outer;
      EagerDraws draws;
      ~Restore() {
        tls_fresh_capture = outer;
        tls_eager_draws = draws;
      }
    } restore{std::exchange(tls_fresh_capture, &nodes), tls_eager_draws};
    return graph.recapture(step, co);
  }
  // Replays `fresh` on `stream`, then puts the generators it drew from back where they were
  // (where nothing else moved them meanwhile), so that the graph's replay draws the same.
  static void replay_drawing_again(Graph& fresh, cudaStream_t stream);

private:
  [[nodiscard]] static const std::vector<TakenNode>& taken_nodes(const Graph& graph);
};

}  // namespace detail

/// Checks that one replay of `graph` leaves `state` as one eager run of `step` leaves it,
/// both starting from the state as it is now: `state` is every buffer the step writes and
/// reads back (weights, optimizer moments, a simulation's fields, counters), as DeviceSpans
/// or DeviceBuffers. The step runs first, with opts.stream (default current_stream()) as the
/// current stream, called with that stream or with nothing; the state is put back; the graph
/// is replayed on that stream; the two results are compared. Random numbers the step draws
/// from Generators are taken back before the replay, which draws them again, so both runs
/// draw the same numbers and a step that draws passes bitwise. Afterwards the state is the
/// replay's (one step taken) and the generators have advanced by one step's draws.
///
/// Where they differ, the Error names the state region, how many elements differ and the
/// first of them with both values. The usual causes: a host value the capture froze (a kernel
/// argument computed on the host, a cuBLAS scalar in host pointer mode, a branch taken on the
/// host) and changed since (set_kernel_arg each step, or keep the value in device memory);
/// work that ran once at capture instead of in the graph; state missing from `state` (a
/// buffer the step writes and reads again is then written twice: list every one); results
/// that depend on the order of atomics (opts.atol, opts.rtol).
///
/// Every other DeviceBuffer the graph's nodes name (kernel arguments, copies, memsets, bodies
/// included: an optimizer's step count, a loss scale's tracker left out of `state`) is copied
/// and put back too, so that the check leaves it one step on as well
/// (VerifyOptions::put_back_named); only `state` is compared.
///
/// An Error before anything runs for a capture open on this thread or a capturing stream (the
/// runs would be captured), a graph with no executable, a null region of non-zero size, a
/// tolerance that is negative or not finite, or (put_back_named) a graph that names a
/// DeviceBuffer freed since its capture, as replay refuses it. The state is copied on the
/// device once (one more copy of it in device memory) and read back twice: a check for tests
/// and first steps, not for every step.
template <class F, class... S>
  requires((std::invocable<F&, cudaStream_t> || std::invocable<F&>) && (detail::VerifiableState<S> && ...))
void verify_replay(const VerifyOptions& opts, Graph& graph, F&& step, const S&... state) {
  static_assert(sizeof...(S) > 0, "cugraphs: verify_replay needs the state the step writes (DeviceSpans or "
                                  "DeviceBuffers) to compare");
  detail::ReplayCheck check(graph, opts, {detail::state_region(state)...});
  {
    detail::TakeBackDraws take_back(detail::EagerRun::Verify);  // the replay draws the same numbers again
    StreamGuard on(check.stream());
    CUGRAPHS_TRY {
      if constexpr (std::invocable<F&, cudaStream_t>) static_cast<void>(step(check.stream()));
      else static_cast<void>(step());
    } CUGRAPHS_CATCH_ALL {
      check.put_back();
      CUGRAPHS_RETHROW;
    }
  }
  check.after_eager();
  check.replay_and_compare();
}

/// verify_replay with the default options.
template <class F, class... S>
  requires((std::invocable<F&, cudaStream_t> || std::invocable<F&>) && (detail::VerifiableState<S> && ...))
void verify_replay(Graph& graph, F&& step, const S&... state) {
  verify_replay(VerifyOptions{}, graph, step, state...);
}

/// A step that takes the CaptureScope (it opens conditional scopes: a convergence loop, a
/// skipped optimizer step) cannot run eagerly, so it is checked against a fresh capture of
/// itself: the step is captured again, as the graph's own capture was made (its pool, mode,
/// stream and options), with the host values it reads now; that capture is replayed from the
/// state, the state is put back, the graph is replayed and the two are compared, as above.
/// It finds what the graph's capture froze and the step now records differently: a scalar
/// passed by value to a kernel, inside a conditional body too, a host-mode cuBLAS scalar, a
/// branch taken on the host. The step's host code runs once more, as a capture; the
/// KernelNodes it takes there (captured_kernel_node) are the graph's own, handed back in the
/// order the graph's capture took them (another kernel there, or more of them, is an Error),
/// so handles the step stores stay valid. Whatever else the step keeps from its capture (a
/// DeviceBuffer it allocates there, a host counter) is the fresh capture's: keep such things
/// outside the step. Random numbers drawn by the fresh capture's replay are taken back, and
/// the graph's replay draws them again. The fresh capture is discarded.
template <class F, class... S>
  requires(!std::invocable<F&, cudaStream_t> && !std::invocable<F&> && std::invocable<F&, CaptureScope&> &&
           (detail::VerifiableState<S> && ...))
void verify_replay(const VerifyOptions& opts, Graph& graph, F&& step, const S&... state) {
  static_assert(sizeof...(S) > 0, "cugraphs: verify_replay needs the state the step writes (DeviceSpans or "
                                  "DeviceBuffers) to compare");
  detail::ReplayCheck check(graph, opts, {detail::state_region(state)...});
  {
    Graph fresh = detail::VerifyAccess::of(graph, step);
    CUGRAPHS_TRY {
      detail::VerifyAccess::replay_drawing_again(fresh, check.stream());
    } CUGRAPHS_CATCH_ALL {
      check.put_back();
      CUGRAPHS_RETHROW;
    }
    check.after_eager();
  }
  check.replay_and_compare(detail::VerifyAgainst::FreshCapture);
}
template <class F, class... S>
  requires(!std::invocable<F&, cudaStream_t> && !std::invocable<F&> && std::invocable<F&, CaptureScope&> &&
           (detail::VerifiableState<S> && ...))
void verify_replay(Graph& graph, F&& step, const S&... state) {
  verify_replay(VerifyOptions{}, graph, step, state...);
}

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/verify.ipp>
#endif
