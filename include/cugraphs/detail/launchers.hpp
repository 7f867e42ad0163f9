// Where host code finds the kernels the host API launches (setting a conditional handle
// from a device flag, the head and tail of the per-launch ring, a graphed callable's
// staging copy). detail/kernels.cuh defines them and registers them here; nvcc compiles it
// in every translation unit that includes cugraphs/graph.hpp, so host code compiled by any
// compiler reaches them once the program holds one such translation unit.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cugraphs::detail {

// The one wording for a kernel of the host API that no nvcc-compiled translation unit has
// registered: `what` names the feature that launches it.
[[noreturn]] void throw_needs_nvcc(std::string_view op, std::string_view what);

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Sets `handle` from the flag at `flag` (`width` bytes: 1 for bool, 4 for unsigned; 0: `flag` is the value).
using SetConditionLauncher = cudaError_t (*)(cudaGraphConditionalHandle handle, const void* flag,
                                             unsigned width, cudaStream_t stream);

// Called by every nvcc translation unit that includes cugraphs/graph.hpp, at start-up.
CUGRAPHS_INLINE void register_set_condition(SetConditionLauncher launch) noexcept;

void launch_set_condition(cudaGraphConditionalHandle handle, const void* flag, unsigned width, cudaStream_t stream,
                          std::string_view op);
#endif

// The per-launch ring's kernels (detail/launch_ring.hpp). The head, one block, is put
// before a graph's first node: thread 0 reads the tag of the next launch's slot; after a
// barrier the block reads the slot's words in parallel (one round trip over the bus, not
// one a word) into device memory. The tail, put after a graph's last nodes, counts the
// launch done.
struct RingArgs {
  const unsigned long long* ring;  // slots x width: the tag, 2 words a generator, 1 a staged leaf
  unsigned slots;
  unsigned width;
  unsigned generators;
  unsigned leaves;
  unsigned long long* values;     // 2 x generators (device): read by the captured kernels
  const void** sources;           // leaves (device): read by the staging copy
  unsigned long long* control;    // [0] launches taken, [1] this launch took a slot (device)
  unsigned long long* host_done;  // control[0], mirrored to pinned memory
};
// Threads of the head's one block: a warp at least, one a word up to 1024.
constexpr unsigned head_threads(const RingArgs& a) noexcept {
  const unsigned words = 2 * a.generators + a.leaves;
  return words <= 32 ? 32 : words >= 1024 ? 1024 : (words + 31) / 32 * 32;
}
// The registered head and tail kernels (null until an nvcc translation unit has run).
[[nodiscard]] CUGRAPHS_INLINE const void* ring_head_kernel() noexcept;
[[nodiscard]] CUGRAPHS_INLINE const void* ring_tail_kernel() noexcept;

// Offsets a graph advances itself (PerLaunch::Advance, detail/launch_ring.hpp). The advance
// kernel, one warp (a thread a generator), is put after a graph's last nodes: it adds what one launch draws to
// each generator's offset word, so that the next launch draws the next numbers with no value
// from the host. The set-words kernel, launched on the replay's stream before a launch,
// writes every generator's (seed, offset) when the host's generators moved otherwise (eager
// draws, another graph drawing from them, manual_seed).
inline constexpr unsigned kMaxGeneratorsPerGraph = 8;  // generators a graph may draw from
struct AdvanceArgs {
  unsigned long long* values;  // 2 x generators (device): (seed, offset) each
  unsigned* launches;          // counted once the offsets are written (device); null: not counted
  unsigned generators;
  unsigned long long increments[kMaxGeneratorsPerGraph];  // what one launch draws from each
};
struct SetWordsArgs {
  unsigned long long* values;
  unsigned words;
  unsigned long long w[2 * kMaxGeneratorsPerGraph];
};
using SetWordsLauncher = cudaError_t (*)(const SetWordsArgs& args, cudaStream_t stream);
// Called by every nvcc translation unit that includes cugraphs/graph.hpp, at start-up.
CUGRAPHS_INLINE void register_advance_kernels(const void* advance, SetWordsLauncher set) noexcept;
// The registered advance kernel (null until an nvcc translation unit has run).
[[nodiscard]] CUGRAPHS_INLINE const void* advance_kernel() noexcept;
void launch_set_words(const SetWordsArgs& args, cudaStream_t stream, std::string_view op);

