// Host-side API behaviour that needs no GPU: stream bookkeeping, spans, and the misuse
// errors a Graph reports before it ever reaches the CUDA runtime.
#include "testing.hpp"

// CUDA's 16-bit float types first: verify.hpp names them itself, and must agree with them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/detail/kernel_args.hpp>
#include <cugraphs/graph.hpp>

#if defined(__linux__)
#  include <sys/mman.h>
#  include <unistd.h>
#endif

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using cugraphs_test::contains;
using cugraphs_test::expect_error;

TEST_CASE("Streams: the current stream starts as the legacy default and follows StreamGuard",
          "[stream]") {
  CHECK(cugraphs::current_stream() == nullptr);
  // CUDA's two named default streams: a guard asks CUDA nothing about them (it asks whether a
  // stream of the program's captures, to fork it into a capture), so no device is needed.
  const cudaStream_t s1 = cudaStreamPerThread;
  const cudaStream_t s2 = cudaStreamLegacy;
  {
    cugraphs::StreamGuard g1(s1);
    CHECK(cugraphs::current_stream() == s1);
    {
      cugraphs::StreamGuard g2(s2);
      CHECK(cugraphs::current_stream() == s2);
    }
    CHECK(cugraphs::current_stream() == s1);
  }
  CHECK(cugraphs::current_stream() == nullptr);
}

TEST_CASE("Streams: is_current_stream_capturing is false, without throwing, on the legacy "
          "default stream", "[stream]") {
  CHECK_NOTHROW(cugraphs::is_current_stream_capturing());
  CHECK_FALSE(cugraphs::is_current_stream_capturing());
}

TEST_CASE("DeviceSpan: sizes, sub-spans and const conversion", "[memory]") {
  static float storage[8];
  constexpr cugraphs::DeviceSpan<float> s(storage, 8);
  static_assert(s.size() == 8 && s.size_bytes() == 32 && !s.empty());
  const cugraphs::DeviceSpan<const float> c = s;
  CHECK(c.data() == storage);
  const auto sub = s.subspan(2, 3);
  CHECK(sub.data() == storage + 2);
  CHECK(sub.size() == 3);
  CHECK(cugraphs::DeviceSpan<int>{}.empty());
  static_assert(!std::is_convertible_v<cugraphs::DeviceSpan<const float>, cugraphs::DeviceSpan<float>>);
}

TEST_CASE("DeviceBuffer: an empty buffer allocates nothing", "[memory]") {
  cugraphs::DeviceBuffer<double> b(0);
  CHECK(b.data() == nullptr);
  CHECK(b.empty());
  CHECK(b.bytes() == 0);
  CHECK_FALSE(b.pool().has_value());
}

TEST_CASE("Graph: misuse of an empty graph is an Error, never undefined behaviour", "[graph]") {
  cugraphs::Graph g;
  CHECK_FALSE(g.is_capturing());
  CHECK_FALSE(g.is_instantiated());
  CHECK(g.native_graph() == nullptr);
  CHECK(g.native_exec() == nullptr);

  auto e = expect_error([&] { g.replay(); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "Graph::replay"));
  CHECK(contains(e.what(), "nothing has been captured"));

  e = expect_error([&] { g.capture_end(); });
  CHECK(contains(e.what(), "no capture is open"));
  e = expect_error([&] { g.instantiate(); });
  CHECK(contains(e.what(), "nothing has been captured"));
  e = expect_error([&] { (void)g.pool_id(); });
  CHECK(contains(e.what(), "Graph::pool"));
  e = expect_error([&] { g.debug_dump("never.dot"); });
  CHECK(contains(e.what(), "enable_debug_mode"));
  g.enable_debug_mode();
  e = expect_error([&] { g.debug_dump("never.dot"); });
  CHECK(contains(e.what(), "nothing has been captured"));
  CHECK_NOTHROW(g.reset());
}

