#!/usr/bin/env bash
# Giant's pipeline parallelism against the single process and against its
# bound measured in the same run, on the model of compare_parallel.sh (4
# layers, hidden 256, 4 heads, sequence 128, vocabulary 256, AdamW, the
# bundled corpus), global batch 8, 1 thread per rank:
#   single             giant train, 1 process, micro-batch 8
#   single_m2, single_m1  the same with micro-batches of 2 (4 accumulated) and of
#                      1 (8): what smaller micro-batches cost one process alone
#   two_independent    two concurrent single processes, no communication (as in
#                      compare_parallel.sh): tokens/s summed. Two processes on this
#                      machine's cores each run slower than one alone, so the
#                      pipeline's bound is this sum x m / (m + p - 1), not single's
#                      tokens/s x the bubble bound 2 m / (m + p - 1)
#   two_independent_m2, two_independent_m1  the same at micro-batches of 2 and 1:
#                      the bound at the pipeline's own micro-batch size
#   pp2_m4, pp2_m8     giant launch --nproc 2, parallel.pp=2, parallel.schedule=1f1b,
#                      micro-batch 2 (m = 4 micro-batches) and 1 (m = 8)
#   pp2_m4_gpipe, pp2_m8_gpipe  the same under parallel.schedule=gpipe
# Every run computes in --precision (fp32). R repetitions, the order of the
# configurations rotating by one each repetition; each run reports its median
# over its steady steps (the first is not counted), then the median of the R
# medians per configuration.
#
# usage: bench/train/compare_pipeline.sh [BUILD_DIR] [--reps 5] [--steps 20]
#            [--precision fp32|bf16] [--configs "single single_m2 single_m1 two_independent
#             two_independent_m2 two_independent_m1 pp2_m4 pp2_m8 pp2_m4_gpipe pp2_m8_gpipe"]
# Lines: `bench=train_pipeline config=C rep=R tokens_per_s=.. step_s=.. comm_wait_s=..`
# per run, `bench=train_pipeline config=C median ...` per configuration, and last
# `summary` with, for X in pp2_m4 pp2_m8 (m micro-batches, p = 2 stages):
#   X_tokens_over_single          X's tokens/s / single's
#   X_bubble_bound                2 m / (m + p - 1): the bound if two ranks ran as fast as one alone
#   X_measured_bound_over_single  two_independent's tokens/s x m / (m + p - 1), over single's
#   X_fraction_of_measured_bound  X's tokens/s / that measured bound
#   X_fraction_of_measured_bound_paired  the same, the median of the ratios within each repetition
#   X_fraction_of_microbatch_bound  against two_independent_mB (B = X's micro-batch) x m / (m + p - 1)
#   X_step_over_gpipe             X's step time / X_gpipe's
# and single_m2_tokens_over_single, single_m1_tokens_over_single (NA where a
# configuration was not run). comm_wait_s is the time rank 0 (the first stage)
# waits on communication, the pipeline's idle time included.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
bench_script=compare_pipeline.sh
build_dir=build
reps=5
steps=20
known="single single_m2 single_m1 two_independent two_independent_m2 two_independent_m1 pp2_m4 pp2_m8 pp2_m4_gpipe pp2_m8_gpipe"
configs=$known
precision=fp32
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$bench_script: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "$bench_script: --reps must be a positive integer, got '$reps'" >&2; exit 2; }
if ! [[ $steps =~ ^[0-9]+$ ]] || (( steps < 2 )); then
  echo "$bench_script: --steps must be at least 2 (the first is not measured), got '$steps'" >&2; exit 2
fi
case $precision in fp32|bf16) ;; *) echo "$bench_script: --precision must be fp32 or bf16, got '$precision'" >&2; exit 2 ;; esac
read -r -a config_list <<< "$configs"
for c in "${config_list[@]}"; do
  [[ " $known " == *" $c "* ]] || { echo "$bench_script: --configs: unknown configuration '$c' (known: $known)" >&2; exit 2; }
done
(( ${#config_list[@]} > 0 )) || { echo "$bench_script: --configs is empty" >&2; exit 2; }

giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "$bench_script: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-pipeline-XXXXXX)
trap 'stop_background; rm -rf "$tmp"' EXIT

bench_model_flags "$steps" "$precision"
batch() { echo --set train.global_batch=8 --set train.micro_batch="$1"; }  # micro-batch -> flags
pipeline() { echo --set parallel.pp=2 --set parallel.schedule="$1"; }      # schedule -> flags
launch=("$giant" launch --nproc 2 --)
# config -> "micro_batch micro_batches how", how: single, two, pp:SCHEDULE
declare -A shape=(
  [single]="8 1 single" [single_m2]="2 4 single" [single_m1]="1 8 single"
  [two_independent]="8 1 two" [two_independent_m2]="2 4 two" [two_independent_m1]="1 8 two"
  [pp2_m4]="2 4 pp:1f1b" [pp2_m8]="1 8 pp:1f1b" [pp2_m4_gpipe]="2 4 pp:gpipe" [pp2_m8_gpipe]="1 8 pp:gpipe")
# config -> its command line, into the array cmd
command_of() {
  local mb m how
  read -r mb m how <<< "${shape[$1]}"
  # shellcheck disable=SC2207
  cmd=("$giant" train "${bench_model[@]}" $(batch "$mb"))
  # shellcheck disable=SC2207
  [[ $how != pp:* ]] || cmd=("${launch[@]}" "${cmd[@]}" $(pipeline "${how#pp:}"))
}
stages_shown=
run_config() {  # config -> tokens_per_s step_s comm_wait_s (and slower_step_s for two_*)
  command_of "$1"
  case ${shape[$1]##* } in
    single) run_giant "$1" "${cmd[@]}"; comm_wait_s=0 ;;
    two) run_two_copies "$1" "${cmd[@]}" ;;
    pp:*) run_giant "$1" "${cmd[@]}"
          if [[ -z $stages_shown ]]; then  # how parallel.partition cut the model, once
            grep -o 'stage [0-9]* (pp rank .*' "$tmp/$1.log" | sed 's/^/# partition: /' || true
            stages_shown=1
          fi ;;
  esac
}

for c in "${config_list[@]}"; do
  command_of "$c"
  case ${shape[$c]##* } in
    two) echo "# $c: 2 concurrent x ${cmd[*]} --set $(out_flag "$c\$i"), i = 0, 1" ;;
    *) echo "# $c: ${cmd[*]} --set $(out_flag "$c")" ;;
  esac
