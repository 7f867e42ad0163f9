#!/usr/bin/env bash
# Session 25, call 3: every test program and example built on the development machine at the
# working tree (fresh-capture verify, unlisted buffers put back, per-capture cuBLAS
# workspaces), the old code's test_cublas with the new case, memcheck over test_verify and the
# new cuBLAS case.
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
P=out/pre
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
pass=0; fail=0; skip=0
for t in $P/tests/*; do
  n=$(basename $t); s=$SECONDS
  timeout 300 $t >$L/$n.log 2>&1; rc=$?
  case $rc in 0) pass=$((pass+1));; 77) skip=$((skip+1));; *) fail=$((fail+1)); echo "FAIL $n rc=$rc"; grep -E "FAILED|with expansion|due to" -A3 $L/$n.log | head -30;; esac
  echo "$n rc=$rc $((SECONDS-s)) s"
done
echo "tests: $pass passed, $fail failed, $skip skipped"
for e in $P/examples/*; do n=$(basename $e); timeout 120 $e >$L/ex_$n.log 2>&1; echo "example $n rc=$? $(tail -1 $L/ex_$n.log | cut -c1-150)"; done
timeout 120 $P/old/test_cublas_old5c "cublas::Handle: graphs captured one after the other*" >$L/old-cublas.log 2>&1; echo "old code, new cuBLAS case rc=$?"; grep -E "FAILED|with expansion|test cases" -A2 $L/old-cublas.log | head -8
s=$SECONDS; timeout 150 compute-sanitizer --report-api-errors no --leak-check full $P/tests/test_verify >$L/memcheck-verify.log 2>&1; echo "memcheck test_verify rc=$? $((SECONDS-s)) s"; tail -2 $L/memcheck-verify.log
s=$SECONDS; timeout 150 compute-sanitizer --report-api-errors no --leak-check full $P/tests/test_cublas "cublas::Handle: graphs captured one after the other*" >$L/memcheck-cublas.log 2>&1; echo "memcheck cublas case rc=$? $((SECONDS-s)) s"; tail -2 $L/memcheck-cublas.log
