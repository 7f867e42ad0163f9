// Diagnosis of a finding (docs/reliability.md, Sanitizers): under compute-sanitizer
// memcheck, test_conditional's case "Nesting" (a While inside an If inside a While) can end
// with cudaErrorIllegalAddress and no reported access. This program has the same scopes,
// kernels and state without Catch2 or the test code. Modes: nest3 (While > If > While),
// nest2 (While > While), flat (one While); add "malloc" to allocate the state with
// cudaMalloc and a synchronize instead of cudaMallocAsync. Build and run on a GPU machine
// (one line):
//   nvcc -std=c++20 -arch=sm_90 -O2 -DFMT_USE_CONSTEXPR=1 -Iinclude
//        tools/diagnostics/memcheck_nesting.cu -o memcheck_nesting -lfmt
//   compute-sanitizer --tool memcheck ./memcheck_nesting nest3
// On the H200 (2026-12-02): alone, every mode gives cudaSuccess, a=6, and memcheck 0
// errors; ten copies at once under memcheck all lose the context (memcheck: 0 errors),
// while the test's case run ten at once without the tool always passes.
#include <cugraphs/graph.hpp>
#include <cstdio>
#include <cstring>
struct Nest { int o, i, a, b, c; bool outer_flag, if_flag, inner_flag; };
__global__ void outer_head(Nest* s) { s->a += 1; s->if_flag = s->o % 2 == 0; s->i = s->o; s->inner_flag = s->i > 0; }
__global__ void inner_body(Nest* s) { s->c += s->o * 10 + s->i; s->i -= 1; s->inner_flag = s->i > 0; }
__global__ void outer_tail(Nest* s) { s->b += s->c % 7; s->o -= 1; s->outer_flag = s->o > 0; }
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "nest3";
  const bool sync_alloc = argc > 2 && std::strcmp(argv[2], "malloc") == 0;
  Nest* st = nullptr;
  if (sync_alloc) { cudaMalloc(&st, sizeof(Nest)); cudaDeviceSynchronize(); }
  else cudaMallocAsync(reinterpret_cast<void**>(&st), sizeof(Nest), 0);
  cugraphs::Graph g;
  {
    cugraphs::CaptureScope scope(g);
    cugraphs::ConditionalScope<cugraphs::While> outer(scope, &st->outer_flag);
    outer_head<<<1, 1, 0, scope.stream()>>>(st);
    if (std::strcmp(mode, "nest3") == 0) {
      cugraphs::ConditionalScope<cugraphs::If> when(scope, &st->if_flag);
      cugraphs::ConditionalScope<cugraphs::While> inner(scope, &st->inner_flag);
      inner_body<<<1, 1, 0, scope.stream()>>>(st);
    } else if (std::strcmp(mode, "nest2") == 0) {
      cugraphs::ConditionalScope<cugraphs::While> inner(scope, &st->inner_flag);
      inner_body<<<1, 1, 0, scope.stream()>>>(st);
    }
    outer_tail<<<1, 1, 0, scope.stream()>>>(st);
  }
  Nest start{6, 0, 0, 0, 0, true, false, false}, out{};
  cudaMemcpy(st, &start, sizeof start, cudaMemcpyHostToDevice);
  g.replay();
  cudaError_t e = cudaMemcpy(&out, st, sizeof out, cudaMemcpyDeviceToHost);
  std::printf("diag %s %s: %s a=%d c=%d\n", mode, sync_alloc ? "malloc" : "mallocAsync", cudaGetErrorName(e), out.a, out.c);
  if (sync_alloc) (void)cudaFree(st);
  else (void)cudaFreeAsync(st, 0);
  return e == cudaSuccess ? 0 : 1;
}
