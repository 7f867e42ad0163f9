// The bad-input table of docs/reliability.md, rows for pool handles and device buffers. Every public operation
// called in the wrong state or with wrong arguments throws a cugraphs::Error whose message
// names the cause, and every object involved stays usable: graphs capture and replay
// afterwards (values read back and compared), no stream is left capturing, pools' figures
// add up, and no CUDA error is left behind. Rows that need two GPUs say so and are skipped,
// with a warning, on one.
#include "reliability.cuh"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

using namespace cugraphs_reliability;
using cugraphs::CaptureScope;
using cugraphs::Generator;


// ---------------------------------------------------------------------------------------
// Pools
// ---------------------------------------------------------------------------------------

TEST_CASE("PoolHandle: a pool of another device is refused by capture_begin and make_graphed_callable; the "
          "pool stays empty and captures on its own device (needs 2 GPUs)", "[reliability][gpu]") {
  const int other = other_device("a pool of another device");
  if (other < 0) return;
  const int here = current_device();
  auto pool = cugraphs::graph_pool_handle(other);
  const std::string why = fmt::format("the pool (id {}) belongs to device {} but device {} is current",
                                      pool.id(), other, here);
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  auto e = expect_error([&] { CaptureScope scope(g, o); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), why));
  CHECK_FALSE(g.is_capturing());

  int calls = 0;
  DeviceBuffer<float> x(kN);
  cugraphs::GraphedOptions go;
  go.pool = pool;
  e = expect_error([&] { (void)cugraphs::make_graphed_callable(go, TwoXPlusOne{&calls}, In(x)); });
  CHECK(contains(e.what(), why));
  CHECK(pool.allocated_bytes() == 0);
  CHECK(pool.reserved_bytes() == 0);
  check_clean();

  // On its own device the pool works.
  {
    cugraphs::detail::DeviceGuard on(other);
    Graph h;
    DeviceBuffer<float> kept;
    {
      CaptureScope scope(h, o);
      kept = DeviceBuffer<float>(kN);
      fill_kernel<<<blocks_for(kN), kThreads, 0, scope.stream()>>>(kept.data(), kN, 3.0f);
    }
    CHECK(pool.allocated_bytes() == 12288);  // 12000 bytes, in 512-byte blocks
    h.replay();
    CHECK(kept.to_host()[7] == 3.0f + 0.007f);
  }
  CHECK(current_device() == here);
}

TEST_CASE("PoolHandle: a moved-from handle still refers to its pool (moves copy); a missing device is an "
          "Error", "[reliability][gpu]") {
  Affine f{2.0f, -0.75f};
  auto pool = cugraphs::graph_pool_handle();
  auto moved_to = std::move(pool);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from handle is the point
  CHECK(pool == moved_to);
  CHECK(pool.id() == moved_to.id());
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  {
    CaptureScope scope(g, o);
    DeviceBuffer<float> temp(kN);
    f.launch(scope.stream());
    CHECK(pool.allocated_bytes() == 12288);
  }
  CHECK(g.pool_id() == moved_to.id());
  CHECK(moved_to.allocated_bytes() == 0);
  CHECK(moved_to.reserved_bytes() == std::size_t{2} << 20);  // one 2 MiB segment
  // NOLINTEND(bugprone-use-after-move)
  f.check_replays(g, 190);
  for (const int bad : {-1, 1 << 20}) {
    const auto e = expect_error([&] { (void)cugraphs::graph_pool_handle(bad); });
    CHECK(e.code() == cudaErrorInvalidDevice);
    CHECK(contains(e.what(), fmt::format("graph_pool_handle({}): no such device", bad)));
  }
  check_clean();
}

// ---------------------------------------------------------------------------------------
// DeviceBuffer
// ---------------------------------------------------------------------------------------

TEST_CASE("DeviceBuffer: host copies of the wrong size are Errors that copy nothing", "[reliability][gpu]") {
  const auto data = random_floats(kN, 200);
  DeviceBuffer<float> b(kN);
  b.copy_from_host(data);
  const std::vector<float> shorter(kN - 1, 5.0f);
  auto e = expect_error([&] { b.copy_from_host(shorter); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "DeviceBuffer::copy_from_host"));
  CHECK(contains(e.what(), "the host range has 2999 elements but the buffer has 3000"));
  std::vector<float> longer(kN + 1, -9.0f);
  e = expect_error([&] { b.copy_to_host(longer); });
  CHECK(contains(e.what(), "DeviceBuffer::copy_to_host"));
  CHECK(contains(e.what(), "the host range has 3001 elements but the buffer has 3000"));
  CHECK(longer == std::vector<float>(kN + 1, -9.0f));  // nothing copied out
  CHECK(b.to_host() == data);                           // nothing copied in
  const auto fresh = random_floats(kN, 201);
  b.copy_from_host(fresh);
  CHECK(b.to_host() == fresh);
  check_clean();
}

