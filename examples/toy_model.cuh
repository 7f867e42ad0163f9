// A toy language-model step for the bucketed examples and benchmarks: embedding lookup,
// a dense layer with ReLU, a dense layer to the vocabulary, and the argmax of each row.
// Every row is computed by the same threads in the same order whatever the number of rows,
// so a padded batch gives, row for row, bit for bit the results of the exact batch.
#pragma once

#include <cugraphs/graph.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace toy {

struct Shape {
  int vocab = 512;
  int dim = 256;
  int hidden = 1024;
  int max_rows = 512;
};

namespace kernels {

__global__ void gather(float* x, const float* embed, const int* tokens, int rows, int dim) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= rows * dim) return;
  const int r = i / dim, c = i % dim;
  x[i] = embed[tokens[r] * dim + c];
}

// out[r][n] = sum_k in[r][k] w[k][n] + b[n], optionally through ReLU.
__global__ void dense(float* out, const float* in, const float* w, const float* b, int rows, int k_dim, int n_dim,
                      bool relu) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int r = static_cast<int>(blockIdx.y);
  if (n >= n_dim || r >= rows) return;
  float s = b[n];
  for (int k = 0; k < k_dim; ++k) s += in[r * k_dim + k] * w[k * n_dim + n];
  out[r * n_dim + n] = relu ? fmaxf(s, 0.0f) : s;
}

// One warp a row: the index of the row's largest value (the first, on ties).
__global__ void argmax(int* next, const float* logits, int rows, int vocab) {
  const int r = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (r >= rows) return;
  float best = -3.4e38f;
  int at = 0;
  for (int v = lane; v < vocab; v += 32) {
    const float x = logits[r * vocab + v];
    if (x > best) {
      best = x;
      at = v;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, best, offset);
    const int other_at = __shfl_down_sync(0xffffffffu, at, offset);
    if (other > best || (other == best && other_at < at)) {
      best = other;
      at = other_at;
    }
  }
  if (lane == 0) next[r] = at;
}

}  // namespace kernels

/// The model's parameters, from a seed.
struct Weights {
  cugraphs::DeviceBuffer<float> embed, w1, b1, w2, b2;

  Weights(const Shape& s, std::uint32_t seed)
      : embed(std::size_t(s.vocab) * s.dim), w1(std::size_t(s.dim) * s.hidden), b1(std::size_t(s.hidden)),
        w2(std::size_t(s.hidden) * s.vocab), b2(std::size_t(s.vocab)) {
    std::uint32_t h = seed;
    auto fill = [&h](cugraphs::DeviceBuffer<float>& b, float scale) {
      std::vector<float> v(b.size());
      for (float& x : v) {
        h = h * 1664525u + 1013904223u;
        x = scale * (static_cast<float>(h >> 8) / 8388608.0f - 1.0f);
      }
      b.copy_from_host(v);
    };
    fill(embed, 1.0f);
    fill(w1, 0.0625f);
    fill(b1, 0.1f);
    fill(w2, 0.03f);
    fill(b2, 0.1f);
  }
};

/// One step for `rows` rows of `tokens` (max_rows of them, padded by the caller): the
/// logits and the next token of each row, as buffers of this call's; the hidden
/// activations are temporaries.
struct Model {
  Shape shape;
  const Weights* weights;
  const int* tokens;

  std::pair<cugraphs::DeviceBuffer<float>, cugraphs::DeviceBuffer<int>> operator()(const int& rows) const {
    const cudaStream_t s = cugraphs::current_stream();
    const auto n = static_cast<std::size_t>(rows);
    cugraphs::DeviceBuffer<float> x(n * shape.dim), h(n * shape.hidden), logits(n * shape.vocab);
    cugraphs::DeviceBuffer<int> next(n);
    constexpr int threads = 256;
    kernels::gather<<<(rows * shape.dim + threads - 1) / threads, threads, 0, s>>>(x.data(), weights->embed.data(),
                                                                                   tokens, rows, shape.dim);
    kernels::dense<<<dim3((shape.hidden + threads - 1) / threads, rows), threads, 0, s>>>(
        h.data(), x.data(), weights->w1.data(), weights->b1.data(), rows, shape.dim, shape.hidden, true);
    kernels::dense<<<dim3((shape.vocab + threads - 1) / threads, rows), threads, 0, s>>>(
        logits.data(), h.data(), weights->w2.data(), weights->b2.data(), rows, shape.hidden, shape.vocab, false);
    kernels::argmax<<<(rows + threads / 32 - 1) / (threads / 32), threads, 0, s>>>(next.data(), logits.data(), rows,
                                                                                     shape.vocab);
    cugraphs::check_launch("toy::Model");
    return {std::move(logits), std::move(next)};
  }
};

/// vLLM's capture sizes up to `max`: 1, 2, 4, then every multiple of 8.
inline std::vector<int> vllm_buckets(int max) {
  std::vector<int> b{1, 2, 4};
  for (int n = 8; n <= max; n += 8) b.push_back(n);
  return b;
}

}  // namespace toy
