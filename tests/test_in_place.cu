// GraphedCallable with InputMode::InPlace on the GPU: f's kernels read the callers' inputs
// where they are (no staging copy), bitwise as eager calls; inputs in the graph's own memory
// are copied; graphs that reach their static inputs otherwise are refused with the reason.
#include "kernels.cuh"
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <cuda.h>  // types only: cuLaunchKernel is reached through the runtime's entry points

#include <array>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

using namespace cugraphs_test;
using cugraphs::DeviceBuffer;
using cugraphs::DeviceSpan;
using cugraphs::InputMode;

namespace {

using In = DeviceSpan<const float>;
using Out = DeviceSpan<float>;
constexpr std::size_t kN = 4099;  // not a multiple of the block size

// out[i] = a[n-1-i] * k + b[i]: reads its first input backwards, so that an output written
// over its own input while it runs gives other numbers than the eager call.
__global__ void reverse_mix(float* out, const float* a, const float* b, std::size_t n, float k) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[n - 1 - i] * k + b[i];
}

// The inputs as a struct passed by value (the addresses inside it are found too), the
// second one offset by a few elements (an address inside the leaf, rebound with its offset).
struct Pair {
  const float* a;
  const float* b_tail;
};
__global__ void sum_pair(float* out, Pair p, std::size_t n, std::size_t skip) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = p.a[i] + (i < n - skip ? p.b_tail[i] : 0.0f);
}

// Two kernels read each input; the result is a buffer of the graph's pool.
auto model() {
  return [](In a, In b) {
    const cudaStream_t s = cugraphs::current_stream();
    const std::size_t n = a.size();
    DeviceBuffer<float> t(n), out(n);
    reverse_mix<<<blocks_for(n), kThreads, 0, s>>>(t.data(), a.data(), b.data(), n, 0.5f);
    sum_pair<<<blocks_for(n), kThreads, 0, s>>>(out.data(), Pair{t.data(), b.data() + 3}, n, 3);
    step_kernel<<<blocks_for(n), kThreads, 0, s>>>(out.data(), n, 2);
    reverse_mix<<<blocks_for(n), kThreads, 0, s>>>(t.data(), out.data(), a.data(), n, -1.25f);
    copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(out.data(), t.data(), n);
    cugraphs::check_launch("model");
    return out;
  };
}

// Reads its inputs through addresses just outside them, as ported code does: a one-based
// base (a1[1] is a[0]), a pointer a few elements past a's end, b's address less 64 elements.
__global__ void pad_reads(float* out, const float* a1, const float* a_past, const float* b_before, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a1[i + 1] * 3.0f + a_past[-5 - static_cast<std::ptrdiff_t>(i)] - b_before[64 + i];
}
// Launched through the driver below (eight-byte parameters only: one packing in `extra`).
__global__ void add_into(float* out, const float* a, const float* b, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = out[i] * 0.5f + a[i] - b[n - 1 - i];
}

// add_into launched with cuLaunchKernel, as libraries launch their kernels: its CUfunction with
// the arguments packed in `extra`, and its CUkernel (cudaGetKernel) with kernelParams.
struct DriverLaunches {
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);
  Launch launch = nullptr;
  CUfunction function = nullptr;
  CUfunction kernel = nullptr;  // a CUkernel, which cuLaunchKernel takes in a CUfunction's place

  DriverLaunches() {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cugraphs::check(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &found),
                    "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess) throw std::runtime_error("cuLaunchKernel not found");
    launch = reinterpret_cast<Launch>(fn);
    cudaFunction_t f = nullptr;
    cugraphs::check(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(add_into)), "cudaGetFuncBySymbol");
    function = reinterpret_cast<CUfunction>(f);
    cudaKernel_t k = nullptr;
    cugraphs::check(cudaGetKernel(&k, add_into), "cudaGetKernel");
    kernel = reinterpret_cast<CUfunction>(k);
  }
  void run(CUfunction f, bool packed, float* out, const float* a, const float* b, std::size_t n,
           cudaStream_t s) const {
    struct {
      float* out;
      const float* a;
      const float* b;
      std::size_t n;
    } args{out, a, b, n};
    std::size_t bytes = sizeof args;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
    void* params[] = {&args.out, &args.a, &args.b, &args.n};
    const auto blocks = static_cast<unsigned>(blocks_for(n)), threads = static_cast<unsigned>(kThreads);
    if (launch(f, blocks, 1, 1, threads, 1, 1, 0, s, packed ? nullptr : params, packed ? extra : nullptr) !=
        CUDA_SUCCESS)
      throw std::runtime_error("cuLaunchKernel failed");
  }
};

