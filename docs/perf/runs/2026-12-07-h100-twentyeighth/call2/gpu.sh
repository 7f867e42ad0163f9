#!/usr/bin/env bash
# Twenty-eighth session, call 1: freed_mapping diagnostic; the old library's build of the new
# test_escapes case (expected to crash); the README's test command from a clean copy; the new
# case under memcheck; the demo. Carried: out/pk (this script), out/old (`git archive fa558aa`).
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 tools/diagnostics/freed_mapping.cu -o /tmp/freed_mapping && /tmp/freed_mapping | tee $L/freed_mapping.log
# The old library (fa558aa) with the new test file, built beside the README's build.
cp tests/test_escapes.cu out/old/tests/
(cd out/old && tools/meson-setup /tmp/bold -Dwerror=true >$L/old-setup.log 2>&1 && nice ninja -C /tmp/bold tests/test_escapes >$L/old-build.log 2>&1; echo "old build rc=$?") &
rm -rf build
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
wait
C="Escapes: a copy of device memory freed inside the capture*"
build/tests/test_escapes "$C" -s 2>&1 | grep -E "says:|passed|failed|FAILED" | cut -c1-2500 | tee $L/new-case.log
compute-sanitizer --leak-check full build/tests/test_escapes "$C" >$L/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -2 $L/memcheck.log
timeout 120 /tmp/bold/tests/test_escapes "$C" >$L/old-case.log 2>&1; echo "old-library new case rc=$?"; tail -5 $L/old-case.log | cut -c1-400
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
