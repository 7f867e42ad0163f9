// expect: verify_replay runs the step eagerly, outside any capture
// A step that opens conditional scopes takes the CaptureScope: it cannot run eagerly.
#include <cugraphs/graph.hpp>

void check(cugraphs::Graph& g, cugraphs::DeviceSpan<float> x) {
  cugraphs::verify_replay(g, [](cugraphs::CaptureScope&) {}, x);
}
