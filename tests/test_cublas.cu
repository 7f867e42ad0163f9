// cuBLAS handles that follow the capture (built where cuBLAS was found): SGEMMs through a
// cugraphs::cublas::Handle, or a user's own handle under cugraphs::cublas::Follow, captured in
// a CaptureScope, inside While and IfElse bodies, in a GraphedPair and in a graphed callable
// that reads its inputs in place (cuBLAS's kernels rebound to each call's), with no manual
// cublasSetStream anywhere; every result checked against a host reference and against the
// same GEMMs run eagerly (bitwise: the same workspace size picks the same algorithm).
#include "kernels.cuh"
#include "testing.hpp"
#include "threads.hpp"

#include <cugraphs/cublas.hpp>
#include <cugraphs/graph.hpp>

#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::CaptureScope;
using cugraphs::ConditionalScope;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Graph;
using cugraphs::cublas::Follow;
using cugraphs::cublas::Handle;
using cugraphs::cublas::HandleOptions;
using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;

namespace {

// C (kM x kN) = op(A) (kM x kK) * B (kK x kN), column-major (cuBLAS's layout).
constexpr int kM = 64, kN = 48, kK = 32;
constexpr std::size_t kSizeA = std::size_t{kM} * kK, kSizeB = std::size_t{kK} * kN, kSizeC = std::size_t{kM} * kN;
constexpr float kPoison = -777.0f;

// Host mode scalars and no TF32, said outright: the captured GEMMs bake alpha and beta in
// at capture time, and the eager ones must compute in plain fp32 like the reference.
void configure(cublasHandle_t h) {
  cugraphs::cublas::check(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  cugraphs::cublas::check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

// C (m x n) = alpha * op(A) * op(B) + beta * C, column-major with leading dimensions.
struct Gemm {
  bool ta = false, tb = false;
  int m = kM, n = kN, k = kK;
  int lda = kM, ldb = kK, ldc = kM;
  float alpha = 1.0f, beta = 0.0f;
};

// The GEMMs of most cases: op(A) (kM x kK) * B (kK x kN); A^T is stored kK x kM.
Gemm plain(float alpha = 1.0f, float beta = 0.0f) { return {false, false, kM, kN, kK, kM, kK, kM, alpha, beta}; }
Gemm a_transposed(float alpha) { return {true, false, kM, kN, kK, kK, kK, kM, alpha, 0.0f}; }

void sgemm(cublasHandle_t h, const Gemm& g, const float* a, const float* b, float* c) {
  cugraphs::cublas::check(cublasSgemm(h, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n,
                                      g.k, &g.alpha, a, g.lda, b, g.ldb, &g.beta, c, g.ldc),
                          "cublasSgemm");
}

// The same on the host, in double.
std::vector<float> host_gemm(const Gemm& g, const std::vector<float>& a, const std::vector<float>& b,
                             std::vector<float> c) {
  auto at = [&](const std::vector<float>& x, bool t, int ld, int row, int col) {
    return double(t ? x[std::size_t(row) * ld + col] : x[std::size_t(col) * ld + row]);
  };
  c.resize(std::size_t(g.ldc) * g.n, 0.0f);
  for (int j = 0; j < g.n; ++j)
    for (int i = 0; i < g.m; ++i) {
      double sum = 0.0;
      for (int p = 0; p < g.k; ++p) sum += at(a, g.ta, g.lda, i, p) * at(b, g.tb, g.ldb, p, j);
      float& out = c[std::size_t(j) * g.ldc + i];
      out = static_cast<float>(g.alpha * sum + double(g.beta) * double(out));
    }
  return c;
}

// Every element within fp32 rounding of a 32-term dot product (and of a few accumulations).
bool close(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-3f + 1e-4f * std::fabs(want[i]))) return false;
  return true;
}

// Counts `*left` down by one and says whether to go on: the While bodies' loop control.
__global__ void count_down(int* left, bool* go_on) {
  *left -= 1;
  *go_on = *left > 0;
}

cudaStream_t stream_of(cublasHandle_t h) {
  cudaStream_t s = nullptr;
  cugraphs::cublas::check(cublasGetStream(h, &s), "cublasGetStream");
  return s;
}

}  // namespace

