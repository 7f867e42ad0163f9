// Kernels the host API needs (setting a conditional handle from a device flag) are
// compiled by nvcc in any translation unit that includes cugraphs under nvcc, which
// registers them here; host code compiled by another compiler then reaches them too.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>

namespace cugraphs::detail {

// The one wording for a kernel of the host API that no nvcc-compiled translation unit has
// registered: `what` names the feature that launches it.
[[noreturn]] inline void throw_needs_nvcc(std::string_view op, std::string_view what) {
  throw_misuse(op, "{} launches a kernel, and no translation unit of this program compiled by nvcc includes "
                   "<cugraphs/graph.hpp>; compile at least one that does with nvcc",
               what);
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Sets `handle` from the flag at `flag` (`width` bytes: 1 for bool, 4 for unsigned).
using SetConditionLauncher = cudaError_t (*)(cudaGraphConditionalHandle handle, const void* flag,
                                             unsigned width, cudaStream_t stream);

inline std::atomic<SetConditionLauncher> set_condition_launcher{nullptr};

inline void launch_set_condition(cudaGraphConditionalHandle handle, const void* flag, unsigned width,
                                 cudaStream_t stream, std::string_view op) {
  const SetConditionLauncher launch = set_condition_launcher.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "setting a condition from a device flag");
  check(launch(handle, flag, width, stream), "{}: launching the condition kernel", op);
}
#endif

// Staging of a graphed callable's inputs, as kernels at the head and the tail of its graph.
// The host posts call k in slot k % slots of a ring in pinned host memory: the sources
// first, then the tag k + 1. At the head, a one-block kernel claims the slot of the next
// call (`consumed` calls so far) if its tag is there and copies the slot's source pointers
// to device memory, and the copy kernel copies every non-null source to its static buffer;
// the tail counts the consumed call, on the device and in pinned memory, so the host knows
// which slots are free again. A launch of the executable that does not come from a call
// finds no posted slot and stages nothing.
struct StageTarget {
  void* dst;
  std::size_t bytes;
};
struct StageArgs {
  const unsigned long long* ring;  // slots x (1 tag + leaves sources), pinned and mapped
  unsigned leaves;
  unsigned slots;
  const StageTarget* targets;      // leaves entries (device)
  unsigned long long* consumed;    // calls consumed so far (device)
  int* claimed;                    // whether this launch claimed a slot (device)
  const void** sources;            // the claimed slot's sources, copied to device memory
  unsigned long long* host_done;   // `consumed`, mirrored to pinned memory
  unsigned chunks;                 // blocks per leaf
};
enum class StagePart { Claim, Copy, Tail };
// Threads of the claim kernel's one block: a warp at least, one a leaf up to 1024.
constexpr unsigned stage_claim_threads(unsigned leaves) noexcept {
  return leaves <= 32 ? 32 : leaves >= 1024 ? 1024 : (leaves + 31) / 32 * 32;
}
using StageLauncher = cudaError_t (*)(const StageArgs& args, StagePart part, cudaStream_t stream);
inline std::atomic<StageLauncher> stage_launcher{nullptr};

inline void launch_stage(const StageArgs& args, StagePart part, cudaStream_t stream, std::string_view op) {
  const StageLauncher launch = stage_launcher.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "staging inputs");
  check(launch(args, part, stream), "{}: launching a staging kernel", op);
}

}  // namespace cugraphs::detail
