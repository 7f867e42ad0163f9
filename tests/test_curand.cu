// cuRAND's host API inside a capture (built where cuRAND was found). What each generator does
// there was measured (tools/diagnostics/curand_host_capture.cu, H100, CUDA 13.0): warmed by an
// eager draw, XORWOW (the default), Philox, MRG32K3A and MTGP32 keep their states in device
// memory and their replays draw afresh; a quasi-random Sobol generator passes its position
// as the kernel's argument and MT19937 generates at the call, capturing only a conversion, so
// their replays draw the numbers drawn at capture. Such a capture is an Error that says what
// to do instead; the others, and a program's own kernels on cuRAND's device API, stand.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <curand.h>
#include <curand_kernel.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::Graph;

namespace {

constexpr std::size_t kCount = 1 << 14;

void check(curandStatus_t s, const char* what) {
  if (s != CURAND_STATUS_SUCCESS) FAIL(what << ": curandStatus_t " << static_cast<int>(s));
}

// A host-API generator that owns itself.
struct Generator {
  explicit Generator(curandRngType_t type, unsigned long long seed = 1234) {
    check(curandCreateGenerator(&gen, type), "curandCreateGenerator");
    if (type < CURAND_RNG_QUASI_DEFAULT)  // quasi-random generators take no seed
      check(curandSetPseudoRandomGeneratorSeed(gen, seed), "curandSetPseudoRandomGeneratorSeed");
  }
  ~Generator() { (void)curandDestroyGenerator(gen); }
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  // One eager draw, so that the generator's states are set up before any capture (as a port's
  // warm-up steps leave them).
  void warm(DeviceBuffer<float>& out) {
    draw(out, cugraphs::current_stream());
    cugraphs::check(cudaStreamSynchronize(cugraphs::current_stream()), "cudaStreamSynchronize");
  }
  void draw(DeviceBuffer<float>& out, cudaStream_t s) {
    check(curandSetStream(gen, s), "curandSetStream");
    check(curandGenerateUniform(gen, out.data(), out.size()), "curandGenerateUniform");
  }
  curandGenerator_t gen{};
};

// Runs `body(type, gen)` for each cuRAND type that keeps its states on the device (XORWOW,
// Philox), with a generator of that type warmed by one eager draw into `out`.
template <class F>
void for_device_state_types(DeviceBuffer<float>& out, F&& body) {
  for (const curandRngType_t type : {CURAND_RNG_PSEUDO_XORWOW, CURAND_RNG_PSEUDO_PHILOX4_32_10}) {
    INFO("cuRAND type " << static_cast<int>(type));
    Generator gen(type);
    gen.warm(out);
    body(type, gen);
  }
}

}  // namespace

// The device API: each thread's state in device memory, set up once and advanced by every
// launch. Not cuRAND's host API, so a capture of it stands. At global scope, so that their
// names (_Z12setup_states..., taking a curandState) reach the library's list of cuRAND's kernels.
__global__ void setup_states(curandStatePhilox4_32_10_t* states, std::size_t n, unsigned long long seed) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) curand_init(seed, i, 0, &states[i]);
}
__global__ void draw_from_states(float* out, curandStatePhilox4_32_10_t* states, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  curandStatePhilox4_32_10_t s = states[i];
  out[i] = curand_uniform(&s);
  states[i] = s;
}

// Before: the capture ended without a word, and every replay wrote the numbers drawn at
// capture (a low-discrepancy sample or a noise field frozen for good), silently.
TEST_CASE("cuRAND: curandGenerate* of a Sobol or MT19937 generator inside a capture is an Error naming cuRAND's "
          "kernel; the Graph stays usable",
          "[curand][escapes][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> out(kCount);
  // A generator's first draw allocates, which no capture allows (cuRAND reports it, and the
  // capture fails): MT19937 is warmed first, as a port's eager steps leave it. Sobol's first
  // draw inside the capture works.
  const struct {
    const char* name;
    curandRngType_t type;
    bool warm;
    const char* kernel;
  } cases[] = {{"SOBOL32", CURAND_RNG_QUASI_SOBOL32, false, "gen_quasi"},
               {"SOBOL32", CURAND_RNG_QUASI_SOBOL32, true, "gen_quasi"},
               {"MT19937", CURAND_RNG_PSEUDO_MT19937, true, "mt19937_scratch_convert"}};
  for (const auto& c : cases) {
    INFO(c.name << (c.warm ? ", warmed" : ", cold"));
    Generator gen(c.type);
    if (c.warm) gen.warm(out);
    Graph g;
    const auto e = expect_error([&] { cugraphs::capture(g, [&](cudaStream_t s) { gen.draw(out, s); }); });
    CHECK(e.code() == cudaSuccess);
    CHECK(contains(e.what(), "a kernel of cuRAND's host API"));
    CHECK(contains(e.what(), c.kernel));
    CHECK(contains(e.what(), "cugraphs::Generator"));
    CHECK_FALSE(g.is_capturing());
    CHECK_FALSE(g.is_instantiated());
    // The same Graph captures other work afterwards.
    cugraphs::capture(g, [&](cudaStream_t s) {
      fill_kernel<<<blocks_for(out.size()), kThreads, 0, s>>>(out.data(), out.size(), 2.0f);
    });
    g.replay();
    CHECK(out.to_host()[0] == 2.0f);  // fill_kernel writes 2 + (i % 1000) / 1000
  }
}

