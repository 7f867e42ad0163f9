// Reproducer of a front-end hang of nvcc 13.0 (issue 30; docs/toolchain.md). With g++ 13 as
// the host compiler (Ubuntu 24.04) and Catch2 v3, cudafe++ and cicc never finish this file
// when Catch2's own `#pragma nv_diagnostic push` / `nv_diag_suppress 177` / `pop` are kept
// in the assertions of tests/support/reliability.cuh (CUGRAPHS_KEEP_CATCH2_NV_PRAGMAS) and
// the file then declares a function it never defines, under the same suppression, as
// Catch2 v3's TEST_CASE does. Without the kept pragmas (the workaround in
// tests/support/testing.hpp) it compiles in seconds. Reduced from test_reliability_memory.cu
// by delta debugging over the preprocessed file (tools/diagnostics/keep-intermediates);
// tools/diagnostics/catch2-pragma-hang compiles it both ways.
#include "reliability.cuh"

static void declared_only();
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177
