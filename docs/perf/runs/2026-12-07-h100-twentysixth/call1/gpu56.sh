#!/usr/bin/env bash
# Session 26, call 1: HEAD 86bca9e (verify refactor) prebuilt: every test and example, memcheck over test_verify.
# the old code's test_conditional with the new flag case), memcheck over the changed tests, then
# the README's two commands from this clean copy.
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
P=out/pre
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pass=0; fail=0; skip=0
for t in $P/tests/*; do
  n=$(basename $t)
  timeout 300 $t >$L/$n.log 2>&1; rc=$?
  case $rc in 0) pass=$((pass+1));; 77) skip=$((skip+1));; *) fail=$((fail+1)); echo "FAIL $n rc=$rc"; grep -E "FAILED|with expansion|due to" -A3 $L/$n.log | head -30;; esac
done
echo "prebuilt tests: $pass passed, $fail failed, $skip skipped"
for e in $P/examples/*; do n=$(basename $e); timeout 120 $e >$L/ex_$n.log 2>&1; echo "example $n rc=$? $(tail -1 $L/ex_$n.log | cut -c1-120)"; done
mc() {  # NAME PROGRAM [FILTER]
  local n=$1; shift; local s=$SECONDS
  timeout 200 compute-sanitizer --report-api-errors no --leak-check full "$@" >$L/memcheck-$n.log 2>&1
  echo "memcheck $n rc=$? $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY|LEAK SUMMARY|test cases' $L/memcheck-$n.log | tr '\n' ' ')"
}
mc verify $P/tests/test_verify