#if CUGRAPHS_HAS_CONDITIONAL_NODES
// Launches kernel `k` on `s`, or, while `s` captures, adds it to the capture inside a child
// graph built by hand.
void launch_in_child(const cudaKernelNodeParams& k, cudaStream_t s) {
  cudaStreamCaptureStatus status{};
  cugraphs::check(cudaStreamIsCapturing(s, &status), "cudaStreamIsCapturing");
  if (status != cudaStreamCaptureStatusActive) {
    cugraphs::check(cudaLaunchKernel(k.func, k.gridDim, k.blockDim, k.kernelParams, 0, s), "cudaLaunchKernel");
    return;
  }
  cudaGraph_t child = nullptr;
  cugraphs::check(cudaGraphCreate(&child, 0), "cudaGraphCreate");
  cudaGraphNode_t node = nullptr;
  cugraphs::check(cudaGraphAddKernelNode(&node, child, nullptr, 0, &k), "cudaGraphAddKernelNode");
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeGraph;
  p.graph.graph = child;
  (void)cugraphs::detail::add_node_to_capture(s, cugraphs::detail::capture_info(s, "test"), p, "test");
  cugraphs::check(cudaGraphDestroy(child), "cudaGraphDestroy");  // the node holds its own copy
}

// f that reads its input from a kernel inside a child graph, `pad` through addresses just
// outside it.
auto reads_in_child(bool pad) {
  return [pad](In a) {
    DeviceBuffer<float> out(a.size());
    float* o = out.data();
    const float* src = a.data();
    const float* a1 = a.data() - 1;
    const float* past = a.data() + a.size() + 4;
    const float* before = a.data() - 64;
    std::size_t n = a.size();
    void* pad_params[] = {&o, &a1, &past, &before, &n};
    void* copy_params[] = {&o, &src, &n};
    cudaKernelNodeParams k{};
    k.func = pad ? reinterpret_cast<void*>(pad_reads) : reinterpret_cast<void*>(copy_kernel);
    k.gridDim = dim3(static_cast<unsigned>(blocks_for(n)));
    k.blockDim = dim3(static_cast<unsigned>(kThreads));
    k.kernelParams = pad ? pad_params : copy_params;
    launch_in_child(k, cugraphs::current_stream());
    return out;
  };
}
#endif

// Reads its input through a table of addresses in device memory.
__global__ void gather_first(float* out, const float* const* table, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = table[0][i];
}

// Reads its input through a parameter block in host-visible memory, as engines hand kernels
// their frame's constants.
struct Block {
  std::size_t n;
  const float* x;
};
__global__ void from_block(float* out, const Block* b) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < b->n) out[i] = b->x[i] + 1.0f;
}

// Reads its input through a texture object (tex1Dfetch over linear memory).
__global__ void fetch_twice(float* out, cudaTextureObject_t t, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = 2.0f * tex1Dfetch<float>(t, static_cast<int>(i));
}

__global__ void fetch_from_table(float* out, const cudaTextureObject_t* table, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(table[0], static_cast<int>(i));
}

