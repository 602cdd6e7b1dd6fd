#!/usr/bin/env bash
# Data time per training step with a memory-mapped dataset: the bench model
# (bench/train/common.sh) trains on the bundled corpus prepared as .bin/.idx
# by giant data prepare, and, interleaved with it, on the same corpus as a
# text file (tokenized in memory: the peer). Each run reports the median over
# its steps (the first left out) of data_s / step_s from metrics.jsonl; the
# script prints every run and the medians over runs. Target: at most 1%.
#
# usage: bench/data/data_time.sh [BUILD_DIR] [--reps 5] [--steps 12] [--tokenizer byte --vocab 256]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
bench_script=data_time.sh
build_dir=build
reps=5
steps=12
tokenizer=byte
vocab=256
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --tokenizer) tokenizer=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;  # model.vocab: the tokenizer's size (50257 for gpt2:DIR)
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "data_time.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "data_time.sh: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-data-time-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$giant" data prepare --input examples/data/kjv.txt --tokenizer "$tokenizer" --output "$tmp/kjv" \
  > "$tmp/prepare.log" 2>&1 || fail "$tmp/prepare.log" "giant data prepare"
bench_model_flags "$steps" fp32

# metrics.jsonl -> the median over steps 2.. of data_s / step_s, and of data_s.
data_share() {
  /usr/bin/python3 -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if not r.get("summary") and "data_s" in r and r.get("step", 0) > 1]
print("%.6f %.6f %.6f" % (statistics.median(r["data_s"] / r["step_s"] for r in steps),
                          statistics.median(r["data_s"] for r in steps), statistics.median(r["step_s"] for r in steps)))' "$1"
}

declare -A shares
for ((rep = 0; rep < reps; ++rep)); do
  for source in indexed text; do
    data_path=$tmp/kjv
    [[ $source == text ]] && data_path=examples/data/kjv.txt
    run=$tmp/$source-$rep
    "$giant" train "${bench_model[@]}" --set data.path="\"$data_path\"" --set data.tokenizer="\"$tokenizer\"" \
      --set model.vocab="$vocab" --set train.out_dir="\"$run\"" > "$run.log" 2>&1 ||
      fail "$run.log" "giant train on the $source data"
    read -r share data_s step_s <<< "$(data_share "$run/metrics.jsonl")"
    printf 'bench=data_time source=%s tokenizer=%s rep=%d data_s=%s step_s=%s data_share=%s\n' \
      "$source" "$tokenizer" "$rep" "$data_s" "$step_s" "$share"
    shares[$source]+="$share"$'\n'
  done
done
indexed=$(printf '%s' "${shares[indexed]}" | median)
text=$(printf '%s' "${shares[text]}" | median)
printf 'bench=data_time_summary tokenizer=%s indexed_data_share=%s text_data_share=%s target_max=0.01\n' \
  "$tokenizer" "$indexed" "$text"
