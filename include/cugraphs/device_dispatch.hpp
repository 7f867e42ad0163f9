// DeviceDispatch: a key the device computed picks the graph that runs next, with no round
// trip through the host: a one-kernel dispatcher graph reads the key when it runs and
// tail-launches the graph of the matching bucket (or the kernel that computed the key does
// so itself, through a DispatchTable). Optional and nvcc-only (not in the
// umbrella): its kernel calls the device runtime's cudaGraphLaunch, which only translation
// units that dispatch should carry.
#pragma once

#include <cugraphs/capture.hpp>
#include <cugraphs/device_launch.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>

#if !defined(__CUDACC__)
#  error "cugraphs/device_dispatch.hpp holds device code: include it only from sources compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cugraphs {

namespace detail {
inline constexpr int kDispatchKeyOutOfRange = -1;  // cudaError_t values are not negative
}  // namespace detail

/// A DeviceDispatch's choice as kernels take it (by value, trivially copyable; from
/// DeviceDispatch::table()). The kernel that computes the key may dispatch itself, with no
/// dispatcher graph between it and the bucket: call dispatch(key) or dispatch_now(key) from one
/// thread of a kernel that runs in a graph (CUDA launches graphs only from kernels of a graph;
/// that graph need not be made for device launch). Either way the launching graph's launch
/// ends, for its stream and for a synchronize, only once the bucket's graph has finished.
/// Failures reach DeviceDispatch::check() as the dispatcher's do.
struct DispatchTable {
  /// Up to this many buckets travel in the table itself (a kernel argument): the choice reads
  /// no device memory, so the bucket's launch waits for no memory load.
  static constexpr unsigned kInline = 8;

  const unsigned* bounds = nullptr;        ///< ascending, one a bucket (device memory)
  const DeviceGraph* graphs = nullptr;     ///< the buckets' graphs (device memory)
  unsigned count = 0;
  int* status = nullptr;                   ///< [0] the first failure, [1] a key above every bound
  unsigned inline_bounds[kInline] = {};    ///< with count <= kInline: the bounds
  cudaGraphExec_t inline_execs[kInline] = {};  ///< with count <= kInline: the buckets' executables

  /// Tail-launches the graph of the smallest bucket whose bound is not below `key`: it starts
  /// once the launching graph has finished. A key above every bound runs nothing and is
  /// recorded with the key. Returns whether a bucket's graph was launched.
  __device__ bool dispatch(unsigned key) const { return dispatch_into(key, cudaStreamGraphTailLaunch); }

  /// As dispatch(), but the bucket's graph starts now (a fire-and-forget launch, a child of
  /// the launching graph) instead of after the launching graph: sooner, and beside what the
  /// launching kernel and its graph still do, which must then neither read what the bucket
  /// writes nor write what it reads. CUDA allows 120 fire-and-forget launches in one launch of
  /// a graph; one beyond is refused and reported as any refused launch.
  __device__ bool dispatch_now(unsigned key) const { return dispatch_into(key, cudaStreamGraphFireAndForget); }

private:
  __device__ bool dispatch_into(unsigned key, cudaStream_t how) const {
    if (status == nullptr) return false;  // a table not from DeviceDispatch::table()
    unsigned lo = 0;
    cudaGraphExec_t exec = nullptr;
    if (count <= kInline) {
      // Count the bounds below the key, then pick the executable: independent comparisons and
      // selects over the table's own words, with no index computed at run time into them
      // (which could send the table through local memory).
#pragma unroll
      for (unsigned i = 0; i < kInline; ++i) lo += (i < count && inline_bounds[i] < key) ? 1u : 0u;
#pragma unroll
      for (unsigned i = 0; i < kInline; ++i)
        if (i == lo) exec = inline_execs[i];
    } else {
      unsigned hi = count;
      while (lo < hi) {
        const unsigned mid = (lo + hi) / 2;
        if (bounds[mid] < key) lo = mid + 1;
        else hi = mid;
      }
      if (lo < count) exec = graphs[lo].exec;
    }
    if (lo == count) {
      if (atomicCAS(status, 0, detail::kDispatchKeyOutOfRange) == 0) status[1] = static_cast<int>(key);
      return false;
    }
#if defined(__CUDA_ARCH__)
    const cudaError_t e = cudaGraphLaunch(exec, how);
    if (e != cudaSuccess) atomicCAS(status, 0, static_cast<int>(e));
    return e == cudaSuccess;
#else
    (void)how;
    return false;
#endif
  }
};

static_assert(std::is_trivially_copyable_v<DispatchTable>, "cugraphs: kernels take a DispatchTable by value");

namespace detail {

// The dispatcher graph's one kernel, one thread: reads the key when it runs and dispatches.
template <int = 0>
__global__ void dispatch_kernel(const unsigned* key, DispatchTable table) {
  (void)table.dispatch(*key);
}

}  // namespace detail

