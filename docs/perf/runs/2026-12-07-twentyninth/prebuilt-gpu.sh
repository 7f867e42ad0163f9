#!/usr/bin/env bash
# Twenty-ninth session: the kernel-argument check (new) and the freed-copy check's final form
# (abbbd55 and after, never run on a GPU), prebuilt here; the old library (abb1136) built with
# the new test; memcheck; then the README's commands from a clean copy.
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P=out/pk
K="Escapes: a kernel handed device memory freed inside a Relaxed capture*"
C="Escapes: a copy of device memory freed inside the capture*"
$P/test_escapes "$K" -s 2>&1 | grep -E "says:|passed|failed|FAILED|with expansion|REQUIRE|CHECK" | cut -c1-3000 | tee $L/kernel-case.log
$P/test_escapes "$C" -s 2>&1 | grep -E "says:|passed|failed|FAILED" | cut -c1-2500 > $L/copy-case.log; tail -1 $L/copy-case.log
$P/test_escapes_old "$K" > $L/old-kernel-case.log 2>&1; echo "old library, new case: rc=$? $(grep -E '^test cases:' $L/old-kernel-case.log)"
for x in "$K" "$C"; do compute-sanitizer --report-api-errors no --leak-check full $P/test_escapes "$x" > $L/memcheck.log 2>&1; echo "memcheck rc=$? $(tail -1 $L/memcheck.log)"; cp $L/memcheck.log "$L/memcheck-${x:10:8}.log"; done
timeout 200 $P/test_escapes > $L/escapes.log 2>&1; echo "test_escapes rc=$? $(grep -E '^(All tests passed|test cases:)' $L/escapes.log | tail -1)"
rm -rf build; s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