// A graphed callable's staging copy, captured before its function: copies every input
// address of the launch (a non-null one) onto its static buffer. Grid: (chunks, leaves).
// The addresses come from the ring's head (control set) or, when the graph takes its
// per-launch values as kernel arguments, from `inline_sources`, rewritten before each launch
// (control null).
struct StageTarget {
  void* dst;
  std::size_t bytes;
};
// The seed a PhiloxArgs drawn inside a capture holds for generator `i` of the graph: never read
// (rng::unpack reads the graph's words; per-launch arguments overwrite it), but unmistakable,
// so that a kernel given a draw's .seed as a plain number (a ported kernel taking a seed) is
// found in the graph, as 8 bytes or its low 4. Both halves are far from 0 and small counts.
[[nodiscard]] constexpr std::uint64_t captured_seed(unsigned i) noexcept { return 0x9e3779b97f4a7c15ull + i; }

// A graphed callable that reads its inputs in place keeps each static input this many bytes
// inside its own buffer, which ends as many bytes after it: an address from the pad before to
// the pad after (a one-based or negative-stride base, an end pointer) is unmistakably that
// input's, and is rebound with it (the input keeps a 512-byte alignment).
inline constexpr std::size_t kInPlacePad = 512;
// Read in place, an input whose address is not a multiple of this is copied for the call (f's
// capture may have chosen its kernels by the static input's alignment).
inline constexpr std::uintptr_t kInPlaceAlignment = 256;
// Whether [a, a + bytes) overlaps the buffer of a static input read in place, pads included.
[[nodiscard]] inline bool overlaps_padded(const StageTarget& t, std::uintptr_t a, std::size_t bytes) noexcept {
  const auto first = reinterpret_cast<std::uintptr_t>(t.dst) - kInPlacePad;
  return a < first + t.bytes + 2 * kInPlacePad && first < a + (bytes != 0 ? bytes : 1);
}
struct StageArgs {
  static constexpr unsigned kInlineLeaves = 64;  // the most leaves staged from arguments
  const StageTarget* targets;          // leaves entries (device)
  const void* const* sources;          // the taken slot's addresses (device, written by the head)
  const unsigned long long* control;   // the ring's control words: [1] this launch took a slot
  unsigned leaves;
  unsigned chunks;                     // blocks per leaf
  const void* inline_sources[kInlineLeaves];  // with control null: this launch's addresses
};
using StageLauncher = cudaError_t (*)(const StageArgs& args, cudaStream_t stream);

// Called by every nvcc translation unit that includes cugraphs/graph.hpp, at start-up.
CUGRAPHS_INLINE void register_ring_kernels(const void* head, const void* tail, StageLauncher stage) noexcept;

void launch_stage(const StageArgs& args, cudaStream_t stream, std::string_view op);

// A fingerprint of `bytes` bytes at `data` (device, pinned or managed memory), added to
// `*out` (device, zeroed first): a 64-bit sum over the bytes' 8-byte words, each mixed with
// its position, so that any change of the bytes changes it but by a 2^-64 chance. A graphed
// callable's warm-up takes one of each writable input before and after f runs
// (GraphedOptions::allow_written_input).
using FingerprintLauncher = cudaError_t (*)(const void* data, std::size_t bytes, unsigned long long* out,
                                            cudaStream_t stream);
// Called by every nvcc translation unit that includes cugraphs/graph.hpp, at start-up.
CUGRAPHS_INLINE void register_fingerprint(FingerprintLauncher launch) noexcept;
void launch_fingerprint(const void* data, std::size_t bytes, unsigned long long* out, cudaStream_t stream,
                        std::string_view op);

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/launchers.ipp>
#endif
