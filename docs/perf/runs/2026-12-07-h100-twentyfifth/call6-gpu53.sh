#!/usr/bin/env bash
# Session 25, call 6: test_verify with the freed-buffer case, and under memcheck.
export PATH=/usr/local/cuda/bin:$PATH
timeout 90 out/bin/test_verify 2>&1 | tail -4
timeout 150 compute-sanitizer --report-api-errors no --leak-check full out/bin/test_verify 2>&1 | grep -E "test cases|SUMMARY"