TEST_CASE("Graph: replay_staged takes a const stage, and refuses a graph with nothing captured", "[graph]") {
  cugraphs::Graph g;
  const auto stage = [](std::span<unsigned long long> words) {
    for (auto& w : words) w = 0;
  };
  auto e = expect_error([&] { g.replay_staged(nullptr, stage, "a staged replay"); });
  CHECK(contains(e.what(), "a staged replay"));
  CHECK(contains(e.what(), "nothing has been captured"));
}

TEST_CASE("StageRef: calls the callable it refers to, const or not, and copies refer to the same one", "[graph]") {
  unsigned long long words[3] = {1, 2, 3};
  int calls = 0;
  auto fill = [&](std::span<unsigned long long> w) {
    ++calls;
    for (auto& x : w) x = 7;
  };
  const auto zero = [](std::span<unsigned long long> w) {
    for (auto& x : w) x = 0;
  };
  cugraphs::detail::StageRef to_fill(fill);
  cugraphs::detail::StageRef copy = to_fill;  // a copy, not a reference to to_fill
  // The same bytes: the copy names `fill` itself (one naming `to_fill` would dangle once
  // to_fill went out of scope).
  CHECK(std::memcmp(&copy, &to_fill, sizeof(copy)) == 0);
  copy(std::span<unsigned long long>(words, 2));
  CHECK(calls == 1);
  CHECK(words[0] == 7);
  CHECK(words[1] == 7);
  CHECK(words[2] == 3);
  cugraphs::detail::StageRef to_zero(zero);
  to_zero(std::span<unsigned long long>(words, 3));
  CHECK(words[0] == 0);
  CHECK(words[2] == 0);
  CHECK(calls == 1);
}

TEST_CASE("Graph: a moved-from graph says so, and can be reused after reset", "[graph]") {
  cugraphs::Graph a;
  cugraphs::Graph b(std::move(a));
  auto e = expect_error([&] { a.replay(); });  // NOLINT(bugprone-use-after-move): the point
  CHECK(contains(e.what(), "moved from"));
  cugraphs::Graph c;
  c = std::move(b);
  e = expect_error([&] { b.replay(); });  // NOLINT(bugprone-use-after-move)
  CHECK(contains(e.what(), "moved from"));
  a.reset();
  e = expect_error([&] { a.replay(); });
  CHECK(contains(e.what(), "nothing has been captured"));
}

TEST_CASE("Capture modes map onto CUDA's", "[graph]") {
  using cugraphs::CaptureMode;
  CHECK(cugraphs::detail::to_cuda(CaptureMode::Global) == cudaStreamCaptureModeGlobal);
  CHECK(cugraphs::detail::to_cuda(CaptureMode::ThreadLocal) == cudaStreamCaptureModeThreadLocal);
  CHECK(cugraphs::detail::to_cuda(CaptureMode::Relaxed) == cudaStreamCaptureModeRelaxed);
  const cugraphs::CaptureOptions defaults;
  CHECK(defaults.mode == CaptureMode::Global);
  CHECK(defaults.stream == nullptr);
  CHECK_FALSE(defaults.pool.has_value());
}

TEST_CASE("export_dot before any capture is an Error", "[graph]") {
  const auto e = expect_error([] { cugraphs::export_dot("never.dot"); });
  CHECK(contains(e.what(), "no capture has completed"));
}

TEST_CASE("GraphCache: a key's bucket is the smallest not below it; past the largest there is none", "[cache]") {
  const std::vector<int> buckets{1, 2, 4, 8, 16};
  CHECK(cugraphs::detail::bucket_index(buckets, 0) == 0u);
  CHECK(cugraphs::detail::bucket_index(buckets, 1) == 0u);
  CHECK(cugraphs::detail::bucket_index(buckets, 3) == 2u);
  CHECK(cugraphs::detail::bucket_index(buckets, 8) == 3u);
  CHECK(cugraphs::detail::bucket_index(buckets, 9) == 4u);
  CHECK_FALSE(cugraphs::detail::bucket_index(buckets, 17).has_value());
  const std::vector<double> widths{0.5, 1.5};
  CHECK(cugraphs::detail::bucket_index(widths, 1.0) == 1u);
  CHECK(cugraphs::detail::key_text(17) == "17");
  CHECK(cugraphs::detail::key_text(std::string("x")) == "this key");
}

