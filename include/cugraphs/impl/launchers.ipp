// The bodies of the functions <cugraphs/detail/launchers.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/launchers.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void throw_needs_nvcc(std::string_view op, std::string_view what) {
  throw_misuse(op, "{} launches a kernel, and no translation unit of this program compiled by nvcc includes "
                   "<cugraphs/graph.hpp>; compile at least one that does with nvcc",
               what);
}

CUGRAPHS_INLINE void launch_stage(const StageArgs& args, cudaStream_t stream, std::string_view op) {
  const StageLauncher launch = stage_launcher.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "staging inputs");
  check(launch(args, stream), "{}: launching the staging copy", op);
}

#if CUGRAPHS_HAS_CONDITIONAL_NODES
CUGRAPHS_INLINE void launch_set_condition(cudaGraphConditionalHandle handle, const void* flag, unsigned width,
    cudaStream_t stream, std::string_view op) {
  const SetConditionLauncher launch = set_condition_launcher.load(std::memory_order_acquire);
  if (launch == nullptr) throw_needs_nvcc(op, "setting a condition from a device flag");
  check(launch(handle, flag, width, stream), "{}: launching the condition kernel", op);
}
#endif

}  // namespace cugraphs::detail
