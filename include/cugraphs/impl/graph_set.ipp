// The bodies of the functions <cugraphs/graph_set.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/graph_set.hpp>
#include <cugraphs/config.hpp>
#include <cugraphs/detail/capture_session.hpp>

#include <exception>
#include <thread>

namespace cugraphs {

CUGRAPHS_INLINE void GraphSet::replay() {
  constexpr std::string_view op = "GraphSet::replay";
  if (members_.empty()) detail::throw_misuse(op, "nothing has been captured into this set; call capture() first");
  for (auto& m : members_) m.graph.check_buffers(op);  // all or none launched (collectives would wait)
  for (auto& m : members_) {
    detail::DeviceGuard on(m.device);
    m.graph.replay(m.stream);
  }
}

CUGRAPHS_INLINE void GraphSet::replay(std::span<const cudaStream_t> streams) {
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
  for (auto& m : members_) m.graph.check_buffers(op);
  for (std::size_t i = 0; i < streams.size(); ++i) {
    detail::DeviceGuard on(members_[i].device);
    members_[i].graph.replay(streams[i]);
  }
}

CUGRAPHS_INLINE void GraphSet::reset() {
  for (auto& m : members_) m.stream.synchronize();
  members_.clear();
}

CUGRAPHS_INLINE auto GraphSet::at(std::size_t i, std::string_view op) const -> const Member& {
  if (i >= members_.size()) detail::throw_misuse(op, "index {} is out of range: the set holds {} graphs", i, members_.size());
  return members_[i];
}

CUGRAPHS_INLINE std::vector<int> GraphSet::chosen_devices(const GraphSetOptions& opts, std::string_view op) {
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

}  // namespace cugraphs

namespace cugraphs::detail {

CUGRAPHS_INLINE void run_on_threads(std::size_t n, void* context, void (*work)(void*, std::size_t)) {
#if CUGRAPHS_EXCEPTIONS
  std::vector<std::exception_ptr> failures(n);
#endif
  {
    std::vector<std::jthread> threads;
    threads.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        CUGRAPHS_TRY {
          work(context, i);
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
    if (failure) std::rethrow_exception(failure);
#endif
}

CUGRAPHS_INLINE std::vector<std::string> collectives_of(std::uint64_t capture_id) {
  if (const auto* session = CaptureSession::find(capture_id)) return session->collectives;
  return {};
}

}  // namespace cugraphs::detail
