// NCCL collectives inside captures (optional: needs NCCL 2.9 or later, and is not part of
// the umbrella header). A collective called through these functions while a capture is
// open on the thread is recorded in the capture's log, so that a GraphSet can check that
// every device captured the same collectives in the same order.
#pragma once

#if !__has_include(<nccl.h>)
#  error "cugraphs/nccl.hpp needs NCCL's nccl.h (NCCL 2.9 or later); build with NCCL, or leave this header out"
#endif

#include <cugraphs/capture.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/span.hpp>

#include <nccl.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 9, 0)
#  error "cugraphs/nccl.hpp needs NCCL 2.9 or later: earlier versions cannot be captured into CUDA graphs"
#endif

namespace cugraphs::nccl {

/// Throws cugraphs::Error naming `op` and NCCL's words when `r` is not ncclSuccess.
inline void check(ncclResult_t r, std::string_view op) {
  if (r == ncclSuccess) [[likely]]
    return;
  std::string detail_text;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  if (r == ncclInvalidUsage || r == ncclInvalidArgument) detail_text = detail::format(": {}", ncclGetLastError(nullptr));
#endif
  // code() stays cudaSuccess: the failure is NCCL's, named in the message.
  detail::throw_library(op, detail::format("NCCL error {}", static_cast<int>(r)), ncclGetErrorString(r), detail_text);
}

/// NCCL's data type for T.
template <class T>
[[nodiscard]] constexpr ncclDataType_t data_type() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<U, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<U, std::int32_t>) return ncclInt32;
  else if constexpr (std::is_same_v<U, std::uint32_t>) return ncclUint32;
  else if constexpr (std::is_same_v<U, std::int64_t>) return ncclInt64;
  else if constexpr (std::is_same_v<U, std::uint64_t>) return ncclUint64;
  else if constexpr (std::is_same_v<U, std::int8_t>) return ncclInt8;
  else if constexpr (std::is_same_v<U, std::uint8_t>) return ncclUint8;
  else static_assert(!sizeof(U), "cugraphs::nccl: no NCCL data type for this element type");
}

[[nodiscard]] constexpr std::string_view name(ncclRedOp_t op) noexcept {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case ncclAvg: return "avg";
#endif
    default: return "a custom operation";
  }
}

/// One communicator per device of one process (ncclCommInitAll): rank i is devices[i].
/// Move-only; destroys the communicators.
class Communicators {
public:
  explicit Communicators(std::vector<int> devices) : devices_(std::move(devices)) {
    constexpr std::string_view op = "nccl::Communicators";
    if (devices_.empty()) detail::throw_misuse(op, "no device was given");
    comms_.resize(devices_.size());
    check(ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()), "ncclCommInitAll");
  }
  Communicators(Communicators&& o) noexcept : devices_(std::move(o.devices_)), comms_(std::move(o.comms_)) {
    o.comms_.clear();
  }
  Communicators& operator=(Communicators&&) = delete;
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ~Communicators() {
    for (ncclComm_t c : comms_) {
      if (c == nullptr) continue;
      if (const ncclResult_t r = ncclCommDestroy(c); r != ncclSuccess)
        detail::report_in_destructor("ncclCommDestroy", [r] { return std::string(ncclGetErrorString(r)); });
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return comms_.size(); }
  [[nodiscard]] int device(std::size_t rank) const { return devices_.at(rank); }
  /// The communicator of `device`'s rank.
  [[nodiscard]] ncclComm_t on(int device) const {
    for (std::size_t i = 0; i < devices_.size(); ++i)
      if (devices_[i] == device) return comms_[i];
    detail::throw_misuse("nccl::Communicators::on", "device {} has no rank in these communicators", device);
  }

private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

/// All-reduce of `send` into `recv` (equal sizes; they may be the same memory) on `stream`.
/// Inside a capture the collective becomes part of the graph and is recorded in the
/// capture's log.
template <class T>
void all_reduce(DeviceSpan<const T> send, DeviceSpan<T> recv, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  constexpr std::string_view what = "nccl::all_reduce";
  if (send.size() != recv.size())
    detail::throw_misuse(what, "the send buffer has {} elements but the receive buffer {}", send.size(), recv.size());
  // Logged in the capture open on this thread when `stream` captures (GraphSet compares the logs).
  const std::pair<std::uintptr_t, std::size_t> buffers[] = {
      {reinterpret_cast<std::uintptr_t>(send.data()), send.size_bytes()},
      {reinterpret_cast<std::uintptr_t>(recv.data()), recv.size_bytes()}};
  detail::record_collective(
      stream, detail::format("all_reduce of {} x {}-byte elements ({})", send.size(), sizeof(T), name(op)), buffers);
  check(ncclAllReduce(send.data(), recv.data(), send.size(), data_type<T>(), op, comm, stream), "ncclAllReduce");
}

/// The same in place.
template <class T>
void all_reduce(DeviceSpan<T> data, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  all_reduce(DeviceSpan<const T>(data), data, op, comm, stream);
}

}  // namespace cugraphs::nccl