TEST_CASE("cublas::Handle: a GEMM captured with a handle made before the capture replays on fresh inputs, "
          "equal to the host reference and bitwise to eager",
          "[cublas][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;
  configure(blas);
  const cublasHandle_t raw = blas.get();
  CHECK(stream_of(raw) == stream.get());

  auto a = filled(kSizeA, 1), b = filled(kSizeB, 2);
  DeviceBuffer<float> c(kSizeC), c_eager(kSizeC);
  Graph g;
  {
    CaptureScope scope(g);
    CHECK(stream_of(raw) == scope.stream());  // re-bound by the scope, before any get()
    sgemm(blas, plain(), a.data(), b.data(), c.data());
  }
  CHECK(stream_of(raw) == stream.get());
  for (std::uint32_t rep = 0; rep < 3; ++rep) {
    const auto ha = random_floats(kSizeA, 10 + rep), hb = random_floats(kSizeB, 20 + rep);
    a.copy_from_host(ha);
    b.copy_from_host(hb);
    put_all(c, kPoison);
    g.replay();
    const auto graphed = c.to_host();
    INFO("replay " << rep);
    REQUIRE(close(graphed, host_gemm(plain(), ha, hb, {})));
    put_all(c_eager, kPoison);
    sgemm(blas, plain(), a.data(), b.data(), c_eager.data());
    REQUIRE(bitwise_equal(graphed, c_eager.to_host()));
  }
}

TEST_CASE("cublas::Handle: a GEMM inside a While body, with no cublasSetStream, accumulates exactly N times, "
          "bitwise as N eager GEMMs",
          "[cublas][conditional][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;
  configure(blas);
  const cublasHandle_t raw = blas.get();
  auto a = filled(kSizeA, 3), b = filled(kSizeB, 4);
  DeviceBuffer<float> c(kSizeC), c_eager(kSizeC);
  DeviceBuffer<int> left(1);
  DeviceBuffer<bool> go_on(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::While> loop(scope, go_on.data());
    CHECK(stream_of(raw) == loop.stream());  // the listener followed the body
    sgemm(blas, plain(1.0f, 1.0f), a.data(), b.data(), c.data());  // C = A B + C
    count_down<<<1, 1, 0, cugraphs::current_stream()>>>(left.data(), go_on.data());
    cugraphs::check_launch("count_down");
  }
  CHECK(stream_of(raw) == stream.get());
  CHECK(blas.workspace_count() == 3);  // this stream, the capture stream, the body's stream

  for (const int n : {3, 0, 6, 1}) {
    const auto ha = random_floats(kSizeA, 30 + n), hb = random_floats(kSizeB, 40 + n),
               hc = random_floats(kSizeC, 50 + n);
    a.copy_from_host(ha);
    b.copy_from_host(hb);
    c.copy_from_host(hc);
    put(left, n);
    put(go_on, n > 0);
    g.replay();
    const auto graphed = c.to_host();

    c_eager.copy_from_host(hc);
    auto want = hc;
    for (int i = 0; i < n; ++i) {
      sgemm(blas, plain(1.0f, 1.0f), a.data(), b.data(), c_eager.data());
      want = host_gemm(plain(1.0f, 1.0f), ha, hb, want);
    }
    INFO("N = " << n);
    REQUIRE(get(left) == (n > 0 ? 0 : n));
    REQUIRE(close(graphed, want));
    REQUIRE(bitwise_equal(graphed, c_eager.to_host()));
    if (n == 0) REQUIRE(graphed == hc);
  }
}

