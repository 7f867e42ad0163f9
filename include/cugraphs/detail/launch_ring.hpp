// The values a graph needs afresh at every launch: each replay's (seed, offset) of every
// generator it draws from, and a graphed callable's input addresses. Recorded while the
// capture is open; once it has ended, attach() chooses how launches get them (PerLaunch):
//
// - As kernel arguments (ArgumentSites, argument_sites.hpp): the kernel nodes whose
//   arguments hold a draw's PhiloxArgs or the staging copy's StageArgs are found, and before
//   each launch they are set to this launch's values (cudaGraphExecKernelNodeSetParams
//   applies to later launches only). No kernel is added; a graph that stages gets an event
//   record node after its last nodes (ArgumentSites::ready).
// - Advanced on the device (a graph that draws and stages nothing): the captured kernels read
//   the generators' device words; one kernel after the graph's last nodes adds what a launch
//   draws to each offset, then counts the launch done in a device word. The host launches and
//   does nothing else while its generators are where the device's words will be; when they
//   moved otherwise (eager draws, another graph drawing from them, manual_seed), a small
//   kernel sets the words on the replay's stream first, after the last launch's end (which
//   may run on another stream: handles do not tell streams apart, since cudaStreamPerThread
//   names one stream a thread and a destroyed stream's handle comes back): the stream first
//   waits until the count has reached the launches queued (cuStreamWaitValue32; CUDA runs
//   the launches of one executable in order). Where that wait cannot be had (CUDA before
//   12.5 at build time, a driver without it: stream_waits()), an event record node after the
//   advance kernel marks the end instead (it costs every launch 0.2 to 0.5 us of host time). A
//   launch of the executable outside cugraphs counts too, which the host does not know of:
//   later waits then end early by as many launches (launch such graphs through replay()).
// - Through a ring: one head kernel goes before the graph's first nodes and one tail kernel
//   after its last. The host writes launch k's values in slot k % slots of a pinned HostRing,
//   publishes the tag k + 1, then launches. The head takes the slot if its tag is there: the
//   generators' words go to the buffer the captured kernels read, the input addresses to the
//   table the staging copy reads. The tail counts the launch done, on the device and in
//   pinned memory, so the host knows the slot is free and that the launch has finished with
//   everything the ring's owner holds. A launch nothing was posted for (an executable
//   launched outside cugraphs) takes nothing: it keeps the last numbers and stages nothing.
//   A launch of the executable outside cugraphs, taking its values as arguments, repeats the
//   last launch's.
#pragma once

#include <cugraphs/detail/argument_sites.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/host_ring.hpp>
#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/error.hpp>
#include <cugraphs/per_launch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
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
  std::pair<std::uint64_t, std::uint64_t> take(std::uint64_t increment);
};

// A graph's per-launch values: recorded while its capture is open (the generators drawn
// from, the staged inputs), readied once it has ended (attach), handed to every launch.
class LaunchRing {
public:
  static constexpr unsigned kSlots = 64;

  // What the captured staging copy reads (device memory): whether this launch took a slot,
  // and the taken slot's input addresses.
  using Staging = StagingWords;

  // Made while the capture is open on this thread; refused in a capture for device launch.
  // The device words live outside the graph's pool: another graph sharing the pool could
  // reuse their blocks as temporaries.
  LaunchRing(std::string_view what, PerLaunch policy, bool device_launch)
      : control_(refuse_device_launch(device_launch, what)), policy_(policy) {}
  LaunchRing(const LaunchRing&) = delete;
  LaunchRing& operator=(const LaunchRing&) = delete;
  ~LaunchRing();

  // ---- while the capture is open

  // The device words (seed, offset) of generator `g`, recording it on first use, and how
  // far the graph has drawn from it so far; the graph then draws `reserved` more.
  struct Draw {
    const std::uint64_t* words;
    std::uint64_t offset;
    std::uint64_t seed;  // captured_seed of the generator's index in the graph
  };
  [[nodiscard]] Draw draw(const std::shared_ptr<GeneratorState>& g, std::uint64_t reserved, std::string_view op);
  // The generators recorded, in the order of their words, each with how far a launch
  // advances it.
  [[nodiscard]] std::vector<std::pair<std::shared_ptr<GeneratorState>, std::uint64_t>> generators() const {
    std::vector<std::pair<std::shared_ptr<GeneratorState>, std::uint64_t>> out;
    out.reserve(uses_.size());
    for (const Use& u : uses_) out.emplace_back(u.generator, u.increment);
    return out;
  }

