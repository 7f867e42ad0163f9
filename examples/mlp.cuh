// A 3-layer perceptron trained by plain SGD on a synthetic regression task, with cuBLAS GEMMs
// and a few small kernels, written as the forward and backward a GraphedPair takes. Shared by
// examples/train_mlp and the training section of benchmarks/bench_suite.
//
// Layout: column-major (cuBLAS's), one sample a column. X is in x batch, T out x batch;
//   h1 = relu(W1 X + b1), h2 = relu(W2 h1 + b2), y = W3 h2 + b3,
//   loss = mean over every element of (y - T)^2.
// The parameters live in one buffer and their gradients in another of the same layout, so
// that one kernel applies the SGD step.
#pragma once

#include <cugraphs/graph.hpp>

#include <cublas_v2.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mlp {

using In = cugraphs::DeviceSpan<const float>;
using Out = cugraphs::DeviceSpan<float>;

struct Shape {
  int batch = 256, in = 32, hidden = 128, out = 8;
  // Offsets of W1, b1, W2, b2, W3, b3 in the parameter buffer, and its size.
  [[nodiscard]] std::size_t w1() const { return 0; }
  [[nodiscard]] std::size_t b1() const { return w1() + std::size_t(hidden) * in; }
  [[nodiscard]] std::size_t w2() const { return b1() + hidden; }
  [[nodiscard]] std::size_t b2() const { return w2() + std::size_t(hidden) * hidden; }
  [[nodiscard]] std::size_t w3() const { return b2() + hidden; }
  [[nodiscard]] std::size_t b3() const { return w3() + std::size_t(out) * hidden; }
  [[nodiscard]] std::size_t parameters() const { return b3() + out; }
};

inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw cugraphs::Error(cudaErrorUnknown, std::string("mlp: ") + what + " failed with cuBLAS status " +
                                                std::to_string(static_cast<int>(s)));
}

// A cuBLAS handle with a workspace of its own: GEMMs then never allocate (which a capture
// would refuse) and pick the same algorithm eagerly and in a capture, so both give the same
// bits. cublasSetStream resets the workspace, so on() sets both. The graphs and the eager
// calls share the workspace: run them on one stream (or streams the caller orders).
class Blas {
public:
  // Made before any work is queued; the workspace is ready when the constructor returns.
  Blas() : workspace_(kWorkspace, nullptr) {
    cugraphs::check(cudaDeviceSynchronize(), "mlp: allocating the cuBLAS workspace");
    check(cublasCreate(&handle_), "cublasCreate");
    check(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // no TF32
  }
  // Waits for the work that uses the workspace (on any stream) before it is freed.
  ~Blas() {
    (void)cudaDeviceSynchronize();
    (void)cublasDestroy(handle_);
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // The handle, bound to the current stream.
  cublasHandle_t on() {
    check(cublasSetStream(handle_, cugraphs::current_stream()), "cublasSetStream");
    check(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()), "cublasSetWorkspace");
    return handle_;
  }

private:
  static constexpr std::size_t kWorkspace = 4u << 20;
  cublasHandle_t handle_ = nullptr;
  cugraphs::DeviceBuffer<unsigned char> workspace_;
};

// C (m x n) = op(A) op(B), column-major, no accumulation.
inline void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b,
                 int ldb, float* c, int ldc) {
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, a, lda, b, ldb,
                    &zero, c, ldc),
        "cublasSgemm");
}

constexpr int kThreads = 256;
inline int blocks(std::size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// z (rows x cols) += bias per row, then relu when asked.
__global__ void bias_act(float* z, const float* bias, int rows, int cols, bool relu) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= std::size_t(rows) * cols) return;
  const float v = z[i] + bias[i % rows];
  z[i] = relu ? fmaxf(v, 0.0f) : v;
}

// loss = mean((y - t)^2): one block in a fixed order, the same bits on every run.
__global__ void mse(const float* y, const float* t, std::size_t n, float* loss) {
  __shared__ float partial[kThreads];
  float s = 0.0f;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = y[i] - t[i];
    s += d * d;
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0] / static_cast<float>(n);
}