// One texture object per buffer an f was called with, kept for the graphs that hold them.
struct Textures {
  std::vector<std::pair<const float*, cudaTextureObject_t>> made;
  Textures() = default;
  Textures(const Textures&) = delete;
  Textures& operator=(const Textures&) = delete;
  ~Textures() {
    for (const auto& m : made) (void)cudaDestroyTextureObject(m.second);
  }
  cudaTextureObject_t over(In a) {
    for (const auto& m : made)
      if (m.first == a.data()) return m.second;
    cudaResourceDesc res{};
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = const_cast<float*>(a.data());
    res.res.linear.desc = cudaCreateChannelDesc<float>();
    res.res.linear.sizeInBytes = a.size_bytes();
    cudaTextureDesc tex{};
    tex.readMode = cudaReadModeElementType;
    cudaTextureObject_t t = 0;
    cugraphs::detail::RelaxedCaptureMode relaxed;  // made while f is captured, too
    cugraphs::check(cudaCreateTextureObject(&t, &res, &tex, nullptr), "cudaCreateTextureObject");
    made.emplace_back(a.data(), t);
    return t;
  }
};

cugraphs::GraphedOptions in_place() {
  cugraphs::GraphedOptions opts;
  opts.inputs = InputMode::InPlace;
  return opts;
}

}  // namespace

TEST_CASE("InPlace: calls read fresh inputs where they are, bitwise as eager calls, copying nothing and leaving "
          "the static inputs as they were",
          "[in_place][graphed][gpu]") {
  auto f = model();
  const DeviceBuffer<float> sa = filled(kN, 1), sb = filled(kN, 2);
  auto g = cugraphs::make_graphed_callable(in_place(), f, In(sa), In(sb));
  CHECK(g.graph().per_launch() == cugraphs::PerLaunch::Parameters);
  // f's five kernels, the staging copy (disabled while inputs are read in place) and the
  // event record node at the end.
  CHECK(g.graph().node_count() == 5 + 1 + 1);
  const auto statics_a = host(std::get<0>(g.static_inputs())), statics_b = host(std::get<1>(g.static_inputs()));
  CHECK(bitwise_equal(statics_a, host(In(sa))));

  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  std::vector<DeviceBuffer<float>> inputs;
  for (std::uint32_t k = 0; k < 6; ++k) inputs.push_back(filled(kN, 10 + k));
  for (int call = 0; call < 30; ++call) {
    const auto& a = inputs[static_cast<std::size_t>(call % 6)];
    const auto& b = inputs[static_cast<std::size_t>((call * 5 + 1) % 6)];
    const Out out = g(In(a), In(b));
    const auto graphed = host(out);
    const auto eager = f(In(a), In(b));
    INFO("call " << call);
    REQUIRE(bitwise_equal(graphed, host(eager.span())));
  }
  CHECK(g.calls() == 30);
  CHECK(g.staged_copies() == 0);
  // Nothing was copied onto the static inputs.
  CHECK(bitwise_equal(host(std::get<0>(g.static_inputs())), statics_a));
  CHECK(bitwise_equal(host(std::get<1>(g.static_inputs())), statics_b));

  // A launch outside cugraphs reads the last call's inputs again, with their new contents.
  const auto& last_a = inputs[29 % 6];
  const auto& last_b = inputs[(29 * 5 + 1) % 6];
  const_cast<DeviceBuffer<float>&>(last_a).copy_from_host(random_floats(kN, 99));
  cugraphs::check(cudaGraphLaunch(g.graph().native_exec(), stream), "cudaGraphLaunch");
  const auto relaunched = host(In(g.static_outputs()));
  CHECK(bitwise_equal(relaunched, host(f(In(last_a), In(last_b)).span())));
}