  // Readies staging of one input address per static input per launch (once per graph);
  // `in_place`: InputMode::InPlace (argument_sites.hpp); `unread_is_error`: the capture's end
  // refuses a graph that reaches some static input nowhere (ArgumentSites::unread_leaf).
  [[nodiscard]] Staging stage(std::span<const StageTarget> statics, bool in_place, bool unread_is_error,
                              std::string_view op);
  // Inputs read in place: memory (address, bytes) where an input is copied rather than read
  // in place (a graphed callable's outputs), beside the pool's and the graph's allocations.
  void shield(std::span<const ArgumentSites::Range> ranges) { shield_.insert(shield_.end(), ranges.begin(), ranges.end()); }
  [[nodiscard]] bool stages_in_place() const noexcept { return in_place_; }

  // Once the capture has ended: the generators may advance again outside captures.
  void end_capture() noexcept;

  // ---- once the capture has ended

  // Readies `g`, the graph the capture made, for its launches' values: as kernel arguments
  // where the policy allows and every value reaches its kernel as one, else through the ring
  // (its head before every root node, its tail after every last node). Zeroes the device
  // words on `stream` first.
  struct GraphFacts {
    bool updatable;  // the graph holds device-updatable kernel nodes, which node updates from the host would overwrite
    const std::vector<ConditionalMade>& conditionals;  // the conditional nodes its capture made
    int device;  // the capture's
    std::span<const ArgumentSites::Range> pool;  // the segments of the pool captured into
    std::span<const ArgumentSites::Range> collective_buffers = {};  // of NCCL collectives (cugraphs/nccl.hpp)
  };
  void attach(cudaGraph_t g, cudaStream_t stream, const GraphFacts& facts, std::string_view op);

  // Whether launches take their values as kernel arguments, or advance them on the device
  // (else through the ring).
  [[nodiscard]] bool by_arguments() const noexcept { return sites_.has_value(); }
  [[nodiscard]] bool advancing() const noexcept { return advancing_; }
  // How many of a graphed callable's inputs the last launch read in place (not copied).
  [[nodiscard]] std::size_t leaves_in_place() const noexcept { return sites_ ? sites_->leaves_in_place() : 0; }

  // ---- every launch

