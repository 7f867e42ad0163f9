// The second translation unit of test_header_only (see there).
#include <cugraphs/graph.hpp>

#include <string>

namespace header_only_other {
std::string misuse_text() {
  try {
    cugraphs::detail::throw_misuse("Graph::replay", "x {}", 3);
  } catch (const cugraphs::Error& e) {
    return e.what();
  }
  return {};
}
std::string hint_text() { return cugraphs::detail::error_hint(cudaErrorStreamCaptureImplicit, "Global"); }
}  // namespace header_only_other
