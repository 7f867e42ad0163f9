#!/usr/bin/env bash
# Session 23, second call: the reworked test_curand (built here) and the old code's build of it.
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 out/bin/test_curand_new > /tmp/new.log 2>&1; echo "new test_curand rc=$?"; grep -E "FAILED|with expansion|with message|test cases|passed" -A3 /tmp/new.log | head -40
timeout 60 out/bin/test_curand_old > /tmp/old.log 2>&1; echo "old 0ce9a61 test_curand rc=$?"; grep -E "FAILED|test cases" -A2 /tmp/old.log | head -16
timeout 120 compute-sanitizer --report-api-errors no --leak-check full out/bin/test_curand_new > /tmp/mc.log 2>&1; echo "memcheck test_curand rc=$?"; tail -3 /tmp/mc.log
