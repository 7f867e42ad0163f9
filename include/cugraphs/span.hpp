// DeviceSpan<T>: a non-owning view of device memory, the leaf type of graphed callables.
// No CUDA runtime calls: flatten.hpp and kernels include it without the rest of the library.
#pragma once

#include <cugraphs/config.hpp>

#include <cstddef>
#include <span>
#include <type_traits>


namespace cugraphs {

/// A non-owning {pointer, size} view of memory kernels can read, passed to kernels by value.
/// The leaf type of graphed callables. A leaf may point to device memory (DeviceBuffer,
/// cudaMalloc, cudaMallocAsync), pinned host memory (cudaMallocHost, cudaHostRegister) or
/// managed memory (cudaMallocManaged); copies of leaves use cudaMemcpyDefault, so each is
/// copied from where it lies. Plain pageable host memory is refused where a kernel would
/// read it (samples, flags), unless the device reads pageable memory.
template <class T>
class DeviceSpan {
public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;

  constexpr DeviceSpan() noexcept = default;
  constexpr DeviceSpan(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// DeviceSpan<T> converts to DeviceSpan<const T>.
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr DeviceSpan(DeviceSpan<U> other) noexcept : data_(other.data()), size_(other.size()) {}

  [[nodiscard]] CUGRAPHS_HOST_DEVICE constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] CUGRAPHS_HOST_DEVICE constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] CUGRAPHS_HOST_DEVICE constexpr std::size_t size_bytes() const noexcept {
    return size_ * sizeof(T);
  }
  [[nodiscard]] CUGRAPHS_HOST_DEVICE constexpr bool empty() const noexcept { return size_ == 0; }
  CUGRAPHS_HOST_DEVICE constexpr T* begin() const noexcept { return data_; }
  CUGRAPHS_HOST_DEVICE constexpr T* end() const noexcept { return data_ + size_; }
  /// Element access; dereferences device memory, so only in device code.
  CUGRAPHS_HOST_DEVICE constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  [[nodiscard]] CUGRAPHS_HOST_DEVICE constexpr DeviceSpan subspan(std::size_t offset,
                                                                  std::size_t count) const noexcept {
    return {data_ + offset, count};
  }
  /// Converts to cuda::std::span<T>: a template over span class templates of element and
  /// extent built from {pointer, size}, so that this header need not include <cuda/std/span>
  /// (1.7 s of nvcc time for every file that includes cugraphs). std::span<T> is left to its
  /// own range constructor (a DeviceSpan is a contiguous range), which a second path would
  /// make ambiguous.
#if defined(__CUDACC__)
#  pragma nv_exec_check_disable
#endif
  template <template <class, std::size_t> class Span>
    requires(!std::is_same_v<Span<T, static_cast<std::size_t>(-1)>, std::span<T>> &&
             std::is_constructible_v<Span<T, static_cast<std::size_t>(-1)>, T*, std::size_t>)
  CUGRAPHS_HOST_DEVICE constexpr operator Span<T, static_cast<std::size_t>(-1)>() const noexcept {  // NOLINT
    return Span<T, static_cast<std::size_t>(-1)>(data_, size_);
  }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cugraphs

/// A DeviceSpan is a view: ranges taken from a temporary one do not dangle, so an rvalue
/// DeviceSpan converts to std::span too.
template <class T>
inline constexpr bool std::ranges::enable_borrowed_range<cugraphs::DeviceSpan<T>> = true;
