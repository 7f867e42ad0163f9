// Graphed-callable benchmark: host cost per call with 1, 4 and 16 inputs of 4 KiB, for
// GraphedCallable against (a) a bare cudaGraphLaunch of the same executable and (b) one
// cudaMemcpyAsync per input plus cudaGraphLaunch. Host cost is measured with the stream
// kept busy (a spinning kernel queued ahead of each batch, so calls never wait for the
// device); throughput to completion, back to back, is printed beside it.
#include "bench_common.hpp"

#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <string>

using namespace cugraphs_bench;

namespace {

constexpr std::size_t kFloats = 1024;  // 4 KiB
using In = cugraphs::DeviceSpan<const float>;

template <std::size_t N>
struct Pointers {
  const float* p[N];
};

template <std::size_t N>
__global__ void sum_inputs(Pointers<N> in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kFloats) return;
  float s = 0.0f;
  for (std::size_t k = 0; k < N; ++k) s += in.p[k][i];
  out[i] = s;
}

template <std::size_t N>
void run(Report& report, cudaStream_t stream) {
  cugraphs::DeviceBuffer<float> out(kFloats);
  std::array<cugraphs::DeviceBuffer<float>, N> storage;
  std::array<In, N> inputs;
  for (std::size_t k = 0; k < N; ++k) {
    storage[k] = cugraphs::DeviceBuffer<float>(kFloats);
    cugraphs::check(cudaMemsetAsync(storage[k].data(), 0, storage[k].bytes(), stream), "memset");
    inputs[k] = storage[k];
  }
  auto f = [o = out.span()](const std::array<In, N>& xs) {
    Pointers<N> p{};
    for (std::size_t k = 0; k < N; ++k) p.p[k] = xs[k].data();
    sum_inputs<N><<<(kFloats + 255) / 256, 256, 0, cugraphs::current_stream()>>>(p, o.data());
  };
  auto g = cugraphs::make_graphed_callable(f, inputs);
  const cudaGraphExec_t exec = g.graph().native_exec();
  const auto& statics = std::get<0>(g.static_inputs());

  auto bare = [&] { cugraphs::check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); };
  auto memcpys = [&] {
    for (std::size_t k = 0; k < N; ++k)
      cugraphs::check(cudaMemcpyAsync(const_cast<float*>(statics[k].data()), inputs[k].data(),
                                      inputs[k].size_bytes(), cudaMemcpyDeviceToDevice, stream),
                      "cudaMemcpyAsync");
    cugraphs::check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  };
  auto graphed = [&] { (void)g(stream, inputs); };

  constexpr int kBatch = 32, kReps = 60;
  std::vector<double> host[3];
  auto batch = [&](auto&& call, std::vector<double>& into) {
    spin<<<1, 1, 0, stream>>>(3'000'000);  // keeps the stream busy past the batch
    const auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) call();
    into.push_back(us_since(t0) / kBatch);
    cugraphs::check(cudaStreamSynchronize(stream), "sync");
  };
  for (int w = 0; w < 5; ++w) {
    std::vector<double> scratch;
    batch(bare, scratch);
    batch(memcpys, scratch);
    batch(graphed, scratch);
  }
  for (int r = 0; r < kReps; ++r) {
    batch(bare, host[0]);
    batch(memcpys, host[1]);
    batch(graphed, host[2]);
  }
  // Throughput: back-to-back calls to completion.
  auto throughput = [&](auto&& call) {
    std::vector<double> v;
    for (int r = 0; r < 9; ++r) {
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      const auto t0 = Clock::now();
      for (int i = 0; i < 200; ++i) call();
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      v.push_back(us_since(t0) / 200);
    }
    return median(v);
  };
  const double hb = median(host[0]), hm = median(host[1]), hg = median(host[2]);
  const double tb = throughput(bare), tm = throughput(memcpys), tg = throughput(graphed);
  std::printf("%2zu inputs | host us/call: bare %6.2f  memcpy+launch %7.2f  GraphedCallable %6.2f | "
              "ratios: vs bare %5.2f (goal <= 1.3)  vs memcpy %5.3f (goal <= 0.1) | to done us/call: %6.2f %7.2f %6.2f\n",
              N, hb, hm, hg, hg / hb, hg / hm, tb, tm, tg);
  report.add(fmt::format("inputs_{}_bare_host_us", N), hb);
  report.add(fmt::format("inputs_{}_memcpy_host_us", N), hm);
  report.add(fmt::format("inputs_{}_graphed_host_us", N), hg);
  report.add(fmt::format("inputs_{}_graphed_vs_bare", N), hg / hb);
  report.add(fmt::format("inputs_{}_graphed_vs_memcpy", N), hg / hm);
  report.add(fmt::format("inputs_{}_bare_done_us", N), tb);
  report.add(fmt::format("inputs_{}_memcpy_done_us", N), tm);
  report.add(fmt::format("inputs_{}_graphed_done_us", N), tg);
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_device("bench_graphed")) return 77;
  const std::string json = json_path(argc, argv, "bench_graphed");
  Report report("graphed");
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  run<1>(report, stream);
  run<4>(report, stream);
  run<16>(report, stream);
  report.write(json);
  return 0;
}
