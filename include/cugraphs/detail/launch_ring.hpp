// The values a graph needs afresh at every launch, handed over through one ring: each
// replay's (seed, offset) of every generator it draws from, and a graphed callable's input
// addresses. A graph that has any gets one head kernel before its first node and one tail
// kernel after its last. The host writes launch k's values in slot k % slots of a pinned
// HostRing, publishes the tag k + 1, then launches. The head takes the slot if its tag is
// there: the generators' words go to the buffer the captured kernels read, the input
// addresses to the table the staging copy reads. The tail counts the launch done, on the
// device and in pinned memory, so the host knows the slot is free and that the launch has
// finished with everything the ring's owner holds. A launch nothing was posted for (an
// executable launched outside cugraphs) takes nothing: it keeps the last numbers and stages
// nothing.
#pragma once

#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/host_ring.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace cugraphs::detail {

// A generator's state, shared by the Generator and the graphs that draw from it.
struct GeneratorState {
  std::mutex m;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  int open_captures = 0;  // captures that recorded this generator and are still open

  // The current (seed, offset), then advances the offset by `increment`.
  std::pair<std::uint64_t, std::uint64_t> take(std::uint64_t increment) {
    std::lock_guard lock(m);
    const auto now = std::pair{seed, offset};
    offset += increment;
    return now;
  }
};

inline constexpr unsigned kMaxGeneratorsPerGraph = 8;

// A graph's per-launch ring: recorded while its capture is open (the generators drawn from,
// the staged inputs), put around the graph when the capture ends, posted to by every launch.
class LaunchRing {
public:
  static constexpr unsigned kSlots = 64;

  // What the captured staging copy reads (device memory): whether this launch took a slot,
  // and the taken slot's input addresses.
  struct Staging {
    const unsigned long long* control;  // [1]: this launch took a slot
    const void* const* sources;
  };

  // Made while the capture is open on this thread. The device words live outside the
  // graph's pool: another graph sharing the pool could reuse their blocks as temporaries.
  explicit LaunchRing(std::string_view what)
      : control_(private_device_memory(kControlWords * sizeof(unsigned long long), what)) {}
  LaunchRing(const LaunchRing&) = delete;
  LaunchRing& operator=(const LaunchRing&) = delete;
  ~LaunchRing() {
    end_capture();
    // Before the device words go: launches in flight read and write them until their tail.
    ring_.wait_all("Graph: waiting for launches in flight (per-launch ring)");
  }

  // ---- while the capture is open

  // The device words (seed, offset) of generator `g`, recording it on first use, and how
  // far the graph has drawn from it so far; the graph then draws `reserved` more.
  struct Draw {
    const std::uint64_t* words;
    std::uint64_t offset;
  };
  [[nodiscard]] Draw draw(const std::shared_ptr<GeneratorState>& g, std::uint64_t reserved, std::string_view op) {
    const unsigned i = index_of(g, op);
    if (reserved > ~std::uint64_t{0} - uses_[i].increment)
      throw_misuse(op, "this graph would draw more than 2^64 values per thread from the generator; the "
                       "64-bit Philox offset would overflow");
    const Draw d{reinterpret_cast<const std::uint64_t*>(values()) + 2 * i, uses_[i].increment};
    uses_[i].increment += reserved;
    return d;
  }

  // Readies staging of `leaves` input addresses per launch (once per graph).
  [[nodiscard]] Staging stage(std::size_t leaves, std::string_view op) {
    if (sources_) throw_misuse(op, "this capture already stages a graphed callable's inputs");
    leaves_ = static_cast<unsigned>(leaves);
    sources_ = private_device_memory(std::max<std::size_t>(leaves, 1) * sizeof(void*), op);
    return {control(), static_cast<const void* const*>(sources_.get())};
  }

  // Before the capture ends, on its stream: allocates the ring, now that the slot's width is
  // known, and captures the tail. Returns the launch's error (an invalidated capture fails
  // it; cudaStreamEndCapture then says why); throws when the ring cannot be made.
  [[nodiscard]] cudaError_t capture_tail(cudaStream_t stream, std::string_view op) {
    const RingTailLauncher tail = ring_tail_launcher.load(std::memory_order_acquire);
    if (tail == nullptr) throw_needs_nvcc(op, "a graph that draws random numbers or stages inputs");
    ring_ = HostRing(kSlots, width(), "the per-launch ring");
    args_ = {ring_.data(), kSlots, width(), static_cast<unsigned>(uses_.size()), leaves_, values(),
             static_cast<const void**>(sources_.get()), control(), ring_.done_word()};
    const cudaError_t e = tail(args_, stream);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
  }

