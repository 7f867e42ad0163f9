// Placeholder, being written.
#include "testing.hpp"

#include <cugraphs/graph.hpp>

TEST_CASE("threads: placeholder", "[threads][gpu]") { REQUIRE(cugraphs::is_current_stream_capturing() == false); }
