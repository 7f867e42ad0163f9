// expect: graphed callable inputs must be DeviceSpan<T> leaves
// An owning DeviceBuffer passed as a sample input instead of its span.
#include <cugraphs/graph.hpp>

void make(const cugraphs::DeviceBuffer<float>& sample) {
  auto g = cugraphs::make_graphed_callable([](const cugraphs::DeviceBuffer<float>&) {}, sample);
  (void)g;
}
