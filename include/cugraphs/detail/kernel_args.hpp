// A kernel node's launch held as bytes: its function, shape and arguments, laid out as the
// kernel's parameters are (cudaFuncGetParamInfo), so that values inside the arguments can be
// found and rewritten and the node set again. The per-launch values of a graph
// (launch_ring.hpp) reach its kernels this way when they are passed as kernel arguments.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/device.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

namespace cugraphs::detail {

class KernelArgs {
public:
  // One parameter's place in the bytes.
  struct Param {
    std::size_t offset;
    std::size_t size;
  };

  // A copy of the launch `p` describes, with `params` its parameters' layout.
  KernelArgs(const cudaKernelNodeParams& p, std::vector<Param> params) : launch_(p), params_(std::move(params)) {
    std::size_t end = 0;
    for (const Param& q : params_) end = std::max(end, q.offset + q.size);
    bytes_.assign(end, std::byte{0});
    for (std::size_t i = 0; i < params_.size(); ++i)
      std::memcpy(bytes_.data() + params_[i].offset, p.kernelParams[i], params_[i].size);
    pointers_.reserve(params_.size());
    for (const Param& q : params_) pointers_.push_back(bytes_.data() + q.offset);
    launch_.kernelParams = pointers_.data();
    launch_.extra = nullptr;
  }
  // Moves keep the vectors' storage, and with it the pointers into it.
  KernelArgs(KernelArgs&&) noexcept = default;
  KernelArgs& operator=(KernelArgs&&) noexcept = default;
  KernelArgs(const KernelArgs&) = delete;
  KernelArgs& operator=(const KernelArgs&) = delete;

  // The layout of `func`'s parameters; none where CUDA cannot say it (a toolkit before 12.4,
  // a kernel launched through the driver API by a library).
  [[nodiscard]] static std::optional<std::vector<Param>> layout(const void* func) {
#if CUGRAPHS_CTK_AT_LEAST(12, 4)
    RelaxedCaptureMode relaxed;  // a query, but one that must not risk a capture open on the thread
    std::vector<Param> params;
    for (std::size_t i = 0;; ++i) {
      Param q{};
      if (cudaFuncGetParamInfo(func, i, &q.offset, &q.size) != cudaSuccess) break;
      params.push_back(q);
    }
    (void)cudaGetLastError();  // the query past the last parameter fails by design
    if (params.empty()) return std::nullopt;  // a kernel without parameters takes no value either
    return params;
#else
    (void)func;
    return std::nullopt;
#endif
  }

  // The launch of kernel node `node`; none when its parameters' layout is unknown.
  [[nodiscard]] static std::optional<KernelArgs> read(cudaGraphNode_t node) {
    cudaKernelNodeParams p{};
    if (cudaGraphKernelNodeGetParams(node, &p) != cudaSuccess || p.func == nullptr || p.kernelParams == nullptr) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    auto params = layout(p.func);
    if (!params) return std::nullopt;
    return KernelArgs(p, std::move(*params));
  }

  [[nodiscard]] const cudaKernelNodeParams& launch() const noexcept { return launch_; }
  [[nodiscard]] std::span<const Param> params() const noexcept { return params_; }
  [[nodiscard]] std::byte* bytes() noexcept { return bytes_.data(); }
  [[nodiscard]] const std::byte* bytes() const noexcept { return bytes_.data(); }

  // The 64-bit word at byte `at` of the arguments.
  [[nodiscard]] std::uint64_t word(std::size_t at) const noexcept {
    std::uint64_t w = 0;
    std::memcpy(&w, bytes_.data() + at, sizeof w);
    return w;
  }
  void set_word(std::size_t at, std::uint64_t w) noexcept { std::memcpy(bytes_.data() + at, &w, sizeof w); }

  // Calls `at(position)` for every 8-byte-aligned position inside a parameter where `words`
  // 64-bit words fit, in order: where a struct of 64-bit members passed by value can start.
  template <class At>
  void for_each_place(std::size_t words, At&& at) const {
    for (const Param& q : params_)
      for (std::size_t p = 0; p + 8 * words <= q.size; p += 8) at(q.offset + p);
  }

private:
  cudaKernelNodeParams launch_{};
  std::vector<Param> params_;
  std::vector<std::byte> bytes_;
  std::vector<void*> pointers_;  // launch_.kernelParams: one into bytes_ a parameter
};

}  // namespace cugraphs::detail
