#!/usr/bin/env bash
# Session 21, call 5 (device time nearly spent): code of 83434c6, programs built here
# (g++ 12) and carried. Most telling first: the old code (97b3bd3) with the new test_cache.cu,
# the new test_cache and the other changed tests, then every test program, the examples,
# memcheck, and g++ 13's -Werror build of the changed headers' tests if time is left.
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 out/bin/test_cache_old "*first call*" >$L/old-test_cache.log 2>&1; echo "old 97b3bd3 test_cache rc=$?"
grep -E "FAILED|with expansion|test cases" -A2 $L/old-test_cache.log | head -20
p=0; f=0; k=0; s=$SECONDS
for n in test_cache test_escapes test_graphed test_in_place test_training test_rng $(cd build-pre/tests && ls test_* | grep -v -x -E "test_(cache|escapes|graphed|in_place|training|rng)"); do
  t=build-pre/tests/$n; timeout 120 $t >$L/$n.log 2>&1; rc=$?
  case $rc in 0) p=$((p+1)); echo "$n: ok";; 77) k=$((k+1)); echo "$n: SKIP";; *) f=$((f+1)); echo "$n: FAIL ($rc)"; grep -B3 -A12 "FAILED" $L/$n.log | head -40;; esac
done
echo "tests: $p passed, $f failed, $k skipped ($((SECONDS-s)) s)"
for ex in build-pre/examples/*; do n=$(basename $ex); timeout 60 $ex >$L/ex-$n.log 2>&1; echo "example $n rc=$?: $(tail -1 $L/ex-$n.log)"; done
for t in test_cache test_escapes; do
  timeout 60 compute-sanitizer --report-api-errors no --leak-check full build-pre/tests/$t >$L/mc-$t.log 2>&1
  echo "memcheck $t rc=$?: $(grep -h -E 'ERROR SUMMARY|LEAK SUMMARY|All tests|failed' $L/mc-$t.log | tr '\n' ' ')"
done
s=$SECONDS
(tools/meson-setup build13 -Dwerror=true >/dev/null 2>&1 && timeout 100 ninja -C build13 tests/test_cache tests/test_graphed >$L/g13-build.log 2>&1); echo "g++ 13 -Werror build of test_cache, test_graphed rc=$? $((SECONDS-s)) s"; grep -E "error|warning" $L/g13-build.log | head -10