TEST_CASE("cublas::Handle: GEMMs in both branches of an IfElse run exactly in the branch the device flag "
          "chooses, across replays",
          "[cublas][conditional][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;
  configure(blas);
  auto a = filled(kSizeA, 5), at = filled(kSizeA, 6), b = filled(kSizeB, 7);
  DeviceBuffer<float> c_then(kSizeC), c_else(kSizeC), eager(kSizeC);
  DeviceBuffer<bool> flag(1);
  Graph g;
  {
    CaptureScope scope(g);
    ConditionalScope<cugraphs::IfElse> branch(scope, flag.data());
    sgemm(blas, plain(), a.data(), b.data(), c_then.data());     // then: A B
    branch.otherwise();
    sgemm(blas, a_transposed(0.5f), at.data(), b.data(), c_else.data());  // else: 0.5 A^T B
  }
  const std::vector<float> poison(kSizeC, kPoison);
  int thens = 0, elses = 0;
  std::uint32_t step = 0;
  for (const bool on_then : {true, false, false, true, false, true}) {
    ++step;
    const auto ha = random_floats(kSizeA, 60 + step), hat = random_floats(kSizeA, 70 + step),
               hb = random_floats(kSizeB, 80 + step);
    a.copy_from_host(ha);
    at.copy_from_host(hat);
    b.copy_from_host(hb);
    put_all(c_then, kPoison);
    put_all(c_else, kPoison);
    put(flag, on_then);
    g.replay();
    const auto got_then = c_then.to_host(), got_else = c_else.to_host();
    INFO("replay " << step << (on_then ? " (then)" : " (else)"));
    if (on_then) {
      ++thens;
      REQUIRE(close(got_then, host_gemm(plain(), ha, hb, {})));
      sgemm(blas, plain(), a.data(), b.data(), eager.data());
      REQUIRE(bitwise_equal(got_then, eager.to_host()));
      REQUIRE(got_else == poison);
    } else {
      ++elses;
      REQUIRE(close(got_else, host_gemm(a_transposed(0.5f), hat, hb, {})));
      sgemm(blas, a_transposed(0.5f), at.data(), b.data(), eager.data());
      REQUIRE(bitwise_equal(got_else, eager.to_host()));
      REQUIRE(got_then == poison);
    }
  }
  CHECK(thens == 3);
  CHECK(elses == 3);
}

TEST_CASE("cublas::Handle: after a capture the handle is back on the current stream, and an eager GEMM is "
          "ordered after that stream's earlier work",
          "[cublas][gpu]") {
  Handle blas;  // made while the legacy default stream is current
  configure(blas);
  const cublasHandle_t raw = blas.get();
  CHECK(stream_of(raw) == cugraphs::current_stream());
  CHECK(blas.stream() == cugraphs::current_stream());
  auto a = filled(kSizeA, 11), b = filled(kSizeB, 12);
  const auto hb = b.to_host();
  DeviceBuffer<float> c(kSizeC), c_eager(kSizeC);

  cugraphs::Stream stream;
  {
    cugraphs::StreamGuard on(stream);
    CHECK(stream_of(raw) == stream.get());  // a StreamGuard moves it too
    Graph g;
    {
      CaptureScope scope(g);
      CHECK(stream_of(raw) == scope.stream());
      sgemm(blas, plain(), a.data(), b.data(), c.data());
    }
    CHECK(cugraphs::current_stream() == stream.get());
    CHECK(stream_of(raw) == cugraphs::current_stream());
    CHECK(stream_of(blas.get()) == cugraphs::current_stream());
    CHECK(blas.stream() == stream.get());

    // A slow kernel on the stream writes A, then the eager GEMM: on any other stream it
    // would read A before the write.
    put_all(c_eager, kPoison);
    slow_fill_kernel<<<1, kThreads, 0, stream>>>(a.data(), kSizeA, 0.25f, 2'000'000);
    cugraphs::check_launch("slow_fill_kernel");
    sgemm(raw, plain(), a.data(), b.data(), c_eager.data());
    const auto eager = c_eager.to_host();
    const auto want = host_gemm(plain(), std::vector<float>(kSizeA, 0.25f), hb, {});
    REQUIRE(close(eager, want));

    put_all(c, kPoison);
    g.replay();
    const auto graphed = c.to_host();
    REQUIRE(close(graphed, want));
    REQUIRE(bitwise_equal(graphed, eager));
  }
  CHECK(stream_of(raw) == cugraphs::current_stream());  // back on the legacy default stream
  CHECK(cugraphs::current_stream() == nullptr);
}