TEST_CASE("InPlace: f that writes its input writes the caller's buffer, as the eager call does; with Copy it "
          "is an Error unless allow_written_input, and then writes the static input",
          "[in_place][graphed][gpu]") {
  auto f = [](Out x) {
    affine_kernel<<<blocks_for(x.size()), kThreads, 0, cugraphs::current_stream()>>>(x.data(), x.size(), 2.0f, 1.0f);
    cugraphs::check_launch("affine");
  };
  DeviceBuffer<float> sample = filled(kN, 3), x = filled(kN, 4), eager = filled(kN, 4);
  for (const InputMode mode : {InputMode::InPlace, InputMode::Copy}) {
    INFO("mode " << static_cast<int>(mode));
    cugraphs::GraphedOptions opts;
    opts.inputs = mode;
    if (mode == InputMode::Copy) {
      CHECK(contains(expect_error([&] { (void)cugraphs::make_graphed_callable(opts, f, Out(sample)); }).what(),
                     "f wrote input leaf 0"));
      opts.allow_written_input = true;
    }
    auto g = cugraphs::make_graphed_callable(opts, f, Out(sample));
    const auto before = host(Out(x));
    g(Out(x));
    if (mode == InputMode::InPlace) {
      f(Out(eager));
      CHECK(bitwise_equal(host(Out(x)), host(Out(eager))));
      CHECK(g.staged_copies() == 0);
    } else {
      CHECK(bitwise_equal(host(Out(x)), before));  // the copy was scaled, not x
      CHECK(g.staged_copies() == 1);
    }
  }
}

TEST_CASE("InPlace: an input that is the callable's own output (a feedback loop) or another callable's output in "
          "the shared pool is copied for that call, and the results match eager calls",
          "[in_place][graphed][pool][gpu]") {
  auto f = model();
  const DeviceBuffer<float> sa = filled(kN, 5), sb = filled(kN, 6), b = filled(kN, 7);
  auto g = cugraphs::make_graphed_callable(in_place(), f, In(sa), In(sb));
  cugraphs::Stream stream;
  cugraphs::StreamGuard on(stream);
  // x(k+1) = f(x(k), b): from call 1 on, x is the static output, which f overwrites while
  // reading it backwards: read in place, the output would differ from the eager call's.
  DeviceBuffer<float> x0 = filled(kN, 8);
  DeviceBuffer<float> eager_x = filled(kN, 8);
  In x(x0);
  std::uint64_t copies = 0;
  for (int step = 0; step < 8; ++step) {
    const bool external = step % 4 == 0;  // every fourth step starts again from a buffer of the caller's
    if (external && step > 0) {
      x0.copy_from_host(random_floats(kN, 40 + static_cast<std::uint32_t>(step)));
      eager_x.copy_from_host(random_floats(kN, 40 + static_cast<std::uint32_t>(step)));
      x = In(x0);
    }
    const Out out = g(x, In(b));
    copies += external ? 0 : 1;  // x alone: b is read in place
    CHECK(g.staged_copies() == copies);
    DeviceBuffer<float> next = f(In(eager_x), In(b));
    INFO("step " << step);
    REQUIRE(bitwise_equal(host(out), host(Out(next))));
    eager_x = std::move(next);
    x = In(out);
  }

  // Two callables in one pool: the second reads the first's output, which is copied.
  auto first = [](In a) {
    DeviceBuffer<float> out(a.size());
    reverse_mix<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), a.data(), a.data(),
                                                                                  a.size(), 3.0f);
    return out;
  };
  auto [g1, g2] = cugraphs::make_graphed_callables(std::make_tuple(first, f),
                                                   std::tuple{std::tuple{In(sa)}, std::tuple{In(sa), In(sb)}},
                                                   in_place());
  for (int r = 0; r < 3; ++r) {
    const DeviceBuffer<float> a = filled(kN, 60 + static_cast<std::uint32_t>(r));
    const Out mid = g1(In(a));
    const Out out = g2(In(mid), In(b));
    const auto eager_mid = first(In(a));
    const auto eager = f(In(eager_mid), In(b));
    INFO("round " << r);
    REQUIRE(bitwise_equal(host(out), host(eager.span())));
  }
  CHECK(g1.staged_copies() == 0);
  CHECK(g2.staged_copies() == 3 * 1);  // its first input lies in the pool and is copied; b is read in place
}

