#!/usr/bin/env bash
# Checks the sanitizer bookkeeping of tools/gpu-check without a GPU: fake test programs and
# a fake compute-sanitizer stand in for the real ones, and the summary must count a
# finding, a run that ran out of time, a run whose only error is the tool's own, and a
# split program's cases exactly.
# Usage: check_gpu_check.sh SOURCE_ROOT WORK_DIR
set -uo pipefail
root=$1 work=$2
unset OUT  # on the lent GPU machine: keep this fake run's logs out of $OUT
rm -rf "$work"
mkdir -p "$work/tools" "$work/pre/tests" "$work/bin"
cp "$root/tools/gpu-check" "$work/tools/"
fail() { echo "FAIL: $*"; exit 1; }

# A Catch2-like program with two cases, one of whose names holds test-spec characters: run
# with a spec, it records the spec it was given.
cat >"$work/pre/tests/test_alpha" <<'PROG'
#!/usr/bin/env bash
if [[ ${1:-} == --list-test-names-only ]]; then printf 'Alpha: one, [two]\nAlpha: three\n'; exit 2; fi
echo "spec: ${1:-none}"
PROG
printf '#!/usr/bin/env bash\necho clean\n' >"$work/pre/tests/test_beta"
printf '#!/usr/bin/env bash\necho found\n' >"$work/pre/tests/test_gamma"
printf '#!/usr/bin/env bash\nsleep 30\n' >"$work/pre/tests/test_slow"
# Never run under the tools.
printf '#!/usr/bin/env bash\nexit 1\n' >"$work/pre/tests/test_trap"

# The fake tool: runs the program; memcheck finds an error in test_gamma.
cat >"$work/bin/compute-sanitizer" <<'TOOL'
#!/usr/bin/env bash
tool=
while [[ $1 == --* ]]; do [[ $1 == --tool ]] && tool=$2; shift 2; done
"$@"
status=$?
if [[ $tool == racecheck && $(basename "$1") == test_beta ]]; then
  # The tool's own failure, counted by the tool as an error: no finding.
  echo "========= Internal Sanitizer Error: Detected a failure to track a kernel launch."
  echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 9
elif [[ $tool == racecheck ]]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
elif [[ $tool == memcheck && $(basename "$1") == test_gamma ]]; then echo "========= ERROR SUMMARY: 1 error"; exit 9
else echo "========= ERROR SUMMARY: 0 errors"; fi
exit $status
TOOL
chmod +x "$work"/pre/tests/* "$work/bin/compute-sanitizer"

cd "$work"
summary=$(PATH="$work/bin:$PATH" CUGRAPHS_PREBUILT=pre CUGRAPHS_SANITIZE_SPLIT=alpha CUGRAPHS_SANITIZE_TIMEOUT=2 \
  bash tools/gpu-check --sanitize-only 2>&1) || fail "gpu-check exited with $?: $summary"
echo "$summary" | tail -4
grep -qF "compute-sanitizer memcheck: 1 of 4 GPU test programs reported errors; out of time: test_slow" <<<"$summary" ||
  fail "memcheck's line does not count test_gamma's finding and test_slow's timeout"
grep -qF "compute-sanitizer racecheck: 0 of 4 GPU test programs reported errors; only internal errors of the tool itself (no finding): test_beta; out of time: test_slow" <<<"$summary" ||
  fail "racecheck's line does not keep test_beta's internal tool error apart"
grep -q "test_trap" pre-logs/sanitize_* 2>/dev/null && fail "test_trap ran under a tool"
[[ $(cat pre-logs/sanitize_memcheck_test_alpha.case*.log | grep -c '^spec: ') == 2 ]] ||
  fail "the split program did not run once per case"
grep -qxF 'spec: Alpha: one\, \[two\]' pre-logs/sanitize_memcheck_test_alpha.case*.log ||
  fail "a name with test-spec characters was not passed whole and escaped"
grep -qxF 'spec: Alpha: three' pre-logs/sanitize_memcheck_test_alpha.case*.log || fail "the second case did not run"

# A selection that matches no program is an error, not an empty pass.
PATH="$work/bin:$PATH" CUGRAPHS_PREBUILT=pre CUGRAPHS_SANITIZE_TESTS=nothing bash tools/gpu-check --sanitize-only \
  >/dev/null 2>&1 && fail "a selection that matches nothing passed"
echo "ok: gpu-check counts findings, timeouts and split cases"
