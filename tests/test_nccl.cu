// NCCL collectives inside captures (built where NCCL 2.9+ was found): an all-reduce in a
// GraphSet step, one rank a device, and an all-reduce of gradients in a training pair's
// backward. On a machine with one GPU the communicators have one rank, so the sums are the
// values themselves; the captures, replays and logs are the same code paths.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>
#include <cugraphs/nccl.hpp>

#include <memory>
#include <numeric>
#include <span>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;

namespace {

constexpr std::size_t kN = 3001;

std::vector<int> all_devices() {
  int n = 0;
  cugraphs::check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  std::vector<int> d(static_cast<std::size_t>(n));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

float start_value(std::size_t i, int device) {
  return static_cast<float>((i * 5 + static_cast<std::size_t>(device) * 3) % 17) - 8.0f;
}

}  // namespace

TEST_CASE("NCCL: an all-reduce captured by a GraphSet, one rank a device, sums fresh values at every replay; "
          "the captures' logs agree",
          "[nccl][graph_set][gpu]") {
  const std::vector<int> devices = all_devices();
  cugraphs::nccl::Communicators comms(devices);
  std::vector<std::unique_ptr<cugraphs::Stream>> streams;  // first: they outlive the buffers
  std::vector<std::unique_ptr<DeviceBuffer<float>>> x, y;
  for (const int d : devices) {
    streams.push_back(std::make_unique<cugraphs::Stream>(d));
    std::vector<float> v(kN);
    for (std::size_t i = 0; i < kN; ++i) v[i] = start_value(i, d);
    x.push_back(std::make_unique<DeviceBuffer<float>>(kN, *streams.back()));
    x.back()->copy_from_host(std::span<const float>(v), *streams.back());
    y.push_back(std::make_unique<DeviceBuffer<float>>(kN, *streams.back()));
  }
  // NCCL connects its ranks at the first collective, which cannot be captured: one eager
  // all-reduce first, all ranks from this thread in one group.
  cugraphs::nccl::check(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t r = 0; r < devices.size(); ++r)
    cugraphs::nccl::all_reduce(In(x[r]->span()), y[r]->span(), ncclSum, comms.on(devices[r]), *streams[r]);
  cugraphs::nccl::check(ncclGroupEnd(), "ncclGroupEnd");
  for (auto& s : streams) s->synchronize();

  cugraphs::GraphSet set;
  set.capture([&](int d, cudaStream_t s) {
    float* xd = x[static_cast<std::size_t>(d)]->data();
    affine_kernel<<<blocks_for(kN), kThreads, 0, s>>>(xd, kN, 1.0f, static_cast<float>(d + 1));  // x += d + 1
    cugraphs::check_launch("affine_kernel");
    cugraphs::nccl::all_reduce(In(xd, kN), y[static_cast<std::size_t>(d)]->span(), ncclSum, comms.on(d), s);
  });
  REQUIRE(set.size() == devices.size());
  for (int replay = 1; replay <= 4; ++replay) {
    for (std::size_t r = 0; r < devices.size(); ++r) y[r]->copy_from_host(std::vector<float>(kN, -1e30f), *streams[r]);
    set.replay();
    set.synchronize();
    std::vector<float> expected(kN, 0.0f);
    for (std::size_t i = 0; i < kN; ++i)
      for (const int d : devices) expected[i] += start_value(i, d) + static_cast<float>(replay * (d + 1));
    for (std::size_t r = 0; r < devices.size(); ++r) {
      INFO("replay " << replay << ", device " << devices[r]);
      REQUIRE(y[r]->to_host(*streams[r]) == expected);  // small integers: exact
    }
  }
}

namespace {
// dw = dy * x; dx = dy * w
__global__ void scale_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  dx[i] = dy[i] * w[i];
  dw[i] = dy[i] * x[i];
}
__global__ void scale_forward(float* y, const float* x, const float* w, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] * w[i];
}
}  // namespace

