#!/usr/bin/env bash
# Session 25, call 7: the three ports and four of their repros rebuilt against the final library.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
cd out/port2
for p in trainer solver engine repro_verify_unlisted repro_workspace_race repro_switch_stream repro_dowhile; do
  timeout 60 ./$p >$p.log 2>&1; rc=$?
  echo "== $p rc=$rc"; tail -3 $p.log | cut -c1-400
done
