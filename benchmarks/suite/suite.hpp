// The sections of bench_suite, one translation unit each, and the sizes they sweep. Every
// section measures a cugraphs figure beside its raw CUDA baseline in the same run, prints
// a table with ratios and the goals, and records raw figures in the Report.
#pragma once

#include "../bench_common.hpp"

#include <cuda_runtime_api.h>

#include <array>

namespace cugraphs_bench {

// Straight-line graphs of this many tiny-kernel nodes.
inline constexpr std::array<int, 5> kNodeCounts{1, 10, 100, 1000, 10000};
// Graphed callables with this many 4 KiB inputs.
inline constexpr std::array<int, 7> kInputCounts{1, 2, 4, 8, 16, 32, 64};
// This many graphs, each with a temporary, in one shared pool or in a pool each.
inline constexpr std::array<int, 7> kGraphCounts{1, 2, 4, 8, 16, 32, 64};

// Graph::replay() against cudaGraphLaunch (host cost); cugraphs::capture against the raw
// capture and instantiate calls; eager launches against one replay, to completion.
void replay_section(Report& report, cudaStream_t stream);
void capture_section(Report& report, cudaStream_t stream);
void eager_section(Report& report, cudaStream_t stream);
// GraphedCallable calls against hand-written staging and a bare launch.
void graphed_section(Report& report, cudaStream_t stream);
// A While loop on the device against the same loop driven from the host (CUDA >= 12.4).
void conditional_section(Report& report, cudaStream_t stream);
// Replays of a graph that draws random numbers against one that does not.
void rng_section(Report& report, cudaStream_t stream);
// Memory of N graphs with temporaries: one shared pool against a pool each.
void memory_section(Report& report, cudaStream_t stream);
// One MLP training step: a GraphedPair against two bare launches and the eager step (cuBLAS).
void training_section(Report& report, cudaStream_t stream);
// Graph::update and set_kernel_args against cudaGraphExecUpdate and
// cudaGraphExecKernelNodeSetParams, beside instantiation.
void update_section(Report& report, cudaStream_t stream);
// A GraphCache over vLLM's bucket sizes: memory, and per-bucket capture with instantiation
// or in-place update.
void buckets_section(Report& report, cudaStream_t stream);
// A chain of dependent kernels with programmatic edges (cugraphs::launch) against plain ones.
void pdl_section(Report& report, cudaStream_t stream);
// A key known on the device selecting a bucket graph: DeviceDispatch against the host round
// trip; a graph launched from the host against the same graph launched by a kernel.
void device_launch_section(Report& report, cudaStream_t stream);

}  // namespace cugraphs_bench
