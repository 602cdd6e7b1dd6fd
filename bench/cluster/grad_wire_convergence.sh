#!/usr/bin/env bash
# Convergence with a compressed gradient wire: the default model trained at
# dp=4 across 2 emulated hosts (giant launch --emulate 2x2, root) with
# parallel.grad_wire = none and with each wire asked for (micro-batch 4, so
# the global batch of 16 is one micro-batch per rank), the same seed and
# data; prints each run's final validation loss and its change from none's.
#
# usage: bench/cluster/grad_wire_convergence.sh [BUILD_DIR] [--steps 300] [--wires "int8 int4"]
#            [--link-rate 1000000000]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
bench_script=grad_wire_convergence.sh
build_dir=build
steps=300
wires="int8 int4"
link_rate=1000000000
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --wires) wires=$2; shift 2 ;;
    --link-rate) link_rate=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$bench_script: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "$bench_script: needs root (giant launch --emulate makes network namespaces)" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "$bench_script: --steps must be a positive integer" >&2; exit 2; }
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "$bench_script: no $giant (build the target giant)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "$bench_script: $(lscpu | sed -n 's/^Model name: *//p'); default model, dp=4 on 2 hosts x 2 ranks at $link_rate bit/s, $steps steps"
baseline=
for wire in none $wires; do
  run=$tmp/$wire
  start=$(date +%s)
  "$giant" launch --emulate 2x2 --link-rate "$link_rate" -- "$giant" train --set parallel.dp=4 --set train.micro_batch=4 --set train.threads=1 \
    --set train.steps="$steps" --set parallel.grad_wire=\""$wire"\" --set train.sample_tokens=0 \
    --set train.out_dir=\""$run"\" > "$run.log" 2>&1 || fail "$run.log" "grad_wire $wire"
  read -r val_loss tokens <<< "$(summary_fields "$run/metrics.jsonl" val_loss tokens_per_s_median)"
  baseline=${baseline:-$val_loss}
  change=$(awk -v v="$val_loss" -v b="$baseline" 'BEGIN { printf "%+.2f%%", 100 * (v / b - 1) }')
  echo "bench=grad_wire_convergence wire=$wire steps=$steps val_loss=$val_loss change_from_none=$change" \
       "tokens_per_s=$tokens seconds=$(( $(date +%s) - start ))"
done
