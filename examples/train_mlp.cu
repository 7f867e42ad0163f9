// Trains a 3-layer perceptron (cuBLAS GEMMs and small kernels, examples/mlp.cuh) on a
// synthetic regression task twice from the same initial parameters: eagerly, and as a
// GraphedPair whose step is two launches (forward, then backward with the SGD update). The
// two loss curves must agree bit for bit; then both are timed, in steps per second.
#include "mlp.cuh"

#include <cugraphs/graph.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBatches = 8;
constexpr int kSteps = 300;       // recorded and compared
constexpr int kTimedSteps = 2000;  // timed

// Steps per second of `step` run `n` times back to back, to completion.
template <class Step>
double steps_per_second(Step&& step, int n) {
  cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "sync");
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) step(i);
  cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "sync");
  return n / std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("train_mlp: no CUDA device found; this example trains on a GPU");
    return 1;
  }
  try {
    cugraphs::Stream stream;
    cugraphs::StreamGuard on(stream);
    const mlp::Shape shape;
    mlp::Blas blas;
    const mlp::Model model{shape, &blas};
    const mlp::Data data(shape, kBatches, 2026);
    const std::vector<float> init = mlp::initial_parameters(shape, 7);
    cugraphs::DeviceBuffer<float> params(shape.parameters()), grads(shape.parameters());
    cugraphs::DeviceBuffer<float> eager_params(shape.parameters()), eager_grads(shape.parameters());
    cugraphs::DeviceBuffer<float> one(1), losses(kSteps), eager_losses(kSteps);
    one.copy_from_host(std::vector<float>{1.0f});  // dloss/dloss
    params.copy_from_host(init);

    // The warm-up runs the backward, SGD step included: parameters are set again after.
    auto pair = mlp::make_pair(model, params.span(), grads.span(), data);
    params.copy_from_host(init);
    eager_params.copy_from_host(init);

    auto graphed_step = [&](int i) -> mlp::Out {
      const mlp::Out loss = pair.forward(data.x[i % kBatches], data.t[i % kBatches]);
      (void)pair.backward(one);
      return loss;
    };
    auto eager_step = [&](int i) {
      const auto& x = data.x[i % kBatches];
      const auto& t = data.t[i % kBatches];
      auto r = model.forward(x, t, eager_params);
      const auto& [h1, h2, y] = r.saved;
      model.backward(x, t, eager_params, eager_grads, r.outputs, {h1.span(), h2.span(), y.span()}, one);
      return r;  // its buffers live until the caller is done with the loss
    };

    for (int i = 0; i < kSteps; ++i) {
      const mlp::Out loss = graphed_step(i);
      cugraphs::check(cudaMemcpyAsync(losses.data() + i, loss.data(), sizeof(float), cudaMemcpyDeviceToDevice, stream),
                      "record loss");
      const auto r = eager_step(i);
      cugraphs::check(cudaMemcpyAsync(eager_losses.data() + i, r.outputs.data(), sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream),
                      "record loss");
    }
    const auto curve = losses.to_host(), eager_curve = eager_losses.to_host();
    const bool same_curve = std::memcmp(curve.data(), eager_curve.data(), curve.size() * sizeof(float)) == 0;
    const auto p = params.to_host(), ep = eager_params.to_host();
    const bool same_params = std::memcmp(p.data(), ep.data(), p.size() * sizeof(float)) == 0;
    const bool learned = curve.back() < 0.7f * curve.front();

    const double graphed_rate = steps_per_second(graphed_step, kTimedSteps);
    const double eager_rate = steps_per_second([&](int i) { (void)eager_step(i); }, kTimedSteps);

    std::printf("train_mlp: %d-%d-%d-%d perceptron, batch %d, %zu parameters, SGD lr %.2g\n", shape.in, shape.hidden,
                shape.hidden, shape.out, shape.batch, shape.parameters(), static_cast<double>(model.lr));
    std::printf("train_mlp: loss at step 0, %d, %d, %d: %.5f %.5f %.5f %.5f\n", kSteps / 10, kSteps / 2, kSteps - 1,
                static_cast<double>(curve[0]), static_cast<double>(curve[kSteps / 10]),
                static_cast<double>(curve[kSteps / 2]), static_cast<double>(curve[kSteps - 1]));
    std::printf("train_mlp: graphed loss curve == eager, bit for bit, over %d steps: %s; final parameters equal: %s\n",
                kSteps, same_curve ? "yes" : "NO", same_params ? "yes" : "NO");
    std::printf("train_mlp: eager %.0f steps/s, graphed pair %.0f steps/s: %.2fx\n", eager_rate, graphed_rate,
                graphed_rate / eager_rate);
    const bool ok = same_curve && same_params && learned;
    std::puts(ok ? "train_mlp: ok" : "train_mlp: FAIL");
    return ok ? 0 : 1;
  } catch (const cugraphs::Error& e) {
    std::printf("train_mlp: %s\n", e.what());
    return 1;
  }
}
