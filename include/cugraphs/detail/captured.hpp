// What an ended capture hands its Graph: the graph made, how to instantiate it, the pool
// share and per-launch values that go with it, and what its work keeps alive.
#pragma once

#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/launch_ring.hpp>
#include <cugraphs/detail/pool.hpp>
#include <cugraphs/detail/session_api.hpp>
#include <cugraphs/per_launch.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace cugraphs::detail {

// What an ended capture produced, for its Graph to keep.
struct Captured {
  cudaGraph_t graph = nullptr;
  bool device_launch = false;    // instantiate for launch from the device
  bool updatable_nodes = false;  // holds device-updatable kernel nodes (launch_updatable)
  // The send and receive buffers of the NCCL collectives captured through cugraphs/nccl.hpp.
  std::vector<std::pair<std::uintptr_t, std::size_t>> collective_buffers;
  PerLaunch per_launch = PerLaunch::Auto;  // as asked (CaptureOptions): recaptures ask the same
  bool watch_buffers = true;               // as asked (CaptureOptions): recaptures ask the same
  std::vector<ConditionalMade> conditionals;  // the conditional nodes made, with their bodies
  PoolShare share;  // the graph's share of the pool it was captured into
  std::unique_ptr<LaunchRing> ring;
  std::vector<std::shared_ptr<void>> keep_alive;
  std::vector<TakenNode> taken;  // the kernel nodes taken, in the order they were taken
};

}  // namespace cugraphs::detail
