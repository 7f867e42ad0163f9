// Plain C++ (g++) using the host API through the umbrella header.
#include <cugraphs/graph.hpp>

#include <string>

// True when replaying an empty graph gives cugraphs::Error naming the misuse.
bool empty_replay_is_an_error() {
  cugraphs::Graph g;
  try {
    g.replay();
  } catch (const cugraphs::Error& e) {
    return std::string(e.what()).find("nothing has been captured") != std::string::npos;
  }
  return false;
}
