// The bodies of the functions <cugraphs/detail/launchers.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/config.hpp>

#include <atomic>

namespace cugraphs::detail {

// Where the kernels registered by nvcc translation units are kept: atomics, since threads may
// launch while a library loaded later registers its copies (the same kernels).
struct KernelRegistry {
  std::atomic<const void*> ring_head{nullptr};
  std::atomic<const void*> ring_tail{nullptr};
  std::atomic<StageLauncher> stage{nullptr};
  std::atomic<const void*> advance{nullptr};
  std::atomic<SetWordsLauncher> set_words{nullptr};
  std::atomic<FingerprintLauncher> fingerprint{nullptr};
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  std::atomic<SetConditionLauncher> set_condition{nullptr};
#endif
};

CUGRAPHS_INLINE KernelRegistry& kernel_registry() noexcept {
  static KernelRegistry registry;  // constant-initialized: registration at start-up finds it ready
  return registry;
}

CUGRAPHS_INLINE void register_ring_kernels(const void* head, const void* tail, StageLauncher stage) noexcept {
  KernelRegistry& r = kernel_registry();
  r.ring_head.store(head, std::memory_order_release);
  r.ring_tail.store(tail, std::memory_order_release);
  r.stage.store(stage, std::memory_order_release);
}

CUGRAPHS_INLINE void register_advance_kernels(const void* advance, SetWordsLauncher set) noexcept {
  KernelRegistry& r = kernel_registry();
  r.advance.store(advance, std::memory_order_release);
  r.set_words.store(set, std::memory_order_release);
}

CUGRAPHS_INLINE const void* advance_kernel() noexcept {
  return kernel_registry().advance.load(std::memory_order_acquire);
}

CUGRAPHS_INLINE void launch_set_words(const SetWordsArgs& args, cudaStream_t stream, std::string_view op) {
  const SetWordsLauncher launch = kernel_registry().set_words.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "a graph that draws random numbers");
  check(launch(args, stream), "{}: launching the kernel that sets the generators' words", op);
}

CUGRAPHS_INLINE const void* ring_head_kernel() noexcept {
  return kernel_registry().ring_head.load(std::memory_order_acquire);
}

CUGRAPHS_INLINE const void* ring_tail_kernel() noexcept {
  return kernel_registry().ring_tail.load(std::memory_order_acquire);
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE void register_set_condition(SetConditionLauncher launch) noexcept {
  kernel_registry().set_condition.store(launch, std::memory_order_release);
}
#endif

CUGRAPHS_INLINE void throw_needs_nvcc(std::string_view op, std::string_view what) {
  throw_misuse(op, "{} launches a kernel, and no translation unit of this program compiled by nvcc includes "
                   "<cugraphs/graph.hpp>; compile at least one that does with nvcc",
               what);
}

CUGRAPHS_INLINE void launch_stage(const StageArgs& args, cudaStream_t stream, std::string_view op) {
  const StageLauncher launch = kernel_registry().stage.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "staging inputs");
  check(launch(args, stream), "{}: launching the staging copy", op);
}

CUGRAPHS_INLINE void register_fingerprint(FingerprintLauncher launch) noexcept {
  kernel_registry().fingerprint.store(launch, std::memory_order_release);
}

CUGRAPHS_INLINE void launch_fingerprint(const void* data, std::size_t bytes, unsigned long long* out,
                                        cudaStream_t stream, std::string_view op) {
  const FingerprintLauncher launch = kernel_registry().fingerprint.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "watching inputs for writes during the warm-up");
  check(launch(data, bytes, out, stream), "{}: launching the kernel that fingerprints an input", op);
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE void launch_set_condition(cudaGraphConditionalHandle handle, const void* flag, unsigned width,
    cudaStream_t stream, std::string_view op) {
  const SetConditionLauncher launch = kernel_registry().set_condition.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "setting a condition from a device flag");
  check(launch(handle, flag, width, stream), "{}: launching the condition kernel", op);
}
#endif

}  // namespace cugraphs::detail
