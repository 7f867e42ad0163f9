// expect: without narrowing (is the index right?
// A float bias correction set at the index of the kernel's size_t count: it would convert
// silently to 0.
#include <cugraphs/graph.hpp>

#include <cstddef>

void step(cugraphs::Graph& g, const cugraphs::KernelNode<float*, std::size_t, float>& node, float bc1) {
  g.set_kernel_arg<1>(node, bc1);
}
