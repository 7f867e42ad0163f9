#!/usr/bin/env bash
# Checks that tools/plot-perf takes every goal from the benchmark JSON: targets it never saw
# before (7.5, 0.25, 42) appear in the goals table and the tables' headers, and a goal on
# PyTorch's figures is judged from the two files (600 / 10 = 60 >= 42: met).
# Usage: check_plot_perf.sh SOURCE_ROOT WORK_DIR
set -uo pipefail
root=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

cat >"$work/suite.json" <<'JSON'
{"benchmark": "bench_suite", "meta": {"device": "test device"},
 "sections": {
  "replay_host": {"nodes": [1, 10], "cugraphs_us": [2.0, 3.0], "bare_us": [1.0, 1.0]},
  "graphed": {"inputs": [1, 16], "graphed_us": [5.0, 10.0], "staging_us": [6.0, 40.0], "bare_us": [4.0, 8.0]}},
 "goals": [
  {"section": "replay_host", "id": "replay_vs_launch", "what": "replay / launch, 1 node", "at": {"nodes": 1},
   "value": 2.0, "op": "<=", "target": 7.5, "met": "yes"},
  {"section": "replay_host", "id": "replay_vs_launch", "what": "replay / launch, 10 nodes", "at": {"nodes": 10},
   "value": 3.0, "op": "<=", "target": 7.5, "met": "yes"},
  {"section": "graphed", "id": "call_vs_staging", "what": "call / staging, 16 inputs", "at": {"inputs": 16},
   "value": 0.25, "op": "<=", "target": 0.2, "met": "no"},
  {"section": "graphed", "id": "torch_call_vs_call", "what": "PyTorch call / our call, 16 inputs", "at": {"inputs": 16},
   "value": null, "op": ">=", "target": 42, "met": null, "versus": {"torch": "torch_graphed_us", "suite": "graphed_us"}}]}
JSON
cat >"$work/torch.json" <<'JSON'
{"meta": {"torch": "test"}, "sections": {"graphed": {"inputs": [16, 1], "torch_graphed_us": [600.0, 50.0]}}}
JSON

python3 "$root/tools/plot-perf" "$work/suite.json" "$work/torch.json" --out "$work/out" >"$work/log" 2>&1 ||
  { cat "$work/log"; fail "plot-perf exited with an error"; }
md=$work/out/performance-figures.md
expect() { grep -qF -- "$1" "$md" || { cat "$md"; fail "missing: $1"; }; }
expect "| replay / launch, 10 nodes | 3.000 | ≤ 7.5 | **met** |"
expect "| call / staging, 16 inputs | 0.250 | ≤ 0.2 | **missed**: 25.0% over the limit |"
expect "| PyTorch call / our call, 16 inputs | 60.000 | ≥ 42 | **met** |"
expect "3 of 4 goals met."
expect "ratio (goal ≤ 7.5)"
expect "vs staging (goal ≤ 0.2 at 16)"
expect "PyTorch / cugraphs (goal ≥ 42 at 16)"
grep -q "vs bare (goal" "$md" && fail "a goal the JSON does not state was shown"
echo "ok: plot-perf reads every goal from the JSON"
