#!/usr/bin/env bash
# The thirtieth session's call, for when device time is short (six starts refused first): the
# diagnostics and test_escapes prebuilt here (out/pk: argument_kinds, relaxed_audit_cost,
# test_escapes, and test_escapes_old: abb1136 with the new test; both
# built at the last commit), the two freed-memory
# cases with their messages, the old library's run of the new case,
# then the README's test command from a clean copy, then memcheck, the audit's cost and the
# whole test_escapes. About 400 s with a warm start. `bash mid-gpu.sh first` stops after the
# old library's run (about 30 s once started), for a start with under 300 s of device time left.
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P=out/pk
$P/argument_kinds > $L/argument_kinds.log 2>&1; echo "argument_kinds rc=$?"; grep -E 'before|freed|int2|0x4000|symbol|handle|function' $L/argument_kinds.log | cut -c1-200
K="Escapes: a kernel handed device memory freed inside a Relaxed capture*"
C="Escapes: a copy of device memory freed inside the capture*"
$P/test_escapes "$K" -s > $L/kernel-case-full.log 2>&1; echo "new case rc=$?"
grep -E "says:|passes|reads as|passed|failed|FAILED|with expansion" $L/kernel-case-full.log | cut -c1-1200
grep -B3 -A12 "FAILED" $L/kernel-case-full.log | head -40
$P/test_escapes "$C" -s > $L/copy-case-full.log 2>&1; echo "copy case rc=$? $(grep -E '^(All tests passed|test cases:)' $L/copy-case-full.log)"
$P/test_escapes_old "$K" > $L/old-kernel-case.log 2>&1; echo "old library, new case: rc=$? $(grep -E '^test cases:' $L/old-kernel-case.log)"; grep -E 'FAILED|due to|Escapes' $L/old-kernel-case.log | head -8 | cut -c1-300
[ "$1" = first ] && exit 0
rm -rf build; s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
compute-sanitizer --report-api-errors no --leak-check full $P/test_escapes "$K" > $L/memcheck-kernel.log 2>&1; echo "memcheck rc=$? $(tail -1 $L/memcheck-kernel.log)"
timeout 120 $P/relaxed_audit_cost > $L/relaxed_audit_cost.log 2>&1; echo "relaxed_audit_cost rc=$?"; tail -8 $L/relaxed_audit_cost.log
timeout 150 $P/test_escapes > $L/escapes.log 2>&1; echo "test_escapes rc=$? $(grep -E '^(All tests passed|test cases:)' $L/escapes.log | tail -1)"
