#!/usr/bin/env bash
# Prepared for the next session (the twenty-seventh's device time ran out before it): the
# README's commands from a clean copy (which run the changed message texts through test_faults,
# test_modes and test_error, and the invalidated-code check of test_curand), then
# tools/diagnostics/pointer_kinds.cu, built there: can memory freed inside a capture be told
# from another graph's allocation not yet backed? Self-contained: nothing to carry.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 tools/diagnostics/pointer_kinds.cu -lcuda -o $L/pointer_kinds && $L/pointer_kinds | tee $L/pointer_kinds.log
nvcc -O2 -arch=sm_90 tools/diagnostics/relaxed_freed_memory.cu -o $L/relaxed_freed_memory &&
  for v in 0 1 2 3; do $L/relaxed_freed_memory $v; echo "exit $?"; done 2>&1 | tee $L/relaxed_freed_memory.log
rm -rf build
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
rm -f $L/pointer_kinds $L/relaxed_freed_memory