TEST_CASE("cublas::Follow: a user's own handle follows into a While body; raw cublasSgemm calls accumulate "
          "exactly N times, and the handle gets its stream back at the end",
          "[cublas][conditional][gpu]") {
  cublasHandle_t mine = nullptr;
  cugraphs::cublas::check(cublasCreate(&mine), "cublasCreate");
  const std::unique_ptr<cublasContext, decltype(&cublasDestroy)> owner(mine, &cublasDestroy);
  configure(mine);
  const cudaStream_t original = stream_of(mine);

  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto a = filled(kSizeA, 13), b = filled(kSizeB, 14);
  DeviceBuffer<float> c(kSizeC), c_eager(kSizeC);
  DeviceBuffer<int> left(1);
  DeviceBuffer<bool> go_on(1);
  {
    Follow follow(mine);  // outlives the graph, whose GEMM uses its workspace
    CHECK(stream_of(mine) == stream.get());
    Graph g;
    {
      CaptureScope scope(g);
      CHECK(stream_of(mine) == scope.stream());
      ConditionalScope<cugraphs::While> loop(scope, go_on.data());
      CHECK(stream_of(mine) == loop.stream());
      sgemm(mine, plain(1.0f, 1.0f), a.data(), b.data(), c.data());  // the raw handle, no get()
      count_down<<<1, 1, 0, cugraphs::current_stream()>>>(left.data(), go_on.data());
      cugraphs::check_launch("count_down");
    }
    CHECK(stream_of(mine) == stream.get());
    CHECK(follow.workspace_count() == 3);

    for (const int n : {2, 5, 1}) {
      const auto ha = random_floats(kSizeA, 90 + n), hb = random_floats(kSizeB, 100 + n),
                 hc = random_floats(kSizeC, 110 + n);
      a.copy_from_host(ha);
      b.copy_from_host(hb);
      c.copy_from_host(hc);
      put(left, n);
      put(go_on, true);
      g.replay();
      const auto graphed = c.to_host();

      c_eager.copy_from_host(hc);
      auto want = hc;
      for (int i = 0; i < n; ++i) {
        sgemm(mine, plain(1.0f, 1.0f), a.data(), b.data(), c_eager.data());
        want = host_gemm(plain(1.0f, 1.0f), ha, hb, want);
      }
      INFO("N = " << n);
      REQUIRE(get(left) == 0);
      REQUIRE(close(graphed, want));
      REQUIRE(bitwise_equal(graphed, c_eager.to_host()));
    }
  }
  CHECK(stream_of(mine) == original);
}

namespace {

// A linear layer y = W x through a Handle: W is kM x kK (a parameter), x kK x kN, y kM x kN.
// The backward returns dx = W^T dy and writes dW = dy x^T into `dw`.
struct Linear {
  const Handle* blas;
  Out dw;

  [[nodiscard]] DeviceBuffer<float> forward(In x, In w) const {
    DeviceBuffer<float> y(kSizeC);
    sgemm(*blas, plain(), w.data(), x.data(), y.data());
    return y;
  }
  [[nodiscard]] DeviceBuffer<float> backward(In x, In w, Out, In dy) const {
    DeviceBuffer<float> dx(kSizeB);
    sgemm(*blas, dx_gemm(), w.data(), dy.data(), dx.data());
    sgemm(*blas, dw_gemm(), dy.data(), x.data(), dw.data());
    return dx;
  }
  static Gemm dx_gemm() { return {true, false, kK, kN, kM, kM, kM, kK, 1.0f, 0.0f}; }
  static Gemm dw_gemm() { return {false, true, kM, kK, kN, kM, kK, kM, 1.0f, 0.0f}; }
  auto forward_fn() const {
    return [*this](In x, In w) { return forward(x, w); };
  }
  auto backward_fn() const {
    return [*this](In x, In w, Out y, In dy) { return backward(x, w, y, dy); };
  }
};

}  // namespace

TEST_CASE("cublas::Handle: a GraphedPair whose halves do their GEMMs through a Handle gives the host reference "
          "and bitwise the eager results, step after step",
          "[cublas][training][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;  // outlives the pair: its graphs use the Handle's workspaces
  configure(blas);
  auto w = filled(kSizeA, 15);
  DeviceBuffer<float> dw(kSizeA), dw_eager(kSizeA);
  const Linear graphed{&blas, dw.span()}, eager{&blas, dw_eager.span()};
  const auto x0 = filled(kSizeB, 16);
  auto pair = cugraphs::make_graphed_pair(graphed.forward_fn(), graphed.backward_fn(), cugraphs::requires_grad(In(x0)),
                                          cugraphs::param(In(w)));
  CHECK(stream_of(blas.get()) == stream.get());
  const auto hw = w.to_host();

  for (std::uint32_t step = 0; step < 4; ++step) {
    const auto hx = random_floats(kSizeB, 120 + step), hdy = random_floats(kSizeC, 130 + step);
    DeviceBuffer<float> x(kSizeB), dy(kSizeC);
    x.copy_from_host(hx);
    dy.copy_from_host(hdy);
    put_all(dw, kPoison);
    const Out y = pair.forward(In(x));
    const auto y_graphed = host(y);
    const Out dx = pair.backward(In(dy));
    const auto dx_graphed = host(dx), dw_graphed = host(dw.span());

    INFO("step " << step);
    REQUIRE(close(y_graphed, host_gemm(plain(), hw, hx, {})));
    REQUIRE(close(dx_graphed, host_gemm(Linear::dx_gemm(), hw, hdy, {})));
    REQUIRE(close(dw_graphed, host_gemm(Linear::dw_gemm(), hdy, hx, {})));

    put_all(dw_eager, kPoison);
    const auto y_eager = eager.forward(x.span(), w.span());
    const auto dx_eager = eager.backward(x.span(), w.span(), Out(), dy.span());
    REQUIRE(bitwise_equal(y_graphed, host(y_eager.span())));
    REQUIRE(bitwise_equal(dx_graphed, host(dx_eager.span())));
    REQUIRE(bitwise_equal(dw_graphed, host(dw_eager.span())));
  }
  CHECK(pair.forward_calls() == 4);
}

