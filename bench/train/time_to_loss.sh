#!/usr/bin/env bash
# README's main job (`giant train` with the defaults) in each precision:
# the wall time until its validation loss first reaches --target (2.0),
# evaluating every --eval-every (25) steps, and the step at which it did.
# The run is stopped there. Runs one after the other, each alone.
#
# usage: bench/train/time_to_loss.sh [BUILD_DIR] [--target 2.0] [--eval-every 25] [--precisions "fp32 bf16"]
# Lines: `bench=train_time_to_loss precision=P target=T step=S seconds=X val_loss=V tokens_per_s=..`
# (or `reached=false` after train.steps), then `summary fp32_over_bf16_seconds=..`.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
target=2.0
eval_every=25
precisions="fp32 bf16"
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --target) target=$2; shift 2 ;;
    --eval-every) eval_every=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "time_to_loss.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "time_to_loss.sh: $giant is missing (build it first)" >&2; exit 2; }
out_dir=$(mktemp -d /tmp/giant-time-to-loss-XXXXXX)
pid=
trap '[[ -z $pid ]] || kill "$pid" 2>/dev/null || true; rm -rf "$out_dir"' EXIT

declare -A seconds_of
for p in $precisions; do
  metrics=$out_dir/$p/metrics.jsonl
  start=$(date +%s.%N)
  "$giant" train --set train.precision="$p" --set train.eval_every="$eval_every" --set train.sample_tokens=0 \
    --set train.out_dir="\"$out_dir/$p\"" > "$out_dir/$p.log" 2>&1 &
  pid=$!
  found=""
  while kill -0 "$pid" 2>/dev/null; do
    if [[ -f $metrics ]]; then
      found=$(/usr/bin/python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "val_loss" in r and not r.get("summary") and r["val_loss"] <= float(sys.argv[2]):
        print(r["step"], r["val_loss"]); break' "$metrics" "$target" 2>/dev/null || true)
      [[ -z $found ]] || break
    fi
    sleep 0.5
  done
  end=$(date +%s.%N)
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  tokens=$(grep -o '"tokens_per_s":[0-9.]*' "$metrics" | tail -20 | sed 's/.*://' | median)
  if [[ -z $found ]]; then
    echo "bench=train_time_to_loss precision=$p target=$target reached=false"
    continue
  fi
  read -r step val <<< "$found"
  s=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')
  seconds_of[$p]=$s
  echo "bench=train_time_to_loss precision=$p target=$target step=$step seconds=$s val_loss=$val tokens_per_s=$tokens"
done
ratio=NA
if [[ -n ${seconds_of[fp32]:-} && -n ${seconds_of[bf16]:-} ]]; then
  ratio=$(awk -v a="${seconds_of[fp32]}" -v b="${seconds_of[bf16]}" 'BEGIN {printf "%.2f", a / b}')
fi
echo "summary target=$target fp32_over_bf16_seconds=$ratio"
