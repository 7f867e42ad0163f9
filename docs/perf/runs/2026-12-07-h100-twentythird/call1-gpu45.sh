#!/usr/bin/env bash
# Session 23, first call: HEAD's README commands from a clean copy, the bench's capture,
# update and replay sections, memcheck over test_escapes.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null
rm -rf build
CL=/usr/local/cuda/lib64; if LD_LIBRARY_PATH=$CL ldd out/bin/curand_host_capture | grep -q "libcurand.*not found"; then w=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null); c=$(find "${w:-/nonexistent}" -name "libcurand.so.*" | head -1); echo "curand from $c"; CL=$(dirname "$c"); fi
LD_LIBRARY_PATH=$CL timeout 60 out/bin/curand_host_capture >$L/curand0.log 2>&1; echo "curand rc=$?"; cut -c1-400 $L/curand0.log
LD_LIBRARY_PATH=$CL timeout 60 out/bin/test_curand_new >$L/new-test_curand.log 2>&1; echo "prebuilt new test_curand rc=$?"; grep -E "FAILED|with expansion|test cases|passed" -A3 $L/new-test_curand.log | head -30
LD_LIBRARY_PATH=$CL timeout 60 out/bin/test_curand_old >$L/old-test_curand.log 2>&1; echo "old 0ce9a61 test_curand rc=$?"; grep -E "FAILED|with expansion|test cases" -A2 $L/old-test_curand.log | head -12
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -4 $L/demo.log
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Expected|Unexpected|Timeout):" $L/test.log; grep -E "FAIL|TIMEOUT" $L/test.log | head
cp build/meson-logs/testlog.txt $L/ 2>/dev/null
grep -B2 -A25 "FAILED:" build/meson-logs/testlog.txt | head -60
s=$SECONDS; timeout 90 build/benchmarks/bench_suite $L/b.json capture update replay >$L/bench.log 2>&1; echo "bench rc=$? $((SECONDS-s)) s"
grep -A9 -E "^== (capture|update|replay)" $L/bench.log | head -45
grep -E "test_curand|curand" $L/test.log | head -5
LD_LIBRARY_PATH=$CL timeout 60 build/tests/test_curand >$L/test_curand.log 2>&1; echo "test_curand rc=$?"; grep -E "FAILED|with expansion|test cases|assertions" -A3 $L/test_curand.log | head -30
s=$SECONDS; timeout 120 compute-sanitizer --report-api-errors no --leak-check full build/tests/test_escapes >$L/memcheck-escapes.log 2>&1; echo "memcheck test_escapes rc=$? $((SECONDS-s)) s"; tail -3 $L/memcheck-escapes.log
