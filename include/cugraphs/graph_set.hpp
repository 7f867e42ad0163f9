// GraphSet: the same step captured on several GPUs of one process, one Graph, one pool and
// one stream per device, each device's capture on a thread of its own.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/collectives.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/memory.hpp>
#include <cugraphs/stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs {

namespace detail {
// Runs work(context, i) for every i < n, each on a thread of its own, waits for all of them,
// then rethrows the first failure in index order. Not a template: <thread> stays in the
// compiled part (graph_set.ipp).
void run_on_threads(std::size_t n, void* context, void (*work)(void* context, std::size_t i));
// The collectives (cugraphs/nccl.hpp) recorded so far by capture `capture_id`, open on this
// thread; none when it is not.
[[nodiscard]] std::vector<std::string> collectives_of(std::uint64_t capture_id);
}  // namespace detail

/// How a GraphSet captures.
struct GraphSetOptions {
  std::vector<int> devices;       ///< empty: every visible device, in order
  std::vector<PoolHandle> pools;  ///< empty: a fresh private pool per device; else one per device, made on it
  /// The captures run at once, one thread per device: ThreadLocal lets each thread make its
  /// own unsafe calls without invalidating the others' captures.
  CaptureMode mode = CaptureMode::ThreadLocal;
  /// Whether each device's capture refuses work that escapes it (legacy default stream work,
  /// per-thread default stream work left unjoined, copies of pageable host memory), as a
  /// Graph's capture in Global mode does. On by default: ThreadLocal alone would let them
  /// through (EscapeCheck::Auto), and such work would run once, while the set is captured.
  EscapeCheck escapes = EscapeCheck::On;
  /// Whether a device's capture that records no work (a step with nothing to do on that
  /// device) is kept as an empty graph (CaptureOptions::allow_empty). By default it is an
  /// Error, and the set is left empty: the usual cause is work queued on a
  /// stream other than the step's, which ran once at the capture and never in a replay.
  bool allow_empty = false;
  /// Whether replay refuses the set, launching none of its graphs, when one names a
  /// DeviceBuffer freed since the capture (CaptureOptions::watch_buffers).
  bool watch_buffers = true;
};

/// One graph per device, captured from the same step. capture() runs `step(device, scope)`
/// (or `step(device, stream)`) on one thread per device, at once, each inside a capture on
/// that device; the step must therefore be safe to call concurrently. Either every device's
/// capture succeeds or the set is left empty and the first failing device's exception
/// propagates. Collectives captured through cugraphs/nccl.hpp are checked to be the same,
/// in the same order, on every device. Use a GraphSet from one thread at a time.
class GraphSet {
public:
  GraphSet() = default;
  GraphSet(GraphSet&&) noexcept = default;
  GraphSet& operator=(GraphSet&&) noexcept = default;
  GraphSet(const GraphSet&) = delete;
  GraphSet& operator=(const GraphSet&) = delete;

  /// Captures `step` on every device of `opts` (replacing what the set held). A bad device
  /// list or pool list is an Error before anything is captured.
  template <class F>
    requires(std::invocable<F&, int, CaptureScope&> || std::invocable<F&, int, cudaStream_t>)
  void capture(F&& step, const GraphSetOptions& opts = {}) {
    constexpr std::string_view op = "GraphSet::capture";
    if (detail::innermost_capture() != nullptr)
      detail::throw_misuse(op, "a capture is open on this thread; capture a GraphSet before capture_begin or "
                               "after capture_end");
    const std::vector<int> devices = chosen_devices(opts, op);
    reset();
    std::vector<Member> members;
    members.reserve(devices.size());
    for (const int d : devices) members.push_back(Member{d, Graph{}, Stream(d)});
    std::vector<std::vector<std::string>> collectives(devices.size());
    auto capture_one = [&](std::size_t i) {
      detail::DeviceGuard on(members[i].device);
      CaptureOptions co;
      co.mode = opts.mode;
      co.escapes = opts.escapes;
      co.allow_empty = opts.allow_empty;
      co.watch_buffers = opts.watch_buffers;
      co.stream = members[i].stream;  // the set's own: a capture thread's capture_stream() ends with it
      if (!opts.pools.empty()) co.pool = opts.pools[i];
      CaptureScope scope(members[i].graph, co);
      if constexpr (std::invocable<F&, int, CaptureScope&>)
        step(members[i].device, scope);
      else
        step(members[i].device, scope.stream());
      collectives[i] = detail::collectives_of(scope.capture_id());
      scope.end();
    };
    // On a failure `members` goes: every graph is discarded.
    detail::run_on_threads(devices.size(), &capture_one,
                           [](void* f, std::size_t i) { (*static_cast<decltype(capture_one)*>(f))(i); });
    if (const auto mismatch = detail::collective_mismatch(collectives, devices))
      detail::throw_misuse(op, "the captures are not rank-uniform: {}. Every device's step must issue the same "
                               "collectives in the same order; the set is left empty",
                           *mismatch);
    members_ = std::move(members);
  }

  /// Replays every graph on its own stream (stream(i)), in device order; returns without
  /// waiting.
  void replay();

  /// Replays graph i on streams[i], which must belong to device(i). Every stream is checked
  /// before anything is launched.
  void replay(std::span<const cudaStream_t> streams);

  /// Waits until every graph's own stream has finished its work.
  void synchronize() {
    for (auto& m : members_) m.stream.synchronize();
  }

  /// Discards every graph (waiting for their own streams first).
  void reset();

  [[nodiscard]] std::size_t size() const noexcept { return members_.size(); }
  [[nodiscard]] bool empty() const noexcept { return members_.empty(); }
  /// The device of graph i.
  [[nodiscard]] int device(std::size_t i) const { return at(i, "GraphSet::device").device; }
  /// Graph i, on device(i).
  [[nodiscard]] Graph& graph(std::size_t i) { return at(i, "GraphSet::graph").graph; }
  /// The stream replay() launches graph i on.
  [[nodiscard]] cudaStream_t stream(std::size_t i) const { return at(i, "GraphSet::stream").stream.get(); }

private:
  struct Member {
    int device;
    Graph graph;
    Stream stream;  // captures and replays the graph
  };

  [[nodiscard]] const Member& at(std::size_t i, std::string_view op) const;
  [[nodiscard]] Member& at(std::size_t i, std::string_view op) {
    return const_cast<Member&>(std::as_const(*this).at(i, op));
  }

  static std::vector<int> chosen_devices(const GraphSetOptions& opts, std::string_view op);

  std::vector<Member> members_;
};

}  // namespace cugraphs

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/graph_set.ipp>
#endif
