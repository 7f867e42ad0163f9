// port_trainer: an existing eager CUDA C++ trainer, ported onto CUDA graphs with cugraphs.
//
// The program is what such trainers look like before any port: a 2-layer MLP regression
// (fp32, column-major, cublasSgemm plus a few small kernels) trained by AdamW, whose bias
// corrections change every step. It is trained three times from the same initial weights:
//   1. eagerly, as written (13 launches a step: 5 GEMMs and 8 kernels);
//   2. as one graph per step: the whole step captured once, then one replay a step, with the
//      per-step scalars (the batch and loss-slot index, AdamW's bias corrections) set on the
//      captured kernel nodes with Graph::set_kernel_arg before each replay;
//   3. as a GraphedPair: forward and backward (AdamW inside the backward) are two graphs,
//      the batch is staged into the forward's static inputs, bias corrections again per step.
// The port changes no kernel and no GEMM call (it adds one kernel, load_batch, for run 2):
// forward(), backward() and optimizer_step() below are shared by all three runs, and take
// the raw cublasHandle_t they always did. The handle is a cugraphs::cublas::Handle, which
// follows the current stream into every capture, so no cublasSetStream is needed anywhere.
// Every run writes its loss into a device array indexed by step (no host round trip in the
// loop); the losses and final weights of runs 2 and 3 must equal the eager run's bit for bit.
//
// Run: build/examples/port_trainer (needs a GPU and cuBLAS; exit status 1 on any mismatch).
#include <cugraphs/cublas.hpp>
#include <cugraphs/graph.hpp>

#include <cublas_v2.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using In = cugraphs::DeviceSpan<const float>;
using Out = cugraphs::DeviceSpan<float>;
using Clock = std::chrono::steady_clock;

// The model: y = W2 relu(W1 x + b1) + b2, one sample a column; loss = mean((y - t)^2).
constexpr int kBatch = 256, kIn = 128, kHidden = 256, kOut = 64;
constexpr int kBatches = 8;  // cycled: step s trains on batch s % kBatches
constexpr int kSteps = 200;
constexpr std::size_t kXSize = std::size_t{kIn} * kBatch;    // one batch of inputs
constexpr std::size_t kTSize = std::size_t{kOut} * kBatch;   // one batch of targets
constexpr std::size_t kHSize = std::size_t{kHidden} * kBatch;

// Offsets of W1, b1, W2, b2 in one flat parameter buffer, so that one AdamW kernel updates
// them all (the gradients, m and v share the layout).
constexpr std::size_t kW1 = 0;
constexpr std::size_t kB1 = kW1 + std::size_t{kHidden} * kIn;
constexpr std::size_t kW2 = kB1 + kHidden;
constexpr std::size_t kB2 = kW2 + std::size_t{kOut} * kHidden;
constexpr std::size_t kParams = kB2 + kOut;

// AdamW's hyperparameters; only the bias corrections change from step to step.
constexpr float kLr = 2e-3f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f, kWeightDecay = 1e-2f;

constexpr int kThreads = 256;
constexpr int blocks_for(std::size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// ---- Kernels (unchanged by the port) --------------------------------------------------

// z (rows x cols) += bias per row, then relu when asked.
__global__ void bias_act(float* z, const float* bias, int rows, int cols, bool relu) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= std::size_t(rows) * cols) return;
  const float v = z[i] + bias[i % rows];
  z[i] = relu ? fmaxf(v, 0.0f) : v;
}

// d *= relu'(pre-activation), read through the relu's output h.
__global__ void relu_backward(float* d, const float* h, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && h[i] <= 0.0f) d[i] = 0.0f;
}

// db[r] = sum over the columns of d (rows x cols): one thread a row, in a fixed order.
__global__ void bias_backward(const float* d, int rows, int cols, float* db) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (int c = 0; c < cols; ++c) s += d[std::size_t(c) * rows + r];
  db[r] = s;
}

// dy = dloss * d mean((y - t)^2) / dy
__global__ void mse_grad(float* dy, const float* y, const float* t, std::size_t n, const float* dloss) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dy[i] = *dloss * 2.0f * (y[i] - t[i]) / static_cast<float>(n);
}