// dy = dloss * 2 (y - t) / n
__global__ void mse_grad(float* dy, const float* y, const float* t, std::size_t n, const float* dloss) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dy[i] = *dloss * 2.0f * (y[i] - t[i]) / static_cast<float>(n);
}

// db[r] = sum over columns of d (rows x cols); one thread a row, in order.
__global__ void row_sums(const float* d, int rows, int cols, float* db) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (int c = 0; c < cols; ++c) s += d[std::size_t(c) * rows + r];
  db[r] = s;
}

// d *= (h > 0): the relu's derivative, through its output.
__global__ void relu_grad(float* d, const float* h, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && h[i] <= 0.0f) d[i] = 0.0f;
}

// p -= lr * g
__global__ void sgd(float* p, const float* g, std::size_t n, float lr) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] -= lr * g[i];
}

// The activations the forward keeps for the backward.
using Saved = std::tuple<cugraphs::DeviceBuffer<float>, cugraphs::DeviceBuffer<float>, cugraphs::DeviceBuffer<float>>;

// The model's forward and backward over parameters `params` and gradients `grads` (user
// memory of shape.parameters() floats each), both read and written in place.
struct Model {
  Shape shape;
  Blas* blas;
  float lr = 0.05f;

  // forward(X, T, params) -> loss (one float), saving h1, h2 and y.
  auto forward(In x, In t, In params) const {
    const Shape& s = shape;
    cublasHandle_t h = blas->on();
    const cudaStream_t stream = cugraphs::current_stream();
    const float* p = params.data();
    cugraphs::DeviceBuffer<float> h1(std::size_t(s.hidden) * s.batch), h2(std::size_t(s.hidden) * s.batch),
        y(std::size_t(s.out) * s.batch), loss(1);
    gemm(h, false, false, s.hidden, s.batch, s.in, p + s.w1(), s.hidden, x.data(), s.in, h1.data(), s.hidden);
    bias_act<<<blocks(h1.size()), kThreads, 0, stream>>>(h1.data(), p + s.b1(), s.hidden, s.batch, true);
    gemm(h, false, false, s.hidden, s.batch, s.hidden, p + s.w2(), s.hidden, h1.data(), s.hidden, h2.data(), s.hidden);
    bias_act<<<blocks(h2.size()), kThreads, 0, stream>>>(h2.data(), p + s.b2(), s.hidden, s.batch, true);
    gemm(h, false, false, s.out, s.batch, s.hidden, p + s.w3(), s.out, h2.data(), s.hidden, y.data(), s.out);
    bias_act<<<blocks(y.size()), kThreads, 0, stream>>>(y.data(), p + s.b3(), s.out, s.batch, false);
    mse<<<1, kThreads, 0, stream>>>(y.data(), t.data(), y.size(), loss.data());
    cugraphs::check_launch("mlp forward");
    return cugraphs::save_for_backward(std::move(loss), Saved{std::move(h1), std::move(h2), std::move(y)});
  }