namespace {

// Calls `call`, a graphed callable of `f` made with InputMode::InPlace, on fresh inputs
// (`make(k)`: a pair of device buffers) and checks each result bitwise against the eager
// call and with `reference(k, result)`; both static inputs are left untouched.
template <class Call, class F, class Make, class Reference>
void check_in_place(Call& call, const F& f, const Make& make, const Reference& reference) {
  const auto statics = [&] {
    const auto& [a, b] = call.static_inputs();
    return std::pair{host(a.data(), a.size()), host(b.data(), b.size())};
  };
  const auto before = statics();
  for (std::uint32_t k = 0; k < 4; ++k) {
    const auto [a, b] = make(k);
    const auto graphed = host(call(a.span(), b.span()));
    INFO("call " << k);
    REQUIRE(reference(k, graphed));
    REQUIRE(bitwise_equal(graphed, host(f(a.span(), b.span()).span())));
  }
  CHECK(call.staged_copies() == 0);
  CHECK(statics() == before);  // both, element by element (the inputs hold no NaN)
}

// Random bf16 numbers (the high half of random floats' bits).
DeviceBuffer<std::uint16_t> random_bf16(std::size_t n, std::uint32_t seed) {
  const auto f = random_floats(n, seed);
  std::vector<std::uint16_t> bits(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t w = 0;
    std::memcpy(&w, &f[i], sizeof w);
    bits[i] = static_cast<std::uint16_t>(w >> 16);
  }
  DeviceBuffer<std::uint16_t> d(n);
  d.copy_from_host(bits);
  return d;
}

}  // namespace

TEST_CASE("cublas::Handle: a graphed callable made with InputMode::InPlace rebinds cuBLAS's own kernels to each "
          "call's inputs: bitwise as eager, nothing copied, the static inputs untouched",
          "[cublas][in_place][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;  // outlives the callables: their graphs use its workspaces
  configure(blas);
  cugraphs::GraphedOptions opts;
  opts.inputs = cugraphs::InputMode::InPlace;
  // Made with InPlace, each was refused before cuBLAS's kernels could be rebound ("a kernel
  // this runtime cannot set").
  for (const int n : {0, 256}) {  // the tests' small SGEMM, and a square one
    const Gemm g = n == 0 ? plain() : Gemm{false, false, n, n, n, n, n, n, 1.0f, 0.0f};
    const std::size_t size_a = std::size_t(g.lda) * g.k, size_b = std::size_t(g.ldb) * g.n;
    const std::size_t size_c = std::size_t(g.ldc) * g.n;
    auto f = [&blas, g, size_c](In a, In b) {
      DeviceBuffer<float> c(size_c);
      sgemm(blas, g, a.data(), b.data(), c.data());
      return c;
    };
    const auto a0 = filled(size_a, 1), b0 = filled(size_b, 2);
    auto call = cugraphs::make_graphed_callable(opts, f, In(a0), In(b0));
    INFO("SGEMM " << g.m << " x " << g.n << " x " << g.k);
    check_in_place(
        call, f,
        [&](std::uint32_t k) {
          return std::pair{filled(size_a, 300 + k), filled(size_b, 400 + k)};
        },
        [&](std::uint32_t k, const std::vector<float>& got) {
          return close(got, host_gemm(g, random_floats(size_a, 300 + k), random_floats(size_b, 400 + k), {}));
        });
  }
  // bf16 operands, fp32 output and compute: a trainer's GEMM, for which cuBLAS on Hopper
  // picks tensor-core kernels (reading their operands through tensor maps, where it does).
  constexpr int n = 512;
  constexpr std::size_t size = std::size_t{n} * n;
  using Half = DeviceSpan<const std::uint16_t>;
  auto f = [&blas](Half a, Half b) {
    DeviceBuffer<float> c(size);
    const float one = 1.0f, zero = 0.0f;
    cugraphs::cublas::check(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16BF, n,
                                         b.data(), CUDA_R_16BF, n, &zero, c.data(), CUDA_R_32F, n,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                            "cublasGemmEx");
    return c;
  };
  const auto a0 = random_bf16(size, 1), b0 = random_bf16(size, 2);
  auto call = cugraphs::make_graphed_callable(opts, f, Half(a0), Half(b0));
  const auto first = host(call(Half(a0), Half(b0)));
  check_in_place(
      call, f, [&](std::uint32_t k) { return std::pair{random_bf16(size, 500 + k), random_bf16(size, 600 + k)}; },
      // Fresh inputs give other products than the static inputs' (which a missed address
      // would read).
      [&](std::uint32_t, const std::vector<float>& got) { return !bitwise_equal(got, first); });
}