TEST_CASE("Graph::update and set_kernel_args on an empty graph are Errors", "[update]") {
  cugraphs::Graph empty, other;
  auto e = cugraphs_test::expect_error([&] { (void)empty.update(std::move(other)); });
  CHECK(e.code() == cudaSuccess);
  CHECK(cugraphs_test::contains(e.what(), "Graph::update: nothing has been captured into this graph"));
  cugraphs::KernelNode<float*, int> node;
  e = cugraphs_test::expect_error([&] { empty.set_kernel_args(node, nullptr, 3); });
  CHECK(cugraphs_test::contains(e.what(), "Graph::set_kernel_args: nothing has been captured"));
  CHECK(node.index() == 0u);
  CHECK(node.native() == nullptr);
}

TEST_CASE("GraphSet: collective logs that differ are described by their first difference; equal logs pass",
          "[graph_set][host]") {
  const std::vector<int> devices{0, 1, 2};
  using Logs = std::vector<std::vector<std::string>>;
  CHECK_FALSE(cugraphs::detail::collective_mismatch(Logs{{"a", "b"}, {"a", "b"}, {"a", "b"}}, devices));
  CHECK_FALSE(cugraphs::detail::collective_mismatch(Logs{{}}, std::vector<int>{0}));
  auto m = cugraphs::detail::collective_mismatch(Logs{{"a", "b"}, {"a", "b"}, {"a", "c"}}, devices);
  REQUIRE(m);
  CHECK(*m == "collective 1 differs: device 0 captured b, device 2 captured c");
  m = cugraphs::detail::collective_mismatch(Logs{{"a"}, {"a", "b"}, {"a"}}, devices);
  REQUIRE(m);
  CHECK(*m == "device 0 captured 1 collective and device 1 captured 2; the first without a partner is b on device 1");
}

