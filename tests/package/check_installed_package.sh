#!/usr/bin/env bash
# check_installed_package.sh BUILD_DIR LAYER...
#
# Installs Giant from a build tree into a temporary prefix, then configures,
# builds and runs tests/package/consumer against it with find_package(Giant):
# an allreduce through Giant::ccl and, where the train layer is built, 2
# training steps through Giant::train. Also checks that every LAYER (those
# the build tree has) is exported as Giant::<layer> with its headers, that
# the giant command is installed and runs, and that the exported targets
# name nothing of the build or source tree (such as the precompiled torch
# header).
set -euo pipefail
build_dir=$(cd "$1" && pwd)
shift
layers=("$@")
here=$(cd "$(dirname "$0")" && pwd)
source_root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
prefix=$work/prefix
targets=$(ls "$prefix"/lib*/cmake/Giant/GiantTargets*.cmake)
for layer in "${layers[@]}"; do
  [ -d "$prefix/include/giant/$layer" ] || fail "no headers installed for $layer"
  # shellcheck disable=SC2086
  grep -q "add_library(Giant::$layer " $targets || fail "Giant::$layer is not exported"
done
with_train=false
[[ " ${layers[*]} " == *" train "* ]] && with_train=true
if $with_train; then
  "$prefix/bin/giant" --help > "$work/giant-help.txt" || fail "the installed giant command does not run"
fi
# shellcheck disable=SC2086
if grep -nF -e PRECOMPILE -e cmake_pch -e "$build_dir" -e "$source_root" $targets; then
  fail "the exported targets name the build or source tree (above)"
fi

cmake -S "$here/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" ||
  { cat "$work/configure.log"; fail "the consumer does not configure"; }
# One job: ctest runs other tests beside this one.
cmake --build "$work/build" -j1 > "$work/build.log" || { cat "$work/build.log"; fail "the consumer does not build"; }
"$work/build/consumer"
if $with_train; then
  mkdir "$work/run"
  "$work/build/consumer_train" "$work/run"
  [ -s "$work/run/out/metrics.jsonl" ] || fail "the consumer's training run wrote no metrics"
fi
echo "PASS"