// *loss = mean((y - t)^2), also kept as losses[step]. One block in a fixed order, so every
// run sums in the same order and gets the same bits.
__global__ void mse_loss(const float* y, const float* t, std::size_t n, float* loss, float* losses, int step) {
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
  if (threadIdx.x == 0) {
    const float mean = partial[0] / static_cast<float>(n);
    *loss = mean;
    losses[step] = mean;
  }
}

// AdamW over every parameter; bc1 = 1 - beta1^t and bc2 = 1 - beta2^t change every step.
__global__ void adamw(float* w, float* m, float* v, const float* g, std::size_t n, float lr, float beta1, float beta2,
                      float eps, float weight_decay, float bc1, float bc2) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
  v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
  const float m_hat = m[i] / bc1, v_hat = v[i] / bc2;
  w[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * w[i]);
}

// Added by the port, for run 2 only: copies batch step % kBatches into the fixed buffers the
// captured GEMMs read. A graph replays fixed addresses, and the GEMMs' nodes are cuBLAS's
// kernels, whose pointer arguments set_kernel_arg cannot reach; so the one value that picks
// the batch is this kernel's `step`, set per replay like the other per-step scalars.
__global__ void load_batch(float* x, float* t, const float* xs, const float* ts, int step) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t b = static_cast<std::size_t>(step % kBatches);
  if (i < kXSize) x[i] = xs[b * kXSize + i];
  if (i < kTSize) t[i] = ts[b * kTSize + i];
}

// ---- Host side of the original program ------------------------------------------------

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw cugraphs::Error(std::string("port_trainer: ") + what + " failed: " + cublasGetStatusName(s));
}

// C (m x n) = op(A) op(B), column-major.
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc) {
  const float one = 1.0f, zero = 0.0f;
  check_blas(cublasSgemm(h, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc), "cublasSgemm");
}

// The activations, their gradients and the loss, allocated once before training.
struct Activations {
  cugraphs::DeviceBuffer<float> h{kHSize}, y{kTSize}, dh{kHSize}, dy{kTSize}, loss{1};
};

// One training run's state: weights, gradients, AdamW's moments, and the loss of each step.
struct Run {
  cugraphs::DeviceBuffer<float> params{kParams}, grads{kParams}, m{kParams}, v{kParams}, losses{kSteps};
  Activations act;

  explicit Run(const std::vector<float>& init) {
    const cudaStream_t s = cugraphs::current_stream();
    params.copy_from_host(init, s);
    cugraphs::check(cudaMemsetAsync(m.data(), 0, m.bytes(), s), "zero m");
    cugraphs::check(cudaMemsetAsync(v.data(), 0, v.bytes(), s), "zero v");
    // NaN everywhere: a step whose loss is never written shows up in the checks.
    cugraphs::check(cudaMemsetAsync(losses.data(), 0xff, losses.bytes(), s), "poison losses");
  }
};

// Forward: h = relu(W1 x + b1), y = W2 h + b2, loss. Its last launch is mse_loss (run 2
// and 3 take that node right after the call).
void forward(cublasHandle_t blas, const float* w, Activations& a, const float* x, const float* t, float* losses,
             int step) {
  const cudaStream_t s = cugraphs::current_stream();
  gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, kHidden, kBatch, kIn, w + kW1, kHidden, x, kIn, a.h.data(), kHidden);
  bias_act<<<blocks_for(kHSize), kThreads, 0, s>>>(a.h.data(), w + kB1, kHidden, kBatch, true);
  gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, kOut, kBatch, kHidden, w + kW2, kOut, a.h.data(), kHidden, a.y.data(), kOut);
  bias_act<<<blocks_for(kTSize), kThreads, 0, s>>>(a.y.data(), w + kB2, kOut, kBatch, false);
  mse_loss<<<1, kThreads, 0, s>>>(a.y.data(), t, kTSize, a.loss.data(), losses, step);
  cugraphs::check_launch("port_trainer: forward");
}

