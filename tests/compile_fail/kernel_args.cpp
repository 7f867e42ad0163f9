// expect: every argument must convert to its kernel parameter's type
// A kernel node of a kernel taking (float*, int), given a string for its pointer.
#include <cugraphs/graph.hpp>

void rebind(cugraphs::Graph& g, const cugraphs::KernelNode<float*, int>& node) { g.set_kernel_args(node, "text", 3); }