TEST_CASE("cublas::Handle: a workspace that cannot be allocated when the current stream changes is reported by "
          "the next get(), naming the remedy; the stream was still set, and the handle recovers",
          "[cublas][memory][gpu]") {
  cugraphs::Stream stream, other;
  cugraphs::StreamGuard on(stream);
  constexpr std::size_t kWorkspace = std::size_t{256} << 20;
  Handle blas(HandleOptions{kWorkspace});
  configure(blas);
  const cublasHandle_t raw = blas.get();
  auto a = filled(kSizeA, 17), b = filled(kSizeB, 18);
  const auto ha = a.to_host(), hb = b.to_host();
  DeviceBuffer<float> c(kSizeC);

  // Fill the device in blocks smaller than a workspace: what is left cannot hold one.
  std::vector<void*> filler;
  for (std::size_t block : {std::size_t{4} << 30, kWorkspace / 2}) {
    void* p = nullptr;
    while (cudaMalloc(&p, block) == cudaSuccess) filler.push_back(p);
    (void)cudaGetLastError();
  }
  auto free_filler = [&] {
    for (void* p : filler) cugraphs::check(cudaFree(p), "cudaFree (filler)");
    filler.clear();
  };
  {
    cugraphs::StreamGuard there(other);  // the listener cannot allocate other's workspace
    CHECK(stream_of(raw) == other.get());  // yet the stream is set: no GEMM lands on the old one
    const auto e = expect_error([&] { (void)blas.get(); });
    free_filler();
    CHECK(e.code() == cudaErrorMemoryAllocation);
    CHECK(contains(e.what(), "cublas::Handle::get"));
    CHECK(contains(e.what(), "following the current stream"));
    CHECK(contains(e.what(), "cudaErrorMemoryAllocation"));
    CHECK(contains(e.what(), "HandleOptions::workspace_bytes"));

    // Memory is back: the next get() binds the stream with its workspace.
    CHECK(stream_of(blas.get()) == other.get());
    CHECK(blas.workspace_count() == 2);
    put_all(c, kPoison);
    sgemm(blas, plain(), a.data(), b.data(), c.data());
    REQUIRE(close(c.to_host(), host_gemm(plain(), ha, hb, {})));
  }
  if (!filler.empty()) free_filler();
  CHECK(stream_of(raw) == stream.get());
}

TEST_CASE("cublas::Handle and Follow: two binders of one handle, a null handle, a moved-from Handle and use from "
          "another thread are Errors naming the cause; the handle stays usable",
          "[cublas][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;
  auto e = expect_error([&] { Follow twice(blas.get()); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "cublas::Follow"));
  CHECK(contains(e.what(), "already bound"));
  e = expect_error([&] { Follow none(nullptr); });
  CHECK(contains(e.what(), "null"));

  Handle moved = std::move(blas);
  e = expect_error([&] { (void)blas.get(); });  // NOLINT(bugprone-use-after-move): the point
  CHECK(contains(e.what(), "moved from"));
  CHECK(stream_of(moved.get()) == stream.get());

  CHECK(contains(error_on_another_thread([&] { (void)moved.get(); }), "another thread"));

  cugraphs::Stream next;
  cugraphs::StreamGuard there(next);
  CHECK(stream_of(moved.get()) == next.get());  // the move kept it following
  CHECK(moved.stream() == next.get());
}

