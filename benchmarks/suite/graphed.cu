// Graphed callables with 1 to 64 inputs of 4 KiB: host cost per call of
// GraphedCallable::operator() against (a) hand-written staging, one cudaMemcpyAsync
// device-to-device per input and then cudaGraphLaunch, and (b) a bare cudaGraphLaunch of
// the same executable (which, handed its inputs as arguments, stages the last call's again;
// through the ring, stages nothing). Host cost is timed with the stream kept busy; calls back
// to back to completion are timed beside it, with the same callable through the ring
// (PerLaunch::Ring), the same f with its inputs read in place (InputMode::InPlace: no staging
// copy, one node update a call) and f's graph alone (no staging: the floor to completion);
// then, at 16 inputs, the same to completion for f of 1, 10 and 100 kernels.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <array>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cugraphs_bench {
namespace {

constexpr std::size_t kFloats = 1024;  // 4 KiB per input
// Input sets rotated from call to call, so that the copies read fresh addresses as they
// would in a real loop rather than the same lines over and over.
constexpr int kSets = 4;
constexpr int kCallBatch = 16;  // calls a timed batch of the callable and of the bare launch
using In = cugraphs::DeviceSpan<const float>;

template <int N>
struct Pointers {
  const float* p[N];
};

template <int N>
__global__ void sum_inputs(Pointers<N> in, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kFloats) return;
  float s = 0.0f;
  for (int k = 0; k < N; ++k) s += in.p[k][i];
  out[i] = s;
}

__global__ void fill(float* x, std::size_t n, float base) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = base + static_cast<float>(i % 97);
}

struct Figures {
  double graphed, staging, bare, ring, graphed_done, staging_done, bare_done, ring_done, plain_done, same;
  double in_place, in_place_done;
};

// kSets sets of N inputs of kFloats each, filled and ready (the warm-up calls run on the
// capture stream: the inputs must be ready before), held by `storage`.
template <int N>
std::array<std::array<In, N>, kSets> input_sets(std::vector<cugraphs::DeviceBuffer<float>>& storage,
                                                cudaStream_t stream) {
  std::array<std::array<In, N>, kSets> sets{};
  for (int s = 0; s < kSets; ++s) {
    for (int k = 0; k < N; ++k) {
      storage.emplace_back(kFloats);
      fill<<<(kFloats + 255) / 256, 256, 0, stream>>>(storage.back().data(), kFloats, static_cast<float>(s * N + k));
      sets[s][k] = storage.back();
    }
  }
  cugraphs::check_launch("fill inputs");
  cugraphs::check(cudaStreamSynchronize(stream), "sync");
  return sets;
}

// f: `kernels` kernels, each summing the N inputs into `out`.
template <int N>
auto summing(cugraphs::DeviceSpan<float> out, int kernels) {
  return [out, kernels](const std::array<In, N>& xs) {
    Pointers<N> p{};
    for (int k = 0; k < N; ++k) p.p[k] = xs[k].data();
    for (int k = 0; k < kernels; ++k)
      sum_inputs<N><<<(kFloats + 255) / 256, 256, 0, cugraphs::current_stream()>>>(p, out.data());
  };
}

template <int N>
Figures run(HostTimer& timer, cudaStream_t stream) {
  cugraphs::DeviceBuffer<float> out(kFloats);
  std::vector<cugraphs::DeviceBuffer<float>> storage;
  const auto sets = input_sets<N>(storage, stream);
  auto f = summing<N>(out.span(), 1);
  auto g = cugraphs::make_graphed_callable(f, sets[0]);  // PerLaunch::Auto
  cugraphs::GraphedOptions through_ring;
  through_ring.per_launch = cugraphs::PerLaunch::Ring;
  auto gr = cugraphs::make_graphed_callable(through_ring, f, sets[0]);
  cugraphs::GraphedOptions read_in_place;
  read_in_place.inputs = cugraphs::InputMode::InPlace;
  auto gi = cugraphs::make_graphed_callable(read_in_place, f, sets[0]);
  const cudaGraphExec_t exec = g.graph().native_exec();
  const auto& statics = std::get<0>(g.static_inputs());
  // f alone on the static inputs, staging nothing: the floor a call can reach to completion.
  cugraphs::Graph plain;
  cugraphs::capture(plain, [&](cudaStream_t) { f(statics); });

  int turn = 0;
  auto next = [&]() -> const std::array<In, N>& { return sets[turn++ % kSets]; };
  auto bare = [&] { cugraphs::check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); };
  auto staging = [&] {
    const auto& in = next();
    for (int k = 0; k < N; ++k)
      cugraphs::check(cudaMemcpyAsync(const_cast<float*>(statics[k].data()), in[k].data(), in[k].size_bytes(),
                                      cudaMemcpyDeviceToDevice, stream),
                      "cudaMemcpyAsync");
    cugraphs::check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  };
  auto graphed = [&] { (void)g(stream, next()); };
  auto ring = [&] { (void)gr(stream, next()); };
  auto in_place = [&] { (void)gi(stream, next()); };
  // The same inputs at every call (a loop that refills its buffers): the staging copy's
  // arguments stay as they are, and the call costs no node update.
  auto same = [&] { (void)g(stream, sets[0]); };

  // The callable and the bare launch run in batches of 16 at every size, so that their
  // ratio compares like with like (the first call of a batch costs more than the rest).
  // Hand-written staging stays under 256 queued copies a batch, so that no call waits for
  // a full device queue: batches of 16 up to 16 inputs, then smaller (which adds under 1%
  // to its cost at 64 inputs).
  const int staging_batch = std::clamp(256 / N, 4, kCallBatch);
  const auto m =
      timer.medians({graphed, staging, bare, ring, same, in_place},
                    {kCallBatch, staging_batch, kCallBatch, kCallBatch, kCallBatch, kCallBatch}, reps(40));

  const double gd = to_done(graphed, stream), sd = to_done(staging, stream), bd = to_done(bare, stream);
  const double rd = to_done(ring, stream), pd = to_done([&] { plain.replay(stream); }, stream);
  const double id = to_done(in_place, stream);
  if (gi.staged_copies() != 0) throw std::runtime_error("graphed callable: the in-place callable copied its inputs");
  // Every call copied each input (none aliases a static buffer).
  if (g.staged_copies() != g.calls() * N) throw std::runtime_error("graphed callable: unexpected staged copy count");
  return {m[0], m[1], m[2], m[3], gd, sd, bd, rd, pd, m[4], m[5], id};
}

