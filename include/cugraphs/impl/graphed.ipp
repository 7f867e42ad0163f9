// The bodies of the functions <cugraphs/graphed.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/graphed.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE void check_sample_leaf(std::string_view op, std::size_t i, const void* data, std::size_t size,
    int device) {
  if (size == 0) return;
  if (data == nullptr) throw_misuse(op, "sample leaf {} is a null pointer with {} elements", i, size);
  check_device_readable(data, device, op, detail::format("sample leaf {}", i));
}

CUGRAPHS_INLINE void WriteWatch::before(cudaStream_t s) {
  if (leaves_.empty()) return;
  const std::size_t bytes = 2 * leaves_.size() * sizeof(unsigned long long);
  void* sums = nullptr;
  check(cudaMallocAsync(&sums, bytes, s), "{}: allocating the inputs' fingerprints", op_);
  sums_ = static_cast<unsigned long long*>(sums);
  stream_ = s;
  check(cudaMemsetAsync(sums_, 0, bytes, s), "{}: zeroing the inputs' fingerprints", op_);
  for (std::size_t k = 0; k < leaves_.size(); ++k)
    launch_fingerprint(leaves_[k].data, leaves_[k].bytes, sums_ + 2 * k, s, op_);
}

CUGRAPHS_INLINE void WriteWatch::judge(cudaStream_t s) {
  if (sums_ == nullptr) return;
  for (std::size_t k = 0; k < leaves_.size(); ++k)
    launch_fingerprint(leaves_[k].data, leaves_[k].bytes, sums_ + 2 * k + 1, s, op_);
  std::vector<unsigned long long> sums(2 * leaves_.size());
  check(cudaMemcpyAsync(sums.data(), sums_, sums.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s),
        "{}: reading the inputs' fingerprints", op_);
  check(cudaStreamSynchronize(s), "{}: reading the inputs' fingerprints", op_);
  for (std::size_t k = 0; k < leaves_.size(); ++k)
    if (sums[2 * k] != sums[2 * k + 1])
      throw_misuse(op_, "{} wrote {} {} ({} bytes at {}, a DeviceSpan of non-const elements) during the warm-up "
                        "calls: its bytes changed. A call copies each input onto a static buffer and {} works on "
                        "that copy (InputMode::Copy), so these writes would never reach the buffer you pass (an "
                        "optimizer's step on parameters handed in as inputs would be lost at every call). {}",
                   owner_, leaf_, leaves_[k].index, leaves_[k].bytes, leaves_[k].data, owner_, remedy_);
}

}  // namespace cugraphs::detail
