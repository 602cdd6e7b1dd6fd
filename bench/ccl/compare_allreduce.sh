#!/usr/bin/env bash
# Compares ccl's allreduce with its peer, Gloo's AllreduceRingChunked over
# TCP, on this machine: R interleaved repetitions (their order alternating, so
# neither always runs first) of both benchmarks at each world size, then the
# median busbw of each and the ratio giant/gloo. Timings on a shared 2-core
# machine vary by up to 2.5x between runs, which is why they are interleaved
# and only medians are compared (DESIGN.md, "Conventions").
#
# usage: bench/ccl/compare_allreduce.sh [BUILD_DIR] [--reps 5] [--bytes 64MiB]
#                                       [--nprocs "2 4"] [--iters 5] [--warmup 2]
#                                       [-- EXTRA `giant bench ccl` FLAGS]
# The last line reads: summary ... ratio_n2=... ratio_n4=...
# Exits non-zero if a run fails or reports wrong results.
set -euo pipefail

build_dir=build
reps=5
bytes=64MiB
nprocs="2 4"
iters=5
warmup=2
extra_giant_flags=()
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --nprocs) nprocs=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --) shift; extra_giant_flags=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "compare_allreduce.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

giant_bin=$build_dir/bin/giant
gloo_bin=$build_dir/bench/ccl/gloo-allreduce-bench
for bin in "$giant_bin" "$gloo_bin"; do
  [[ -x $bin ]] || { echo "compare_allreduce.sh: $bin is missing (build it first)" >&2; exit 2; }
done

# Both peers: same size, dtype, op, iteration and warmup counts.
giant_flags=(--collectives allreduce --bytes "$bytes" --dtype f32 --op sum --iters "$iters"
             --warmup "$warmup" "${extra_giant_flags[@]}")
gloo_flags=(--bytes "$bytes" --iters "$iters" --warmup "$warmup")
echo "# compare_allreduce: reps=$reps nprocs=($nprocs) bytes=$bytes host=$(hostname) cores=$(nproc)"
echo "# giant: $giant_bin bench ccl --nproc N ${giant_flags[*]}"
echo "# gloo:  $gloo_bin --nproc N ${gloo_flags[*]}  (AllreduceRingChunked<float>, tcp 127.0.0.1)"

results=$(mktemp)
trap 'rm -f "$results"' EXIT

# Runs one benchmark and appends "peer n rep busbw" to $results.
run_one() {
  local peer=$1 n=$2 rep=$3 output line busbw wrong
  if [[ $peer == giant ]]; then
    output=$("$giant_bin" bench ccl --nproc "$n" "${giant_flags[@]}" 2>&1) || {
      echo "$output" >&2; echo "compare_allreduce.sh: giant bench ccl failed at n=$n" >&2; exit 1; }
    line=$(grep '^bench=ccl ' <<<"$output" | tail -n 1)
    grep '^bench=limit ' <<<"$output" | sed "s/^/# rep=$rep n=$n /"
  else
    output=$("$gloo_bin" --nproc "$n" "${gloo_flags[@]}" 2>&1) || {
      echo "$output" >&2; echo "compare_allreduce.sh: gloo-allreduce-bench failed at n=$n" >&2; exit 1; }
    line=$(grep '^bench=gloo ' <<<"$output" | tail -n 1)
  fi
  busbw=$(grep -o 'busbw_gbps=[0-9.]*' <<<"$line" | cut -d= -f2)
  wrong=$(grep -o 'wrong=[0-9]*' <<<"$line" | cut -d= -f2)
  if [[ -z $busbw || $wrong != 0 ]]; then
    echo "$output" >&2
    echo "compare_allreduce.sh: $peer at n=$n gave no result or wrong=$wrong" >&2
    exit 1
  fi
  printf '%-5s n=%s rep=%s busbw_gbps=%s   %s\n' "$peer" "$n" "$rep" "$busbw" "$line"
  echo "$peer $n $rep $busbw" >>"$results"
}

for ((rep = 0; rep < reps; rep++)); do
  for n in $nprocs; do
    if ((rep % 2 == 0)); then order="giant gloo"; else order="gloo giant"; fi
    for peer in $order; do run_one "$peer" "$n" "$rep"; done
  done
done

median() {  # median of the numbers on stdin
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan";
    else if (NR % 2) printf "%.4f\n", v[(NR + 1) / 2];
    else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

summary="summary bench=allreduce bytes=$bytes reps=$reps"
echo "#"
echo "# median busbw (GB/s) over $reps interleaved repetitions"
printf '# %6s %10s %10s %8s   %s\n' nproc giant gloo ratio "per-repetition busbw giant | gloo"
for n in $nprocs; do
  giant_all=$(awk -v n="$n" '$1 == "giant" && $2 == n { printf "%s ", $4 }' "$results")
  gloo_all=$(awk -v n="$n" '$1 == "gloo" && $2 == n { printf "%s ", $4 }' "$results")
  giant_median=$(tr ' ' '\n' <<<"$giant_all" | grep . | median)
  gloo_median=$(tr ' ' '\n' <<<"$gloo_all" | grep . | median)
  ratio=$(awk -v a="$giant_median" -v b="$gloo_median" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
  printf '# %6s %10s %10s %8s   %s| %s\n' "$n" "$giant_median" "$gloo_median" "$ratio" "$giant_all" "$gloo_all"
  summary+=" giant_n$n=$giant_median gloo_n$n=$gloo_median ratio_n$n=$ratio"
done
echo "$summary"
