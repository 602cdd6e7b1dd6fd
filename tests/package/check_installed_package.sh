#!/usr/bin/env bash
# Installs Giant from a build tree into a temporary prefix, then configures,
# builds and runs tests/package/consumer against it with find_package(Giant).
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$source_dir/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/build" -j2 > "$work/build.log"
"$work/build/consumer"