  // Once the capture has ended: the generators may advance again outside captures.
  void end_capture() noexcept {
    if (!capturing_) return;
    capturing_ = false;
    for (auto& u : uses_) {
      std::lock_guard lock(u.generator->m);
      --u.generator->open_captures;
    }
  }

  // Puts the head kernel before every root node of `g`, the graph the capture made, and
  // zeroes the launch counter on `stream`.
  void attach_head(cudaGraph_t g, cudaStream_t stream, std::string_view op) {
    const void* kernel = ring_head_kernel.load(std::memory_order_acquire);
    if (kernel == nullptr) throw_needs_nvcc(op, "a graph that draws random numbers or stages inputs");
    {
      // Done before any replay, on whatever stream: the stream is idle, and the wait runs in
      // relaxed mode for a capture that may be open on this thread.
      RelaxedCaptureMode relaxed;
      check(cudaMemsetAsync(control(), 0, kControlWords * sizeof(unsigned long long), stream), "{}: cudaMemsetAsync", op);
      check(cudaStreamSynchronize(stream), "{}: cudaStreamSynchronize", op);
    }
    void* params[] = {&args_};
    cudaKernelNodeParams kp{};
    kp.func = const_cast<void*>(kernel);
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(head_threads(args_));
    kp.kernelParams = params;
    const auto roots = graph_nodes(g, op, true);
    cudaGraphNode_t head = nullptr;
    check(cudaGraphAddKernelNode(&head, g, nullptr, 0, &kp), "{}: cudaGraphAddKernelNode", op);
    for (cudaGraphNode_t root : roots) add_edge(g, head, root, op);
  }

  // ---- every launch

  // One launch, as one transaction: waits until the next slot is free; lets `stage` write the
  // launch's input-address words (one a leaf, 0 for an input not copied; `stage` may throw,
  // and then nothing is published); then, inside `guard` (which runs what it is given, for
  // a checked pool under the pool's lock and checks), writes each generator's (seed,
  // offset), advancing it by what a launch draws, publishes the slot (its tag last) and
  // calls `go`, which launches or throws. A launch that throws takes its post back (the
  // generators stay advanced).
  template <class Stage, class Guard, class Go>
  void launch(cudaStream_t stream, Stage&& stage, Guard&& guard, Go&& go, std::string_view op) {
    unsigned long long* slot = ring_.next_slot(stream, op);
    stage(std::span<unsigned long long>(slot + 1 + 2 * uses_.size(), leaves_));
    guard([&] {
      for (std::size_t i = 0; i < uses_.size(); ++i) {
        const auto [seed, offset] = uses_[i].generator->take(uses_[i].increment);
        slot[1 + 2 * i] = seed;
        slot[2 + 2 * i] = offset;
      }
      ring_.publish(slot);
      CUGRAPHS_TRY {
        go();
      } CUGRAPHS_CATCH_ALL {
        ring_.withdraw();
        CUGRAPHS_RETHROW;
      }
      ring_.launched(stream);
    });
  }

  // Whether launches stage a graphed callable's inputs.
  [[nodiscard]] bool stages() const noexcept { return sources_ != nullptr; }

  // Waits until every launch posted so far has finished (its tail has run).
  void wait_all(std::string_view op) noexcept { ring_.wait_all(op); }

private:
  // control_: [0] launches taken, [1] whether this launch took a slot, then the generators'
  // (seed, offset) pairs.
  static constexpr std::size_t kControlWords = 2 + 2 * kMaxGeneratorsPerGraph;

  struct Use {
    std::shared_ptr<GeneratorState> generator;
    std::uint64_t increment = 0;  // consumed by one launch
  };

  unsigned index_of(const std::shared_ptr<GeneratorState>& g, std::string_view op) {
    for (unsigned i = 0; i < uses_.size(); ++i)
      if (uses_[i].generator == g) return i;
    if (uses_.size() == kMaxGeneratorsPerGraph)
      throw_misuse(op, "a graph may draw from at most {} generators", kMaxGeneratorsPerGraph);
    {
      std::lock_guard lock(g->m);
      ++g->open_captures;
    }
    uses_.push_back({g, 0});
    return static_cast<unsigned>(uses_.size() - 1);
  }

  [[nodiscard]] unsigned long long* control() const noexcept { return static_cast<unsigned long long*>(control_.get()); }
  [[nodiscard]] unsigned long long* values() const noexcept { return control() + 2; }
  [[nodiscard]] unsigned width() const noexcept { return 1 + 2 * static_cast<unsigned>(uses_.size()) + leaves_; }

  std::shared_ptr<void> control_;
  std::shared_ptr<void> sources_;  // set when the graph stages inputs
  std::vector<Use> uses_;
  unsigned leaves_ = 0;
  bool capturing_ = true;
  RingArgs args_{};
  HostRing ring_;  // last: waited for before the device words go
};

}  // namespace cugraphs::detail
