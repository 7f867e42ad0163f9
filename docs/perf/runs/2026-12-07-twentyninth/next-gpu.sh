#!/usr/bin/env bash
# Prepared in the twenty-ninth session, when no machine was lent (four starts refused, then
# loans paused). Runs what has never run on a GPU: the kernel-argument freed check of Relaxed
# captures (199ffcc, 05c543a and after) and the freed-copy check's final form (abbbd55 and
# after). First the tests nearest the change, built alone from a clean copy, the two cases
# with their printed messages and under memcheck; then the old library (abb1136) with the new
# test, where out/old was carried:
#   git archive abb1136 | tar -x -C out/old && rm -rf out/old/docs &&
#   cp tests/test_escapes.cu out/old/tests/ && cp tests/support/testing.hpp out/old/tests/support/
# then the README's commands from a clean copy. About 450 s with a warm start.
export PATH=/usr/local/cuda/bin:$PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 tools/diagnostics/argument_kinds.cu -o $L/argument_kinds -lcuda && $L/argument_kinds 2>&1 | tee $L/argument_kinds.log
nvcc -O2 -std=c++20 -arch=sm_90 -DFMT_USE_CONSTEXPR=1 -Iinclude tools/diagnostics/relaxed_audit_cost.cu -o $L/relaxed_audit_cost && $L/relaxed_audit_cost 2>&1 | tee $L/relaxed_audit_cost.log
rm -rf build
T="tests/test_escapes tests/test_modes tests/test_curand tests/test_faults tests/test_pools"
s=$SECONDS; tools/meson-setup build -Dwerror=true >$L/setup.log 2>&1 && ninja -C build $T >$L/build.log 2>&1; echo "build rc=$? $((SECONDS-s)) s"
K="Escapes: a kernel handed device memory freed inside a Relaxed capture*"
C="Escapes: a copy of device memory freed inside the capture*"
build/tests/test_escapes "$K" -s 2>&1 | grep -E "says:|passes|reads as|passed|failed|FAILED|with expansion" | cut -c1-3000 | tee $L/kernel-case.log
build/tests/test_escapes "$C" -s 2>&1 | grep -E "says:|passed|failed|FAILED" | cut -c1-2500 > $L/copy-case.log; tail -1 $L/copy-case.log
for x in kernel copy; do [ $x = kernel ] && c="$K" || c="$C"
  compute-sanitizer --report-api-errors no --leak-check full build/tests/test_escapes "$c" >$L/memcheck-$x.log 2>&1
  echo "memcheck $x rc=$? $(tail -1 $L/memcheck-$x.log)"; done
for t in $T; do n=$(basename $t); timeout 150 build/$t >$L/$n.log 2>&1; echo "$n rc=$? $(grep -E '^(All tests passed|test cases:)' $L/$n.log | tail -1)"; done
if [ -d out/old ]; then
  (cd out/old && tools/meson-setup /tmp/bold >/dev/null 2>&1 && ninja -C /tmp/bold tests/test_escapes >$L/old-build.log 2>&1)
  /tmp/bold/tests/test_escapes "$K" >$L/old-kernel-case.log 2>&1; echo "old library, new case: rc=$? $(grep -E '^test cases:' $L/old-kernel-case.log)"
fi
rm -rf build; s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):|FAIL" $L/test.log
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
