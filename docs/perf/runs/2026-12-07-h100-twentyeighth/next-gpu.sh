#!/usr/bin/env bash
# Prepared for the next session (the twenty-eighth's device time ran out, after three refused
# starts): the freed-memory check as committed (abbbd55 and after) has run on no GPU in its
# final form. First the mended test_escapes and the tests nearest the change (graph memory
# nodes, pools, modes), built alone from a clean copy, and the new case under memcheck; then
# the README's commands from a clean copy. Self-contained: nothing to carry.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -rf build
T="tests/test_escapes tests/test_pools tests/test_reliability_memory tests/test_modes"
s=$SECONDS; tools/meson-setup build -Dwerror=true >$L/setup.log 2>&1 && ninja -C build $T >$L/build.log 2>&1; echo "build rc=$? $((SECONDS-s)) s"
C="Escapes: a copy of device memory freed inside the capture*"
build/tests/test_escapes "$C" -s 2>&1 | grep -E "says:|passed|failed|FAILED" | cut -c1-2500 | tee $L/new-case.log
compute-sanitizer --report-api-errors no --leak-check full build/tests/test_escapes "$C" >$L/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -2 $L/memcheck.log
for t in $T; do n=$(basename $t); timeout 120 build/$t >$L/$n.log 2>&1; echo "$n rc=$? $(grep -E '^(All tests passed|test cases:)' $L/$n.log | tail -1)"; done
rm -rf build; s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