/// Runs, on the device, the graph of the smallest bucket that holds `*key`, a value a kernel
/// wrote: bucket i takes keys up to bounds[i] (strictly ascending). Each bucket's Graph must
/// be captured with CaptureOptions::device_launch and outlive the dispatch, keeping its
/// executable (once handed out, Graph::update never replaces it; do not reset, re-capture or
/// replay it from the host meanwhile: a device launch of a graph that is running fails).
/// replay() launches the dispatcher graph, whose kernel reads the key when it runs and
/// tail-launches the bucket's graph: work queued after replay() on the stream waits for both;
/// replay the dispatcher on one stream at a time. A key above the largest bound runs no bucket
/// and is reported by check(), with the key; so is a launch the device refused.
class DeviceDispatch {
public:
  DeviceDispatch(std::span<Graph* const> buckets, std::span<const unsigned> bounds, const unsigned* key) {
    constexpr std::string_view op = "DeviceDispatch";
    if (buckets.empty()) detail::throw_misuse(op, "no bucket graphs were given");
    if (buckets.size() != bounds.size())
      detail::throw_misuse(op, "{} bucket graphs but {} bounds; give one bound per graph", buckets.size(), bounds.size());
    for (std::size_t i = 1; i < bounds.size(); ++i)
      if (bounds[i] <= bounds[i - 1])
        detail::throw_misuse(op, "the bounds must ascend strictly: bound {} is {} after {}", i, bounds[i], bounds[i - 1]);
    if (key == nullptr) detail::throw_misuse(op, "the key pointer is null");
    const int device = detail::current_device();
    detail::check_device_readable(key, device, op, "the key pointer");
    std::vector<DeviceGraph> graphs;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      if (buckets[i] == nullptr) detail::throw_misuse(op, "bucket graph {} is null", i);
      graphs.push_back(buckets[i]->device_graph());  // refuses a graph not made for device launch
    }
    buckets_.assign(buckets.begin(), buckets.end());
    const std::size_t n = graphs.size();
    graphs_ = detail::PrivateArray<DeviceGraph>(n, op);
    bounds_ = detail::PrivateArray<unsigned>(n, op);
    status_ = detail::PrivateArray<int>(2, op);  // [0] the first failure, [1] the key out of range
    {
      // On cugraphs' own non-blocking stream: the legacy default stream would break a capture
      // open meanwhile on any thread.
      const cudaStream_t s = detail::thread_stream(detail::ThreadStream::Words, device);
      detail::check(cudaMemcpyAsync(graphs_.data(), graphs.data(), graphs_.bytes(), cudaMemcpyHostToDevice, s),
                    "{}: cudaMemcpyAsync", op);
      detail::check(cudaMemcpyAsync(bounds_.data(), bounds.data(), bounds_.bytes(), cudaMemcpyHostToDevice, s),
                    "{}: cudaMemcpyAsync", op);
      detail::check(cudaMemsetAsync(status_.data(), 0, status_.bytes(), s), "{}: cudaMemsetAsync", op);
      detail::check(cudaStreamSynchronize(s), "{}: cudaStreamSynchronize", op);
    }
    device_ = device;
    largest_ = bounds.back();
    table_.bounds = bounds_.data();
    table_.graphs = graphs_.data();
    table_.count = static_cast<unsigned>(n);
    table_.status = status_.data();
    if (n <= DispatchTable::kInline) {
      for (std::size_t i = 0; i < n; ++i) {
        table_.inline_bounds[i] = bounds[i];
        table_.inline_execs[i] = graphs[i].exec;
      }
    }
    CaptureOptions co;
    co.device_launch = true;
    CaptureScope scope(dispatcher_, co);
    detail::dispatch_kernel<<<1, 1, 0, scope.stream()>>>(key, table());
    detail::check(cudaGetLastError(), "{}: launching the dispatcher kernel", op);
    scope.end();
  }

  /// Launches the dispatcher on this thread's current_stream().
  void replay() { replay(current_stream()); }
  /// Launches the dispatcher on `stream`. Refused, as a bucket's own replay would be, while
  /// a bucket's graph names a DeviceBuffer freed since its capture (CaptureOptions::watch_buffers).
  void replay(cudaStream_t stream) {
    for (Graph* g : buckets_) g->check_buffers("DeviceDispatch::replay");
    dispatcher_.replay(stream);
  }

  /// Throws the first failure since the last check (a key above the largest bound, a
  /// refused device-side launch) and forgets it: call it after synchronizing.
  void check() {
    constexpr std::string_view op = "DeviceDispatch::check";
    int words[2] = {0, 0};
    detail::take_words(status_.data(), words, 2, device_, op);
    if (words[0] == 0) return;
    if (words[0] == detail::kDispatchKeyOutOfRange)
      detail::throw_misuse(op, "a key of {} was above the largest bucket bound, {}: no bucket graph ran for it. "
                               "Add a bucket that holds it, or clamp the key before the dispatch",
                           static_cast<unsigned>(words[1]), largest_);
    const auto e = static_cast<cudaError_t>(words[0]);
    detail::throw_error(e, op, "the dispatcher's launch of a bucket graph from the device failed: {} ({})",
                        cudaGetErrorName(e), cudaGetErrorString(e));
  }

  /// The choice for kernels that compute the key and dispatch themselves (DispatchTable):
  /// valid while this DeviceDispatch lives.
  [[nodiscard]] DispatchTable table() const noexcept {
    return status_.data() != nullptr ? table_ : DispatchTable{};  // a moved-from dispatch has none
  }

  /// The dispatcher graph (one kernel node), instantiated for device launch.
  [[nodiscard]] const Graph& dispatcher() const noexcept { return dispatcher_; }

private:
  detail::PrivateArray<DeviceGraph> graphs_;
  detail::PrivateArray<unsigned> bounds_;
  detail::PrivateArray<int> status_;
  std::vector<Graph*> buckets_;  // for their buffer checks (replay)
  DispatchTable table_;
  unsigned largest_ = 0;
  int device_ = 0;
  Graph dispatcher_;  // last: it goes first, before the arrays its kernel reads
};

}  // namespace cugraphs
