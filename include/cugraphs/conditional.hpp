// Device-side control flow inside a capture: ConditionalScope<If | While | IfElse | Switch>.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/condition.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/memory.hpp>

#include <concepts>
#include <cstdint>
#include <exception>

namespace cugraphs {

/// The kinds of conditional scope.
struct If {};
struct While {};
struct IfElse {};
struct Switch {};

/// Tag: the condition is left to kernels (Condition::set), starting from a fixed value at
/// every launch of the graph.
struct SetByKernels {
  unsigned initial = 0;
};

#if CUGRAPHS_HAS_CONDITIONAL_NODES

namespace detail {
template <class Kind>
inline constexpr ConditionalKind conditional_kind_v = std::same_as<Kind, If>       ? ConditionalKind::If
                                                      : std::same_as<Kind, While>  ? ConditionalKind::While
                                                      : std::same_as<Kind, IfElse> ? ConditionalKind::IfElse
                                                                                   : ConditionalKind::Switch;
template <class Kind>
concept ConditionalKindTag = std::same_as<Kind, If> || std::same_as<Kind, While> ||
                             std::same_as<Kind, IfElse> || std::same_as<Kind, Switch>;
}  // namespace detail

/// Captures the body of a conditional node for the lifetime of a scope. The first argument
/// is the enclosing CaptureScope; a scope opened while another is open nests inside it.
/// While the scope is open, current_stream() (and CaptureScope::stream()) is the stream that
/// captures the body. Ending the scope normally closes the node (prefer end(), which reports
/// failures as an ordinary throw); leaving it by exception aborts the whole capture cleanly.
///
/// - If: the body runs on a replay when `*pred` is true at that point of the graph.
/// - While: the body repeats while `*pred` is true; `*pred` is read before the first
///   iteration and again at the end of every iteration, so body kernels just write it.
/// - IfElse: otherwise() switches from the then-body to the else-body.
/// - Switch: case_(i) starts body i; an index >= n runs no body.
template <class Kind>
  requires detail::ConditionalKindTag<Kind>
class ConditionalScope {
  static_assert(!(std::same_as<Kind, IfElse> || std::same_as<Kind, Switch>) ||
                    CUGRAPHS_HAS_CONDITIONAL_ELSE_SWITCH,
                "ConditionalScope<IfElse> and <Switch> need the CUDA toolkit 12.8 or newer");
  static constexpr detail::ConditionalKind kind = detail::conditional_kind_v<Kind>;

public:
  /// If, While, IfElse: the condition is `*pred` (a device flag).
  ConditionalScope(CaptureScope& scope, const bool* pred)
    requires(!std::same_as<Kind, Switch>)
      : ConditionalScope(scope, detail::ConditionSource::device_flag(pred),
                         kind == detail::ConditionalKind::IfElse ? 2u : 1u) {}

  /// The same with the flag as a one-element DeviceSpan.
  ConditionalScope(CaptureScope& scope, DeviceSpan<const bool> pred)
    requires(!std::same_as<Kind, Switch>)
      : ConditionalScope(scope, checked_single(pred)) {}

  /// Switch over `n` cases, selected by `*index` (a device value).
  ConditionalScope(CaptureScope& scope, const unsigned* index, unsigned n)
    requires std::same_as<Kind, Switch>
      : ConditionalScope(scope, detail::ConditionSource::device_index(index), n) {}

  /// The condition made earlier in this capture by CaptureScope::make_condition() (at the
  /// same nesting level): kernels captured before the node, or inside it, set it. A Switch
  /// has `cases` bodies.
  ConditionalScope(CaptureScope& scope, Condition made_before, unsigned cases = 1)
      : ConditionalScope(scope, from_condition(made_before),
                         kind == detail::ConditionalKind::IfElse ? 2u
                         : kind == detail::ConditionalKind::Switch ? cases
                                                                   : 1u) {}

  /// A flag of another type than `const bool*` (Switch: `const unsigned*`) is refused in words.
  template <class P>
    requires(std::is_pointer_v<P> && !std::is_convertible_v<P, const bool*> && !std::same_as<Kind, Switch>)
  ConditionalScope(CaptureScope&, P) {
    static_assert(sizeof(P) == 0, "cugraphs: ConditionalScope<If>, <While> and <IfElse> read their condition from "
                                  "a device flag of type const bool* (or a one-element DeviceSpan<const bool>); "
                                  "a flag of another type would be read as the wrong bytes. Keep the flag as a "
                                  "bool, or let a kernel set the condition (SetByKernels, make_condition)");
  }
  template <class P>
    requires(std::is_pointer_v<P> && !std::is_convertible_v<P, const unsigned*> && std::same_as<Kind, Switch>)
  ConditionalScope(CaptureScope&, P, unsigned) {
    static_assert(sizeof(P) == 0, "cugraphs: ConditionalScope<Switch> reads the case to run from a device index of "
                                  "type const unsigned*; an index of another type would be read as the wrong bytes. "
                                  "Keep the index as an unsigned, or let a kernel set it (SetByKernels, "
                                  "make_condition)");
  }

