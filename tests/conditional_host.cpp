// The seed's low-level conditional members of Graph, used from a translation unit that the
// host compiler (not nvcc) compiles: the condition kernel comes from the nvcc-compiled part
// of the program.
#include <cugraphs/graph.hpp>

#include <vector>

bool host_compiled_if_node_works(const bool* flag, int* counter, void (*launch_increment)(int*, cudaStream_t)) {
  cugraphs::Graph g;
  g.capture_begin();
  g.begin_capture_to_if_node(flag);
  launch_increment(counter, cugraphs::current_stream());
  g.end_capture_to_conditional_node();
  g.capture_end();

  int result = 0;
  bool ok = true;
  for (const bool on : {true, false, true}) {
    const bool host_flag = on;
    cugraphs::check(cudaMemcpy(const_cast<bool*>(flag), &host_flag, 1, cudaMemcpyHostToDevice), "flag");
    cugraphs::check(cudaMemcpy(counter, &result, sizeof(int), cudaMemcpyHostToDevice), "counter");
    g.replay();
    int after = -1;
    cugraphs::check(cudaMemcpy(&after, counter, sizeof(int), cudaMemcpyDeviceToHost), "read back");
    ok = ok && after == (on ? 1 : 0);
  }
  return ok;
}
