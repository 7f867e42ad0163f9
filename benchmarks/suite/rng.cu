// Replays of a graph whose kernel draws random numbers through a Generator against the same
// graph drawing from fixed arguments: host cost with the stream kept busy, and back-to-back
// replays to completion, for the default (PerLaunch::Auto, which hands a graph of one drawing
// kernel its offsets as kernel arguments), for PerLaunch::Advance and for PerLaunch::Ring.
// Then graphs of 1, 10 and 100 small drawing kernels, to completion and host cost, five ways:
// fixed arguments (no fresh numbers: the floor), the library through the ring, the library with
// offsets as kernel arguments (PerLaunch::Parameters), the same done by hand in raw CUDA
// (cudaGraphExecKernelNodeSetParams of every drawing node before each cudaGraphLaunch), which
// the library's figure should match, and the library advancing the offsets on the device.
// Last, a graphed callable that both stages 16 inputs and draws, both ways, against f's graph
// alone. Each way draws from a generator of its own (same seed): the ways are timed in
// interleaved batches, and a generator that another graph advanced in between would make an
// Advance replay set its words first (one more kernel on the stream), which a loop replaying
// one graph never pays.
#include "suite.hpp"

#include <cugraphs/graph.hpp>

#include <curand_kernel.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace cugraphs_bench {
namespace {

__global__ void uniforms(float* out, unsigned n, cugraphs::PhiloxArgs args) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  out[i] = curand_uniform(&state);
}

const char* per_launch_name(cugraphs::PerLaunch p) {
  switch (p) {
    case cugraphs::PerLaunch::Parameters: return "parameters";
    case cugraphs::PerLaunch::Ring: return "ring";
    case cugraphs::PerLaunch::Advance: return "advance";
    case cugraphs::PerLaunch::Auto: break;
  }
  return "none";
}