// Issue 29 across graph sizes: f of `kernels` kernels, each reading the 16 inputs (so an
// in-place call sets that many nodes). Calls back to back to completion: the copying call,
// the in-place call and f's graph alone.
struct SizeFigures {
  double copying_done, in_place_done, plain_done;
};
SizeFigures run_size(int kernels, cudaStream_t stream) {
  constexpr int N = 16;
  cugraphs::DeviceBuffer<float> out(kFloats);
  std::vector<cugraphs::DeviceBuffer<float>> storage;
  const auto sets = input_sets<N>(storage, stream);
  auto f = summing<N>(out.span(), kernels);
  auto g = cugraphs::make_graphed_callable(f, sets[0]);
  cugraphs::GraphedOptions read_in_place;
  read_in_place.inputs = cugraphs::InputMode::InPlace;
  auto gi = cugraphs::make_graphed_callable(read_in_place, f, sets[0]);
  cugraphs::Graph plain;
  cugraphs::capture(plain, [&](cudaStream_t) { f(std::get<0>(g.static_inputs())); });
  int turn = 0;
  auto next = [&]() -> const std::array<In, N>& { return sets[turn++ % kSets]; };
  const double copying = to_done([&] { (void)g(stream, next()); }, stream);
  const double in_place = to_done([&] { (void)gi(stream, next()); }, stream);
  const double alone = to_done([&] { plain.replay(stream); }, stream);
  if (gi.staged_copies() != 0) throw std::runtime_error("graphed callable: the in-place callable copied its inputs");
  return {copying, in_place, alone};
}

}  // namespace