done
echo "# reps=$reps steps=$steps precision=$precision configs=\"${config_list[*]}\" (order rotates each repetition)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

declare -A all_tokens all_step all_comm rep_tokens paired_fraction
n=${#config_list[@]}
for ((rep = 0; rep < reps; ++rep)); do
  rep_tokens=()
  for ((k = 0; k < n; ++k)); do
    c=${config_list[$(((k + rep) % n))]}
    run_config "$c"
    extra=""
    [[ ${shape[$c]##* } != two ]] || extra=" slower_step_s=$slower_step_s"
    echo "bench=train_pipeline config=$c rep=$rep tokens_per_s=$tokens_per_s step_s=$step_s comm_wait_s=$comm_wait_s$extra"
    all_tokens[$c]+="$tokens_per_s " all_step[$c]+="$step_s " all_comm[$c]+="$comm_wait_s "
    rep_tokens[$c]=$tokens_per_s
  done
  # The fraction of the measured bound within each repetition: drift between repetitions cancels.
  for x in pp2_m4 pp2_m8; do
    read -r _ m _ <<< "${shape[$x]}"
    if [[ -n ${rep_tokens[$x]:-} && -n ${rep_tokens[two_independent]:-} ]]; then
      paired_fraction[$x]+="$(awk -v t="${rep_tokens[$x]}" -v b="${rep_tokens[two_independent]}" -v m="$m" \
        'BEGIN {printf "%.3f", t / (b * m / (m + 1))}') "
    fi
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A med_tokens med_step med_comm
for c in $known; do med_tokens[$c]=NA med_step[$c]=NA med_comm[$c]=NA; done
printf '%-20s %14s %10s %12s\n' config tokens_per_s step_s comm_wait_s
for c in "${config_list[@]}"; do
  med_tokens[$c]=$(tr ' ' '\n' <<< "${all_tokens[$c]}" | grep . | median)
  med_step[$c]=$(tr ' ' '\n' <<< "${all_step[$c]}" | grep . | median)
  med_comm[$c]=$(tr ' ' '\n' <<< "${all_comm[$c]}" | grep . | median)
  printf '%-20s %14s %10s %12s\n' "$c" "${med_tokens[$c]}" "${med_step[$c]}" "${med_comm[$c]}"
done
for c in "${config_list[@]}"; do
  echo "bench=train_pipeline config=$c median reps=$reps steps=$steps tokens_per_s=${med_tokens[$c]} step_s=${med_step[$c]} comm_wait_s=${med_comm[$c]}"
done

scaled() { awk -v a="$1" -v f="$2" 'BEGIN {if (a == "NA") print "NA"; else printf "%.1f", a * f}'; }  # A x F
summary=()
for x in pp2_m4 pp2_m8; do
  read -r mb m _ <<< "${shape[$x]}"
  fill=$(awk -v m="$m" 'BEGIN {printf "%.6f", m / (m + 1)}')  # m / (m + p - 1), p = 2
  bound=$(scaled "${med_tokens[two_independent]}" "$fill")
  micro_bound=$(scaled "${med_tokens[two_independent_m$mb]}" "$fill")
  paired=NA
  [[ -z ${paired_fraction[$x]:-} ]] || paired=$(tr ' ' '\n' <<< "${paired_fraction[$x]}" | grep . | median)
  echo "# $x ($m micro-batches of $mb): bubble bound 2 x $fill; measured bound two_independent x $fill = $bound tokens/s;" \
       "at micro-batch $mb: two_independent_m$mb x $fill = $micro_bound tokens/s"
  echo "# $x tokens / measured bound within each repetition: ${paired_fraction[$x]:-NA}"
  summary+=("${x}_tokens_over_single=$(ratio "${med_tokens[$x]}" "${med_tokens[single]}")"
            "${x}_bubble_bound=$(awk -v f="$fill" 'BEGIN {printf "%.3f", 2 * f}')"
            "${x}_measured_bound_over_single=$(ratio "$bound" "${med_tokens[single]}")"
            "${x}_fraction_of_measured_bound=$(ratio "${med_tokens[$x]}" "$bound")"
            "${x}_fraction_of_measured_bound_paired=$paired"
            "${x}_fraction_of_microbatch_bound=$(ratio "${med_tokens[$x]}" "$micro_bound")"
            "${x}_step_over_gpipe=$(ratio "${med_step[$x]}" "${med_step[${x}_gpipe]}")")
done
echo "summary ${summary[*]}" \
     "single_m2_tokens_over_single=$(ratio "${med_tokens[single_m2]}" "${med_tokens[single]}")" \
     "single_m1_tokens_over_single=$(ratio "${med_tokens[single_m1]}" "${med_tokens[single]}")" \
     "precision=$precision reps=$reps steps=$steps"