// Graphs of `kernels` small drawing kernels, five ways (see the header).
void rng_sweep(Report& report, cudaStream_t stream) {
  constexpr unsigned n = 1u << 14;  // small kernels: the latency-bound case
  std::printf("\n== RNG sweep: graphs of small drawing kernels, fixed args / ring / args (library) / args (raw) / "
              "advance\n");
  std::printf("%-8s %11s %11s %11s %11s %11s %9s %9s %9s | %9s %9s %9s %9s %9s\n", "kernels", "fixed done", "ring done",
              "args done", "raw done", "adv done", "ring/fix", "args/fix", "adv/fix", "fix host", "ring host",
              "args host", "raw host", "adv host");
  for (const int kernels : {1, 10, 100}) {
    cugraphs::DeviceBuffer<float> out(n * static_cast<std::size_t>(kernels));
    cugraphs::Graph fixed, ring, args, params, advance;
    cugraphs::Generator ring_gen(1), args_gen(1), advance_gen(1);
    auto capture_with = [&](cugraphs::Graph& g, cugraphs::Generator* gen, cugraphs::PerLaunch per_launch) {
      cugraphs::CaptureOptions opts;
      opts.per_launch = per_launch;
      cugraphs::capture(
          g,
          [&](cudaStream_t s) {
            for (int k = 0; k < kernels; ++k)
              uniforms<<<n / 256, 256, 0, s>>>(
                  out.data() + k * std::size_t{n}, n,
                  gen != nullptr ? gen->philox(4) : cugraphs::PhiloxArgs{1, 4u * k, nullptr});
          },
          opts);
    };
    capture_with(fixed, nullptr, cugraphs::PerLaunch::Auto);
    capture_with(ring, &ring_gen, cugraphs::PerLaunch::Ring);
    capture_with(args, &args_gen, cugraphs::PerLaunch::Parameters);
    capture_with(params, nullptr, cugraphs::PerLaunch::Auto);
    capture_with(advance, &advance_gen, cugraphs::PerLaunch::Advance);
    cugraphs::check_launch("uniforms");
    // The alternative: before each launch, every drawing node gets this launch's (seed,
    // offset) by value (cudaGraphExecKernelNodeSetParams applies to later launches only).
    std::vector<cudaGraphNode_t> nodes(static_cast<std::size_t>(kernels));
    std::size_t count = nodes.size();
    cugraphs::check(cudaGraphGetNodes(params.native_graph(), nodes.data(), &count), "cudaGraphGetNodes");
    std::uint64_t offset = 0;
    auto params_launch = [&] {
      for (std::size_t k = 0; k < count; ++k) {
        float* dst = out.data() + k * std::size_t{n};
        unsigned size = n;
        cugraphs::PhiloxArgs args{7, offset + 4 * k, nullptr};
        void* values[] = {&dst, &size, &args};
        cudaKernelNodeParams p{};
        p.func = reinterpret_cast<void*>(&uniforms);
        p.gridDim = dim3(n / 256);
        p.blockDim = dim3(256);
        p.kernelParams = values;
        cugraphs::check(cudaGraphExecKernelNodeSetParams(params.native_exec(), nodes[k], &p), "SetParams");
      }
      offset += 4 * count;
      cugraphs::check(cudaGraphLaunch(params.native_exec(), stream), "cudaGraphLaunch");
    };
    const double fd = to_done([&] { fixed.replay(); }, stream);
    const double rd = to_done([&] { ring.replay(); }, stream);
    const double ad = to_done([&] { args.replay(); }, stream);
    const double pd = to_done(params_launch, stream);
    const double vd = to_done([&] { advance.replay(); }, stream);
    HostTimer timer(stream);
    const auto h = timer.medians({[&] { fixed.replay(); }, [&] { ring.replay(); }, [&] { args.replay(); },
                                  params_launch, [&] { advance.replay(); }},
                                 16, reps(40), 3);
    std::printf("%-8d %8.2f us %8.2f us %8.2f us %8.2f us %8.2f us %9.3f %9.3f %9.3f | %6.2f us %6.2f us %6.2f us "
                "%6.2f us %6.2f us\n",
                kernels, fd, rd, ad, pd, vd, rd / fd, ad / fd, vd / fd, h[0], h[1], h[2], h[3], h[4]);
    Json& row = report.section("rng_sweep")[std::to_string(kernels)];
    const char* ways[] = {"fixed", "ring", "args", "params", "advance"};
    const double done[] = {fd, rd, ad, pd, vd};
    for (int w = 0; w < 5; ++w) {
      row[std::string(ways[w]) + "_done_us"] = done[w];
      row[std::string(ways[w]) + "_host_us"] = h[static_cast<std::size_t>(w)];
    }
  }
}

// A graphed callable that both stages and draws: 16 inputs of 4 KiB, one kernel that sums
// them and adds a uniform. Calls to completion and host cost with PerLaunch::Auto (values as
// arguments) and PerLaunch::Ring, against f's graph alone with fixed Philox arguments.
constexpr int kStagedInputs = 16;
constexpr unsigned kStagedFloats = 1024;
using In = cugraphs::DeviceSpan<const float>;
struct StagedPointers {
  const float* p[kStagedInputs];
};

__global__ void sum_plus_uniform(StagedPointers in, float* out, cugraphs::PhiloxArgs args) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kStagedFloats) return;
  const auto [seed, offset] = cugraphs::rng::unpack(args);
  curandStatePhilox4_32_10_t state;
  curand_init(seed, i, offset, &state);
  float s = curand_uniform(&state);
  for (int k = 0; k < kStagedInputs; ++k) s += in.p[k][i];
  out[i] = s;
}