// Before: the graph's GEMMs used workspaces the Handle freed when it went.
TEST_CASE("cublas::Handle: a graph keeps the workspaces its capture used: the Handle may go first, the graph "
          "replays exactly, and the memory returns when the graph goes",
          "[cublas][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto a = filled(kSizeA, 7), b = filled(kSizeB, 8);
  DeviceBuffer<float> c(kSizeC);
  const auto ha = a.to_host(), hb = b.to_host();
  auto g = std::make_unique<Graph>();
  const std::size_t start = device_free_bytes();
  {
    Handle blas(HandleOptions{std::size_t{64} << 20});
    configure(blas);
    {
      CaptureScope scope(*g);
      sgemm(blas, plain(), a.data(), b.data(), c.data());
    }
  }  // the Handle goes; the capture stream's workspace stays with the graph
  const std::size_t handle_gone = device_free_bytes();
  CHECK(start - handle_gone >= (std::size_t{64} << 20));  // at least the graph's 64 MiB workspace is still held
  for (int rep = 0; rep < 3; ++rep) {
    put_all(c, kPoison);
    g->replay();
    REQUIRE(close(c.to_host(), host_gemm(plain(), ha, hb, {})));
  }
  g.reset();
  CHECK(device_free_bytes() >= handle_gone + (std::size_t{64} << 20));  // returned with the graph
}

// Before: made without a word; the GEMM ran on the program's stream while f was captured
// and never in a call, so every call returned the same (first) product.
TEST_CASE("cublas: a graphed callable whose f runs its GEMM through a raw handle bound once to a stream of the "
          "program's is an Error naming current_stream(); binding it to current_stream() in f works",
          "[cublas][graphed][gpu]") {
  cugraphs::Stream own;
  cublasHandle_t mine = nullptr;
  cugraphs::cublas::check(cublasCreate(&mine), "cublasCreate");
  configure(mine);
  cugraphs::cublas::check(cublasSetStream(mine, own), "cublasSetStream");  // once, at start-up
  const auto hb = random_floats(kSizeB, 5);
  auto a = filled(kSizeA, 1), b = filled(kSizeB, 2);
  b.copy_from_host(hb);
  bool rebind = false;
  auto forward = [&](In x) {
    if (rebind) cugraphs::cublas::check(cublasSetStream(mine, cugraphs::current_stream()), "cublasSetStream");
    DeviceBuffer<float> c(kSizeC);
    sgemm(mine, plain(), x.data(), b.data(), c.data());
    return c;
  };
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(forward, In(a.span())); });
  CHECK(contains(e.what(), "never reads input leaf 0"));
  CHECK(contains(e.what(), "cublasSetStream(handle, my_stream)"));
  cugraphs::check(cudaStreamSynchronize(own), "cudaStreamSynchronize");
  rebind = true;
  auto call = cugraphs::make_graphed_callable(forward, In(a.span()));
  for (std::uint32_t rep = 0; rep < 2; ++rep) {
    const auto ha = random_floats(kSizeA, 30 + rep);
    auto x = filled(kSizeA, 0);
    x.copy_from_host(ha);
    const auto got = host(call(In(x.span())));
    INFO("call " << rep);
    REQUIRE(close(got, host_gemm(plain(), ha, hb, {})));
  }
  cugraphs::cublas::check(cublasDestroy(mine), "cublasDestroy");
}