TEST_CASE("InPlace: a graph that reaches a static input other than through its kernels' arguments, a ring, and "
          "a graphed pair are refused with the reason; a Copy callable of the same f works",
          "[in_place][graphed][gpu]") {
  auto copies_input = [](In a) {
    DeviceBuffer<float> out(a.size());
    cugraphs::check(cudaMemcpyAsync(out.data(), a.data(), a.size_bytes(), cudaMemcpyDeviceToDevice,
                                    cugraphs::current_stream()),
                    "cudaMemcpyAsync");
    return out;
  };
  const DeviceBuffer<float> sa = filled(kN, 9);
  const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), copies_input, In(sa)); });
  CHECK(contains(e.what(), "InputMode::InPlace"));
  CHECK(contains(e.what(), "is a copy that reads static input leaf 0"));
  CHECK(contains(e.what(), "Make it with InputMode::Copy"));

#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // A kernel in a child graph that takes the input's address, or one just outside it (which
  // passed unseen before the pads were searched: its calls read the static input).
  for (const bool pad : {false, true}) {
    INFO("pad " << pad);
    const auto child = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), reads_in_child(pad), In(sa)); });
    CHECK(contains(child.what(), "inside a conditional body or a child graph"));
    CHECK(contains(child.what(), "takes the address of static input leaf 0"));
    auto copying = cugraphs::make_graphed_callable(reads_in_child(pad), In(sa));  // Copy
    const DeviceBuffer<float> x = filled(kN, 10);
    CHECK(bitwise_equal(host(copying(In(x))), host(reads_in_child(pad)(In(x)).span())));
  }
#endif

  // A texture object made over the input holds the address it was made with.
  Textures textures;
  auto reads_texture = [&textures](In a) {
    DeviceBuffer<float> out(a.size());
    fetch_twice<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), textures.over(a),
                                                                                   a.size());
    cugraphs::check_launch("fetch_twice");
    return out;
  };
  const auto tex = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), reads_texture, In(sa)); });
  CHECK(contains(tex.what(), "takes a texture object over static input leaf 0"));
  CHECK(contains(tex.what(), "Make it with InputMode::Copy"));
  // The same through a bindless table copied from pinned memory.
  {
    cudaTextureObject_t* pinned = nullptr;
    cugraphs::check(cudaMallocHost(&pinned, sizeof(cudaTextureObject_t)), "cudaMallocHost");
    const std::unique_ptr<cudaTextureObject_t, cudaError_t (*)(void*)> staged(pinned, &cudaFreeHost);
    DeviceBuffer<cudaTextureObject_t> table(1);
    auto reads_table = [&](In a) {
      const cudaStream_t s = cugraphs::current_stream();
      staged.get()[0] = textures.over(a);
      cugraphs::check(
          cudaMemcpyAsync(table.data(), staged.get(), sizeof(cudaTextureObject_t), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync");
      DeviceBuffer<float> out(a.size());
      fetch_from_table<<<blocks_for(a.size()), kThreads, 0, s>>>(out.data(), table.data(), a.size());
      cugraphs::check_launch("fetch_from_table");
      return out;
    };
    const auto bindless = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), reads_table, In(sa)); });
    CHECK(contains(bindless.what(), "copies a texture object over static input leaf 0 from host memory"));
    cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
  // The same texture read by a kernel inside a child graph gets the same reason (nested
  // kernels were refused with a generic one before).
  {
    auto texture_in_child = [&textures](In a) {
      DeviceBuffer<float> out(a.size());
      float* o = out.data();
      cudaTextureObject_t t = textures.over(a);
      std::size_t n = a.size();
      void* params[] = {&o, &t, &n};
      cudaKernelNodeParams k{};
      k.func = reinterpret_cast<void*>(fetch_twice);
      k.gridDim = dim3(static_cast<unsigned>(blocks_for(n)));
      k.blockDim = dim3(static_cast<unsigned>(kThreads));
      k.kernelParams = params;
      launch_in_child(k, cugraphs::current_stream());
      return out;
    };
    const auto nested =
        expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), texture_in_child, In(sa)); });
    CHECK(contains(nested.what(), "inside a conditional body or a child graph"));
    CHECK(contains(nested.what(), "takes a texture object over static input leaf 0"));
  }