TEST_CASE("NCCL: a training pair whose backward all-reduces its weight gradient (average over the ranks) "
          "replays the collective with every backward",
          "[nccl][training][gpu]") {
  cugraphs::nccl::Communicators comms({0});  // one rank: the average is the gradient itself
  cugraphs::detail::DeviceGuard on(0);
  auto host_of = [](std::size_t n, float base) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 9);
    return v;
  };
  DeviceBuffer<float> w(kN), dw(kN), x0(kN), local(kN);  // local: this rank's gradient, before the average
  w.copy_from_host(host_of(kN, 1.0f));
  x0.copy_from_host(host_of(kN, 2.0f));
  const ncclComm_t comm = comms.on(0);
  auto forward = [](In x, In wt) {
    DeviceBuffer<float> y(x.size());
    scale_forward<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(y.data(), x.data(), wt.data(),
                                                                                     x.size());
    return y;
  };
  // The average lands in dw only through the collective (dw is poisoned before each step):
  // a backward graph without it would leave the poison.
  auto backward = [g = dw.span(), mine = local.span(), comm](In x, In wt, Out, In dy) {
    DeviceBuffer<float> dx(x.size());
    scale_backward<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(
        dx.data(), mine.data(), dy.data(), x.data(), wt.data(), x.size());
    cugraphs::nccl::all_reduce(In(mine), g, ncclAvg, comm, cugraphs::current_stream());
    return dx;
  };
  auto pair = cugraphs::make_graphed_pair(forward, backward, cugraphs::requires_grad(In(x0)), cugraphs::param(In(w)));
  cugraphs::Stream stream;
  cugraphs::StreamGuard guard(stream);
  for (int step = 0; step < 5; ++step) {
    const auto xs = host_of(kN, static_cast<float>(step)), dys = host_of(kN, static_cast<float>(10 - step));
    DeviceBuffer<float> x(kN, stream), dy(kN, stream);
    x.copy_from_host(xs, stream);
    dy.copy_from_host(dys, stream);
    dw.copy_from_host(std::vector<float>(kN, -1e30f), stream);  // poison
    (void)pair.forward(In(x.span()));
    const Out dx = pair.backward(In(dy.span()));
    const auto dx_host = host(dx);
    const auto dw_host = dw.to_host(stream);
    const auto ws = host_of(kN, 1.0f);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      wrong += dw_host[i] != dys[i] * xs[i] ? 1 : 0;  // small integers: exact
      wrong += dx_host[i] != dys[i] * ws[i] ? 1 : 0;
    }
    INFO("step " << step);
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("NCCL: a graphed callable made with InputMode::InPlace whose f all-reduces its input is refused (NCCL "
          "keeps the addresses it was captured with), one whose f all-reduces its own buffer reads its inputs in "
          "place; the Copy callable of the first reduces fresh inputs",
          "[nccl][in_place][gpu]") {
  cugraphs::nccl::Communicators comms({0});  // one rank: the sum is the input itself
  cugraphs::detail::DeviceGuard on(0);
  const ncclComm_t comm = comms.on(0);
  auto f = [comm](In x) {
    DeviceBuffer<float> sum(x.size());
    cugraphs::nccl::all_reduce(x, sum.span(), ncclSum, comm, cugraphs::current_stream());
    return sum;
  };
  std::vector<float> values(kN);
  for (std::size_t i = 0; i < kN; ++i) values[i] = start_value(i, 0);
  DeviceBuffer<float> sample(kN);
  sample.copy_from_host(values);
  cugraphs::GraphedOptions opts;
  opts.inputs = cugraphs::InputMode::InPlace;
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(opts, f, In(sample.span())); });
  CHECK(contains(e.what(), "InputMode::InPlace"));
  CHECK(contains(e.what(), "holds an NCCL collective over static input leaf 0, which keeps the address it was "
                            "captured with"));
  CHECK(contains(e.what(), "Make it with InputMode::Copy"));

  // A collective over f's own buffer (the input scaled by a kernel first) is no concern of
  // the inputs': they are read in place.
  auto scales_then_reduces = [comm](In x) {
    const cudaStream_t s = cugraphs::current_stream();
    DeviceBuffer<float> mine(x.size()), sum(x.size());
    scale_forward<<<blocks_for(x.size()), kThreads, 0, s>>>(mine.data(), x.data(), x.data(), x.size());
    cugraphs::check_launch("scale_forward");
    cugraphs::nccl::all_reduce(In(mine.span()), sum.span(), ncclSum, comm, s);
    return sum;
  };
  auto squares = cugraphs::make_graphed_callable(opts, scales_then_reduces, In(sample.span()));
  for (int call = 0; call < 3; ++call) {
    std::vector<float> xs(kN), expected(kN);
    for (std::size_t i = 0; i < kN; ++i) {
      xs[i] = start_value(i, 0) + static_cast<float>(call);
      expected[i] = xs[i] * xs[i];
    }
    DeviceBuffer<float> x(kN);
    x.copy_from_host(xs);
    INFO("call " << call);
    CHECK(bitwise_equal(host(squares(In(x.span()))), expected));
  }
  CHECK(squares.staged_copies() == 0);

  auto g = cugraphs::make_graphed_callable(f, In(sample.span()));  // Copy
  for (int call = 0; call < 3; ++call) {
    for (auto& v : values) v += 1.0f;
    DeviceBuffer<float> x(kN);
    x.copy_from_host(values);
    INFO("call " << call);
    CHECK(bitwise_equal(host(g(In(x.span()))), values));
  }
}
