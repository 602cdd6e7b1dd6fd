#!/usr/bin/env bash
# MFU of one process: 4 layers, hidden 512, 8 heads, sequence 256, batch 8,
# 1 thread, computing in --precision (bf16 by default, or fp32). Each of R
# runs measures its own reference (a 1024^3 matrix product in that dtype on
# the same thread, at start-up) and reports its median MFU over its steps;
# prints each run and the median over runs.
#
# usage: bench/train/mfu.sh [BUILD_DIR] [--reps 5] [--steps 8] [--precision bf16|fp32]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
steps=8
precision=bf16
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "mfu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "mfu.sh: $giant is missing (build it first)" >&2; exit 2; }
out_dir=$(mktemp -d /tmp/giant-mfu-XXXXXX)
trap 'rm -rf "$out_dir"' EXIT
values=()
for ((rep = 0; rep < reps; ++rep)); do
  "$giant" train --set model.layers=4 --set model.hidden=512 --set model.heads=8 \
    --set model.seq_len=256 --set train.global_batch=8 --set train.micro_batch=8 \
    --set train.threads=1 --set train.steps="$steps" --set train.precision="$precision" --set train.eval_every=0 \
    --set train.eval_batches=1 --set train.sample_tokens=0 --set train.out_dir="\"$out_dir\"" \
    > "$out_dir/log" 2>&1 || { cat "$out_dir/log" >&2; echo "mfu.sh: giant train failed" >&2; exit 1; }
  fields=$(summary_fields "$out_dir/metrics.jsonl" mfu_median matmul_flops step_s_median tokens_per_s_median)
  read -r mfu matmul step tokens <<< "$fields"
  printf 'bench=train_mfu precision=%s rep=%d mfu=%.4f matmul_gflops=%.1f step_s=%.3f tokens_per_s=%.1f\n' "$precision" "$rep" "$mfu" \
    "$(awk -v f="$matmul" 'BEGIN {print f / 1e9}')" "$step" "$tokens"
  values+=("$(printf '%.4f' "$mfu")")
done
echo "summary precision=$precision mfu_median=$(printf '%s\n' "${values[@]}" | median) reps=$reps"
