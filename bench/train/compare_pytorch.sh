#!/usr/bin/env bash
# Giant's trainer against the same GPT in PyTorch (bench/train/pytorch_gpt.py
# on Debian's python3-torch): 4 layers, hidden 256, 4 heads, sequence 128,
# vocabulary 256, batch 8, AdamW, on the bundled corpus. At each thread count,
# R repetitions of both, interleaved (their order alternating), each reporting
# its median tokens/s over its steady steps; then the median of the R medians
# of each and the ratio giant/pytorch.
#
# usage: bench/train/compare_pytorch.sh [BUILD_DIR] [--reps 5] [--threads "1 2"] [--steps 25]
# The last lines read: summary threads=T giant_tokens_per_s=... pytorch_tokens_per_s=... ratio=...
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
threads_list="1 2"
steps=25
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --threads) threads_list=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "compare_pytorch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
python=/usr/bin/python3   # Debian's, which has torch 1.13
[[ -x $giant ]] || { echo "compare_pytorch.sh: $giant is missing (build it first)" >&2; exit 2; }
out_dir=$(mktemp -d /tmp/giant-compare-XXXXXX)
trap 'rm -rf "$out_dir"' EXIT

model=(--set model.layers=4 --set model.hidden=256 --set model.heads=4 --set model.seq_len=128
       --set model.vocab=256 --set train.global_batch=8 --set train.micro_batch=8)
run_giant() {  # threads -> tokens/s median
  "$giant" train "${model[@]}" --set train.threads="$1" --set train.steps="$steps" \
    --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0 \
    --set train.out_dir="\"$out_dir/giant\"" > "$out_dir/giant.log" 2>&1 ||
    { cat "$out_dir/giant.log" >&2; echo "compare_pytorch.sh: giant train failed" >&2; exit 1; }
  summary_fields "$out_dir/giant/metrics.jsonl" tokens_per_s_median
}
run_pytorch() {
  "${peer_malloc[@]}" "$python" bench/train/pytorch_gpt.py --threads "$1" --steps "$steps" --warmup 1 \
    --data examples/data/kjv.txt > "$out_dir/pytorch.log" 2>&1 ||
    { cat "$out_dir/pytorch.log" >&2; echo "compare_pytorch.sh: pytorch_gpt.py failed" >&2; exit 1; }
  sed -n 's/.* tokens_per_s_median=\([0-9.]*\).*/\1/p' "$out_dir/pytorch.log" | tail -1
}

echo "# giant: $giant train ${model[*]} --set train.steps=$steps"
echo "# pytorch: ${peer_malloc[*]} $python bench/train/pytorch_gpt.py --steps $steps --warmup 1 --data examples/data/kjv.txt ($($python -c 'import torch; print("torch", torch.__version__)'))"
summaries=()
for threads in $threads_list; do
  giant_values=() pytorch_values=()
  for ((rep = 0; rep < reps; ++rep)); do
    if (( rep % 2 == 0 )); then
      g=$(run_giant "$threads"); p=$(run_pytorch "$threads")
    else
      p=$(run_pytorch "$threads"); g=$(run_giant "$threads")
    fi
    giant_values+=("$g") pytorch_values+=("$p")
    echo "bench=train_parity threads=$threads rep=$rep giant_tokens_per_s=$g pytorch_tokens_per_s=$p"
  done
  g=$(printf '%s\n' "${giant_values[@]}" | median)
  p=$(printf '%s\n' "${pytorch_values[@]}" | median)
  summaries+=("summary threads=$threads giant_tokens_per_s=$g pytorch_tokens_per_s=$p ratio=$(awk -v g="$g" -v p="$p" 'BEGIN {printf "%.3f", g / p}')")
done
printf '%s\n' "${summaries[@]}"
