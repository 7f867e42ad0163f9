#!/usr/bin/env bash
# Session 27, call 1: every test program built on
# the development machine at 4c471f7 + the cuRAND classifier refactor (prebuilt), the old library's builds of the new cases, the
# key repros of the ports, then the README's commands from this clean copy as time allows.
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
R=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tar xJf out/pk/pre.tar.xz -C out || exit 3
P=$R/out/pre
pass=0; fail=0; skip=0
for t in $P/tests/*; do
  n=$(basename $t)
  timeout 120 $t >$L/$n.log 2>&1; rc=$?
  case $rc in 0) pass=$((pass+1));; 77) skip=$((skip+1));; *) fail=$((fail+1)); echo "FAIL $n rc=$rc"; grep -E "FAILED|with expansion|due to" -A3 $L/$n.log | head -30;; esac
done
echo "prebuilt tests: $pass passed, $fail failed, $skip skipped"
grep -h "says:" $L/test_escapes.log $L/test_cache.log | grep -E "helper's parameter|call whose f leaves|verify after a host" | cut -c1-300
for o in "test_escapes:*host function handed*" "test_cache:*watches that stream*" "test_rng:*numbers drawn before the capture*" "test_curand:*seeded inside a capture*"; do
  t=${o%%:*}; f=${o#*:}
  timeout 60 $P/old/$t "$f" >$L/old-$t.log 2>&1; echo "old $t rc=$?: $(grep -E 'test cases' $L/old-$t.log)"
done
cd $P/port
for p in repro_hostfn repro_cache_stream_arg_cublas_new repro_rng_drawn_outside_new ../particles/repro_curand_reseed_new decode ../particles/particles ../spectral/spectral; do
  timeout 30 ./$p >$L/key-$(basename $p).log 2>&1; rc=$?
  echo "== $p rc=$rc: $(tail -1 $L/key-$(basename $p).log | cut -c1-300)"
done
for d in thrust pipeline; do
  cd $P/port4/$d
  for p in *; do
    timeout 60 ./$p >$L/p4-$d-$p.log 2>&1; rc=$?
    echo "== $d/$p rc=$rc: $(grep -E '^(RESULT|REPRO)' $L/p4-$d-$p.log | tail -2 | tr '\n' ' ' | cut -c1-300)"
  done
done
timeout 90 compute-sanitizer --leak-check full --error-exitcode 9 $P/tests/test_escapes "*host function handed*" >$L/memcheck-escapes.log 2>&1; echo "memcheck escapes rc=$?: $(tail -1 $L/memcheck-escapes.log)"
cd $R; rm -rf build
s=$SECONDS; tools/run test >$L/test.log 2>&1; echo "test rc=$? $((SECONDS-s)) s"; grep -E "^(Ok|Fail|Skipped|Timeout):" $L/test.log
s=$SECONDS; tools/run demo >$L/demo.log 2>&1; echo "demo rc=$? $((SECONDS-s)) s"; tail -1 $L/demo.log
