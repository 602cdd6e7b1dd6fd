#!/usr/bin/env bash
# scripts/check-layers on a tiny tree (fixture/) whose layer "low" includes
# the layer above it and torch, which it does not link, and whose program
# apps/tool/tool links a benchmark: each is named (includes with file and
# line) and the check fails; with a graph that allows them it passes.
# A rule stated outright (models and parallel do not include the planner)
# fails with its reason even where the graph allows the include.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=$here/../../scripts/check-layers
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

status=0
"$check" "$here/fixture" "$here/fixture/layers.txt" > "$work/out" || status=$?
cat "$work/out"
expect() {
  grep -qF -- "$1" "$work/out" || { echo "FAIL: expected the line: $1"; exit 1; }
}
[ "$status" -eq 1 ] || { echo "FAIL: exit status $status on a tree with violations, expected 1"; exit 1; }
expect 'giant/low/low.h:3: low includes "giant/high/high.h"'
expect 'giant/low/low.h:4: low includes <torch/torch.h>'
expect 'not checked (not built here): giant/unbuilt/'
expect '2 include(s) of a layer not linked'
expect 'apps/tool/tool links bench/thing: apps do not link bench'
expect '1 link(s) from apps to bench'

printf 'low: high torch\nhigh: low torch\napps/tool/tool: src/giant/low\n' > "$work/allowed.txt"
"$check" "$here/fixture" "$work/allowed.txt" || { echo "FAIL: a tree within its graph was refused"; exit 1; }

mkdir -p "$work/rule/giant/models" "$work/rule/giant/planner"
printf '#pragma once\n' > "$work/rule/giant/planner/plan.h"
printf '#pragma once\n#include "giant/planner/plan.h"\n' > "$work/rule/giant/models/model.h"
printf 'models: planner\nplanner:\n' > "$work/rule/layers.txt"
status=0
"$check" "$work/rule" "$work/rule/layers.txt" > "$work/out" || status=$?
cat "$work/out"
[ "$status" -eq 1 ] || { echo "FAIL: models including the planner passed (status $status)"; exit 1; }
expect 'giant/models/model.h:2: models includes "giant/planner/plan.h": models and parallel do not include the planner'
echo "PASS"
