// A consumer built with -fno-exceptions: cugraphs hands failures to the error handler.
//   consumer handler   a handler set with set_error_handler reports the misuse and exits 3
//   consumer default   the default handler prints the message and aborts
#include <cugraphs/graph.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static_assert(CUGRAPHS_EXCEPTIONS == 0, "this consumer must be built with -fno-exceptions");

void launch_scale(float* x, int n, float a, cudaStream_t s);

namespace {
void report_and_exit(const cugraphs::Error& e) noexcept {
  std::printf("handler got (code %d): %s\n", static_cast<int>(e.code()), e.what());
  std::fflush(stdout);
  std::_Exit(3);
}
}  // namespace

int main(int argc, char** argv) {
  const bool custom = argc > 1 && std::strcmp(argv[1], "handler") == 0;
  if (custom) (void)cugraphs::set_error_handler(&report_and_exit);
  cugraphs::Graph empty;
  empty.replay();  // misuse: never returns
  std::puts("consumer: replay of an empty graph returned");
  return 1;
}