// Backward: every gradient into g, from dloss (the loss's own gradient, 1 here).
void backward(cublasHandle_t blas, const float* w, float* g, Activations& a, const float* x, const float* t,
              const float* dloss) {
  const cudaStream_t s = cugraphs::current_stream();
  mse_grad<<<blocks_for(kTSize), kThreads, 0, s>>>(a.dy.data(), a.y.data(), t, kTSize, dloss);
  // Layer 2: dW2 = dy h^T, db2 = row sums of dy, dh = W2^T dy through the relu.
  gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, kOut, kHidden, kBatch, a.dy.data(), kOut, a.h.data(), kHidden, g + kW2, kOut);
  bias_backward<<<blocks_for(kOut), kThreads, 0, s>>>(a.dy.data(), kOut, kBatch, g + kB2);
  gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, kHidden, kBatch, kOut, w + kW2, kOut, a.dy.data(), kOut, a.dh.data(), kHidden);
  relu_backward<<<blocks_for(kHSize), kThreads, 0, s>>>(a.dh.data(), a.h.data(), kHSize);
  // Layer 1: dW1 = dh x^T, db1 = row sums of dh; the data takes no gradient.
  gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, kHidden, kIn, kBatch, a.dh.data(), kHidden, x, kIn, g + kW1, kHidden);
  bias_backward<<<blocks_for(kHidden), kThreads, 0, s>>>(a.dh.data(), kHidden, kBatch, g + kB1);
  cugraphs::check_launch("port_trainer: backward");
}

// AdamW's bias corrections for 0-based `step`, computed the same way by every run.
struct BiasCorrections {
  float bc1, bc2;
};
BiasCorrections bias_corrections(int step) {
  const auto t = static_cast<float>(step + 1);
  return {1.0f - std::pow(kBeta1, t), 1.0f - std::pow(kBeta2, t)};
}

// One AdamW step over all parameters: a single launch (run 2 and 3 take its node).
void optimizer_step(float* w, float* m, float* v, const float* g, int step) {
  const auto [bc1, bc2] = bias_corrections(step);
  adamw<<<blocks_for(kParams), kThreads, 0, cugraphs::current_stream()>>>(w, m, v, g, kParams, kLr, kBeta1, kBeta2,
                                                                         kEps, kWeightDecay, bc1, bc2);
  cugraphs::check_launch("port_trainer: optimizer step");
}

// The data set: kBatches batches of inputs uniform in [-1, 1] and targets sin(A x) for a
// fixed random teacher A (learnable by the MLP), copied to the device once.
struct Data {
  cugraphs::DeviceBuffer<float> xs{kBatches * kXSize}, ts{kBatches * kTSize};
  cugraphs::DeviceBuffer<float> one{1};  // dloss/dloss

  explicit Data(unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float scale = 3.0f / std::sqrt(float(kIn));  // A x has about unit variance
    std::vector<float> a(std::size_t{kOut} * kIn), x(kBatches * kXSize), t(kBatches * kTSize);
    for (auto& e : a) e = scale * u(gen);
    for (auto& e : x) e = u(gen);
    for (std::size_t c = 0; c < std::size_t{kBatches} * kBatch; ++c)  // every sample of every batch
      for (std::size_t o = 0; o < kOut; ++o) {
        float z = 0.0f;
        for (std::size_t i = 0; i < kIn; ++i) z += a[i * kOut + o] * x[c * kIn + i];
        t[c * kOut + o] = std::sin(z);
      }
    xs.copy_from_host(x);
    ts.copy_from_host(t);
    one.copy_from_host(std::vector<float>{1.0f});
  }
  [[nodiscard]] const float* x(int step) const { return xs.data() + std::size_t(step % kBatches) * kXSize; }
  [[nodiscard]] const float* t(int step) const { return ts.data() + std::size_t(step % kBatches) * kTSize; }
};

// Initial weights uniform in +-1/sqrt(fan in), biases 0, from a fixed seed.
std::vector<float> initial_weights(unsigned seed) {
  std::vector<float> w(kParams, 0.0f);
  std::mt19937 gen(seed);
  auto fill = [&](std::size_t at, std::size_t count, int fan_in) {
    const float r = 1.0f / std::sqrt(float(fan_in));
    std::uniform_real_distribution<float> d(-r, r);
    for (std::size_t i = 0; i < count; ++i) w[at + i] = d(gen);
  };
  fill(kW1, std::size_t{kHidden} * kIn, kIn);
  fill(kW2, std::size_t{kOut} * kHidden, kHidden);
  return w;
}

