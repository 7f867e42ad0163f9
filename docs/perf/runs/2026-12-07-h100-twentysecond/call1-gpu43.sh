#!/usr/bin/env bash
# Session 22, trimmed call (device time short): HEAD's README commands from a clean copy and
# the old code (8f37692) with the new freed-buffer test; then, if time is left, the bench.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -rf build
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -4 $L/demo.log
(cd out/old-esc && ../../tools/meson-setup /tmp/be -Dwerror=true >/dev/null 2>&1 && nice ninja -C /tmp/be tests/test_escapes >$L/old-esc-build.log 2>&1) &
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Expected|Unexpected|Timeout):" $L/test.log; grep -E "FAIL|TIMEOUT" $L/test.log | head
cp build/meson-logs/testlog.txt $L/ 2>/dev/null
grep -B2 -A25 "FAILED:" build/meson-logs/testlog.txt | head -60
wait
timeout 30 /tmp/be/tests/test_escapes "*freed after the capture*" >$L/old-test_escapes.log 2>&1; echo "old 8f37692 test_escapes (freed buffer) rc=$?"
grep -E "FAILED|with expansion|test cases" -A2 $L/old-test_escapes.log | head -12
s=$SECONDS; timeout 60 build/benchmarks/bench_suite capture replay >$L/bench.log 2>&1; echo "bench rc=$? $((SECONDS-s)) s"
grep -A8 -E "^== (capture|replay)" $L/bench.log | head -30
