// One training step of examples/mlp.cuh's perceptron (32-128-128-8, batch 256: cuBLAS GEMMs,
// small kernels, SGD): host cost per step of the graphed pair (forward(X, T), then
// backward(dloss)) against two bare cudaGraphLaunch calls of the same executables (which
// find no posted call and stage nothing: the floor a step can reach) and against the
// eager step (every GEMM and kernel launched, temporaries from cudaMallocAsync). Host cost
// is timed with the stream kept busy; steps back to back to completion beside it.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <cstdio>
#include <functional>
#include <vector>

#if CUGRAPHS_BENCH_CUBLAS
#  include "../../examples/mlp.cuh"
#endif

namespace cugraphs_bench {

#if CUGRAPHS_BENCH_CUBLAS
void training_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  HostTimer timer(stream);
  constexpr int kBatches = 4;
  const mlp::Shape shape;
  mlp::Blas blas;
  const mlp::Model model{shape, &blas};
  const mlp::Data data(shape, kBatches, 11);
  const auto init = mlp::initial_parameters(shape, 5);
  cugraphs::DeviceBuffer<float> params(shape.parameters()), grads(shape.parameters());
  cugraphs::DeviceBuffer<float> eager_params(shape.parameters()), eager_grads(shape.parameters()), one(1);
  one.copy_from_host(std::vector<float>{1.0f});
  params.copy_from_host(init);
  eager_params.copy_from_host(init);
  auto pair = mlp::make_pair(model, params.span(), grads.span(), data);
  const cudaGraphExec_t fwd = pair.forward_graph().native_exec(), bwd = pair.backward_graph().native_exec();
  std::size_t fwd_nodes = 0, bwd_nodes = 0;
  cugraphs::check(cudaGraphGetNodes(pair.forward_graph().native_graph(), nullptr, &fwd_nodes), "count nodes");
  cugraphs::check(cudaGraphGetNodes(pair.backward_graph().native_graph(), nullptr, &bwd_nodes), "count nodes");

  int turn = 0;
  auto graphed = [&] {
    const int i = turn++ % kBatches;
    (void)pair.forward(stream, data.x[i], data.t[i]);
    (void)pair.backward(stream, one);
  };
  auto bare = [&] {
    cugraphs::check(cudaGraphLaunch(fwd, stream), "cudaGraphLaunch");
    cugraphs::check(cudaGraphLaunch(bwd, stream), "cudaGraphLaunch");
  };
  auto eager = [&] {
    const int i = turn++ % kBatches;
    auto r = model.forward(data.x[i], data.t[i], eager_params);
    const auto& [h1, h2, y] = r.saved;
    model.backward(data.x[i], data.t[i], eager_params, eager_grads, r.outputs, {h1.span(), h2.span(), y.span()}, one);
  };
  // Batches of 16 steps for the pair and the bare launches (32 launches), 8 for the eager
  // step (about 160 launches), so that no batch waits for a full device queue.
  const auto m = timer.medians({graphed, bare, eager}, {16, 16, 8}, reps(40));

  const double gd = to_done(graphed, stream), bd = to_done(bare, stream), ed = to_done(eager, stream);
  timer.note_uncovered();

  const double vs_bare = m[0] / m[1];
  std::printf("\n== training step (MLP %d-%d-%d-%d, batch %d; forward %zu nodes, backward %zu nodes)\n", shape.in,
              shape.hidden, shape.hidden, shape.out, shape.batch, fwd_nodes, bwd_nodes);
  std::printf("host cost per step: graphed pair %.2f us, two bare launches %.2f us (%.3f, goal <= 1.3 %s), eager "
              "%.2f us (%.1fx the pair)\n",
              m[0], m[1], vs_bare,
              report.goal({"training", "pair_vs_bare", "graphed training step / two bare launches, host cost"}, vs_bare,
                          "<=", 1.3)
                  .c_str(),
              m[2], m[2] / m[0]);
  std::printf("to completion per step: graphed %.2f us (%.0f steps/s), bare %.2f us, eager %.2f us (%.0f steps/s): "
              "%.2fx\n",
              gd, 1e6 / gd, bd, ed, 1e6 / ed, ed / gd);
  report.torch_goal(
      {"training", "torch_step_vs_pair", "PyTorch make_graphed_callables step / graphed pair step, host cost"},
      "torch_graphed_us", "graphed_us", ">=", 20.0);
  Json& sec = report.section("training");
  sec["batch"] = shape.batch;
  sec["layers"] = std::vector<double>{double(shape.in), double(shape.hidden), double(shape.hidden), double(shape.out)};
  sec["forward_nodes"] = fwd_nodes;
  sec["backward_nodes"] = bwd_nodes;
  sec["graphed_us"] = m[0];
  sec["bare_us"] = m[1];
  sec["eager_us"] = m[2];
  sec["graphed_done_us"] = gd;
  sec["bare_done_us"] = bd;
  sec["eager_done_us"] = ed;
  sec["uncovered_batches"] = timer.uncovered();
}
#else
void training_section(Report& report, cudaStream_t) {
  std::printf("\n== training step: skipped (bench_suite was built without cuBLAS)\n");
  report.section("training")["skipped"] = "built without cuBLAS";
}
#endif

}  // namespace cugraphs_bench