  // backward(X, T, params, loss, saved, dloss): every gradient into `grads`, then the SGD
  // step on `params`. No argument takes a gradient, so it returns nothing.
  void backward(In x, In t, In params, Out grads, Out /*loss*/, const std::tuple<Out, Out, Out>& saved,
                In dloss) const {
    const Shape& s = shape;
    cublasHandle_t h = blas->on();
    const cudaStream_t stream = cugraphs::current_stream();
    const auto& [h1, h2, y] = saved;
    const float* p = params.data();
    float* g = grads.data();
    cugraphs::DeviceBuffer<float> dy(y.size()), d2(h2.size()), d1(h1.size());
    mse_grad<<<blocks(dy.size()), kThreads, 0, stream>>>(dy.data(), y.data(), t.data(), dy.size(), dloss.data());
    // Layer 3: dW3 = dy h2^T, db3 = rows of dy, dh2 = W3^T dy, through relu.
    gemm(h, false, true, s.out, s.hidden, s.batch, dy.data(), s.out, h2.data(), s.hidden, g + s.w3(), s.out);
    row_sums<<<blocks(s.out), kThreads, 0, stream>>>(dy.data(), s.out, s.batch, g + s.b3());
    gemm(h, true, false, s.hidden, s.batch, s.out, p + s.w3(), s.out, dy.data(), s.out, d2.data(), s.hidden);
    relu_grad<<<blocks(d2.size()), kThreads, 0, stream>>>(d2.data(), h2.data(), d2.size());
    // Layer 2.
    gemm(h, false, true, s.hidden, s.hidden, s.batch, d2.data(), s.hidden, h1.data(), s.hidden, g + s.w2(), s.hidden);
    row_sums<<<blocks(s.hidden), kThreads, 0, stream>>>(d2.data(), s.hidden, s.batch, g + s.b2());
    gemm(h, true, false, s.hidden, s.batch, s.hidden, p + s.w2(), s.hidden, d2.data(), s.hidden, d1.data(), s.hidden);
    relu_grad<<<blocks(d1.size()), kThreads, 0, stream>>>(d1.data(), h1.data(), d1.size());
    // Layer 1: no gradient for X.
    gemm(h, false, true, s.hidden, s.in, s.batch, d1.data(), s.hidden, x.data(), s.in, g + s.w1(), s.hidden);
    row_sums<<<blocks(s.hidden), kThreads, 0, stream>>>(d1.data(), s.hidden, s.batch, g + s.b1());
    sgd<<<blocks(s.parameters()), kThreads, 0, stream>>>(const_cast<float*>(p), g, s.parameters(), lr);
    cugraphs::check_launch("mlp backward");
  }
};

// Initial parameters: uniform in +-1/sqrt(fan in), biases 0, from a fixed seed.
inline std::vector<float> initial_parameters(const Shape& s, std::uint32_t seed) {
  std::vector<float> p(s.parameters(), 0.0f);
  std::mt19937 gen(seed);
  auto fill = [&](std::size_t at, std::size_t count, int fan_in) {
    std::uniform_real_distribution<float> d(-1.0f / std::sqrt(float(fan_in)), 1.0f / std::sqrt(float(fan_in)));
    for (std::size_t i = 0; i < count; ++i) p[at + i] = d(gen);
  };
  fill(s.w1(), std::size_t(s.hidden) * s.in, s.in);
  fill(s.w2(), std::size_t(s.hidden) * s.hidden, s.hidden);
  fill(s.w3(), std::size_t(s.out) * s.hidden, s.hidden);
  return p;
}

// A synthetic regression task: `count` batches of inputs uniform in [-1, 1] and targets
// t_o = sin(sum_i A_oi x_i) + 0.5 cos(x_o) for a fixed random teacher matrix A.
struct Data {
  std::vector<cugraphs::DeviceBuffer<float>> x, t;
  Data(const Shape& s, int count, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> a(std::size_t(s.out) * s.in);
    for (auto& v : a) v = u(gen) * 0.5f;
    for (int b = 0; b < count; ++b) {
      std::vector<float> xs(std::size_t(s.in) * s.batch), ts(std::size_t(s.out) * s.batch);
      for (auto& v : xs) v = u(gen);
      for (int c = 0; c < s.batch; ++c)
        for (int o = 0; o < s.out; ++o) {
          float z = 0.0f;
          for (int i = 0; i < s.in; ++i) z += a[std::size_t(i) * s.out + o] * xs[std::size_t(c) * s.in + i];
          ts[std::size_t(c) * s.out + o] = std::sin(z) + 0.5f * std::cos(xs[std::size_t(c) * s.in + o % s.in]);
        }
      x.emplace_back(xs.size());
      x.back().copy_from_host(xs);
      t.emplace_back(ts.size());
      t.back().copy_from_host(ts);
    }
  }
};

// A graphed training step of `model`: forward(X, T) then backward(dloss), each one launch.
inline auto make_pair(const Model& model, Out params, Out grads, const Data& data,
                      const cugraphs::GraphedOptions& opts = {}) {
  return cugraphs::make_graphed_pair(
      opts, [model](In x, In t, In p) { return model.forward(x, t, p); },
      [model, grads](In x, In t, In p, Out loss, const std::tuple<Out, Out, Out>& saved, In dloss) {
        model.backward(x, t, p, grads, loss, saved, dloss);
      },
      In(data.x[0]), In(data.t[0]), cugraphs::param(In(params)));
}

}  // namespace mlp
