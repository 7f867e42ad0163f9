#!/usr/bin/env bash
# Session 24, first call: verify_replay's test built here, then the README commands from a
# clean copy, then memcheck with leak check over test_verify and the cuBLAS verify case.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 out/bin/test_verify >$L/prebuilt-test_verify.log 2>&1; echo "prebuilt test_verify rc=$?"; grep -E "FAILED|with expansion|test cases|passed|due to" -A4 $L/prebuilt-test_verify.log | head -40
LD_LIBRARY_PATH=/usr/local/cuda/lib64 timeout 60 out/bin/test_cublas "[verify]" >$L/prebuilt-test_cublas-verify.log 2>&1; echo "prebuilt test_cublas [verify] rc=$?"; grep -E "FAILED|with expansion|test cases|passed|due to|error" -A3 $L/prebuilt-test_cublas-verify.log | head -20
s=$SECONDS; timeout 150 compute-sanitizer --report-api-errors no --leak-check full out/bin/test_verify >$L/memcheck-verify.log 2>&1; echo "memcheck prebuilt test_verify rc=$? $((SECONDS-s)) s"; tail -3 $L/memcheck-verify.log
rm -rf build
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -4 $L/demo.log
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Expected|Unexpected|Timeout):" $L/test.log; grep -E "FAIL|TIMEOUT" $L/test.log | head
cp build/meson-logs/testlog.txt $L/ 2>/dev/null
grep -B2 -A25 "FAILED:" build/meson-logs/testlog.txt | head -60
grep -E " verify | cublas " $L/test.log | head
timeout 60 build/tests/test_cublas "[verify]" >$L/test_cublas-verify.log 2>&1; echo "test_cublas [verify] rc=$?"; grep -E "FAILED|with expansion|test cases|passed" -A3 $L/test_cublas-verify.log | head -20
