// expect: do not match its Args
// A GraphedCallable of one input, called with two.
#include <cugraphs/graph.hpp>

void call(cugraphs::GraphedCallable<void (*)(cugraphs::DeviceSpan<const float>), cugraphs::DeviceSpan<const float>>& g,
          cugraphs::DeviceSpan<const float> x) {
  g(x, x);
}
