// Kernels the host API needs (setting a conditional handle from a device flag) are
// compiled by nvcc in any translation unit that includes cugraphs under nvcc, which
// registers them here; host code compiled by another compiler then reaches them too.
#pragma once

#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>

namespace cugraphs::detail {

// Sets `handle` from the flag at `flag` (`width` bytes: 1 for bool, 4 for unsigned).
using SetConditionLauncher = cudaError_t (*)(cudaGraphConditionalHandle handle, const void* flag,
                                             unsigned width, cudaStream_t stream);

inline std::atomic<SetConditionLauncher> set_condition_launcher{nullptr};

inline void launch_set_condition(cudaGraphConditionalHandle handle, const void* flag, unsigned width,
                                 cudaStream_t stream, std::string_view op) {
  const SetConditionLauncher launch = set_condition_launcher.load(std::memory_order_acquire);
  if (launch == nullptr)
    throw_misuse(op, "setting a condition from a device flag launches a kernel, and no translation "
                     "unit of this program compiled by nvcc includes <cugraphs/graph.hpp>; compile "
                     "at least one that does with nvcc");
  check(launch(handle, flag, width, stream), fmt::format("{}: launching the condition kernel", op));
}

}  // namespace cugraphs::detail