TEST_CASE("DeviceBuffer: a moved-from buffer is empty, a host copy into it names that, and the buffer it "
          "moved to keeps the data", "[reliability][gpu]") {
  const auto data = random_floats(kN, 210);
  DeviceBuffer<float> a(kN);
  a.copy_from_host(data);
  DeviceBuffer<float> b = std::move(a);
  // NOLINTBEGIN(bugprone-use-after-move): using the moved-from buffer is the point
  CHECK(a.data() == nullptr);
  CHECK(a.size() == 0);
  const auto e = expect_error([&] { a.copy_from_host(data); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "the host range has 3000 elements but the buffer has 0"));
  CHECK(contains(e.what(), "moved from"));
  CHECK(a.to_host().empty());  // an empty buffer reads back as empty, consistently
  CHECK(b.to_host() == data);
  a = DeviceBuffer<float>(kN);  // and takes new memory
  a.copy_from_host(data);
  CHECK(a.to_host() == data);
  // NOLINTEND(bugprone-use-after-move)
  check_clean();
}

TEST_CASE("DeviceBuffer: a host copy on a capturing stream is an Error, and the capture is not invalidated",
          "[reliability][gpu]") {
  Affine f{-0.5f, 0.25f};
  const auto data = random_floats(kN, 220);
  Graph g;
  {
    CaptureScope scope(g);
    f.launch(scope.stream());
    for (const auto& e : {expect_error([&] { f.x.copy_from_host(data, scope.stream()); }),
                          expect_error([&] { (void)f.x.to_host(scope.stream()); })}) {
      CHECK(e.code() == cudaSuccess);
      CHECK(contains(e.what(), "the stream is capturing"));
      CHECK(contains(e.what(), "copy before capture_begin, or after capture_end"));
    }
    CHECK(capture_active(scope.stream()));
  }
  f.check_replays(g, 230);
  check_clean();
}

TEST_CASE("DeviceBuffer: a count whose byte size overflows, and one larger than the device, are Errors; "
          "a capture survives the failed allocation", "[reliability][gpu]") {
  constexpr std::size_t overflowing = std::numeric_limits<std::size_t>::max() / 2;
  constexpr std::size_t too_large = std::size_t{1} << 60;  // 4 EiB of floats
  auto e = expect_error([&] { DeviceBuffer<float> b(overflowing); });
  CHECK(e.code() == cudaSuccess);
  CHECK(contains(e.what(), "overflow"));
  e = expect_error([&] { (void)cugraphs::allocate<float>(too_large); });
  CHECK(e.code() == cudaErrorMemoryAllocation);
  CHECK(contains(e.what(), "cudaMallocAsync"));
  CHECK(contains(e.what(), "out of memory"));
  CHECK(cudaGetLastError() == cudaSuccess);

  Affine f{4.0f, 1.0f};
  auto pool = cugraphs::graph_pool_handle();
  CaptureOptions o;
  o.pool = pool;
  Graph g;
  {
    CaptureScope scope(g, o);
    e = expect_error([&] { DeviceBuffer<float> huge(too_large); });
    CHECK(e.code() == cudaErrorMemoryAllocation);
    CHECK(contains(e.what(), fmt::format("graph pool {}", pool.id())));
    e = expect_error([&] { DeviceBuffer<float> huge(overflowing); });
    CHECK(contains(e.what(), "overflow"));
    CHECK(pool.reserved_bytes() == 0);
    CHECK(capture_active(scope.stream()));
    DeviceBuffer<float> temp(kN);  // the pool still allocates
    CHECK(pool.allocated_bytes() == 12288);
    f.launch(scope.stream());
  }
  CHECK(pool.allocated_bytes() == 0);
  f.check_replays(g, 240);
  DeviceBuffer<float> fine(kN);
  CHECK(fine.data() != nullptr);
  check_clean();
}

