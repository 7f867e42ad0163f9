// The header-only build (no CUGRAPHS_SEPARATE_COMPILATION): two translation units include
// every header, so a function body left without `inline` is defined twice and the program
// fails to link; the calls below reach bodies from both units. Host-only.
#include "testing.hpp"

#include <cugraphs/graph.hpp>

#include <string>

#if defined(CUGRAPHS_SEPARATE_COMPILATION)
#  error "test_header_only must be built header-only (the cugraphs-header-only dependency)"
#endif

namespace header_only_other {
std::string misuse_text();
std::string hint_text();
}  // namespace header_only_other

TEST_CASE("Header-only build: bodies defined in every translation unit link once and agree", "[header_only]") {
  const auto here = cugraphs_test::expect_error([] { cugraphs::detail::throw_misuse("Graph::replay", "x {}", 3); });
  CHECK(std::string(here.what()) == header_only_other::misuse_text());
  CHECK(cugraphs::detail::error_hint(cudaErrorStreamCaptureImplicit, "Global") == header_only_other::hint_text());
  CHECK(cugraphs_test::contains(header_only_other::hint_text(), "legacy default stream"));
}