#endif
  {
    auto copying = cugraphs::make_graphed_callable(reads_texture, In(sa));  // Copy
    const DeviceBuffer<float> x = filled(kN, 10);
    CHECK(bitwise_equal(host(copying(In(x))), host(reads_texture(In(x)).span())));
  }

  // A table of the input's address copied from plain pageable memory (a capture in
  // ThreadLocal mode lets such copies through): it cannot be searched, and would keep the
  // static input's address.
  {
    DeviceBuffer<const float*> table(1);
    auto through_table = [&table, held = std::vector<const float*>(1)](In a) mutable {
      held[0] = a.data();
      const cudaStream_t s = cugraphs::current_stream();
      cugraphs::check(cudaMemcpyAsync(table.data(), held.data(), sizeof(const float*), cudaMemcpyHostToDevice, s),
                      "cudaMemcpyAsync");
      DeviceBuffer<float> out(a.size());
      gather_first<<<blocks_for(a.size()), kThreads, 0, s>>>(out.data(), table.data(), a.size());
      cugraphs::check_launch("gather_first");
      return out;
    };
    auto opts = in_place();
    opts.mode = cugraphs::CaptureMode::ThreadLocal;
    const auto pageable = expect_error([&] { (void)cugraphs::make_graphed_callable(opts, through_table, In(sa)); });
    CHECK(contains(pageable.what(), "copies 8 bytes from plain pageable host memory"));
    CHECK(contains(pageable.what(), "Make it with InputMode::Copy"));
  }

  // A parameter block in managed or mapped pinned memory that the host fills in f: while f
  // is captured it holds the static input's address, which no call can rebind.
  for (const bool managed : {true, false}) {
    INFO("managed " << managed);
    Block* block = nullptr;
    if (managed)
      cugraphs::check(cudaMallocManaged(&block, sizeof(Block)), "cudaMallocManaged");
    else
      cugraphs::check(cudaHostAlloc(&block, sizeof(Block), cudaHostAllocMapped), "cudaHostAlloc");
    auto through_block = [block](In a) {
      const cudaStream_t s = cugraphs::current_stream();
      block->n = a.size();
      block->x = a.data();
      DeviceBuffer<float> out(a.size());
      from_block<<<blocks_for(a.size()), kThreads, 0, s>>>(out.data(), block);
      cugraphs::check_launch("from_block");
      return out;
    };
    const auto e = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), through_block, In(sa)); });
    CHECK(contains(e.what(), "pinned host or managed memory that holds the address of static input leaf 0"));
    CHECK(contains(e.what(), "Make it with InputMode::Copy"));
    cugraphs::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cugraphs::check(managed ? cudaFree(block) : cudaFreeHost(block), "free");
  }

  auto sets_input = [](Out a) {
    cugraphs::check(cudaMemsetAsync(a.data(), 0, a.size_bytes(), cugraphs::current_stream()), "cudaMemsetAsync");
  };
  DeviceBuffer<float> sx = filled(kN, 9);
  const auto memset = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), sets_input, Out(sx)); });
  CHECK(contains(memset.what(), "is a memset of static input leaf 0"));

  // f returning a view of its input: the output would show the static input, which calls
  // that read in place never write.
  auto returns_input = [](Out a) {
    affine_kernel<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(a.data(), a.size(), 2.0f, 1.0f);
    return a;
  };
  const auto view = expect_error([&] { (void)cugraphs::make_graphed_callable(in_place(), returns_input, Out(sx)); });
  CHECK(contains(view.what(), "output leaf 0 lies in static input leaf 0"));

  auto opts = in_place();
  opts.per_launch = cugraphs::PerLaunch::Ring;
  const auto ring = expect_error([&] { (void)cugraphs::make_graphed_callable(opts, model(), In(sa), In(sa)); });
  CHECK(contains(ring.what(), "PerLaunch::Ring was asked for"));

  auto fwd = [](In a) {
    DeviceBuffer<float> out(a.size());
    copy_kernel<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), a.data(), a.size());
    return out;
  };
  auto bwd = [](In, Out, In grad) {
    DeviceBuffer<float> out(grad.size());
    copy_kernel<<<blocks_for(grad.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), grad.data(),
                                                                                     grad.size());
    return out;
  };
  const auto pair = expect_error(
      [&] { (void)cugraphs::make_graphed_pair(in_place(), fwd, bwd, cugraphs::requires_grad(In(sa))); });
  CHECK(contains(pair.what(), "graphed pairs copy their inputs"));

  auto g = cugraphs::make_graphed_callable(copies_input, In(sa));  // Copy
  const DeviceBuffer<float> x = filled(kN, 10);
  CHECK(bitwise_equal(host(g(In(x))), host(In(x))));
}

