#!/usr/bin/env bash
# giant data prepare with 1 and 2 workers on the same input (the bundled
# corpus repeated COPIES times, default 10: 41.5 MB), interleaved, medians of
# RUNS (default 5), with the byte tokenizer and, given GPT2_DIR (vocab.json +
# merges.txt or encoder.json + vocab.bpe), GPT-2 BPE. The time is the one
# the command's summary line gives (reading, tokenizing, writing, fsync; not
# the process's start-up). Prints key=value lines per tokenizer and worker
# count, the ratio of 2 workers to 1 (target >= 1.7 on a 2-core machine),
# and the load average before and after: other work on the machine takes
# the second core from the second worker.
#
# usage: bench/data/prepare_speed.sh   (GIANT=build/bin/giant RUNS=5 COPIES=10 GPT2_DIR=...)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
giant=${GIANT:-$root/build/bin/giant}
runs=${RUNS:-5}
copies=${COPIES:-10}
bench_script=prepare_speed.sh
source "$root/bench/train/common.sh"  # median, fail

[[ -x $giant ]] || { echo "$bench_script: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/giant-prepare-speed-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for ((i = 0; i < copies; i++)); do cat "$root/examples/data/kjv.txt"; printf '\n'; done > "$tmp/input.txt"
input_mb=$(awk -v b="$(stat -c %s "$tmp/input.txt")" 'BEGIN {printf "%.1f", b / 1e6}')

# seconds TOKENIZER WORKERS -> the seconds of one run, from its summary line
# (reading, tokenizing, writing and fsync; not the process's start-up)
seconds() {
  local log=$tmp/run.log
  "$giant" data prepare --input "$tmp/input.txt" --tokenizer "$1" --output "$tmp/out" --workers "$2" > "$log" 2>&1 ||
    fail "$log" "giant data prepare --tokenizer $1 --workers $2"
  sed -n 's/^giant data prepare: .* in \([0-9.]*\) s (.*/\1/p' "$log"
}
load() { cut -d' ' -f1 /proc/loadavg; }

echo "prepare host_cores=$(nproc) load_before=$(load)"
tokenizers=(byte)
if [[ -n ${GPT2_DIR:-} ]]; then tokenizers+=("gpt2:$GPT2_DIR"); fi
for tokenizer in "${tokenizers[@]}"; do
  one=() two=()
  for ((run = 0; run < runs; run++)); do
    one+=("$(seconds "$tokenizer" 1)")
    two+=("$(seconds "$tokenizer" 2)")
  done
  m1=$(printf '%s\n' "${one[@]}" | median)
  m2=$(printf '%s\n' "${two[@]}" | median)
  name=${tokenizer%%:*}
  for w in 1 2; do
    m=$m1; [[ $w == 2 ]] && m=$m2
    awk -v n="$name" -v w="$w" -v m="$m" -v mb="$input_mb" -v r="$runs" \
      'BEGIN {printf "prepare tokenizer=%s workers=%s input_mb=%s runs=%s median_s=%.3f mb_per_s=%.2f\n", n, w, mb, r, m, mb / m}'
  done
  awk -v n="$name" -v a="$m1" -v b="$m2" 'BEGIN {printf "prepare tokenizer=%s speedup_2_over_1=%.2f\n", n, a / b}'
done
echo "prepare load_after=$(load)"