  /// The condition is set by kernels through condition(), from `tag.initial` at every launch.
  ConditionalScope(CaptureScope& scope, SetByKernels tag, unsigned cases = 1)
      : ConditionalScope(scope, detail::ConditionSource::set_by_kernels(tag.initial),
                         kind == detail::ConditionalKind::IfElse ? 2u
                         : kind == detail::ConditionalKind::Switch ? cases
                                                                   : 1u) {}

  ~ConditionalScope() noexcept(false) {
    if (!open_) return;
    if (!detail::conditional_is_open(capture_id_, frame_id_)) return;
    if (std::uncaught_exceptions() > uncaught_) {
      detail::abort_capture(capture_id_);  // leaving by exception discards the whole capture
    } else {
      end();
    }
  }

  ConditionalScope(const ConditionalScope&) = delete;
  ConditionalScope& operator=(const ConditionalScope&) = delete;

  /// The stream capturing the active body.
  [[nodiscard]] cudaStream_t stream() const { return frame().stream; }

  /// The node's condition, for kernels to set. Only on a scope opened with SetByKernels: on a
  /// scope with a flag, cugraphs sets the condition from the flag (a While at the end of
  /// every iteration too), which would overwrite what a kernel set.
  [[nodiscard]] Condition condition() const {
    const auto f = frame();
    if (!f.set_by_kernels)
      detail::throw_misuse(op(), "this scope's condition is set from its flag before the node{}, which would "
                                 "overwrite a kernel's set(); open the scope with SetByKernels{{}} to set the "
                                 "condition from kernels in a While's body, or with a Condition from "
                                 "CaptureScope::make_condition() for a kernel that decides before the node",
                           kind == detail::ConditionalKind::While ? " and at the end of every iteration" : "");
    return Condition(f.handle);
  }

  /// Closes the node. Scopes close innermost first; out of order is an Error, and so is
  /// ending a scope twice.
  void end() {
    if (!open_) detail::throw_misuse(op(), "this conditional scope has already ended");
    detail::conditional_step(capture_id_, frame_id_, detail::ConditionalStep::Close, 0, nullptr, op());
    open_ = false;
  }

  /// While: re-read the condition from `*pred` (instead of the constructor's flag) at the end
  /// of every iteration.
  void set_predicate(const bool* pred)
    requires std::same_as<Kind, While>
  {
    (void)frame();  // a closed scope says so before a null flag does
    detail::conditional_step(capture_id_, frame_id_, detail::ConditionalStep::SetRefresh, 0, pred, op());
  }

  /// IfElse: ends the then-body and captures the else-body. Once only.
  void otherwise()
    requires std::same_as<Kind, IfElse>
  {
    if (frame().else_captured) detail::throw_misuse(op(), "otherwise() was already called");
    detail::conditional_step(capture_id_, frame_id_, detail::ConditionalStep::SwitchBody, 1, nullptr, op());
  }

  /// Switch: ends the active case, if any, and captures case `i`. Each case at most once.
  void case_(unsigned i)
    requires std::same_as<Kind, Switch>
  {
    detail::conditional_step(capture_id_, frame_id_, detail::ConditionalStep::SwitchBody, i, nullptr, op());
  }

private:
  ConditionalScope(CaptureScope& scope, detail::ConditionSource source, unsigned bodies)
      : capture_id_(scope.capture_id()), uncaught_(std::uncaught_exceptions()) {
    frame_id_ = detail::open_conditional(capture_id_, kind, source, bodies, op());
  }

  static std::string op() { return detail::format("ConditionalScope<{}>", detail::name(kind)); }

  static detail::ConditionSource from_condition(Condition c) {
    if (c.graph() == nullptr)
      detail::throw_misuse(op(), "the Condition is empty; make it with CaptureScope::make_condition() in this "
                                 "capture before the scope");
    return detail::ConditionSource::made_handle(c.handle(), c.graph());
  }

  static const bool* checked_single(DeviceSpan<const bool> pred) {
    if (pred.size() != 1)
      detail::throw_misuse(op(), "the predicate span must hold exactly one flag, it holds {}", pred.size());
    return pred.data();
  }

  // This scope's frame, while its capture is open on this thread.
  [[nodiscard]] detail::FrameView frame() const { return detail::conditional_frame(capture_id_, frame_id_, op()); }

  std::uint64_t capture_id_;
  std::uint64_t frame_id_ = 0;
  int uncaught_;
  bool open_ = true;
};

#else

template <class Kind>
class ConditionalScope {
  static_assert(sizeof(Kind) == 0, "ConditionalScope needs the CUDA toolkit 12.4 or newer (12.8 for "
                                   "IfElse and Switch): conditional graph nodes are not available");
};

#endif

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/session_api.ipp>
#endif
