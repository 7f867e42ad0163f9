// expect: do not match its Args
// A GraphedCallable made for float inputs, called with an int span.
#include <cugraphs/graph.hpp>

void call(cugraphs::GraphedCallable<void (*)(cugraphs::DeviceSpan<const float>), cugraphs::DeviceSpan<const float>>& g,
          cugraphs::DeviceSpan<int> wrong) {
  g(wrong);
}
