// A Jacobi solver for the 2-D Poisson problem -lap(u) = f on the unit square (u = 0 on the
// boundary), shared by examples/solver and the conditional section of benchmarks/bench_suite.
// The grid holds n x n interior points with a zero halo.
#pragma once

#include <cugraphs/graph.hpp>

#include <cmath>
#include <vector>

namespace jacobi {

struct Problem {
  int n = 0;              // interior points per side
  float h2 = 0.0f;        // squared spacing
  float* u = nullptr;     // (n + 2)^2, current iterate
  float* v = nullptr;     // (n + 2)^2, scratch
  const float* f = nullptr;
  float* residual = nullptr;  // one float: ||f + lap(u)||_2
  int* sweeps = nullptr;      // sweeps done
  bool* go_on = nullptr;      // loop condition
};

__global__ void sweep(const float* __restrict__ in, float* __restrict__ out, const float* __restrict__ f,
                      int n, float h2) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y + 1;
  const int j = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (i > n || j > n) return;
  const int w = n + 2, k = i * w + j;
  out[k] = 0.25f * (in[k - 1] + in[k + 1] + in[k - w] + in[k + w] + h2 * f[k]);
}

// One block, fixed order: the same residual bit for bit on every run. Thread 0 then counts
// the sweeps, decides whether to go on, and (in the graph) sets the loop's condition.
__global__ void residual_and_decide(const float* __restrict__ u, const float* __restrict__ f, int n,
                                    float h2, float* residual, int* sweeps, int batch, float tolerance,
                                    int max_sweeps, bool* go_on, cugraphs::Condition loop, bool set_loop) {
  __shared__ double partial[1024];
  const int w = n + 2;
  double sum = 0.0;
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int k = (idx / n + 1) * w + idx % n + 1;
    const double lap = (static_cast<double>(u[k - 1]) + u[k + 1] + u[k - w] + u[k + w] - 4.0 * u[k]) / h2;
    const double r = f[k] + lap;
    sum += r * r;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float r = static_cast<float>(sqrt(partial[0]));
    *residual = r;
    *sweeps += batch;
    const bool more = r > tolerance && *sweeps < max_sweeps;
    *go_on = more;
    if (set_loop) loop.set(more);
  }
}

struct Stop {
  float tolerance;  // on ||f + lap(u)||_2
  int max_sweeps;
};

// `batch` sweeps (an even number, so the result lands back in u), then the residual and the
// decision; with `loop` set, the decision also sets that loop's condition.
inline void sweep_batch(const Problem& p, int batch, Stop stop, cudaStream_t s,
                        const cugraphs::Condition* loop = nullptr) {
  const dim3 threads(32, 8), blocks((p.n + 31) / 32, (p.n + 7) / 8);
  for (int b = 0; b < batch; b += 2) {
    sweep<<<blocks, threads, 0, s>>>(p.u, p.v, p.f, p.n, p.h2);
    sweep<<<blocks, threads, 0, s>>>(p.v, p.u, p.f, p.n, p.h2);
  }
  residual_and_decide<<<1, 1024, 0, s>>>(p.u, p.f, p.n, p.h2, p.residual, p.sweeps, batch, stop.tolerance,
                                         stop.max_sweeps, p.go_on, loop ? *loop : cugraphs::Condition{},
                                         loop != nullptr);
  cugraphs::check_launch("Jacobi sweep batch");
}

// Right-hand side for the exact solution sin(pi x) sin(pi y).
inline std::vector<float> rhs(int n) {
  const double pi = 3.14159265358979323846, h = 1.0 / (n + 1);
  std::vector<float> f(static_cast<std::size_t>(n + 2) * (n + 2), 0.0f);
  for (int i = 1; i <= n; ++i)
    for (int j = 1; j <= n; ++j)
      f[i * (n + 2) + j] = static_cast<float>(2 * pi * pi * std::sin(pi * i * h) * std::sin(pi * j * h));
  return f;
}

inline double exact(int n, int i, int j) {
  const double pi = 3.14159265358979323846, h = 1.0 / (n + 1);
  return std::sin(pi * i * h) * std::sin(pi * j * h);
}

// Owns the buffers of one problem.
struct Buffers {
  explicit Buffers(int n)
      : n(n), u(cells(n)), v(cells(n)), f(cells(n)), residual(1), sweeps(1), go_on(1) {
    f.copy_from_host(rhs(n));
    reset();
  }
  void reset() {
    const std::vector<float> zero(cells(n), 0.0f);
    u.copy_from_host(zero);
    v.copy_from_host(zero);
    const int none[1] = {0};
    sweeps.copy_from_host(std::span<const int>(none, 1));
    const bool yes[1] = {true};
    go_on.copy_from_host(std::span<const bool>(yes, 1));
  }
  [[nodiscard]] Problem problem() const {
    const float h = 1.0f / static_cast<float>(n + 1);
    return {n, h * h, u.data(), v.data(), f.data(), residual.data(), sweeps.data(), go_on.data()};
  }
  static std::size_t cells(int n) { return static_cast<std::size_t>(n + 2) * (n + 2); }

  int n;
  cugraphs::DeviceBuffer<float> u, v, f, residual;
  cugraphs::DeviceBuffer<int> sweeps;
  cugraphs::DeviceBuffer<bool> go_on;
};

// The whole solve as a step to capture: a While node whose body runs a sweep batch and lets
// the residual kernel decide, through the node's condition, whether to loop again.
inline auto solve_step(const Problem& p, int batch, Stop stop) {
  return [p, batch, stop](cugraphs::CaptureScope& scope) {
    cugraphs::ConditionalScope<cugraphs::While> loop(scope, cugraphs::SetByKernels{1});
    const cugraphs::Condition condition = loop.condition();
    sweep_batch(p, batch, stop, scope.stream(), &condition);
  };
}

// The solve as one graph: one replay per solve, no host synchronisation per iteration.
inline cugraphs::Graph capture_solver(const Problem& p, int batch, Stop stop) {
  cugraphs::Graph g;
  cugraphs::capture(g, solve_step(p, batch, stop));
  return g;
}

// The same solve driven from the host: launch a batch, copy the residual back, decide.
inline int solve_from_host(const Problem& p, int batch, Stop stop, cudaStream_t s) {
  int sweeps = 0;
  float residual = 0.0f;
  do {
    sweep_batch(p, batch, stop, s);
    cugraphs::check(cudaMemcpyAsync(&residual, p.residual, sizeof(float), cudaMemcpyDeviceToHost, s),
                    "copy the residual back");
    cugraphs::check(cudaStreamSynchronize(s), "wait for the residual");
    sweeps += batch;
  } while (residual > stop.tolerance && sweeps < stop.max_sweeps);
  return sweeps;
}

}  // namespace jacobi
