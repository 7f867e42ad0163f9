#!/usr/bin/env bash
# Every public header compiles alone, with consumers' strict warnings as errors, under each
# host compiler found (g++, clang++) and under nvcc, and with CUGRAPHS_SEPARATE_COMPILATION
# (declarations only) under the first; the device-only header refuses host
# compilers with its own message.
# Usage: check.sh INCLUDE_DIR WORK_DIR
set -uo pipefail
inc=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_inc=$(dirname "$nvcc_bin")/../include
warnings=(-Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror)
compilers=()
for c in g++ clang++; do command -v "$c" >/dev/null && compilers+=("$c"); done
# Whether host compiler $1 refuses source $2 (including header $3, device code) with a
# message holding $4; says FAIL otherwise.
refused_by_host() {
  local out
  if out=$("$1" -std=c++20 -fsyntax-only -I"$inc" -isystem "$cuda_inc" "$2" 2>&1) || ! grep -q "$4" <<<"$out"; then
    echo "FAIL: $3 under $1 must fail with its message:"; echo "$out" | head
    return 1
  fi
}

# One header's compilations; prints "checked N failed M" last (headers run in parallel).
check_one() {
  local h=$1 name out c checked=0 failed=0
  # The optional NCCL header needs nccl.h, which CUDA's include directory holds only where
  # NCCL is installed there.
  if [[ $h == cugraphs/nccl.hpp && ! -f $cuda_inc/nccl.h ]]; then
    echo "skipped: $h (no nccl.h in $cuda_inc)"
    echo "checked 0 failed 0"
    return
  fi
  # Likewise the optional cuBLAS header, and its binder, need cublas_v2.h.
  if [[ ($h == cugraphs/cublas.hpp || $h == cugraphs/detail/cublas_binder.hpp) && ! -f $cuda_inc/cublas_v2.h ]]; then
    echo "skipped: $h (no cublas_v2.h in $cuda_inc)"
    echo "checked 0 failed 0"
    return
  fi
  name=$(tr '/.' '__' <<<"$h")
  printf '#include <%s>\n' "$h" >"$work/$name.cpp"
  cp "$work/$name.cpp" "$work/$name.cu"
  for c in "${compilers[@]}"; do
    checked=$((checked + 1))
    if [[ $h == cugraphs/device_dispatch.hpp ]]; then
      # Device code: host compilers are refused with its own message.
      refused_by_host "$c" "$work/$name.cpp" "$h" "holds device code: include it only from sources compiled by nvcc" ||
        failed=$((failed + 1))
    elif ! out=$("$c" -std=c++20 -fsyntax-only "${warnings[@]}" -I"$inc" -isystem "$cuda_inc" "$work/$name.cpp" 2>&1); then
      echo "FAIL: $h alone under $c:"; echo "$out" | head -20; failed=$((failed + 1))
    fi
  done
  # Declarations alone, as the Meson dependency compiles them (CUGRAPHS_SEPARATE_COMPILATION).
  if [[ $h != cugraphs/device_dispatch.hpp && ${#compilers[@]} -gt 0 ]]; then
    checked=$((checked + 1))
    if ! out=$("${compilers[0]}" -std=c++20 -fsyntax-only "${warnings[@]}" -DCUGRAPHS_SEPARATE_COMPILATION -I"$inc" \
        -isystem "$cuda_inc" "$work/$name.cpp" 2>&1); then
      echo "FAIL: $h alone under ${compilers[0]} with CUGRAPHS_SEPARATE_COMPILATION:"; echo "$out" | head -20
      failed=$((failed + 1))
    fi
  fi
  checked=$((checked + 1))
  # nvcc's own generated host code trips -Wpedantic, so that one is left to the host compilers.
  if ! out=$("$nvcc_bin" -std=c++20 -c -o "$work/$name.o" -I"$inc" -Xcompiler=-Wall,-Wextra,-Wconversion,-Wshadow,-Werror \
      "$work/$name.cu" 2>&1); then
    echo "FAIL: $h alone under nvcc:"; echo "$out" | head -20; failed=$((failed + 1))
  fi
  echo "checked $checked failed $failed"
}
export -f check_one refused_by_host
export inc work nvcc_bin cuda_inc
export compilers_list="${compilers[*]}" warnings_list="${warnings[*]}"
# Arrays do not cross into the xargs shells: each job rebuilds them from the lists.
results=$(cd "$inc" && find cugraphs -name '*.hpp' | sort |
  xargs -P "$(nproc)" -I{} bash -c 'read -ra compilers <<<"$compilers_list"; read -ra warnings <<<"$warnings_list"; check_one "$1"' _ {})
grep -v -E '^checked [0-9]+ failed [0-9]+$' <<<"$results"
checked=$(awk '/^checked [0-9]+ failed [0-9]+$/ {n += $2} END {print n + 0}' <<<"$results")
failed=$(awk '/^checked [0-9]+ failed [0-9]+$/ {n += $4} END {print n + 0}' <<<"$results")
# The device code header: nvcc only, with a message that says so.
printf '#include <cugraphs/detail/kernels.cuh>\n' >"$work/kernels.cpp"
for c in "${compilers[@]}"; do
  checked=$((checked + 1))
  refused_by_host "$c" "$work/kernels.cpp" cugraphs/detail/kernels.cuh \
    "is device code: include it only from sources compiled by nvcc" || failed=$((failed + 1))
done
echo "headers: $checked compilations (${compilers[*]} nvcc), $failed failed"
((failed == 0))