// The trap verify_replay exists for: in host pointer mode cuBLAS reads alpha at the call and
// the capture keeps that value, so an optimizer's learning rate changed later is not seen by
// any replay, silently. No check at capture time can tell; the eager step can.
TEST_CASE("verify_replay: a cuBLAS scalar in host pointer mode, changed after the capture, is named; in device "
          "pointer mode, written before each step, the replay follows it",
          "[cublas][verify][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  auto a = filled(kSizeA, 11), b = filled(kSizeB, 12);
  DeviceBuffer<float> c(kSizeC);
  put_all(c, 0.0f);
  Handle blas;
  configure(blas);  // host pointer mode
  float rate = 1.0f;
  const auto host_scalar_step = [&](cudaStream_t) { sgemm(blas, plain(rate, 1.0f), a.data(), b.data(), c.data()); };
  Graph g;
  cugraphs::capture(g, host_scalar_step);
  cugraphs::verify_replay(g, host_scalar_step, c);
  rate = 0.5f;
  const auto e = expect_error([&] { cugraphs::verify_replay(g, host_scalar_step, c); });
  INFO(e.what());
  CHECK(contains(e.what(), "state 0 (3072 x float at "));
  CHECK(contains(e.what(), "cuBLAS scalar in host pointer mode"));

  // The scalars in device memory: each replay reads them where the step reads them.
  Handle device_scalars;
  cugraphs::cublas::check(cublasSetPointerMode(device_scalars, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
  cugraphs::cublas::check(cublasSetMathMode(device_scalars, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  DeviceBuffer<float> alpha(1), beta(1);
  put(alpha, 1.0f);
  put(beta, 1.0f);
  const auto device_scalar_step = [&](cudaStream_t) {
    cugraphs::cublas::check(cublasSgemm(device_scalars, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, alpha.data(), a.data(),
                                        kM, b.data(), kK, beta.data(), c.data(), kM),
                            "cublasSgemm");
  };
  Graph h;
  cugraphs::capture(h, device_scalar_step);
  for (const float r : {1.0f, 0.5f, 0.125f}) {
    put(alpha, r);
    cugraphs::verify_replay(h, device_scalar_step, c);
  }
}

TEST_CASE("cublas::Handle: graphs captured one after the other share no workspace, so replays of them at the same "
          "time on two streams compute every dot product right",
          "[cublas][gpu]") {
  // Two graphs of 64 long dot products each, through one Handle in device pointer mode (the
  // dots' partial sums go through the workspace). Before, both captures used the capture
  // stream's one block, and concurrent replays raced in it (1,833 of 2,560 dots wrong, H100).
  constexpr int n = 1 << 22, dots = 64, rounds = 20;
  cugraphs::Stream s1, s2;
  Handle blas;
  cugraphs::cublas::check(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
  DeviceBuffer<double> a(n), b(n), ra(dots), rb(dots);
  const auto fill = [](DeviceBuffer<double>& x, double v) {
    const std::vector<double> values(x.size(), v);
    x.copy_from_host(values);
  };
  fill(a, 1.0);
  fill(b, 2.0);
  {
    cugraphs::StreamGuard on(s1);  // cuBLAS's first calls, eagerly
    cugraphs::cublas::check(cublasDdot(blas, n, a.data(), 1, a.data(), 1, ra.data()), "cublasDdot");
    s1.synchronize();
  }
  const auto capture = [&](Graph& g, const double* v, double* r) {
    CaptureScope scope(g);
    for (int i = 0; i < dots; ++i)
      cugraphs::cublas::check(cublasDdot(blas, n, v, 1, v, 1, r + i), "cublasDdot");
  };
  Graph ga, gb;
  capture(ga, a.data(), ra.data());
  capture(gb, b.data(), rb.data());
  // The current stream's, s1's, and one on the capture stream for each graph (before: the
  // two graphs shared the capture stream's, 3).
  CHECK(blas.workspace_count() == 4);
  int wrong = 0;
  for (int round = 0; round < rounds; ++round) {
    ga.replay(s1);
    gb.replay(s2);
    const auto ha = ra.to_host(s1), hb = rb.to_host(s2);
    for (int i = 0; i < dots; ++i) wrong += (ha[i] != double(n)) + (hb[i] != 4.0 * n);
  }
  CHECK(wrong == 0);
}

TEST_CASE("cublas::Handle: a graph's recaptures reuse its workspace: capture_or_update many times holds no more "
          "than once, and the graph computes what eager GEMMs do",
          "[cublas][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  Handle blas;
  configure(blas);
  auto a = filled(kSizeA, 5), b = filled(kSizeB, 6);
  DeviceBuffer<float> c(kSizeC), c_eager(kSizeC);
  sgemm(blas, plain(), a.data(), b.data(), c_eager.data());
  const auto step = [&](cudaStream_t) { sgemm(blas, plain(), a.data(), b.data(), c.data()); };
  Graph g;
  (void)g.capture_or_update(step);
  const std::size_t once = blas.workspace_count();
  for (int i = 0; i < 10; ++i) CHECK(g.capture_or_update(step).applied());
  CHECK(blas.workspace_count() == once);  // keyed by capture, each recapture would add a block the graph keeps
  put_all(c, kPoison);
  g.replay();
  CHECK(host(c) == host(c_eager));
}