TEST_CASE("InPlace: an input not aligned as its static input is copied for that call, the other input read in "
          "place, and the results match eager calls",
          "[in_place][graphed][gpu]") {
  auto f = model();
  const DeviceBuffer<float> sa = filled(kN, 11), sb = filled(kN, 12);
  auto g = cugraphs::make_graphed_callable(in_place(), f, In(sa), In(sb));
  const DeviceBuffer<float> wide = filled(kN + 1, 13), b = filled(kN, 14);
  const In shifted(wide.data() + 1, kN);  // 4 bytes past a 256-byte boundary
  const auto static_b = host(std::get<1>(g.static_inputs()));
  for (int call = 0; call < 4; ++call) {
    const bool aligned = call % 2 == 1;
    const In a = aligned ? In(sb) : shifted;
    const Out out = g(a, In(b));
    INFO("call " << call);
    REQUIRE(bitwise_equal(host(out), host(f(a, In(b)).span())));
  }
  CHECK(g.staged_copies() == 2 * 1);  // the two shifted calls, the shifted input alone each
  // The shifted input was copied onto its static input; b never was.
  CHECK(bitwise_equal(host(std::get<0>(g.static_inputs())), host(shifted)));
  CHECK(bitwise_equal(host(std::get<1>(g.static_inputs())), static_b));
}

TEST_CASE("InPlace: a writable input not aligned as its static input is an Error, since f's writes would reach "
          "only the copy; aligned, f's writes reach the caller's buffer",
          "[in_place][graphed][gpu]") {
  // f updates its first input in place (a parameter step) and returns a sum. Before, the
  // unaligned call copied x in, f stepped the copy, and the caller's x kept its old values.
  auto f = [](Out x, In g) {
    const cudaStream_t s = cugraphs::current_stream();
    const std::size_t n = x.size();
    DeviceBuffer<float> out(n);
    affine_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.data(), n, 0.5f, 1.0f);
    reverse_mix<<<blocks_for(n), kThreads, 0, s>>>(out.data(), g.data(), x.data(), n, 2.0f);
    cugraphs::check_launch("step in place");
    return out;
  };
  DeviceBuffer<float> sx = filled(kN, 51);
  const DeviceBuffer<float> sg = filled(kN, 52);
  auto g = cugraphs::make_graphed_callable(in_place(), f, Out(sx), In(sg));
  DeviceBuffer<float> x = filled(kN, 53), x_eager = filled(kN, 53), wide = filled(kN + 1, 54);
  const auto expect_out = host(f(Out(x_eager), In(sg)).span());
  REQUIRE(bitwise_equal(host(g(Out(x), In(sg))), expect_out));
  CHECK(bitwise_equal(host(In(x)), host(In(x_eager))));  // the step reached the caller's buffer
  CHECK(g.staged_copies() == 0);

  const Out shifted(wide.data() + 1, kN);  // 4 bytes past a 256-byte boundary
  const auto before = host(In(shifted));
  const auto e = expect_error([&] { (void)g(shifted, In(sg)); });
  CHECK(contains(e.what(), "input leaf 0 (at "));
  CHECK(contains(e.what(), "is writable (a DeviceSpan of non-const elements) but not aligned to 256 bytes"));
  CHECK(contains(e.what(), "make that argument a DeviceSpan<const T>"));
  CHECK(g.calls() == 1);
  cugraphs::check(cudaDeviceSynchronize(), "sync");
  CHECK(bitwise_equal(host(In(shifted)), before));  // nothing ran

  // Still usable, and a read-only unaligned input is copied as before.
  auto reads = cugraphs::make_graphed_callable(in_place(), [](In a) {
    DeviceBuffer<float> out(a.size());
    copy_kernel<<<blocks_for(a.size()), kThreads, 0, cugraphs::current_stream()>>>(out.data(), a.data(), a.size());
    return out;
  }, In(sg));
  CHECK(bitwise_equal(host(reads(In(shifted))), before));
  CHECK(reads.staged_copies() == 1);
  REQUIRE(bitwise_equal(host(g(Out(x), In(sg))), host(f(Out(x_eager), In(sg)).span())));
  CHECK(bitwise_equal(host(In(x)), host(In(x_eager))));
}

