#!/usr/bin/env bash
# Giant's trainer against the same GPT in PyTorch (bench/train/pytorch_gpt.py
# on Debian's python3-torch): 4 layers, hidden 256, 4 heads, sequence 128,
# vocabulary 256, AdamW, on the bundled corpus, batch --batch (8). At each
# thread count, R repetitions, interleaved (their order rotating), each
# reporting its median tokens/s over its steady steps and its last loss;
# then the median of the R medians of each and the ratios.
#
# --precision fp32 (the default): giant fp32 against PyTorch fp32.
# --precision bf16: giant bf16 mixed precision against PyTorch under CPU
#   autocast bf16 (pytorch_gpt.py --bf16), and against giant fp32, all three
#   interleaved.
#
# usage: bench/train/compare_pytorch.sh [BUILD_DIR] [--reps 5] [--threads "1 2"] [--steps 25]
#            [--batch 8] [--precision fp32|bf16]
# The last lines read: summary threads=T precision=P giant_tokens_per_s=...
# pytorch_tokens_per_s=... ratio=... (bf16: and giant_fp32_tokens_per_s=...
# bf16_over_fp32=...) and the losses of each.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
threads_list="1 2"
steps=25
batch=8
precision=fp32
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --threads) threads_list=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "compare_pytorch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $precision in fp32|bf16) ;; *) echo "compare_pytorch.sh: --precision must be fp32 or bf16, got '$precision'" >&2; exit 2 ;; esac
[[ $batch =~ ^[1-9][0-9]*$ ]] || { echo "compare_pytorch.sh: --batch must be a positive integer, got '$batch'" >&2; exit 2; }
giant=$build_dir/bin/giant
python=/usr/bin/python3   # Debian's, which has torch 1.13
[[ -x $giant ]] || { echo "compare_pytorch.sh: $giant is missing (build it first)" >&2; exit 2; }
out_dir=$(mktemp -d /tmp/giant-compare-XXXXXX)
trap 'rm -rf "$out_dir"' EXIT

model=(--set model.layers=4 --set model.hidden=256 --set model.heads=4 --set model.seq_len=128
       --set model.vocab=256 --set train.global_batch="$batch" --set train.micro_batch="$batch")
peer_flags=(--batch "$batch")
[[ $precision == fp32 ]] || peer_flags+=(--bf16)
run_giant() {  # threads precision -> "tokens/s last_loss"
  "$giant" train "${model[@]}" --set train.threads="$1" --set train.precision="$2" --set train.steps="$steps" \
    --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0 \
    --set train.out_dir="\"$out_dir/giant\"" > "$out_dir/giant.log" 2>&1 ||
    { cat "$out_dir/giant.log" >&2; echo "compare_pytorch.sh: giant train failed" >&2; exit 1; }
  summary_fields "$out_dir/giant/metrics.jsonl" tokens_per_s_median last_loss
}
run_pytorch() {  # threads -> "tokens/s last_loss"
  "${peer_malloc[@]}" "$python" bench/train/pytorch_gpt.py --threads "$1" --steps "$steps" --warmup 1 \
    "${peer_flags[@]}" --data examples/data/kjv.txt > "$out_dir/pytorch.log" 2>&1 ||
    { cat "$out_dir/pytorch.log" >&2; echo "compare_pytorch.sh: pytorch_gpt.py failed" >&2; exit 1; }
  sed -n 's/.* tokens_per_s_median=\([0-9.]*\).* loss_last=\([0-9.]*\).*/\1 \2/p' "$out_dir/pytorch.log" | tail -1
}

echo "# giant: $giant train ${model[*]} --set train.precision=$precision --set train.steps=$steps"
echo "# pytorch: ${peer_malloc[*]} $python bench/train/pytorch_gpt.py --steps $steps --warmup 1 ${peer_flags[*]} --data examples/data/kjv.txt ($($python -c 'import torch; print("torch", torch.__version__)'))"
kinds=(giant pytorch)
[[ $precision == fp32 ]] || kinds+=(giant_fp32)
summaries=()
for threads in $threads_list; do
  declare -A tokens=() losses=()
  for ((rep = 0; rep < reps; ++rep)); do
    line="bench=train_parity threads=$threads precision=$precision rep=$rep"
    for ((k = 0; k < ${#kinds[@]}; ++k)); do
      kind=${kinds[$(((k + rep) % ${#kinds[@]}))]}
      case $kind in
        giant) result=$(run_giant "$threads" "$precision") ;;
        giant_fp32) result=$(run_giant "$threads" fp32) ;;
        pytorch) result=$(run_pytorch "$threads") ;;
      esac
      read -r t l <<< "$result"
      tokens[$kind]+="$t " losses[$kind]+="$l "
      line+=" ${kind}_tokens_per_s=$t ${kind}_loss=$l"
    done
    echo "$line"
  done
  med() { tr ' ' '\n' <<< "$1" | grep . | median; }
  g=$(med "${tokens[giant]}") p=$(med "${tokens[pytorch]}")
  s="summary threads=$threads precision=$precision giant_tokens_per_s=$g pytorch_tokens_per_s=$p"
  s+=" ratio=$(awk -v g="$g" -v p="$p" 'BEGIN {printf "%.3f", g / p}')"
  if [[ $precision != fp32 ]]; then
    f=$(med "${tokens[giant_fp32]}")
    s+=" giant_fp32_tokens_per_s=$f bf16_over_fp32=$(awk -v g="$g" -v f="$f" 'BEGIN {printf "%.3f", g / f}')"
  fi
  for kind in "${kinds[@]}"; do s+=" ${kind}_loss=$(med "${losses[$kind]}")"; done
  summaries+=("$s")
done
printf '%s\n' "${summaries[@]}"
