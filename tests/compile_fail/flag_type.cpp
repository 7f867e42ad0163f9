// expect: read their condition from a device flag of type const bool*
// A While scope opened on an int flag: it would read the int's first byte as the condition.
#include <cugraphs/graph.hpp>

void loop_on(cugraphs::CaptureScope& scope, const int* counter) {
  cugraphs::ConditionalScope<cugraphs::While> loop(scope, counter);
}