void rng_staged(Report& report, cudaStream_t stream, cugraphs::Generator& gen) {
  cugraphs::DeviceBuffer<float> out(kStagedFloats);
  std::vector<cugraphs::DeviceBuffer<float>> storage;
  std::array<std::array<In, kStagedInputs>, 2> sets{};
  for (auto& set : sets)
    for (auto& leaf : set) {
      storage.emplace_back(kStagedFloats);
      cugraphs::check(cudaMemsetAsync(storage.back().data(), 0, storage.back().bytes(), stream), "cudaMemsetAsync");
      leaf = storage.back();
    }
  cugraphs::check(cudaStreamSynchronize(stream), "sync");
  auto f = [&](bool fresh) {
    return [&, fresh](const std::array<In, kStagedInputs>& xs) {
      StagedPointers p{};
      for (int k = 0; k < kStagedInputs; ++k) p.p[k] = xs[k].data();
      sum_plus_uniform<<<kStagedFloats / 256, 256, 0, cugraphs::current_stream()>>>(
          p, out.data(), fresh ? gen.philox(4) : cugraphs::PhiloxArgs{1, 0, nullptr});
    };
  };
  auto by_args = cugraphs::make_graphed_callable(f(true), sets[0]);
  cugraphs::GraphedOptions through_ring;
  through_ring.per_launch = cugraphs::PerLaunch::Ring;
  auto by_ring = cugraphs::make_graphed_callable(through_ring, f(true), sets[0]);
  cugraphs::GraphedOptions read_in_place;
  read_in_place.inputs = cugraphs::InputMode::InPlace;
  auto in_place = cugraphs::make_graphed_callable(read_in_place, f(true), sets[0]);
  cugraphs::Graph plain;
  cugraphs::capture(plain, [&](cudaStream_t) { f(false)(std::get<0>(by_args.static_inputs())); });
  cugraphs::check_launch("sum_plus_uniform");
  int turn = 0;
  auto call_args = [&] { (void)by_args(stream, sets[turn++ % 2]); };
  auto call_ring = [&] { (void)by_ring(stream, sets[turn++ % 2]); };
  auto call_in_place = [&] { (void)in_place(stream, sets[turn++ % 2]); };
  auto replay_plain = [&] { plain.replay(stream); };
  const double ad = to_done(call_args, stream), rd = to_done(call_ring, stream), pd = to_done(replay_plain, stream);
  const double id = to_done(call_in_place, stream);
  HostTimer timer(stream);
  const auto h = timer.medians({call_args, call_ring, replay_plain, call_in_place}, 16, reps(40), 3);
  if (in_place.staged_copies() != 0) throw std::runtime_error("rng: the in-place callable copied its inputs");
  const std::string v = report.goal({"rng", "staged_rng_done_vs_plain", "16-input call that draws / f's graph alone, "
                                                                       "to completion"},
                                    ad / pd, "<=", 1.15);
  const std::string vi = report.goal({"rng", "in_place_rng_done_vs_plain",
                                      "16-input call that draws, inputs in place / f's graph alone, to completion"},
                                     id / pd, "<=", 1.15);
  std::printf("\n== RNG and staging in one call: 16 inputs of 4 KiB and one drawing kernel (%s)\n",
              by_args.graph().per_launch() == cugraphs::PerLaunch::Parameters ? "values as arguments" : "ring");
  std::printf("%-22s %12s %12s %12s | %10s %10s %10s\n", "", "args done", "ring done", "alone done", "args host",
              "ring host", "alone host");
  std::printf("%-22s %9.2f us %9.2f us %9.2f us | %7.2f us %7.2f us %7.2f us  args/alone %.3f (<= 1.15) %s\n",
              "per call", ad, rd, pd, h[0], h[1], h[2], ad / pd, v.c_str());
  std::printf("%-22s done %.2f us, host %.2f us: done / alone %.3f (<= 1.15) %s, host / alone %.3f\n",
              "inputs in place", id, h[3], id / pd, vi.c_str(), h[3] / h[2]);
  Json& sec = report.section("rng_staged");
  const char* ways[] = {"args", "ring", "plain", "in_place"};
  const double done[] = {ad, rd, pd, id};
  for (int w = 0; w < 4; ++w) {
    sec[std::string(ways[w]) + "_done_us"] = done[w];
    sec[std::string(ways[w]) + "_host_us"] = h[static_cast<std::size_t>(w)];
  }
}

}  // namespace