// What a run leaves: its per-step losses, its final weights, and its speed.
struct Result {
  std::vector<float> losses, weights;
  double steps_per_s = 0.0;
};

// Times `step(s)` for s = 0 .. kSteps-1 on the current stream, then reads the run back.
template <class Step>
Result train(Run& run, Step&& step) {
  const cudaStream_t s = cugraphs::current_stream();
  cugraphs::check(cudaStreamSynchronize(s), "port_trainer: before the run");
  const auto t0 = Clock::now();
  for (int i = 0; i < kSteps; ++i) step(i);
  cugraphs::check(cudaStreamSynchronize(s), "port_trainer: after the run");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return {run.losses.to_host(), run.params.to_host(), kSteps / seconds};
}

// ---- Run 1: the original program, eagerly -----------------------------------------------

void eager_step(cublasHandle_t blas, Run& r, const Data& d, int step) {
  forward(blas, r.params.data(), r.act, d.x(step), d.t(step), r.losses.data(), step);
  backward(blas, r.params.data(), r.grads.data(), r.act, d.x(step), d.t(step), d.one.data());
  optimizer_step(r.params.data(), r.m.data(), r.v.data(), r.grads.data(), step);
}

Result run_eager(cugraphs::cublas::Handle& blas, const Data& d, const std::vector<float>& init) {
  Run r(init);
  return train(r, [&](int step) { eager_step(blas, r, d, step); });
}

// ---- Run 2: the whole step as one graph --------------------------------------------------

Result run_graph_per_step(cugraphs::cublas::Handle& blas, const Data& d, const std::vector<float>& init) {
  Run r(init);
  cugraphs::DeviceBuffer<float> x(kXSize), t(kTSize);  // the batch the captured GEMMs read
  // The nodes whose arguments change per step, declared before the capture that fills them.
  auto batch_node = cugraphs::kernel_node_for(load_batch);
  auto loss_node = cugraphs::kernel_node_for(mse_loss);
  auto adamw_node = cugraphs::kernel_node_for(adamw);
  cugraphs::Graph step_graph;
  {
    // Inside the scope current_stream() is the capture stream: the launches above and the
    // Handle's GEMMs all go there. Step 0's values are captured; set_kernel_arg replaces them.
    cugraphs::CaptureScope scope(step_graph);
    load_batch<<<blocks_for(kXSize), kThreads, 0, scope.stream()>>>(x.data(), t.data(), d.xs.data(), d.ts.data(), 0);
    cugraphs::check_launch("port_trainer: load_batch");
    batch_node = cugraphs::captured_kernel_node(load_batch);
    forward(blas, r.params.data(), r.act, x.data(), t.data(), r.losses.data(), 0);
    loss_node = cugraphs::captured_kernel_node(mse_loss);  // forward's last launch
    backward(blas, r.params.data(), r.grads.data(), r.act, x.data(), t.data(), d.one.data());
    optimizer_step(r.params.data(), r.m.data(), r.v.data(), r.grads.data(), 0);
    adamw_node = cugraphs::captured_kernel_node(adamw);
  }
  return train(r, [&](int step) {
    const auto [bc1, bc2] = bias_corrections(step);
    step_graph.set_kernel_arg<4>(batch_node, step);  // load_batch(x, t, xs, ts, step)
    step_graph.set_kernel_arg<5>(loss_node, step);   // mse_loss(y, t, n, loss, losses, step)
    step_graph.set_kernel_arg<10, 11>(adamw_node, bc1, bc2);  // adamw(w, m, v, g, n, lr, b1, b2, eps, wd, bc1, bc2)
    step_graph.replay();
  });
}

// ---- Run 3: a graphed pair, AdamW inside the backward ----------------------------------

