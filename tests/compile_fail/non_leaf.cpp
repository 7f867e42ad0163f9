// expect: this type cannot be flattened
// A graphed callable whose argument is not a DeviceSpan tree.
#include <cugraphs/graph.hpp>

#include <vector>

struct NotOptedIn {
  cugraphs::DeviceSpan<float> x;
};

void make(NotOptedIn sample) {
  auto g = cugraphs::make_graphed_callable([](const NotOptedIn&) {}, sample);
  (void)g;
}
