// engine: the frame loop of a small simulation engine, as a game or simulation engine would
// embed cugraphs. This file is host code, compiled by the host compiler alone and without
// exceptions; the kernels live in sim.cu. Each frame applies the player's input (a scripted
// attractor) with random forcing, then takes as many substeps as the particles' speed
// needs, a number only the device knows. Eagerly that loop asks the device after every
// substep; graphed, a frame is two launches: a GraphedCallable (input staged, fresh random
// numbers from a Generator every call) and a graph whose While node runs the substeps.
// Both runs start alike and must agree bit for bit; then their frame times are compared.
#include "sim.hpp"

#include <cugraphs/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Controls = cugraphs::DeviceSpan<const float>;
constexpr int kParticles = 16384;
constexpr int kFrames = 600;
constexpr std::uint64_t kSeed = 2026;

// An engine reports fatal errors its own way: built without exceptions, cugraphs hands
// every failure to this handler, which must not return.
void fatal(const cugraphs::Error& e) noexcept {
  std::fprintf(stderr, "engine: fatal: %s (CUDA error %d)\n", e.what(), static_cast<int>(e.code()));
  std::fflush(stderr);
  std::_Exit(2);
}

// The particles of one run and their frame state, in device memory.
struct World {
  cugraphs::DeviceBuffer<float> x{kParticles}, y{kParticles}, vx{kParticles}, vy{kParticles};
  cugraphs::DeviceBuffer<sim::FrameState> state{1};

  [[nodiscard]] sim::Particles particles() { return {x.data(), y.data(), vx.data(), vy.data(), kParticles}; }

  // The same start for every run: particles spread over the box, at rest.
  void reset() {
    std::vector<float> px(kParticles), py(kParticles);
    std::uint32_t h = 12345;
    auto next = [&h] {
      h = h * 1664525u + 1013904223u;
      return static_cast<float>(h >> 8) / 16777216.0f;
    };
    for (int i = 0; i < kParticles; ++i) {
      px[static_cast<std::size_t>(i)] = next();
      py[static_cast<std::size_t>(i)] = next();
    }
    x.copy_from_host(px);
    y.copy_from_host(py);
    vx.copy_from_host(std::vector<float>(kParticles, 0.0f));
    vy.copy_from_host(std::vector<float>(kParticles, 0.0f));
    state.copy_from_host(std::vector<sim::FrameState>(1, sim::FrameState{}));
  }
};

// The player's input for every frame, recorded ahead: an attractor circling the box, its
// pull changing with the frame.
std::vector<float> scripted_input() {
  std::vector<float> controls;
  for (int f = 0; f < kFrames; ++f) {
    const float a = 0.02f * static_cast<float>(f);
    controls.push_back(0.5f + 0.3f * std::cos(a));
    controls.push_back(0.5f + 0.3f * std::sin(a));
    controls.push_back(f % 120 < 60 ? 0.02f : 0.002f);
  }
  return controls;
}

struct Record {
  std::vector<double> frame_us;
  std::vector<unsigned> substeps;
};

// Runs every frame with `frame`, timed from its first launch to its completion, and keeps
// each frame's substep count (read afterwards, outside the timing).
template <class Frame>
Record run(World& world, const cugraphs::DeviceBuffer<float>& script, cudaStream_t s, Frame&& frame) {
  Record r;
  for (int f = 0; f < kFrames; ++f) {
    const Controls controls(script.data() + 3 * f, 3);
    const auto t0 = Clock::now();
    frame(controls);
    cugraphs::check(cudaStreamSynchronize(s), "frame");
    r.frame_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    sim::FrameState st{};
    cugraphs::check(cudaMemcpyAsync(&st, world.state.data(), sizeof st, cudaMemcpyDeviceToHost, s), "read state");
    cugraphs::check(cudaStreamSynchronize(s), "read state");
    r.substeps.push_back(st.substeps);
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool same_bits(const cugraphs::DeviceBuffer<float>& a, const cugraphs::DeviceBuffer<float>& b) {
  const auto ha = a.to_host(), hb = b.to_host();
  return std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(float)) == 0;
}

}  // namespace