TEST_CASE("InPlace: addresses just outside an input (a one-based base, past its end) and kernels launched "
          "through the driver are rebound, bitwise as eager calls",
          "[in_place][graphed][gpu]") {
  const DriverLaunches driver;
  auto f = [&driver](In a, In b) {
    const cudaStream_t s = cugraphs::current_stream();
    const std::size_t n = a.size();
    DeviceBuffer<float> out(n);
    pad_reads<<<blocks_for(n), kThreads, 0, s>>>(out.data(), a.data() - 1, a.data() + n + 4, b.data() - 64, n);
    cugraphs::check_launch("pad_reads");
    driver.run(driver.function, true, out.data(), a.data(), b.data(), n, s);
    driver.run(driver.kernel, false, out.data(), b.data(), a.data(), n, s);
    return out;
  };
  const DeviceBuffer<float> sa = filled(kN, 21), sb = filled(kN, 22);
  auto g = cugraphs::make_graphed_callable(in_place(), f, In(sa), In(sb));
  const auto statics_a = host(std::get<0>(g.static_inputs())), statics_b = host(std::get<1>(g.static_inputs()));

  std::vector<DeviceBuffer<float>> inputs;
  for (std::uint32_t k = 0; k < 4; ++k) inputs.push_back(filled(kN, 30 + k));
  for (int call = 0; call < 12; ++call) {
    const In a(inputs[static_cast<std::size_t>(call % 4)]);
    const In b(inputs[static_cast<std::size_t>((call + 1) % 4)]);
    INFO("call " << call);
    REQUIRE(bitwise_equal(host(g(a, b)), host(f(a, b).span())));
  }
  CHECK(g.staged_copies() == 0);
  CHECK(bitwise_equal(host(std::get<0>(g.static_inputs())), statics_a));
  CHECK(bitwise_equal(host(std::get<1>(g.static_inputs())), statics_b));

  // An input not aligned as its static input is copied, and the words around it then name the
  // static input again (its pads): still the eager call's numbers.
  const DeviceBuffer<float> wide = filled(kN + 1, 40);
  const In shifted(wide.data() + 1, kN);
  REQUIRE(bitwise_equal(host(g(shifted, In(inputs[0]))), host(f(shifted, In(inputs[0])).span())));
  CHECK(g.staged_copies() == 1);
  REQUIRE(bitwise_equal(host(g(In(inputs[1]), In(inputs[2]))), host(f(In(inputs[1]), In(inputs[2])).span())));
  CHECK(g.staged_copies() == 1);
}