// A generator seeded inside the capture (an engine's seed a frame, for frames that can be
// replayed deterministically) must never give a graph that stands and seeds its states again
// with the capture's seed at every replay (the same numbers every frame). Measured (H100, CUDA
// 13.0, tools/diagnostics/curand_host_capture.cu): in every mode cuRAND refuses the draw after
// the reseed (status 201) and the capture is lost. The second branch below guards a cuRAND
// that would capture its seeding kernel (generate_seed_pseudo) instead: capture_end refuses
// it by name (that branch does not run on CUDA 13.0; the kernel's name is told in
// test_host_api.cpp).
TEST_CASE("cuRAND: a generator seeded inside a capture never gives a graph that stands: cuRAND refuses the draw, "
          "or the capture's end names cuRAND's seeding kernel",
          "[curand][escapes][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> out(kCount);
  for (const auto mode : {cugraphs::CaptureMode::Global, cugraphs::CaptureMode::Relaxed}) {
    const char* mode_name = mode == cugraphs::CaptureMode::Global ? "Global" : "Relaxed";
    INFO("CaptureMode " << mode_name);
    for_device_state_types(out, [&](curandRngType_t, Generator& gen) {
      curandStatus_t seeded = CURAND_STATUS_SUCCESS, drawn = CURAND_STATUS_SUCCESS;
      const auto frame = [&](cudaStream_t s) {
        seeded = curandSetPseudoRandomGeneratorSeed(gen.gen, 99);
        (void)curandSetStream(gen.gen, s);
        drawn = curandGenerateUniform(gen.gen, out.data(), out.size());
      };
      cugraphs::CaptureOptions o;
      o.mode = mode;
      o.escapes = cugraphs::EscapeCheck::On;
      Graph g;
      const auto e = expect_error([&] { cugraphs::capture(g, frame, o); });
      std::printf("cuRAND seeded inside a %s capture: seed status %d, draw status %d; the capture's end says: %.200s\n",
                  mode_name, static_cast<int>(seeded), static_cast<int>(drawn), e.what());
      CHECK_FALSE(g.is_instantiated());
      if (drawn != CURAND_STATUS_SUCCESS) CHECK(e.code() == cudaErrorStreamCaptureInvalidated);
      if (seeded == CURAND_STATUS_SUCCESS && drawn == CURAND_STATUS_SUCCESS) {
        CHECK(e.code() == cudaSuccess);
        CHECK(contains(e.what(), "seeds a generator's states"));
        CHECK(contains(e.what(), "generate_seed_pseudo"));
        // Without the check the same capture stands, and its replays draw the same numbers.
        o.escapes = cugraphs::EscapeCheck::Off;
        Graph off;
        cugraphs::capture(off, frame, o);
        off.replay();
        const auto first = out.to_host();
        off.replay();
        CHECK(bitwise_equal(out.to_host(), first));
      }
    });
  }
}

TEST_CASE("cuRAND: with EscapeCheck::Off a Sobol capture stands and its replays draw the same numbers (why the "
          "check refuses it); a graphed callable that draws from it is refused when it is made",
          "[curand][escapes][graphed][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> out(kCount);
  Generator gen(CURAND_RNG_QUASI_SOBOL32);
  gen.warm(out);
  Graph g;
  cugraphs::CaptureOptions o;
  o.escapes = cugraphs::EscapeCheck::Off;
  cugraphs::capture(g, [&](cudaStream_t s) { gen.draw(out, s); }, o);
  g.replay();
  const auto first = out.to_host();
  g.replay();
  CHECK(bitwise_equal(out.to_host(), first));

  auto sample = [&gen](DeviceSpan<const float> x) {
    DeviceBuffer<float> y(x.size());
    gen.draw(y, cugraphs::current_stream());
    return y;
  };
  const DeviceBuffer<float> x(kCount);
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(sample, DeviceSpan<const float>(x.span())); });
  CHECK(contains(e.what(), "a kernel of cuRAND's host API"));
}

TEST_CASE("cuRAND: generators that keep their states on the device (XORWOW, Philox) are captured, and each replay "
          "draws afresh (XORWOW's replays go on with its eager sequence); so are a program's own kernels on "
          "cuRAND's device API",
          "[curand][gpu]") {
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  DeviceBuffer<float> out(kCount);
  for_device_state_types(out, [&](curandRngType_t type, Generator& gen) {
    Graph g;
    cugraphs::capture(g, [&](cudaStream_t s) { gen.draw(out, s); });
    g.replay();
    const auto first = out.to_host();
    g.replay();
    const auto second = out.to_host();
    CHECK_FALSE(bitwise_equal(first, second));
    if (type == CURAND_RNG_PSEUDO_XORWOW) {
      // A twin's eager draws: the warm-up's, then the two replays' (the capture's call drew
      // nothing: the first replay draws what it stands for).
      Generator twin(type);
      DeviceBuffer<float> eager(kCount);
      twin.warm(eager);
      twin.warm(eager);
      CHECK(bitwise_equal(eager.to_host(), first));
      twin.warm(eager);
      CHECK(bitwise_equal(eager.to_host(), second));
    }
  });
  DeviceBuffer<curandStatePhilox4_32_10_t> states(kCount);
  setup_states<<<blocks_for(kCount), kThreads, 0, stream>>>(states.data(), kCount, 7);
  Graph g;
  cugraphs::capture(g, [&](cudaStream_t s) {
    draw_from_states<<<blocks_for(kCount), kThreads, 0, s>>>(out.data(), states.data(), kCount);
  });
  g.replay();
  const auto first = out.to_host();
  g.replay();
  const auto second = out.to_host();
  CHECK_FALSE(bitwise_equal(first, second));
  for (const float v : second) REQUIRE((v > 0.0f && v <= 1.0f));
}
