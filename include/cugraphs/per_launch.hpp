// PerLaunch: how a graph that draws random numbers or stages a graphed callable's inputs
// receives each launch's values.
#pragma once

namespace cugraphs {

/// How each launch of a graph gets its fresh values (every Generator's (seed, offset), a
/// graphed callable's input addresses). Every way gives the same results; they differ in
/// cost. Advance (graphs that draw and stage nothing): the graph advances its generators'
/// offsets itself, through one small kernel after its last nodes, which also counts the
/// launch done (where streams cannot wait for that count, CUDA before 12.5 or a driver without
/// cuStreamWaitValue32, an event record node after it marks a launch's end); the
/// host launches and does nothing more, unless its generators moved otherwise since the last
/// launch (eager draws, another graph drawing from them, manual_seed), when one small kernel
/// sets the device's words first (after the last launch's end: about 4 to 6 us of host time
/// on the H200 machine, so graphs replayed in turn are best given generators of their own). Parameters: before each
/// launch, the kernel nodes that take such values get this launch's as kernel arguments
/// (cudaGraphExecKernelNodeSetParams, which leaves launches already queued as they were; a
/// node whose values did not change, a callable called again with the same inputs, is left as
/// it is): no kernel is added (a graph that stages gets one event record node at its end),
/// and the host pays one node update a kernel that takes values. Ring: the host posts the
/// values to a pinned ring, a head kernel takes them before the graph's first nodes and a tail
/// kernel after its last counts the launch done: two kernels in series with the graph's work,
/// a host cost that does not grow with the graph. Auto: Parameters when every value reaches
/// its kernels as an argument of a top-level kernel node and no other way (not inside a
/// conditional body or a child graph, not through a copy from host memory), a graphed
/// callable stages at most 64 inputs, the graph holds no device-updatable node, and at most
/// kAutoParameterNodes kernel nodes take values; otherwise Advance for a graph that draws and
/// stages nothing, and Ring for one that stages. Forcing Parameters where that does not hold, or Advance on a graph that
/// stages, is an Error at capture_end that says why. A launch of the executable outside
/// cugraphs (cudaGraphLaunch of native_exec()) gets no fresh values from the host: under
/// Parameters and Ring it repeats the last launch's numbers; under Advance it draws the next
/// ones, which the generator does not count (later replays run one launch ahead of it until
/// manual_seed), and counts a launch the host does not know of, so that a later replay whose
/// generator moved may set the words before the replay before it has read them: launch such
/// graphs through Graph::replay.
enum class PerLaunch { Auto, Parameters, Ring, Advance };

/// The most kernel nodes taking per-launch values for which PerLaunch::Auto chooses
/// Parameters. Each costs a node update on the host at every launch (0.47 to 0.56 us on the
/// H200 machine), while the ring's head and tail cost the device about 6 to 7 us a launch
/// (bench_suite's `rng` sweep, 2026-12-05): up to about 12 node updates the host pays less
/// than the ring would cost the device. (Advance costs the device less, about 1 to 2 us a
/// launch in series with the graph's work, and the host about nothing, 2026-12-05.)
inline constexpr unsigned kAutoParameterNodes = 12;

/// How a graphed callable's calls hand f's graph their inputs. Copy (the default): each call
/// copies every input onto its static buffer inside the graph (one staging kernel before f's
/// work), so f's graph reads the static inputs, as captured. InPlace: each call gives f's
/// kernels the inputs' own addresses as kernel arguments (the static inputs' addresses found
/// in the arguments of f's kernel nodes after the capture, with those up to 512 bytes outside
/// them such as a one-based base, rebound at every call by the node updates
/// PerLaunch::Parameters makes) and the staging kernel is disabled: nothing is copied,
/// a call takes f's graph's time to complete, and f reads (and, where it writes its inputs,
/// writes) the caller's buffers. An input is copied, as Copy does, where it lies in memory
/// the graph allocated or writes as its result (its pool's segments and allocation nodes,
/// which hold f's temporaries and the outputs of this and other callables sharing the pool;
/// this callable's outputs), where f's temporaries or outputs could overwrite it while f reads
/// it, or where it is not aligned to 256 bytes as its static input is (f's capture may have
/// chosen its kernels by that alignment); the call's other inputs are still read in place.
/// The static inputs hold what the last call that copied them copied (the samples at first).
/// InPlace is an Error at capture time, naming the node, where f's graph reaches a static
/// input other than through kernel arguments of its top-level kernel nodes (a copy or a
/// memset of it, a kernel whose arguments neither the runtime nor the driver can read, a
/// kernel in a conditional body or a child graph, a texture object made over it, which holds
/// the address it was made with, a copy from plain pageable host memory, which cannot be
/// searched for it, a parameter block in pinned or managed memory holding it, an NCCL
/// collective over it; a library's kernels, cuBLAS's, are rebound
/// through the driver), where f returns a view of its input, under PerLaunch::Ring, and for
/// graphed pairs (the backward reads the forward's static inputs).
enum class InputMode { Copy, InPlace };

}  // namespace cugraphs