TEST_CASE("DeviceSpan converts to std::span of the same element type (its range constructor), unambiguously",
          "[span]") {
  float values[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  const cugraphs::DeviceSpan<float> d(values + 1, 3);
  const std::span<float> s = d;
  CHECK(s.data() == values + 1);
  CHECK(s.size() == 3);
  const std::span<const float> c = cugraphs::DeviceSpan<const float>(d);
  CHECK(c[2] == 4.0f);
  static_assert(!std::is_convertible_v<cugraphs::DeviceSpan<float>, std::span<double>>);
  // A view: a temporary DeviceSpan converts too (borrowed range).
  const std::span<float> from_temporary = cugraphs::DeviceSpan<float>(values, 2);
  CHECK(from_temporary.size() == 2);
}

TEST_CASE("Condition::set's value: a bool as 0 or 1, an integer as it is where 32 bits hold it, a wider one that "
          "does not fit as the largest (never its low bits, which could read as false)",
          "[conditional]") {
  using cugraphs::detail::condition_value;
  enum class Case : long long { first = 0, far = 1LL << 40 };
  static_assert(condition_value(true) == 1u && condition_value(false) == 0u);
  static_assert(condition_value(7) == 7u && condition_value(std::uint16_t{9}) == 9u);
  static_assert(condition_value(-1) == 0xFFFFFFFFu);  // 32 bits: wraps, nonzero as before
  static_assert(condition_value(std::uint64_t{3}) == 3u);
  static_assert(condition_value(std::uint64_t{1} << 32) == 0xFFFFFFFFu);  // truncated, it read as 0
  static_assert(condition_value(std::int64_t{-(1LL << 32)}) == 0xFFFFFFFFu);
  static_assert(condition_value(std::size_t{0xFFFFFFFFu}) == 0xFFFFFFFFu);
  static_assert(condition_value(Case::first) == 0u && condition_value(Case::far) == 0xFFFFFFFFu);
  CHECK(condition_value(std::uint64_t{1} << 40) != 0u);
}

// What a warm-up (detail::warm_up: the eager calls before a graphed callable's, a pair's or a
// cache bucket's capture) does with its draws, without a GPU: drawing outside a capture touches
// only the generator's host state. Before: a generator another thread drew from between two of
// the warm-up's draws was put back too, so later draws repeated that thread's numbers.
TEST_CASE("RNG: a warm-up gives its draws back only to generators nothing else moved since its first draw",
          "[rng]") {
  cugraphs::Generator a(5), b(6), c(7);
  std::vector<cugraphs::detail::DrawnInWarmUp> drawn;
  cugraphs::detail::tls_warm_up_draws = &drawn;  // as detail::warm_up sets it
  (void)a.philox(4);                              // the warm-up's own draws only
  (void)a.philox(8);
  (void)b.philox(4);
  std::thread([&b] { (void)b.philox(4); }).join();  // another thread, between two of the warm-up's draws
  (void)b.philox(4);
  (void)c.philox(4);
  std::thread([&c] { (void)c.philox(4); }).join();  // another thread, after the warm-up's last draw
  cugraphs::detail::tls_warm_up_draws = nullptr;
  cugraphs::detail::take_back_draws(drawn);
  CHECK(a.offset() == 0);   // given back
  CHECK(b.offset() == 12);  // kept: 4 to 8 are the other thread's
  CHECK(c.offset() == 8);
  CHECK(a.seed() == 5);
}

TEST_CASE("cuRAND's host-API kernels whose replays repeat are told from its others and from a program's own "
          "kernels by their mangled names",
          "[curand]") {
  using cugraphs::detail::curand_host_kernel_kind;
  using enum cugraphs::detail::CurandHostKernel;
  // Names as libcurand (CUDA 13.0) has them: Sobol's generation, MT19937's conversion.
  CHECK(curand_host_kernel_kind("_Z9gen_quasiI24__curandStateSharedSobolIjEfiXadL_Z22_curand_uniform_noargsjiEE10rng_"
                                "configIS1_L14curandOrdering101EEEvPT0_mjjyPKNT_10value_typeET1_") == repeats);
  CHECK(curand_host_kernel_kind("_Z23mt19937_scratch_convertIfEvPjPT_i") == repeats);
  // The kernels that seed a pseudo-random generator's states (XORWOW, Philox, MRG32K3A).
  CHECK(curand_host_kernel_kind("_Z20generate_seed_pseudoyyy14curandOrderingP17curandStateXORWOWPj") == seeds);
  CHECK(curand_host_kernel_kind("_Z20generate_seed_pseudoyyP24curandStatePhilox4_32_10") == seeds);
  CHECK(curand_host_kernel_kind("_Z20generate_seed_pseudoI10rng_configI19curandStateMRG32k3aL14curandOrdering101EEEvyyyS2_"
                                "PS1_Pj") == seeds);
  CHECK(curand_host_kernel_kind("_Z20generate_seed_pseudoPfm") == none);
  // Generators that advance on the device (their replays draw afresh), a program's own kernel
  // on cuRAND's device API, a namespaced kernel, a kernel of that name that takes no
  // curandState, names that are not mangled or are cut short.
  CHECK(curand_host_kernel_kind("_Z20gen_sequenced_PhiloxI24curandStatePhilox4_32_106float4iXadL_Z28curand_"
                                "uniform_noargs_philoxIS0_ES1_PT_iEELb0ELi128EEvS4_PT0_mmT1_") == none);
  CHECK(curand_host_kernel_kind("_Z13gen_sequencedI17curandStateXORWOWfiXadL_Z21curand_uniform_noargsIS0_EfPT_"
                                "iEE10rng_configIS0_L14curandOrdering101EEEvS3_PT0_mmT1_") == none);
  CHECK(curand_host_kernel_kind("_Z12setup_statesP24curandStatePhilox4_32_10my") == none);
  CHECK(curand_host_kernel_kind("_ZN12_GLOBAL__N_19gen_quasiEP24__curandStateSharedSobolIjE") == none);
  CHECK(curand_host_kernel_kind("_Z9gen_quasiPfm") == none);
  CHECK(curand_host_kernel_kind("gen_quasi") == none);
  CHECK(curand_host_kernel_kind("_Z99gen_quasi") == none);
  CHECK(curand_host_kernel_kind("_Z") == none);
  CHECK(curand_host_kernel_kind("") == none);
}

namespace {

// The bytes of `values`.
template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// state_difference over two host vectors, as a region of `kind` at a made-up address.
template <class T>
std::optional<std::string> difference(const std::vector<T>& replay, const std::vector<T>& eager, double atol = 0,
                                      double rtol = 0) {
  using cugraphs::detail::state_kind;
  const cugraphs::detail::StateRegion region{reinterpret_cast<const void*>(std::uintptr_t{0x1000}),
                                             replay.size() * sizeof(T), sizeof(T), state_kind<T>()};
  return cugraphs::detail::state_difference("state", 3, region, bytes_of(replay), bytes_of(eager), atol, rtol);
}

}  // namespace

TEST_CASE("verify_replay's comparison: bitwise by default, floating-point state within tolerances, each "
          "type's values in words",
          "[verify]") {
  using cugraphs::detail::StateKind;
  using cugraphs::detail::state_kind;
  static_assert(state_kind<const float>() == StateKind::Float);
  static_assert(state_kind<__half>() == StateKind::Half);
  static_assert(state_kind<__nv_bfloat16>() == StateKind::BFloat16);
  static_assert(state_kind<std::int16_t>() == StateKind::Signed);
  static_assert(state_kind<unsigned char>() == StateKind::Unsigned);

  const std::vector<float> eager{1, 2, 3, 4, 5, 6, 7, 8};
  CHECK_FALSE(difference(eager, eager));
  auto replay = eager;
  replay[2] = 3.5f;
  replay[5] = 6.25f;
  const auto d = difference(replay, eager);
  REQUIRE(d);
  CHECK(*d == "state 3 (8 x float at 0x1000): 2 of 8 differ bitwise; the first, element 2: replay "
              "3.5, eager 3");
  CHECK(contains(*difference(replay, eager, 0.3), "1 of 8 differ beyond atol 0.3 + rtol 0 x |eager|; the first, "
                                                  "element 2: replay 3.5, eager 3"));
  CHECK_FALSE(difference(replay, eager, 0.5));
  CHECK_FALSE(difference(replay, eager, 0, 0.17));  // 0.5 <= 0.17 * 3, 0.25 <= 0.17 * 6

  // Zeros of both signs and NaNs: bitwise they differ; within a tolerance NaN matches NaN.
  const float nan1 = std::bit_cast<float>(0x7fc00001u), nan2 = std::bit_cast<float>(0x7fc00002u);
  CHECK(difference(std::vector<float>{-0.0f, nan1}, std::vector<float>{0.0f, nan1}));
  CHECK_FALSE(difference(std::vector<float>{nan1}, std::vector<float>{nan1}));
  CHECK(difference(std::vector<float>{nan1}, std::vector<float>{nan2}));
  CHECK_FALSE(difference(std::vector<float>{-0.0f, nan1}, std::vector<float>{0.0f, nan2}, 0, 1e-6));
  CHECK(difference(std::vector<float>{1.0f}, std::vector<float>{nan1}, 1.0));

  // 16-bit floats as numbers: half 1.0 and 1.5, bfloat16 2.0 and -0.5.
  const auto half = [](std::uint16_t bits) { return std::bit_cast<__half>(bits); };
  CHECK(contains(*difference(std::vector<__half>{half(0x3c00)}, std::vector<__half>{half(0x3e00)}),
                 "1 x __half at 0x1000): 1 of 1 differ bitwise; the first, element 0: replay 1, eager 1.5"));
  CHECK_FALSE(difference(std::vector<__half>{half(0x3c00)}, std::vector<__half>{half(0x3e00)}, 0.5));
  CHECK(contains(*difference(std::vector<__half>{half(0x0001)}, std::vector<__half>{half(0xfc00)}),
                 "replay 5.960464477539063e-08, eager -inf"));
  const auto bf = [](std::uint16_t bits) { return std::bit_cast<__nv_bfloat16>(bits); };
  CHECK(contains(*difference(std::vector<__nv_bfloat16>{bf(0x4000)}, std::vector<__nv_bfloat16>{bf(0xbf00)}),
                 "1 x __nv_bfloat16 at 0x1000): 1 of 1 differ bitwise; the first, element 0: replay 2, eager -0.5"));

  // Integers in decimal (sign-extended), bools in words, other types as their bytes; a
  // tolerance does not apply to them.
  CHECK(contains(*difference(std::vector<std::int16_t>{7, -2}, std::vector<std::int16_t>{7, 5}, 10),
                 "2 x 2-byte signed integer at 0x1000): 1 of 2 differ bitwise; the first, element 1: "
                 "replay -2, eager 5"));
  CHECK(contains(*difference(std::vector<std::uint64_t>{~0ull}, std::vector<std::uint64_t>{1}),
                 "replay 18446744073709551615, eager 1"));
  CHECK(contains(*difference(std::vector<std::int64_t>{-1}, std::vector<std::int64_t>{1}), "replay -1, eager 1"));
  const std::vector<std::byte> yes{std::byte{1}}, no{std::byte{0}};
  const cugraphs::detail::StateRegion flag{yes.data(), 1, 1, state_kind<bool>()};
  CHECK(contains(*cugraphs::detail::state_difference("output leaf", 0, flag, yes, no, 0, 0), "replay true, eager false"));
  struct Rgb {
    unsigned char r, g, b;
  };
  CHECK(contains(*difference(std::vector<Rgb>{{1, 2, 3}}, std::vector<Rgb>{{1, 2, 0xff}}),
                 "1 x 3-byte element at 0x1000): 1 of 1 differ bitwise; the first, element 0: replay bytes 01 02 "
                 "03, eager bytes 01 02 ff"));
}

TEST_CASE("The freed-memory check's view of the host: no-access and unmapped addresses are unusable, the stack, "
          "the heap and read-only mappings are not; only no-access mappings are reservations",
          "[escapes][host]") {
#if defined(__linux__)
  using cugraphs::detail::host_reserved;
  using cugraphs::detail::host_unusable;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // Address space reserved with no access, as the CUDA driver reserves device memory's.
  void* reserved = mmap(nullptr, 4 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(reserved != MAP_FAILED);
  auto* bytes = static_cast<std::byte*>(reserved);
  CHECK(host_unusable(bytes + page + 3));
  CHECK(host_reserved(bytes + page + 3));
  // Made readable: usable.
  REQUIRE(mprotect(bytes + page, page, PROT_READ) == 0);
  CHECK_FALSE(host_unusable(bytes + page + 3));
  CHECK_FALSE(host_reserved(bytes + page + 3));
  CHECK(host_unusable(bytes + 2 * page));  // its neighbour still grants nothing
  CHECK(host_reserved(bytes + 2 * page));
  // Unmapped: unusable, and no reservation either (a 64-bit value that is no address reads so).
  REQUIRE(munmap(reserved, 4 * page) == 0);
  CHECK(host_unusable(bytes + page + 3));
  CHECK_FALSE(host_reserved(bytes + page + 3));
  int on_stack = 0;
  const auto on_heap = std::make_unique<int>(0);
  CHECK_FALSE(host_unusable(&on_stack));
  CHECK_FALSE(host_unusable(on_heap.get()));
  CHECK_FALSE(host_reserved(&on_stack));
  CHECK_FALSE(host_reserved(on_heap.get()));
  CHECK(host_unusable(nullptr));  // page zero is never mapped
  CHECK_FALSE(host_reserved(nullptr));
#else
  SKIP("the map of the process is read on Linux only");
#endif
}
