// The captured graph as an object of its own: NativeGraph owns a cudaGraph_t (shared by its
// Graph and by export_dot's record of the most recent capture), with the words for
// instantiation failures and the DOT writer.
#pragma once

#include <cugraphs/config.hpp>
#include <cugraphs/detail/graph_queries.hpp>
#include <cugraphs/error.hpp>

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace cugraphs::detail {

// Why cudaGraphInstantiateWithParams failed, in words.
// `g` is the graph instantiated, to say where the failing node stands.
[[nodiscard]] std::string instantiate_failure(cudaError_t e, const cudaGraphInstantiateParams& p, cudaGraph_t g);

// Owns a cudaGraph_t; shared so that export_dot can still write the most recently
// completed capture after its Graph was reset.
struct NativeGraph {
  cudaGraph_t graph;
  // What the graph's nodes name and must outlive it (the event a staging graph's last node
  // records): let go after cudaGraphDestroy, since members go after the destructor's body.
  std::shared_ptr<void> keep;
  // CUDA graph objects are not internally synchronized, and export_dot may write this one
  // from another thread: every CUDA call on `graph` made after it is shared (instantiation,
  // DOT writes) holds this mutex.
  std::mutex m;
  // Whether the graph has memory-allocation nodes, whose addresses a later capture may copy
  // from before this graph first runs (hold_graph_allocations).
  bool allocates;
  explicit NativeGraph(cudaGraph_t g) noexcept : graph(g), allocates(hold_graph_allocations(this, g)) {}
  ~NativeGraph() {
    if (allocates) release_graph_allocations(this);
    report_in_destructor(cudaGraphDestroy(graph), "cudaGraphDestroy");
  }
  NativeGraph(const NativeGraph&) = delete;
  NativeGraph& operator=(const NativeGraph&) = delete;
};

class LastCapture {
public:
  static LastCapture& instance();
  void set(std::shared_ptr<NativeGraph> g);
  [[nodiscard]] std::shared_ptr<NativeGraph> get();

private:
  std::mutex m_;
  std::shared_ptr<NativeGraph> graph_;
};

void write_dot(cudaGraph_t g, const std::string& path, std::string_view op);

}  // namespace cugraphs::detail

#if !defined(CUGRAPHS_SEPARATE_COMPILATION)
#  include <cugraphs/impl/native_graph.ipp>
#endif
