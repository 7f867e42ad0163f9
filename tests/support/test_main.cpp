// The one Catch2 main of the test suite. Executables that need a GPU exit with 77, meson's
// "skipped", when no CUDA device is present.
#if defined(CUGRAPHS_CATCH2_V3)
#  include <catch2/catch_session.hpp>
#else
#  define CATCH_CONFIG_RUNNER
#  include <catch2/catch.hpp>
#endif

#include <cuda_runtime_api.h>

#include <cstdio>

bool cugraphs_test_requires_gpu();  // defined by requires_gpu.cpp or host_only.cpp

int main(int argc, char* argv[]) {
  if (cugraphs_test_requires_gpu()) {
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::printf("SKIP: no CUDA device (%s); this test needs a GPU\n",
                  e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
