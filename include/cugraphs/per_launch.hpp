// PerLaunch: how a graph that draws random numbers or stages a graphed callable's inputs
// receives each launch's values.
#pragma once

namespace cugraphs {

/// How each launch of a graph gets its fresh values (every Generator's (seed, offset), a
/// graphed callable's input addresses). Both ways give the same results; they differ in
/// cost. Parameters: before each launch, the kernel nodes that take such values get this
/// launch's as kernel arguments (cudaGraphExecKernelNodeSetParams, which leaves launches
/// already queued as they were): no kernel is added (a graph that stages gets one event
/// record node at its end, which marks when a launch has finished), and the host pays one
/// node update a kernel that takes values. Ring: the host posts the values to a pinned ring,
/// a head kernel takes them before the graph's first nodes and a tail kernel after its last counts
/// the launch done: two kernels in series with the graph's work, a host cost that does not
/// grow with the graph. Auto: Parameters when every value reaches its kernels as an argument
/// of a top-level kernel node and no other way (not inside a conditional body or a child
/// graph, not through a copy from host memory), a graphed callable stages at most 64 inputs,
/// the graph holds no device-updatable node, and at most kAutoParameterNodes kernel nodes
/// take values; Ring otherwise. Forcing Parameters where that does not hold is an Error at
/// capture_end that says why.
enum class PerLaunch { Auto, Parameters, Ring };

/// The most kernel nodes taking per-launch values for which PerLaunch::Auto chooses
/// Parameters. Each costs a node update on the host at every launch (0.47 to 0.56 us on the
/// H200 machine), while the ring's head and tail cost the device about 6 to 7 us a launch
/// (bench_suite's `rng` sweep, 2026-12-05): up to about 12 node updates the host pays less
/// than the ring would cost the device.
inline constexpr unsigned kAutoParameterNodes = 12;

}  // namespace cugraphs
