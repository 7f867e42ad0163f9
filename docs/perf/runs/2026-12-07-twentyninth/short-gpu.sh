#!/usr/bin/env bash
# The twenty-ninth session's short call (device time nearly spent): the diagnostic, the new
# case and the copy case with their messages, the old library's build of the new case, the
# whole test_escapes, and memcheck over the new case. Prebuilt here (out/pk).
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 tools/diagnostics/argument_kinds.cu -o $L/argument_kinds -lcuda && $L/argument_kinds 2>&1 | tee $L/argument_kinds.log
P=out/pk
K="Escapes: a kernel handed device memory freed inside a Relaxed capture*"
C="Escapes: a copy of device memory freed inside the capture*"
$P/test_escapes "$K" -s > $L/kernel-case-full.log 2>&1; echo "new case rc=$?"
grep -E "says:|passes|reads as|passed|failed|FAILED|with expansion" $L/kernel-case-full.log | cut -c1-1500
grep -B3 -A12 "FAILED" $L/kernel-case-full.log | head -60
$P/test_escapes "$C" -s 2>&1 | grep -E "says:|passed|failed|FAILED" | cut -c1-400 > $L/copy-case.log; tail -1 $L/copy-case.log
$P/test_escapes_old "$K" > $L/old-kernel-case.log 2>&1; echo "old library, new case: rc=$? $(grep -E '^test cases:' $L/old-kernel-case.log)"
timeout 150 $P/test_escapes > $L/escapes.log 2>&1; echo "test_escapes rc=$? $(grep -E '^(All tests passed|test cases:)' $L/escapes.log | tail -1)"
compute-sanitizer --report-api-errors no --leak-check full $P/test_escapes "$K" > $L/memcheck-kernel.log 2>&1; echo "memcheck rc=$? $(tail -1 $L/memcheck-kernel.log)"