int main() {
  (void)cugraphs::set_error_handler(&fatal);  // used when built without exceptions, as here
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("engine: no CUDA device found; this example steps particles on a GPU");
    return 1;
  }
  const sim::Config config;
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  cugraphs::DeviceBuffer<float> script(3 * kFrames);
  script.copy_from_host(scripted_input());
  World graphed_world, eager_world;
  graphed_world.reset();
  cugraphs::Generator gen(kSeed), eager_gen(kSeed);

  // Graphed: the input step as a GraphedCallable (its warm-up runs it three times, so the
  // world and the generator are set again after), the substeps as a While graph.
  auto input_step = cugraphs::make_graphed_callable(
      [&](Controls controls) {
        const cudaStream_t s = cugraphs::current_stream();
        sim::launch_begin_frame(graphed_world.state.data(), s);
        sim::launch_forces(graphed_world.particles(), controls.data(), gen.philox(4), graphed_world.state.data(),
                           config, s);
      },
      Controls(script.data(), 3));
  cugraphs::Graph substeps;
  {
    cugraphs::CaptureScope scope(substeps);
    cugraphs::ConditionalScope<cugraphs::While> loop(scope, sim::more_flag(graphed_world.state.data()));
    sim::launch_plan(graphed_world.state.data(), config, loop.stream());
    sim::launch_substep(graphed_world.particles(), graphed_world.state.data(), loop.stream());
    sim::launch_check(graphed_world.state.data(), config, loop.stream());
  }
  graphed_world.reset();
  eager_world.reset();
  gen.manual_seed(kSeed);

  const Record graphed = run(graphed_world, script, stream, [&](Controls controls) {
    (void)input_step(controls);
    substeps.replay();
  });

  // Eager: the same kernels launched one by one; after each substep the host reads the
  // flag back to decide whether to go on.
  void* pinned = nullptr;  // the flag's copy on the host
  cugraphs::check(cudaMallocHost(&pinned, sizeof(bool)), "cudaMallocHost");
  bool* more = static_cast<bool*>(pinned);
  const Record eager = run(eager_world, script, stream, [&](Controls controls) {
    sim::FrameState* st = eager_world.state.data();
    sim::launch_begin_frame(st, stream);
    sim::launch_forces(eager_world.particles(), controls.data(), eager_gen.philox(4), st, config, stream);
    do {
      sim::launch_plan(st, config, stream);
      sim::launch_substep(eager_world.particles(), st, stream);
      sim::launch_check(st, config, stream);
      cugraphs::check(cudaMemcpyAsync(more, sim::more_flag(st), sizeof(bool), cudaMemcpyDeviceToHost, stream),
                      "read the loop flag");
      cugraphs::check(cudaStreamSynchronize(stream), "read the loop flag");
    } while (*more);
  });
  cugraphs::check(cudaFreeHost(pinned), "cudaFreeHost");

  const bool same_state = same_bits(graphed_world.x, eager_world.x) && same_bits(graphed_world.y, eager_world.y) &&
                          same_bits(graphed_world.vx, eager_world.vx) && same_bits(graphed_world.vy, eager_world.vy);
  const bool same_substeps = graphed.substeps == eager.substeps;
  const auto xs = graphed_world.x.to_host(), ys = graphed_world.y.to_host();
  const bool inside = std::all_of(xs.begin(), xs.end(), [](float v) { return v >= 0.0f && v <= 1.0f; }) &&
                      std::all_of(ys.begin(), ys.end(), [](float v) { return v >= 0.0f && v <= 1.0f; });
  unsigned total = 0;
  for (unsigned n : graphed.substeps) total += n;
  const auto [fewest, most] = std::minmax_element(graphed.substeps.begin(), graphed.substeps.end());
  const double graphed_us = median(graphed.frame_us), eager_us = median(eager.frame_us);

  std::printf("engine: %d particles, %d frames, %u substeps (%u to %u a frame, chosen on the device)\n", kParticles,
              kFrames, total, *fewest, *most);
  std::printf("engine: state after the last frame bitwise equal to the eager run: %s; substeps per frame equal: "
              "%s; particles inside the box: %s\n",
              same_state ? "yes" : "NO", same_substeps ? "yes" : "NO", inside ? "yes" : "NO");
  std::printf("engine: median frame time, to completion: eager %.1f us (a host round trip per substep), graphed "
              "%.1f us (a GraphedCallable call and one replay of a While graph): %.2fx\n",
              eager_us, graphed_us, eager_us / graphed_us);
  const bool ok = same_state && same_substeps && inside && total > static_cast<unsigned>(kFrames);
  std::puts(ok ? "engine: ok" : "engine: FAIL");
  return ok ? 0 : 1;
}
