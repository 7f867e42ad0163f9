// The registry of live DeviceBuffers that graphs check at replay (reliability row 119), on
// fake addresses (never dereferenced): which buffer an address names, and which frees a
// graph notices.
#include "testing.hpp"

#include <cugraphs/detail/buffer_registry.hpp>

#include <cstdint>
#include <vector>

using cugraphs::detail::BufferRegistry;
using cugraphs::detail::named_buffers_freed;
using cugraphs::detail::NamedBuffer;

namespace {
// Far above anything the other host tests could hold.
constexpr std::uintptr_t kBase = std::uintptr_t{0x7e5} << 36;
const void* at(std::uintptr_t offset) { return reinterpret_cast<const void*>(kBase + offset); }
}  // namespace

TEST_CASE("BufferRegistry: an address names the buffer it lies in, or ends one past, preferring the buffer that "
          "starts there; a free some graph noticed is counted, and a new buffer at the same address is another",
          "[registry]") {
  BufferRegistry& r = BufferRegistry::instance();
  r.add(at(0), 4096);         // a
  r.add(at(4096), 1024);      // c, right after a
  r.add(at(1 << 20), 512);    // b, alone
  r.add(at(2 << 20), 256);    // d, never named
  CHECK_FALSE(r.empty());

  std::vector<NamedBuffer> named;
  const std::vector<std::uint64_t> words{
      kBase + 100,              // inside a
      kBase + 4096,             // c's first byte (and a's end): c
      kBase + (1 << 20) + 512,  // one past b, where nothing starts: b
      kBase + 100,              // a again: named once a call
      0,                        // a null pointer
      kBase + (3 << 20),        // no buffer
      7,                        // a scalar
  };
  r.name(words, 3, named);
  REQUIRE(named.size() == 3);
  CHECK(named[0].base == kBase);
  CHECK(named[0].bytes == 4096);
  CHECK(named[1].base == kBase + 4096);
  CHECK(named[2].base == kBase + (1 << 20));
  for (const NamedBuffer& b : named) CHECK(b.node == 3);
  CHECK(r.first_gone(named) == nullptr);

  // Another call names a again, for another node.
  r.name(std::vector<std::uint64_t>{kBase + 4095}, NamedBuffer::kNested, named);
  REQUIRE(named.size() == 4);
  CHECK(named[3].id == named[0].id);

  // Freeing a buffer no graph named leaves the count alone; a named one moves it.
  const auto freed = named_buffers_freed.load();
  r.remove(at(2 << 20));
  CHECK(named_buffers_freed.load() == freed);
  r.remove(at(4096));
  CHECK(named_buffers_freed.load() == freed + 1);
  const NamedBuffer* gone = r.first_gone(named);
  REQUIRE(gone != nullptr);
  CHECK(gone->base == kBase + 4096);

  // A new buffer where c was is not c.
  r.add(at(4096), 1024);
  gone = r.first_gone(named);
  REQUIRE(gone != nullptr);
  CHECK(gone->base == kBase + 4096);
  r.remove(at(12345));  // never added: nothing happens

  for (const std::uintptr_t off : {std::uintptr_t{0}, std::uintptr_t{4096}, std::uintptr_t{1} << 20})
    r.remove(at(off));
  CHECK(named_buffers_freed.load() == freed + 3);
}
