#!/usr/bin/env bash
# Compiles one source that must NOT compile, and checks that the compiler's message says why.
# The source's first line is "// expect: TEXT"; TEXT must appear in the diagnostics.
# Usage: check.sh SOURCE INCLUDE_DIR COMPILER [COMPILER ARGS...]
set -uo pipefail
src=$1 inc=$2
shift 2
expect=$(sed -n '1s|^// expect: ||p' "$src")
[[ -n $expect ]] || { echo "no '// expect:' line in $src"; exit 1; }
cuda_inc=/usr/local/cuda/include
if command -v nvcc >/dev/null; then cuda_inc=$(dirname "$(command -v nvcc)")/../include; fi
out=$("$@" -std=c++20 -fsyntax-only -DFMT_USE_CONSTEXPR=1 -I"$inc" -I"$cuda_inc" \
  $(pkg-config --cflags fmt 2>/dev/null) "$src" 2>&1)
status=$?
if [[ $status -eq 0 ]]; then
  echo "FAIL: $src compiled, but it must not"
  exit 1
fi
if ! grep -qF -- "$expect" <<<"$out"; then
  echo "FAIL: $src failed to compile, but without the expected message: $expect"
  echo "$out" | head -40
  exit 1
fi
echo "ok: $src is refused with: $expect"
