#!/usr/bin/env bash
# Session 25, call 8: the solver example with verify_replay of its While step; the conditional
# section of the benchmark suite (capture_solver now captures through solve_step).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
timeout 60 out/ex/solver; echo "solver rc=$?"
timeout 90 out/ex/bench_suite /tmp/c.json conditional 2>&1 | tail -8; echo "bench rc=$?"
