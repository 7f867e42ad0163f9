#!/usr/bin/env bash
# Installs cugraphs (meson install) into a fresh prefix, then builds and runs two consumers
# against the installed tree: one through pkg-config (host code by g++ with strict
# warnings, kernels by nvcc), one through CMake's find_package(cugraphs CONFIG), one built
# with -fno-exceptions whose failures go to the error handler, and examples/engine through
# its own CMakeLists.txt. None needs fmt. Usage: check.sh SOURCE_ROOT WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
export PATH=$(dirname "$nvcc_bin"):$PATH
meson setup "$work/build" "$src" -Dprefix="$prefix" -Dtests=disabled -Dexamples=disabled -Dbenchmarks=disabled \
  >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
meson install -C "$work/build" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
pc_dir=$(dirname "$(find "$prefix" -name cugraphs.pc | head -1)")
cmake_dir=$(dirname "$(find "$prefix" -name cugraphsConfig.cmake | head -1)")
[[ -f $prefix/include/cugraphs/graph.hpp && -n $pc_dir && -n $cmake_dir ]] || { echo "install is incomplete"; exit 1; }

echo "== pkg-config consumer"
cflags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags cugraphs)
libs=$(PKG_CONFIG_PATH=$pc_dir pkg-config --libs cugraphs)
cuda_lib=$(dirname "$nvcc_bin")/../lib64
mkdir -p "$work/pc"
# shellcheck disable=SC2086
g++ -std=c++20 -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror $cflags -isystem "$(dirname "$nvcc_bin")/../include" \
  -c "$src/tests/consumers/common/main.cpp" -o "$work/pc/main.o"
# shellcheck disable=SC2086
nvcc -std=c++20 -arch=sm_90 $cflags -c "$src/tests/consumers/common/kernels.cu" -o "$work/pc/kernels.o"
# shellcheck disable=SC2086
nvcc "$work/pc/main.o" "$work/pc/kernels.o" -L"$cuda_lib" $libs -o "$work/pc/consumer"
"$work/pc/consumer"

echo "== CMake consumer"
if ! command -v cmake >/dev/null; then echo "cmake not found"; exit 1; fi
cmake -S "$src/tests/consumers/cmake" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_COMPILER="$nvcc_bin" >"$work/cmake-configure.log" 2>&1 || { cat "$work/cmake-configure.log"; exit 1; }
cmake --build "$work/cmake" >"$work/cmake-build.log" 2>&1 || { cat "$work/cmake-build.log"; exit 1; }
"$work/cmake/consumer"

echo "== no-exceptions consumer"
mkdir -p "$work/noexc"
# Linking objects $3... against the compiled part must fail, naming tag $1 ($2 says what).
refused_at_link() {
  local tag=$1 what=$2 out
  shift 2
  # shellcheck disable=SC2086
  if out=$(nvcc "$@" -L"$cuda_lib" $libs -o "$work/noexc/refused" 2>&1) || [[ $out != *"$tag"* ]]; then
    echo "FAIL: $what linked against the compiled part:"; echo "$out" | head
    exit 1
  fi
  echo "$what: refused at link time ($tag)"
}
# The compiled part is built with exceptions and the legacy default stream: a -fno-exceptions
# unit, and a CUDA unit built with --default-stream per-thread (stream 0 means another stream
# there), must each fail to link.
# shellcheck disable=SC2086
g++ -std=c++20 -fno-exceptions $cflags -isystem "$(dirname "$nvcc_bin")/../include" \
  -c "$src/tests/consumers/noexcept/main.cpp" -o "$work/noexc/mixed.o"
refused_at_link separate_compilation_without_exceptions "a -fno-exceptions unit" "$work/noexc/mixed.o" "$work/pc/kernels.o"
# shellcheck disable=SC2086
nvcc -std=c++20 -arch=sm_90 --default-stream per-thread $cflags -c "$src/tests/consumers/common/kernels.cu" \
  -o "$work/noexc/per_thread.o"
refused_at_link separate_compilation_per_thread_default_stream "a --default-stream per-thread unit" \
  "$work/pc/main.o" "$work/noexc/per_thread.o"
# The header-only package is the one for code built without exceptions.
cflags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags cugraphs-header-only)
libs=$(PKG_CONFIG_PATH=$pc_dir pkg-config --libs cugraphs-header-only)
# shellcheck disable=SC2086
g++ -std=c++20 -fno-exceptions -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror $cflags \
  -isystem "$(dirname "$nvcc_bin")/../include" -c "$src/tests/consumers/noexcept/main.cpp" -o "$work/noexc/main.o"
# shellcheck disable=SC2086
nvcc -std=c++20 -arch=sm_90 -Xcompiler=-fno-exceptions $cflags -c "$src/tests/consumers/common/kernels.cu" \
  -o "$work/noexc/kernels.o"
# shellcheck disable=SC2086
nvcc "$work/noexc/main.o" "$work/noexc/kernels.o" -L"$cuda_lib" $libs -o "$work/noexc/consumer"
set +e
out=$("$work/noexc/consumer" handler 2>&1); status=$?
echo "$out"
[[ $status -eq 3 && $out == *"handler got (code 0): cugraphs: Graph::replay: nothing has been captured"* ]] ||
  { echo "FAIL: the handler did not get the misuse (exit $status)"; exit 1; }
out=$("$work/noexc/consumer" default 2>&1); status=$?
echo "$out"
[[ $status -eq 134 && $out == *"cugraphs: Graph::replay: nothing has been captured"* &&
   $out == *"aborting (built without exceptions)"* ]] ||
  { echo "FAIL: the default handler did not print and abort (exit $status)"; exit 1; }
echo "no-exceptions consumer: ok (the handler got the Error; the default printed it and aborted)"

echo "== examples/engine (CMake, host code without exceptions)"
cmake -S "$src/examples/engine" -B "$work/engine" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_COMPILER="$nvcc_bin" \
  -DCMAKE_CXX_FLAGS=-Werror >"$work/engine-configure.log" 2>&1 || { cat "$work/engine-configure.log"; exit 1; }
grep -q "cugraphs_DIR" "$work/engine/CMakeCache.txt" && ! grep -q "cugraphs_DIR:PATH=cugraphs_DIR-NOTFOUND" "$work/engine/CMakeCache.txt" ||
  { echo "FAIL: the engine did not find the installed cugraphs"; exit 1; }
cmake --build "$work/engine" >"$work/engine-build.log" 2>&1 || { cat "$work/engine-build.log"; exit 1; }
out=$("$work/engine/engine" 2>&1); status=$?
echo "$out"
[[ ($status -eq 0 && $out == *"engine: ok"*) || ($status -eq 1 && $out == *"no CUDA device found"*) ]] ||
  { echo "FAIL: the engine example (exit $status)"; exit 1; }
