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
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace cugraphs {

/// How a GraphSet captures.
struct GraphSetOptions {
  std::vector<int> devices;       ///< empty: every visible device, in order
  std::vector<PoolHandle> pools;  ///< empty: a fresh private pool per device; else one per device, made on it
  /// The captures run at once, one thread per device: ThreadLocal lets each thread make its
  /// own unsafe calls without invalidating the others' captures.
  CaptureMode mode = CaptureMode::ThreadLocal;
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
#if CUGRAPHS_EXCEPTIONS
    std::vector<std::exception_ptr> failures(devices.size());
#endif
    std::vector<std::vector<std::string>> collectives(devices.size());
    {
      std::vector<std::jthread> threads;
      threads.reserve(devices.size());
      for (std::size_t i = 0; i < devices.size(); ++i) {
        threads.emplace_back([&, i] {
          CUGRAPHS_TRY {
            detail::DeviceGuard on(members[i].device);
            CaptureOptions co;
            co.mode = opts.mode;
            co.stream = members[i].stream;  // the set's own: a capture thread's capture_stream() ends with it
            if (!opts.pools.empty()) co.pool = opts.pools[i];
            CaptureScope scope(members[i].graph, co);
            if constexpr (std::invocable<F&, int, CaptureScope&>)
              step(members[i].device, scope);
            else
              step(members[i].device, scope.stream());
            if (const auto* session = detail::CaptureSession::find(scope.capture_id()))
              collectives[i] = session->collectives;
            scope.end();
          } CUGRAPHS_CATCH_ALL {
#if CUGRAPHS_EXCEPTIONS
            failures[i] = std::current_exception();
#endif
          }
        });
      }
    }  // the threads join here
#if CUGRAPHS_EXCEPTIONS
    for (auto& failure : failures)
      if (failure) std::rethrow_exception(failure);  // `members` goes: every graph is discarded
#endif
    if (const auto mismatch = detail::collective_mismatch(collectives, devices))
      detail::throw_misuse(op, "the captures are not rank-uniform: {}. Every device's step must issue the same "
                               "collectives in the same order; the set is left empty",
                           *mismatch);
    members_ = std::move(members);
  }

  /// Replays every graph on its own stream (stream(i)), in device order; returns without
  /// waiting.
  void replay() {
    constexpr std::string_view op = "GraphSet::replay";
    if (members_.empty()) detail::throw_misuse(op, "nothing has been captured into this set; call capture() first");
    for (auto& m : members_) {
      detail::DeviceGuard on(m.device);
      m.graph.replay(m.stream);
    }
  }

  /// Replays graph i on streams[i], which must belong to device(i). Every stream is checked
  /// before anything is launched.
  void replay(std::span<const cudaStream_t> streams) {
    constexpr std::string_view op = "GraphSet::replay";
    if (members_.empty()) detail::throw_misuse(op, "nothing has been captured into this set; call capture() first");
    if (streams.size() != members_.size())
      detail::throw_misuse(op, "{} streams were given for {} graphs; pass one stream per device, in the set's "
                               "order",
                           streams.size(), members_.size());
    for (std::size_t i = 0; i < streams.size(); ++i) {
      detail::DeviceGuard on(members_[i].device);
      const int d = detail::stream_device(streams[i], op);
      if (d != members_[i].device)
        detail::throw_misuse(op, "stream {} belongs to device {} but graph {} was captured on device {}; nothing "
                                 "was launched",
                             i, d, i, members_[i].device);
    }
    for (std::size_t i = 0; i < streams.size(); ++i) {
      detail::DeviceGuard on(members_[i].device);
      members_[i].graph.replay(streams[i]);
    }
  }

  /// Waits until every graph's own stream has finished its work.
  void synchronize() {
    for (auto& m : members_) m.stream.synchronize();
  }

  /// Discards every graph (waiting for their own streams first).
  void reset() {
    for (auto& m : members_) m.stream.synchronize();
    members_.clear();
  }

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

  [[nodiscard]] const Member& at(std::size_t i, std::string_view op) const {
    if (i >= members_.size()) detail::throw_misuse(op, "index {} is out of range: the set holds {} graphs", i, members_.size());
    return members_[i];
  }
  [[nodiscard]] Member& at(std::size_t i, std::string_view op) {
    return const_cast<Member&>(std::as_const(*this).at(i, op));
  }

  static std::vector<int> chosen_devices(const GraphSetOptions& opts, std::string_view op) {
    const int count = detail::device_count();
    std::vector<int> devices = opts.devices;
    if (devices.empty())
      for (int d = 0; d < count; ++d) devices.push_back(d);
    if (devices.empty()) detail::throw_cuda(cudaErrorNoDevice, detail::format("{}: no CUDA device is visible", op));
    for (std::size_t i = 0; i < devices.size(); ++i) {
      if (devices[i] < 0 || devices[i] >= count)
        detail::throw_misuse(op, "device {} does not exist ({} device{} visible)", devices[i], count,
                             count == 1 ? " is" : "s are");
      if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i), devices[i]) !=
          devices.begin() + static_cast<std::ptrdiff_t>(i))
        detail::throw_misuse(op, "device {} is listed twice; a set holds one graph per device", devices[i]);
    }
    if (!opts.pools.empty()) {
      if (opts.pools.size() != devices.size())
        detail::throw_misuse(op, "{} pools were given for {} devices; give one pool per device, or none",
                             opts.pools.size(), devices.size());
      for (std::size_t i = 0; i < devices.size(); ++i)
        if (opts.pools[i].device() != devices[i])
          detail::throw_misuse(op, "pool {} belongs to device {} but device {} captures into it; make each pool "
                                   "on its device",
                               i, opts.pools[i].device(), devices[i]);
    }
    return devices;
  }

  std::vector<Member> members_;
};

}  // namespace cugraphs
