#!/usr/bin/env bash
# Generation with the key-value cache against without it: tokens/s of 256 new
# tokens (greedy, 1 thread) from the prompt "And God said" (12 tokens).
#
# Without --checkpoint, the model is the bench model of bench/train/common.sh
# (4 layers, hidden 256, 4 heads, vocabulary 256) with seeded weights, run by
# giant-generate-bench (bench/generate), once per entry of --seq-lens:
#   seq128  model.seq_len 128, the bench model's: the context passes it after
#           116 new tokens, and from there the cache prefills the window again
#           each token (the same tokens as without it, at its cost)
#   seq512  model.seq_len 512: the 268 tokens fit, the cache's whole gain
# With --checkpoint DIR, `giant generate DIR` and `giant generate --no-cache DIR`
# on that checkpoint (it needs train::load_inference_model; until that lands
# the library program above is the measurement).
# R repetitions, cached and uncached alternating (which goes first switching
# each repetition); medians of the R runs; the ratio of the medians and the
# median of the ratios within each repetition (_paired); same_tokens says
# whether both gave the same tokens in every run.
#
# usage: bench/train/generate_speed.sh [BUILD_DIR] [--reps 5] [--tokens 256] [--seq-lens "128 512"]
#            [--threads 1] [--checkpoint DIR]
# Lines: `bench=generate config=C mode=M rep=R tokens_per_s=.. seconds=.. decode_tokens_per_s=..`
# per run, `bench=generate config=C mode=M median tokens_per_s=.. decode_tokens_per_s=..`, and
# `summary config=C cached_over_uncached=.. cached_over_uncached_paired=.. same_tokens=..` per config.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
tokens=256
seq_lens="128 512"
threads=1
checkpoint=""
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --seq-lens) seq_lens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --checkpoint) checkpoint=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "generate_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for pair in "reps:$reps" "tokens:$tokens" "threads:$threads"; do
  [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]] ||
    { echo "generate_speed.sh: --${pair%%:*} must be a positive integer, got '${pair#*:}'" >&2; exit 2; }
done
program=$build_dir/bench/generate/giant-generate-bench
giant=$build_dir/bin/giant
if [[ -n $checkpoint ]]; then
  [[ -x $giant ]] || { echo "generate_speed.sh: $giant is missing (build it first)" >&2; exit 2; }
  [[ -e $checkpoint ]] || { echo "generate_speed.sh: --checkpoint $checkpoint does not exist" >&2; exit 2; }
  configs=checkpoint
else
  [[ -x $program ]] || { echo "generate_speed.sh: $program is missing (build it first)" >&2; exit 2; }
  configs=""
  for s in $seq_lens; do
    [[ $s =~ ^[1-9][0-9]*$ ]] || { echo "generate_speed.sh: --seq-lens: '$s' is no positive integer" >&2; exit 2; }
    configs+="seq$s "
  done
fi
tmp=$(mktemp -d /tmp/giant-generate-speed-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bench_script=generate_speed.sh

# run_one CONFIG MODE: one generation; sets tokens_per_s, seconds, decode_tokens_per_s, tokens_id.
run_one() {
  local config=$1 mode=$2 log=$tmp/$1.$2.log line
  if [[ $config == checkpoint ]]; then
    local flags=()
    [[ $mode == cached ]] || flags=(--no-cache)
    "$giant" generate "$checkpoint" --prompt "And God said" --max-tokens "$tokens" --temperature 0 \
      --threads "$threads" "${flags[@]}" > "$tmp/text" 2> "$log" || fail "$log" "$config $mode"
    # giant generate: N tokens in S s (T tokens/s), ...; decode M tokens in S s (D tokens/s)
    line=$(grep '^giant generate: [0-9]* tokens in' "$log" | tail -1) || fail "$log" "$config $mode (no statistics)"
    seconds=$(sed -n 's/^giant generate: [0-9]* tokens in \([^ ]*\) s (\([^ ]*\) tokens\/s).*/\1/p' <<< "$line")
    tokens_per_s=$(sed -n 's/^giant generate: [0-9]* tokens in [^ ]* s (\([^ ]*\) tokens\/s).*/\1/p' <<< "$line")
    decode_tokens_per_s=$(sed -n 's/.*decode [0-9]* tokens in [^ ]* s (\([^ ]*\) tokens\/s).*/\1/p' <<< "$line")
    tokens_id=$(cksum < "$tmp/text" | cut -d' ' -f1)
  else
    "$program" --mode "$mode" --seq-len "${config#seq}" --tokens "$tokens" --threads "$threads" > "$log" 2>&1 ||
      fail "$log" "$config $mode"
    line=$(grep '^bench=generate ' "$log" | tail -1) || fail "$log" "$config $mode (no result line)"
    field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< "$line"; }
    seconds=$(field seconds)
    tokens_per_s=$(field tokens_per_s)
    decode_tokens_per_s=$(field decode_tokens_per_s)
    tokens_id=$(field tokens_crc32c)
  fi
}

echo "# reps=$reps tokens=$tokens threads=$threads configs=\"${configs% }\"" \
     "${checkpoint:+checkpoint=$checkpoint}"
for config in $configs; do
  declare -A all_tokens=() all_decode=()
  paired="" same=true
  for ((rep = 0; rep < reps; ++rep)); do
    declare -A rep_tokens=() rep_id=()
    order="cached uncached"
    (( rep % 2 == 0 )) || order="uncached cached"
    for mode in $order; do
      run_one "$config" "$mode"
      echo "bench=generate config=$config mode=$mode rep=$rep tokens_per_s=$tokens_per_s seconds=$seconds" \
           "decode_tokens_per_s=$decode_tokens_per_s"
      all_tokens[$mode]+="$tokens_per_s " all_decode[$mode]+="$decode_tokens_per_s "
      rep_tokens[$mode]=$tokens_per_s rep_id[$mode]=$tokens_id
    done
    paired+="$(ratio "${rep_tokens[cached]}" "${rep_tokens[uncached]}") "
    [[ ${rep_id[cached]} == "${rep_id[uncached]}" ]] || same=false
  done
  declare -A med=()
  for mode in cached uncached; do
    med[$mode]=$(tr ' ' '\n' <<< "${all_tokens[$mode]}" | grep . | median)
    echo "bench=generate config=$config mode=$mode median tokens_per_s=${med[$mode]}" \
         "decode_tokens_per_s=$(tr ' ' '\n' <<< "${all_decode[$mode]}" | grep . | median)"
  done
  echo "summary config=$config cached_over_uncached=$(ratio "${med[cached]}" "${med[uncached]}")" \
       "cached_over_uncached_paired=$(tr ' ' '\n' <<< "$paired" | grep . | median) same_tokens=$same"
done
