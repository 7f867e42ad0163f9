// The pool's block bookkeeping, on fake segments (addresses are never dereferenced).
#include "testing.hpp"

#include <cugraphs/detail/block_allocator.hpp>

#include <array>

using cugraphs::detail::BlockAllocator;
using cugraphs::detail::BlockTag;
using cugraphs::detail::kBlockAlignment;

namespace {
constexpr std::size_t MiB = 1 << 20;
void* fake_base(std::uintptr_t n) { return reinterpret_cast<void*>(n << 32); }
auto* const stream_a = reinterpret_cast<cudaStream_t>(0x1000);
auto* const stream_b = reinterpret_cast<cudaStream_t>(0x2000);
}  // namespace

TEST_CASE("BlockAllocator: carves blocks by best fit and counts bytes exactly", "[pool]") {
  BlockAllocator a;
  const std::array<std::uint64_t, 1> open{7};
  CHECK(a.allocate(1024, {7, stream_a}, open) == nullptr);  // no segment yet
  a.add_segment(fake_base(1), 2 * MiB);
  CHECK(a.reserved_bytes() == 2 * MiB);

  auto* b1 = a.allocate(4096, {7, stream_a}, open);
  auto* b2 = a.allocate(kBlockAlignment, {7, stream_a}, open);
  REQUIRE(b1 != nullptr);
  REQUIRE(b2 != nullptr);
  CHECK(b1->addr == reinterpret_cast<std::uintptr_t>(fake_base(1)));
  CHECK(b2->addr == b1->addr + 4096);
  CHECK(a.allocated_bytes() == 4096 + kBlockAlignment);
  CHECK(a.reserved_bytes() == 2 * MiB);
  CHECK(a.allocate(4 * MiB, {7, stream_a}, open) == nullptr);  // larger than any free block

  a.free(b1, open);
  a.free(b2, open);
  CHECK(a.allocated_bytes() == 0);
  CHECK(a.free_block_count() == 1);  // all three pieces merged back
}

TEST_CASE("BlockAllocator: the smallest block that fits is chosen", "[pool]") {
  BlockAllocator a;
  const std::array<std::uint64_t, 0> none{};
  a.add_segment(fake_base(1), 8 * MiB);
  a.add_segment(fake_base(2), 2 * MiB);
  auto* b = a.allocate(MiB, {}, none);
  REQUIRE(b != nullptr);
  CHECK(b->addr == reinterpret_cast<std::uintptr_t>(fake_base(2)));
}

TEST_CASE("BlockAllocator: a block freed in an open capture is reused only by that capture and stream",
          "[pool]") {
  BlockAllocator a;
  a.add_segment(fake_base(1), 2 * MiB);
  std::array<std::uint64_t, 2> open{1, 2};
  auto* whole = a.allocate(2 * MiB, {1, stream_a}, open);
  REQUIRE(whole != nullptr);
  const auto addr = whole->addr;
  a.free(whole, open);

  CHECK(a.allocate(MiB, {1, stream_b}, open) == nullptr);  // same capture, other stream
  CHECK(a.allocate(MiB, {2, stream_a}, open) == nullptr);  // another capture still open
  CHECK(a.allocate(MiB, {}, open) == nullptr);             // outside any capture

  auto* again = a.allocate(MiB, {1, stream_a}, open);
  REQUIRE(again != nullptr);
  CHECK(again->addr == addr);
  a.free(again, open);

  // Once capture 1 has ended, any later capture may reuse the block.
  const std::array<std::uint64_t, 1> after{2};
  a.coalesce(after);
  auto* later = a.allocate(2 * MiB, {2, stream_b}, after);
  REQUIRE(later != nullptr);
  CHECK(later->addr == addr);
}

TEST_CASE("BlockAllocator: neighbours pending on different streams merge only once settled", "[pool]") {
  BlockAllocator a;
  a.add_segment(fake_base(1), 2 * MiB);
  std::array<std::uint64_t, 1> open{5};
  auto* x = a.allocate(MiB, {5, stream_a}, open);
  auto* y = a.allocate(MiB, {5, stream_b}, open);
  REQUIRE(x != nullptr);
  REQUIRE(y != nullptr);
  a.free(x, open);
  a.free(y, open);
  CHECK(a.free_block_count() == 2);
  CHECK(a.allocate(2 * MiB, {5, stream_a}, open) == nullptr);

  const std::array<std::uint64_t, 0> none{};
  a.coalesce(none);
  CHECK(a.free_block_count() == 1);
  CHECK(a.allocate(2 * MiB, {9, stream_b}, none) != nullptr);
}

TEST_CASE("BlockAllocator: only wholly free, settled segments are given back", "[pool]") {
  BlockAllocator a;
  const std::array<std::uint64_t, 0> none{};
  a.add_segment(fake_base(1), 2 * MiB);
  a.add_segment(fake_base(2), 4 * MiB);
  auto* held = a.allocate(3 * MiB, {}, none);
  REQUIRE(held != nullptr);
  CHECK(held->addr == reinterpret_cast<std::uintptr_t>(fake_base(2)));

  auto released = a.take_free_segments(none);
  REQUIRE(released.size() == 1);
  CHECK(released[0] == fake_base(1));
  CHECK(a.reserved_bytes() == 4 * MiB);
  CHECK(a.segment_count() == 1);

  a.free(held, none);
  released = a.take_free_segments(none);
  REQUIRE(released.size() == 1);
  CHECK(released[0] == fake_base(2));
  CHECK(a.reserved_bytes() == 0);
  CHECK(a.segment_bases().empty());
}