void rng_section(Report& report, cudaStream_t stream) {
  cugraphs::StreamGuard on(stream);
  constexpr unsigned n = 1u << 20;
  cugraphs::DeviceBuffer<float> out(n);
  cugraphs::Generator gen(1), ring_gen(1), advance_gen(1);
  cugraphs::Graph with_rng, with_ring, with_advance, without_rng;
  auto drawing = [&](cugraphs::Generator& from) {
    return [&](cudaStream_t s) { uniforms<<<n / 256, 256, 0, s>>>(out.data(), n, from.philox(1)); };
  };
  cugraphs::capture(with_rng, drawing(gen));
  cugraphs::CaptureOptions ring_opts, advance_opts;
  ring_opts.per_launch = cugraphs::PerLaunch::Ring;
  advance_opts.per_launch = cugraphs::PerLaunch::Advance;
  cugraphs::capture(with_ring, drawing(ring_gen), ring_opts);
  cugraphs::capture(with_advance, drawing(advance_gen), advance_opts);
  cugraphs::capture(without_rng, [&](cudaStream_t s) {
    uniforms<<<n / 256, 256, 0, s>>>(out.data(), n, cugraphs::PhiloxArgs{1, 0, nullptr});
  });
  cugraphs::check_launch("uniforms");
  HostTimer timer(stream);
  const auto m = timer.medians({[&] { with_rng.replay(); }, [&] { without_rng.replay(); }, [&] { with_ring.replay(); },
                                [&] { with_advance.replay(); }},
                               32, reps(80), 5);
  auto done = [&](cugraphs::Graph& g) {
    std::vector<double> v;
    for (int r = 0; r < reps(9) + 1; ++r) {
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      const auto t0 = Clock::now();
      for (int i = 0; i < 100; ++i) g.replay();
      cugraphs::check(cudaStreamSynchronize(stream), "sync");
      if (r > 0) v.push_back(us_since(t0) / 100);
    }
    return median(v);
  };
  const double dw = done(with_rng), dn = done(without_rng), dr = done(with_ring), da = done(with_advance);
  const double ratio = m[0] / m[1];
  const std::string v = report.goal({"rng", "rng_vs_fixed", "replay host cost with RNG / without"}, ratio, "<=", 1.1);
  // Issue 29: the replay to completion.
  const std::string vd =
      report.goal({"rng", "rng_done_vs_fixed", "replay to completion with RNG / without"}, dw / dn, "<=", 1.1);
  std::printf("\n== RNG: replay of a graph drawing 1M uniforms through a Generator vs fixed Philox arguments\n");
  std::printf("%-26s %14s %14s %8s %8s\n", "", "with RNG", "without", "ratio", "goal");
  std::printf("%-26s %11.3f us %11.3f us %8.3f %8s %s\n", "host cost per replay", m[0], m[1], ratio, "<= 1.1", v.c_str());
  std::printf("%-26s %11.2f us %11.2f us %8.3f %8s %s\n", "to done, back to back", dw, dn, dw / dn, "<= 1.1",
              vd.c_str());
  std::printf("(with RNG: PerLaunch::Auto, which chose %s)\n", per_launch_name(with_rng.per_launch()));
  std::printf("%-26s %11.3f us host, %.2f us to done (%.3f, %.3f of without)\n", "the same, PerLaunch::Ring", m[2],
              dr, m[2] / m[1], dr / dn);
  std::printf("%-26s %11.3f us host, %.2f us to done (%.3f, %.3f of without)\n", "the same, Advance", m[3], da,
              m[3] / m[1], da / dn);
  timer.note_uncovered();
  {
    Json& sec = report.section("rng");
    sec["with_rng_us"] = m[0];
    sec["without_rng_us"] = m[1];
    sec["with_rng_done_us"] = dw;
    sec["without_rng_done_us"] = dn;
    sec["ring_us"] = m[2];
    sec["ring_done_us"] = dr;
    sec["advance_us"] = m[3];
    sec["advance_done_us"] = da;
    sec["per_launch"] = per_launch_name(with_rng.per_launch());
    sec["uncovered_batches"] = timer.uncovered();
  }
  rng_sweep(report, stream);
  rng_staged(report, stream, gen);
}

}  // namespace cugraphs_bench