  // One launch of `exec`, as one transaction: waits until the ring's next slot is free; lets
  // `stage` write the launch's input-address words (one a leaf, 0 for an input not copied;
  // `stage` may throw, and then nothing is posted); then, inside `guard` (which runs what it
  // is given, for a checked pool under the pool's lock and checks), takes each generator's
  // (seed, offset), advancing it by what a launch draws, hands the values over (sets the
  // nodes that take them as arguments, or publishes the slot, its tag last) and calls `go`,
  // which launches or throws. A launch that throws takes its post back (the generators stay
  // advanced). `resolve(index, node)` names the executable's node for a node of the capture.
  template <class Resolve, class Stage, class Guard, class Go>
  void launch(cudaStream_t stream, cudaGraphExec_t exec, Resolve&& resolve, Stage&& stage, Guard&& guard, Go&& go,
              std::string_view op) {
    if (advancing_) {
      stage(std::span<unsigned long long>());  // nothing staged: advancing only draws
      guard([&, this] {
        take_values();
        const bool moved = !std::ranges::equal(taken_, expected_);
        expected_.clear();  // unknown until this launch is queued
        if (moved) post_words(stream, op);
        CUGRAPHS_TRY {
          go();
        } CUGRAPHS_CATCH_ALL {
          // The set-words kernel may be queued with no launch after it: later waits cover it.
          if (moved) {
            if (cudaEventRecord(advance_end_.get(), stream) == cudaSuccess)
              orphaned_ = true;
            else
              (void)cudaGetLastError();  // the launch's own error is the one thrown
          }
          CUGRAPHS_RETHROW;
        }
        ++launches_;
        if (moved) orphaned_ = false;  // this launch came after it: waits for the count cover it
        for (std::size_t i = 0; i < taken_.size(); ++i)
          expected_.emplace_back(taken_[i].first, taken_[i].second + uses_[i].increment);
      });
      return;
    }
    if (sites_) {
      sites_->bind(exec, resolve);
      stage(sites_->staged());
      guard([&, this] {
        take_values();
        sites_->set_nodes(exec, taken_, op);
        go();
      });
      return;
    }
    unsigned long long* slot = ring_.next_slot(stream, op);
    stage(std::span<unsigned long long>(slot + 1 + 2 * uses_.size(), leaves_));
    guard([&, this] {
      take_values();
      for (std::size_t i = 0; i < uses_.size(); ++i) {
        slot[1 + 2 * i] = taken_[i].first;
        slot[2 + 2 * i] = taken_[i].second;
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

  // Sets `target`, a node of `exec`, to `p` (Graph::set_kernel_args; `function`: p's kernel's,
  // kept by the caller); with values as arguments, through ArgumentSites::set_node_params
  // (nothing changes when it throws).
  template <class Resolve>
  void set_node_params(cudaGraphExec_t exec, const Resolve& resolve, cudaGraphNode_t target,
                       const cudaKernelNodeParams& p, cudaFunction_t& function, std::string_view op) {
    if (sites_) {
      sites_->set_node_params(exec, resolve, target, p, function, taken_, op);
    } else if (const cudaError_t e = set_exec_kernel_node(exec, target, p, function); e != cudaSuccess)
      [[unlikely]] {
      throw_cuda(e, format("{} (cudaGraphExecKernelNodeSetParams)", op));
    }
  }

  // The event that a graph staging by arguments, or advancing its offsets, records at the end
  // of each launch, through its last node; null otherwise. The graph's holder keeps it.
  [[nodiscard]] std::shared_ptr<void> end_event() const noexcept {
    return sites_ ? sites_->end_event() : counted_ ? nullptr : advance_end_;
  }

  // Whether launches stage a graphed callable's inputs.
  [[nodiscard]] bool stages() const noexcept { return sources_ != nullptr; }

  // Waits until every launch so far has finished: through the ring, until its tail has run;
  // advancing on the device, until the device's count has reached the launches queued (or
  // the event the last one records at its end has completed);
  // with values as arguments, likewise for a graph that stages (one that only draws records
  // none: its launches read nothing that its owner frees).
  void wait_all(std::string_view op) noexcept;

private:
  // The device words, unless the capture is for device launch, whose launches from the device
  // would get no fresh values.
  [[nodiscard]] static std::shared_ptr<void> refuse_device_launch(bool device_launch, std::string_view op);

  // control_: [0] launches taken, [1] whether this launch took a slot, then the generators'
  // (seed, offset) pairs.
  static constexpr std::size_t kControlWords = 2 + 2 * kMaxGeneratorsPerGraph;

  struct Use {
    std::shared_ptr<GeneratorState> generator;
    std::uint64_t increment = 0;  // consumed by one launch
  };
  unsigned index_of(const std::shared_ptr<GeneratorState>& g, std::string_view op);

  // Under PerLaunch::Parameters, an Error saying `why` launches cannot hand their values over
  // as kernel arguments; under Auto, false (the ring is used).
  bool refuse_arguments(std::string_view op, std::string_view why) const;

  // The ring's head before every root node of `g` and its tail after every last one.
  void attach_ring(cudaGraph_t g, std::string_view op);

  // The advance kernel after every last node of `g`, counting launches (or, without stream
  // waits, the end's event record node after it).
  // The edges from plain kernel nodes (neither cooperative nor device-updatable) are
  // programmatic where the advance kernel waits for them (compiled for sm_90+), `g` holds no
  // device-updatable node and CUDA accepts them.
  void attach_advance(cudaGraph_t g, bool updatable, std::string_view op);
  // Sets the generators' words to taken_ on `stream`, after the last launch's end (whatever
  // stream it ran on) and after a set-words kernel queued by a launch that failed.
  void post_words(cudaStream_t stream, std::string_view op);

  // Each generator's (seed, offset) for this launch, advancing it by what a launch draws.
  void take_values();

  [[nodiscard]] unsigned long long* control() const noexcept { return static_cast<unsigned long long*>(control_.get()); }
  [[nodiscard]] unsigned long long* values() const noexcept { return control() + 2; }
  // Advancing on the device: the launches finished, counted by the advance kernel (control_[0]).
  [[nodiscard]] unsigned* launch_count() const noexcept { return reinterpret_cast<unsigned*>(control()); }
  [[nodiscard]] unsigned width() const noexcept { return 1 + 2 * static_cast<unsigned>(uses_.size()) + leaves_; }

  std::shared_ptr<void> control_;
  std::shared_ptr<void> sources_;  // set when the graph stages inputs
  std::vector<Use> uses_;
  std::vector<DrawMade> draws_;    // every draw of the capture, in order
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken_;  // this launch's (seed, offset) a generator
  unsigned leaves_ = 0;
  std::vector<StageTarget> statics_;  // the static inputs
  bool in_place_ = false;             // InputMode::InPlace
  bool unread_is_error_ = false;      // a static input no node reaches fails the capture
  // In place: where inputs are copied (shield(), the pool's segments, the graph's allocations).
  std::vector<ArgumentSites::Range> shield_;
  bool capturing_ = true;
  PerLaunch policy_;
  std::optional<ArgumentSites> sites_;  // values as kernel arguments, when chosen
  // Offsets advanced on the device:
  bool advancing_ = false;
  bool counted_ = false;  // the advance kernel counts launches (else the end event is a node of the graph)
  bool orphaned_ = false;  // a set-words kernel was queued for a launch that failed: advance_end_ follows it
  unsigned launches_ = 0;  // launches queued (the count they reach, modulo 2^32)
  int device_ = 0;
  // Counted: recorded after a set-words kernel whose launch failed. Else recorded by the
  // graph's last node too.
  std::shared_ptr<CUevent_st> advance_end_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> expected_;  // what the words hold for the next launch
  // Values through the ring:
  RingArgs args_{};
  HostRing ring_;  // last: waited for before the device words go
};

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/launch_ring.ipp>
#endif
