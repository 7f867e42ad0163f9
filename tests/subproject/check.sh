#!/usr/bin/env bash
# Builds tests/subproject/consumer with cugraphs vendored as a Meson subproject, then runs it.
# Usage: check.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work/subprojects/cugraphs"
cp -r "$src/tests/subproject/consumer/." "$work/"
cp -r "$src/meson.build" "$src/meson_options.txt" "$src/include" "$src/src" "$src/cmake" "$src/LICENSE" "$work/subprojects/cugraphs/"
meson setup "$work/build" "$work" >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
meson compile -C "$work/build" >"$work/compile.log" 2>&1 || { cat "$work/compile.log"; exit 1; }
"$work/build/consumer"