Result run_graphed_pair(cugraphs::cublas::Handle& blas, const Data& d, const std::vector<float>& init) {
  Run r(init);
  auto loss_node = cugraphs::kernel_node_for(mse_loss);
  auto adamw_node = cugraphs::kernel_node_for(adamw);
  // forward(x, t, w) -> loss. x and t are staged into the pair's static inputs each call;
  // w is a param: read in place, never staged.
  auto forward_fn = [&](In x, In t, Out w) {
    forward(blas, w.data(), r.act, x.data(), t.data(), r.losses.data(), 0);
    loss_node = cugraphs::captured_kernel_node(mse_loss);
    return r.act.loss.span();
  };
  // backward(x, t, w, loss, dloss): the gradients, then the optimizer step on w in place.
  // No argument is marked requires_grad, so it returns nothing.
  auto backward_fn = [&](In x, In t, Out w, Out /*loss*/, In dloss) {
    backward(blas, w.data(), r.grads.data(), r.act, x.data(), t.data(), dloss.data());
    optimizer_step(w.data(), r.m.data(), r.v.data(), r.grads.data(), 0);
    adamw_node = cugraphs::captured_kernel_node(adamw);
  };
  cugraphs::GraphedOptions opts;
  opts.warmup_iters = 0;  // a warm-up backward would step AdamW on the weights before step 0
  auto pair = cugraphs::make_graphed_pair(opts, forward_fn, backward_fn, In(d.x(0), kXSize), In(d.t(0), kTSize),
                                          cugraphs::param(r.params.span()));
  return train(r, [&](int step) {
    const auto [bc1, bc2] = bias_corrections(step);
    pair.set_kernel_arg<5>(loss_node, step);  // in the forward graph
    pair.set_kernel_arg<10, 11>(adamw_node, bc1, bc2);  // in the backward graph
    (void)pair.forward(In(d.x(step), kXSize), In(d.t(step), kTSize));
    (void)pair.backward(In(d.one));
  });
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("port_trainer: no CUDA device found. This example trains on a GPU (eagerly and as CUDA "
              "graphs); it builds without one but cannot run.");
    return 1;
  }
  try {
    cudaDeviceProp prop{};
    cugraphs::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    cugraphs::cublas::Handle blas;  // follows current_stream(): this stream, then each capture's
    const Data data(2026);
    const std::vector<float> init = initial_weights(7);

    // Warm-up outside the timings: module loading, cuBLAS's first calls, the workspace.
    {
      Run scratch(init);
      for (int step = 0; step < 3; ++step) eager_step(blas, scratch, data, step);
      stream.synchronize();
    }

    const Result eager = run_eager(blas, data, init);
    const Result graph = run_graph_per_step(blas, data, init);
    const Result pair = run_graphed_pair(blas, data, init);

    const bool same_losses = bitwise_equal(graph.losses, eager.losses) && bitwise_equal(pair.losses, eager.losses);
    const bool same_weights =
        bitwise_equal(graph.weights, eager.weights) && bitwise_equal(pair.weights, eager.weights);
    const float first = eager.losses.front(), last = eager.losses.back();
    const bool learned = std::isfinite(first) && std::isfinite(last) && last < first / 4.0f;

    std::printf("port_trainer on %s: MLP %d-%d-%d, batch %d, %d batches, %zu parameters, AdamW, %d steps\n",
                prop.name, kIn, kHidden, kOut, kBatch, kBatches, kParams, kSteps);
    std::printf("  eager                    %8.0f steps/s\n", eager.steps_per_s);
    std::printf("  one graph per step       %8.0f steps/s  %.2fx eager\n", graph.steps_per_s,
                graph.steps_per_s / eager.steps_per_s);
    std::printf("  graphed pair             %8.0f steps/s  %.2fx eager\n", pair.steps_per_s,
                pair.steps_per_s / eager.steps_per_s);
    std::printf("  loss: first %.5f, last %.5f\n", static_cast<double>(first), static_cast<double>(last));
    std::printf("  losses bitwise equal: %s; final weights bitwise equal: %s\n", same_losses ? "yes" : "NO",
                same_weights ? "yes" : "NO");
    if (!same_losses || !same_weights || !learned) {
      std::puts(learned ? "port_trainer: FAIL: a graphed run differs from the eager one"
                        : "port_trainer: FAIL: the loss did not fall to a quarter of its first value");
      return 1;
    }
    std::puts("port_trainer: ok");
    return 0;
  } catch (const cugraphs::Error& e) {
    std::printf("port_trainer: %s\n", e.what());
    return 1;
  }
}
