// expect: must return one gradient per argument marked requires_grad
// A backward that returns a double gradient for a float input marked requires_grad.
#include <cugraphs/graph.hpp>

using In = cugraphs::DeviceSpan<const float>;
using Out = cugraphs::DeviceSpan<float>;
using Forward = cugraphs::DeviceBuffer<float> (*)(In);
using Backward = cugraphs::DeviceBuffer<double> (*)(In, Out, In);

void call(cugraphs::GraphedPair<Forward, Backward, cugraphs::Grad<In>>& pair, In x) { (void)pair.forward(x); }
