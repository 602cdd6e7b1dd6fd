#!/usr/bin/env bash
# The largest GPT that trains on 2 ranks (parallel.dp=2) with each rank's
# address space limited to --limit-gb (prlimit --as), per ZeRO stage and
# recomputation choice: a binary search over the hidden size (a multiple of
# 64, heads = hidden / 64) at --layers layers, each try --steps steps in
# fp32. Prints each stage and choice's largest size, its parameters and
# their ratio to ZeRO-1 without recomputation (the issue's target: at least
# 2x for the best). Model states per parameter on 2 ranks in fp32: ZeRO-1
# 4 + 4 + 8/2 = 12, ZeRO-2 4 + 12/2 = 10, ZeRO-3 16/2 = 8, so the formulas
# alone bound the gain at 1.5x; the rest is activations, which
# recomputation shrinks. A stage or choice the build does not run (even at
# the smallest size) prints status=unavailable.
#
# usage: bench/train/largest_model.sh [BUILD_DIR] [--limit-gb 8] [--layers 8] [--seq 256]
#        [--micro-batch 4] [--steps 2] [--try-timeout 900] [--zeros "1 2 3"]
#        [--recomputes "none selective full"]
# A model trains when its last step finishes (the final checkpoint's save
# may still run out of memory). A try that runs past --try-timeout seconds
# (near the limit a rank can stall instead of failing) counts as not
# fitting, and says so on stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
bench_script=largest_model.sh
build_dir=build
limit_gb=8
layers=8
seq=256
micro=4
steps=2
try_timeout=900
zeros="1 2 3"
recomputes="none selective full"
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --limit-gb) limit_gb=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --micro-batch) micro=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --try-timeout) try_timeout=$2; shift 2 ;;
    --zeros) zeros=$2; shift 2 ;;
    --recomputes) recomputes=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "$bench_script: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "$bench_script: $giant is missing (build it first)" >&2; exit 2; }
command -v prlimit > /dev/null || { echo "$bench_script: prlimit (util-linux) is missing" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-largest-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
limit_bytes=$(awk -v g="$limit_gb" 'BEGIN {printf "%.0f", g * 1024 * 1024 * 1024}')

# trains HIDDEN ZERO RECOMPUTE: 0 when that model trains within the limit.
trains() {
  local h=$1 zero=$2 recompute=$3 name=h$1_zero$2_$3
  rm -rf "${tmp:?}/$name"
  local status=0
  timeout "$try_timeout" "$giant" launch --nproc 2 -- prlimit --as="$limit_bytes" "$giant" train \
    --set model.layers="$layers" --set model.hidden="$h" --set model.heads=$((h / 64)) --set model.seq_len="$seq" \
    --set model.vocab=256 --set train.threads=1 --set train.steps="$steps" --set train.eval_every=0 \
    --set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32 \
    --set train.micro_batch="$micro" --set train.global_batch=$((2 * micro)) --set parallel.dp=2 \
    --set parallel.zero="$zero" --set train.recompute="\"$recompute\"" --set ccl.timeout=60 --set "$(out_flag "$name")" \
    > "$tmp/$name.log" 2>&1 || status=$?
  [[ $status == 124 ]] && echo "$bench_script: $name ran past ${try_timeout}s: counted as not fitting" >&2
  # Trained: the last step finished on every rank (rank 0 prints it only
  # after the step's collectives). The final checkpoint, which needs memory
  # of its own to stage, is not part of training.
  [[ $status == 0 ]] || grep -q "^\[rank 0\] step $steps/$steps loss" "$tmp/$name.log"
}
parameters_at() {  # HIDDEN -> the model's parameter count (the run's "model:" line)
  sed -n 's/^\(\[rank 0\] \)*model: \([0-9]*\) parameters.*/\2/p' "$tmp"/h$1_*.log | head -1
}

# The formulas' bound for ZeRO-3 (8 bytes per parameter, 12 L h^2
# parameters) times 1.5: the search's upper end, in units of 64.
top=$(awk -v b="$limit_bytes" -v L="$layers" 'BEGIN {h = sqrt(b / 8 / (12 * L)) * 1.5; printf "%d", h / 64 + 1}')
baseline=""
for zero in $zeros; do
  for recompute in $recomputes; do
    if ! trains 64 "$zero" "$recompute"; then
      echo "bench=largest_model zero=$zero recompute=$recompute status=unavailable"
      continue
    fi
    lo=1 hi=$top tries=1  # lo trains; hi is not known to
    while (( hi > lo )); do
      mid=$(((lo + hi + 1) / 2))
      tries=$((tries + 1))
      if trains $((mid * 64)) "$zero" "$recompute"; then lo=$mid; else hi=$((mid - 1)); fi
    done
    h=$((lo * 64))
    n=$(parameters_at "$h")
    [[ $zero == 1 && $recompute == none ]] && baseline=$n
    printf 'bench=largest_model limit_gb=%s ranks=2 zero=%s recompute=%s layers=%s hidden=%s seq_len=%s micro_batch=%s parameters=%s vs_zero1_none=%s tries=%s\n' \
      "$limit_gb" "$zero" "$recompute" "$layers" "$h" "$seq" "$micro" "$n" "$(ratio "$n" "${baseline:-NA}")" "$tries"
  done
done
