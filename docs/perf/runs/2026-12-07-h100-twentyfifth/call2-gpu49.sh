#!/usr/bin/env bash
# Session 25, call 2: the fresh-capture verify (test_verify built here), then the three ports
# written this session as new users would (trainer, solver, engine) and their repros.
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs' EXIT; trap 'exit 143' TERM
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 90 out/bin/test_verify >$L/test_verify.log 2>&1; echo "test_verify rc=$?"; grep -E "FAILED|with expansion|test cases|passed|due to" -A4 $L/test_verify.log | head -60
timeout 90 out/bin/test_verify_old5c "verify_replay: a buffer the graph names*" >$L/old5c-unlisted.log 2>&1; echo "old (5c453e4) unlisted case rc=$?"; grep -E "FAILED|with expansion|test cases|passed" -A3 $L/old5c-unlisted.log | head -12
s=$SECONDS; timeout 150 compute-sanitizer --report-api-errors no --leak-check full out/bin/test_verify >$L/memcheck-verify.log 2>&1; echo "memcheck test_verify rc=$? $((SECONDS-s)) s"; tail -3 $L/memcheck-verify.log
for d in trainer solver engine; do
  for b in out/port/$d/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    case "$b" in *.sh) continue;; esac
    n=$(basename $b)
    s=$SECONDS; (cd out/port/$d && timeout 60 ./$n) >$L/$d-$n.log 2>&1; rc=$?
    echo "== $d/$n rc=$rc $((SECONDS-s)) s"; tail -6 $L/$d-$n.log | cut -c1-300
  done
done
(cd out/port/solver && timeout 60 ./solver --own-dot) >$L/solver-own-dot.log 2>&1; echo "== solver --own-dot rc=$?"; tail -4 $L/solver-own-dot.log | cut -c1-300