void graphed_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  HostTimer timer(stream);
  std::printf("\n== graphed callable, host cost per call (inputs of 4 KiB): operator() vs N x cudaMemcpyAsync + "
              "launch vs bare launch\n");
  std::printf("%6s %12s %12s %12s %10s %10s %8s %8s | to done: %s\n", "inputs", "callable", "staging", "bare",
              "vs bare", "vs staging", "goals", "", "callable / staging / bare");
  std::vector<double> inputs, graphed, staging, bare, graphed_done, staging_done, bare_done, ring, ring_done, plain_done,
      same, in_place, in_place_done;
  auto one = [&](auto tag) {
    constexpr int n = decltype(tag)::value;
    const Figures f = run<n>(timer, stream);
    const double vs_bare = f.graphed / f.bare, vs_staging = f.graphed / f.staging;
    std::string verdicts;
    // The goals are stated at 16 inputs; the ratio to a bare launch is checked at every size.
    verdicts += report.goal({"graphed", "call_vs_bare",
                             fmt::format("call / bare launch host cost, {} input{}", n, n == 1 ? "" : "s"),
                             "inputs", n},
                            vs_bare, "<=", 1.3);
    if (n == 16) {
      verdicts += " ";
      verdicts += report.goal(
          {"graphed", "call_vs_staging", "call / hand-written staging host cost, 16 inputs", "inputs", n}, vs_staging,
          "<=", 0.1);
      // Issue 29: the call to completion, against f's graph alone (no staging at all).
      verdicts += " ";
      verdicts += report.goal(
          {"graphed", "call_done_vs_plain_done", "call / f's graph alone, to completion, 16 inputs", "inputs", n},
          f.graphed_done / f.plain_done, "<=", 1.15);
      // The same f with its inputs read in place: no staging copy at all.
      verdicts += " ";
      verdicts += report.goal({"graphed", "in_place_done_vs_plain_done",
                               "in-place call / f's graph alone, to completion, 16 inputs", "inputs", n},
                              f.in_place_done / f.plain_done, "<=", 1.15);
      verdicts += " ";
      verdicts += report.goal(
          {"graphed", "in_place_vs_bare", "in-place call / bare launch host cost, 16 inputs", "inputs", n},
          f.in_place / f.bare, "<=", 1.3);
      report.torch_goal({"graphed", "torch_call_vs_call",
                         "PyTorch make_graphed_callables call / GraphedCallable call, 16 inputs", "inputs", n},
                        "torch_graphed_us", "graphed_us", ">=", 50.0);
    }
    std::printf("%6d %9.2f us %9.2f us %9.2f us %10.3f %10.3f %8s %8s | %.2f / %.2f / %.2f us; ring %.2f us "
                "(host %.2f), in place %.2f us (host %.2f, %.3f x bare), f alone %.2f us; same inputs: host %.2f us "
                "(%.3f x bare)\n",
                n, f.graphed, f.staging, f.bare, vs_bare, vs_staging, n == 16 ? "1.3,.1,1.15" : "<= 1.3",
                verdicts.c_str(), f.graphed_done, f.staging_done, f.bare_done, f.ring_done, f.ring, f.in_place_done,
                f.in_place, f.in_place / f.bare, f.plain_done, f.same, f.same / f.bare);
    inputs.push_back(n);
    graphed.push_back(f.graphed);
    staging.push_back(f.staging);
    bare.push_back(f.bare);
    graphed_done.push_back(f.graphed_done);
    staging_done.push_back(f.staging_done);
    bare_done.push_back(f.bare_done);
    ring.push_back(f.ring);
    ring_done.push_back(f.ring_done);
    plain_done.push_back(f.plain_done);
    same.push_back(f.same);
    in_place.push_back(f.in_place);
    in_place_done.push_back(f.in_place_done);
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(std::integral_constant<int, kInputCounts[I]>{}), ...);
  }(std::make_index_sequence<kInputCounts.size()>{});
  std::printf("\n16 inputs, f of 1, 10 and 100 kernels each reading them, to completion: copying call / in-place "
              "call / f's graph alone\n");
  std::vector<double> sizes, size_copying, size_in_place, size_plain;
  for (const int kernels : {1, 10, 100}) {
    const SizeFigures z = run_size(kernels, stream);
    std::string verdicts = report.goal({"graphed", "size_copying_done_vs_plain_done",
                                        fmt::format("call / f's graph alone, to completion, 16 inputs, {} kernel{}",
                                                    kernels, kernels == 1 ? "" : "s"),
                                        "kernels", kernels},
                                       z.copying_done / z.plain_done, "<=", 1.15);
    verdicts += " ";
    verdicts += report.goal({"graphed", "size_in_place_done_vs_plain_done",
                             fmt::format("in-place call / f's graph alone, to completion, 16 inputs, {} kernel{}",
                                         kernels, kernels == 1 ? "" : "s"),
                             "kernels", kernels},
                            z.in_place_done / z.plain_done, "<=", 1.15);
    std::printf("%4d kernel%s  %9.2f / %9.2f / %9.2f us   copying %.3f, in place %.3f of alone  %s\n", kernels,
                kernels == 1 ? " " : "s", z.copying_done, z.in_place_done, z.plain_done, z.copying_done / z.plain_done,
                z.in_place_done / z.plain_done, verdicts.c_str());
    sizes.push_back(kernels);
    size_copying.push_back(z.copying_done);
    size_in_place.push_back(z.in_place_done);
    size_plain.push_back(z.plain_done);
  }
  timer.note_uncovered();
  Json& sec = report.section("graphed");
  sec["sizes_kernels"] = sizes;  // f of that many kernels, 16 inputs: to completion
  sec["size_copying_done_us"] = size_copying;
  sec["size_in_place_done_us"] = size_in_place;
  sec["size_plain_done_us"] = size_plain;
  sec["inputs"] = inputs;
  sec["graphed_us"] = graphed;
  sec["staging_us"] = staging;
  sec["bare_us"] = bare;
  sec["graphed_done_us"] = graphed_done;
  sec["staging_done_us"] = staging_done;
  sec["bare_done_us"] = bare_done;
  sec["ring_us"] = ring;  // the same callable with PerLaunch::Ring
  sec["ring_done_us"] = ring_done;
  sec["plain_done_us"] = plain_done;  // f's graph alone
  sec["same_inputs_us"] = same;       // the callable called with the same inputs every time
  sec["in_place_us"] = in_place;      // the same f, InputMode::InPlace
  sec["in_place_done_us"] = in_place_done;
  sec["uncovered_batches"] = timer.uncovered();
}

}  // namespace cugraphs_bench
