#!/usr/bin/env bash
# mid-gpu.sh's first part alone (prebuilt out/pk), for a start with under 300 s of device time
# left: what the argument words read as, the new case with its messages, the copy case, the
# old library's run of the new case. About 30 s once started.
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
