// expect: do not match the pair's staged inputs
// A pair's forward called with its parameter too: parameters are read in place, never passed.
#include <cugraphs/graph.hpp>

using In = cugraphs::DeviceSpan<const float>;
using Out = cugraphs::DeviceSpan<float>;
using Forward = cugraphs::DeviceBuffer<float> (*)(In, In);
using Backward = void (*)(In, In, Out, In);

void call(cugraphs::GraphedPair<Forward, Backward, In, cugraphs::Param<In>>& pair, In x, In w) {
  (void)pair.forward(x, w);
}
