#!/usr/bin/env bash
# Giant's data and tensor parallelism side by side with their bound and their
# peer, on the model of the single-process parity bench (4 layers, hidden 256,
# 4 heads, sequence 128, vocabulary 256, AdamW, the bundled corpus):
#   single           giant train, 1 process x 1 thread, batch 8
#   dp2              giant launch --nproc 2, parallel.dp=2, 1 thread each, batch 8 per rank
#                    (the default ZeRO stage 1: optimizer state and update sharded)
#   dp2_zero0        dp2 with the whole optimizer on each rank (parallel.zero=0)
#   dp2_zero2, dp2_zero3  dp2 with the gradients sharded too (parallel.zero=2), and the
#                    parameters (parallel.zero=3, each layer gathered before it runs);
#                    only when named in --configs
#   two_independent  two concurrent single processes, no communication: the bound
#                    for dp2 (tokens/s summed, step time the mean of the two; the
#                    slower of the two is kept too: a synchronous step cannot beat it)
#   pytorch_ddp      bench/train/pytorch_ddp.py, DDP over gloo, 2 x 1 thread, batch 8 per rank,
#                    on the heap settings giant train uses (peer_malloc in common.sh)
#   tp2              giant launch --nproc 2, parallel.tp=2, 1 thread each, batch 8
#   dp2_fp32, tp2_fp32  dp2 and tp2 in fp32 whatever --precision says (with
#                    --precision bf16: the same layouts before mixed precision)
# Every giant run computes in --precision (fp32 by default; bf16: mixed
# precision, and pytorch_ddp then runs under CPU autocast bf16, --bf16).
# R repetitions, the order of the configurations rotating by one each
# repetition; each run reports its median over its steady steps (the first
# step is not counted); then the median of the R medians per configuration.
#
# usage: bench/train/compare_parallel.sh [BUILD_DIR] [--reps 5] [--steps 20]
#            [--precision fp32|bf16] [--configs "single dp2 dp2_zero0 two_independent pytorch_ddp tp2"]
# Lines: `bench=train_parallel config=C rep=R tokens_per_s=.. step_s=.. comm_wait_s=..`
# per run, `bench=train_parallel config=C median ...` per configuration, and last
# `summary dp2_step_over_two_independent=.. dp2_step_over_two_independent_paired=..
# dp2_step_over_slower_independent_paired=.. dp2_tokens_over_pytorch_ddp=..
# (the same four for dp2_zero0) tp2_tokens_over_single=.. dp2_tokens_over_dp2_fp32=..
# tp2_tokens_over_tp2_fp32=.. dp2_zero2_tokens_over_dp2=.. dp2_zero3_tokens_over_dp2=..
# dp2_zero3_tokens_over_pytorch_ddp=..` (NA where a
# configuration was not run); _paired is the median over repetitions of the
# ratio within each one;
# dp2_step_over_slower_independent_paired compares dp2 with the slower of the two
# processes in each repetition (on this VM one core often runs 5-15% slower than
# the other for seconds at a time, and dp2's ranks wait for the slower one).
# comm_wait_s is the time a rank waits on communication (giant: the summary's
# comm_wait_s_median, NA when absent; pytorch_ddp: its rank 0's exposed
# gradient-reduction wait; 0 for the configurations without communication).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
steps=20
configs="single dp2 dp2_zero0 two_independent pytorch_ddp tp2"
precision=fp32
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "compare_parallel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "compare_parallel.sh: --reps must be a positive integer, got '$reps'" >&2; exit 2; }
if ! [[ $steps =~ ^[0-9]+$ ]] || (( steps < 2 )); then
  echo "compare_parallel.sh: --steps must be at least 2 (the first is not measured), got '$steps'" >&2; exit 2
fi
case $precision in fp32|bf16) ;; *) echo "compare_parallel.sh: --precision must be fp32 or bf16, got '$precision'" >&2; exit 2 ;; esac
read -r -a config_list <<< "$configs"
for c in "${config_list[@]}"; do
  case $c in single|dp2|dp2_zero0|dp2_zero2|dp2_zero3|two_independent|pytorch_ddp|tp2|dp2_fp32|tp2_fp32) ;;
    *) echo "compare_parallel.sh: --configs: unknown configuration '$c'" \
            "(known: single dp2 dp2_zero0 dp2_zero2 dp2_zero3 two_independent pytorch_ddp tp2 dp2_fp32 tp2_fp32)" >&2; exit 2 ;;
  esac
done
(( ${#config_list[@]} > 0 )) || { echo "compare_parallel.sh: --configs is empty" >&2; exit 2; }

giant=$build_dir/bin/giant
python=/usr/bin/python3   # Debian's, which has torch 1.13
data=examples/data/kjv.txt
[[ -x $giant ]] || { echo "compare_parallel.sh: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-parallel-XXXXXX)

bench_model_flags "$steps" "$precision"
common=("${bench_model[@]}")
single_flags=(--set train.global_batch=8 --set train.micro_batch=8)
dp2_flags=(--set parallel.dp=2 --set train.global_batch=16 --set train.micro_batch=8)
dp2_zero0_flags=("${dp2_flags[@]}" --set parallel.zero=0)
dp2_zero2_flags=("${dp2_flags[@]}" --set parallel.zero=2)
dp2_zero3_flags=("${dp2_flags[@]}" --set parallel.zero=3)
tp2_flags=(--set parallel.tp=2 --set train.global_batch=8 --set train.micro_batch=8)
fp32_flags=(--set train.precision=fp32)  # after common's: the last --set wins
launch=("$giant" launch --nproc 2 --)
ddp=("${peer_malloc[@]}" "$python" bench/train/pytorch_ddp.py --nproc 2 --threads 1 --batch 8 --layers 4 --hidden 256
     --heads 4 --seq-len 128 --vocab 256 --steps "$steps" --warmup 1 --data "$data")
[[ $precision == fp32 ]] || ddp+=(--bf16)
bench_script=compare_parallel.sh
trap 'stop_background; rm -rf "$tmp"' EXIT

run_single() { run_giant single "$giant" train "${common[@]}" "${single_flags[@]}"; comm_wait_s=0; }
run_dp2() { run_giant dp2 "${launch[@]}" "$giant" train "${common[@]}" "${dp2_flags[@]}"; }
run_dp2_zero0() { run_giant dp2_zero0 "${launch[@]}" "$giant" train "${common[@]}" "${dp2_zero0_flags[@]}"; }
run_dp2_zero2() { run_giant dp2_zero2 "${launch[@]}" "$giant" train "${common[@]}" "${dp2_zero2_flags[@]}"; }
run_dp2_zero3() { run_giant dp2_zero3 "${launch[@]}" "$giant" train "${common[@]}" "${dp2_zero3_flags[@]}"; }
run_tp2() { run_giant tp2 "${launch[@]}" "$giant" train "${common[@]}" "${tp2_flags[@]}"; }
run_dp2_fp32() { run_giant dp2_fp32 "${launch[@]}" "$giant" train "${common[@]}" "${dp2_flags[@]}" "${fp32_flags[@]}"; }
run_tp2_fp32() { run_giant tp2_fp32 "${launch[@]}" "$giant" train "${common[@]}" "${tp2_flags[@]}" "${fp32_flags[@]}"; }
run_two_independent() { run_two_copies independent "$giant" train "${common[@]}" "${single_flags[@]}"; }
run_pytorch_ddp() {
  local log=$tmp/pytorch_ddp.log line
  "${ddp[@]}" > "$log" 2>&1 || fail "$log" pytorch_ddp
  line=$(grep '^impl=pytorch_ddp nproc=' "$log" | tail -1) || fail "$log" "pytorch_ddp (no summary line)"
  tokens_per_s=$(sed -n 's/.* tokens_per_s_median=\([^ ]*\).*/\1/p' <<< "$line")
  step_s=$(sed -n 's/.* step_s_median=\([^ ]*\).*/\1/p' <<< "$line")
  comm_wait_s=$(sed -n 's/.* comm_wait_s_median=\([^ ]*\).*/\1/p' <<< "$line")
}

echo "# torch: $("$python" -c 'import torch; print(torch.__version__)') ($python)"
commands=(
  "single: $giant train ${common[*]} ${single_flags[*]} --set $(out_flag single)"
  "dp2: ${launch[*]} $giant train ${common[*]} ${dp2_flags[*]} --set $(out_flag dp2)"
  "dp2_zero0: ${launch[*]} $giant train ${common[*]} ${dp2_zero0_flags[*]} --set $(out_flag dp2_zero0)"
  "dp2_zero2: ${launch[*]} $giant train ${common[*]} ${dp2_zero2_flags[*]} --set $(out_flag dp2_zero2)"
  "dp2_zero3: ${launch[*]} $giant train ${common[*]} ${dp2_zero3_flags[*]} --set $(out_flag dp2_zero3)"
  "two_independent: 2 concurrent x $giant train ${common[*]} ${single_flags[*]} --set $(out_flag "independent\$i"), i = 0, 1"
  "pytorch_ddp: ${ddp[*]}"
  "tp2: ${launch[*]} $giant train ${common[*]} ${tp2_flags[*]} --set $(out_flag tp2)"
  "dp2_fp32: ${launch[*]} $giant train ${common[*]} ${dp2_flags[*]} ${fp32_flags[*]} --set $(out_flag dp2_fp32)"
  "tp2_fp32: ${launch[*]} $giant train ${common[*]} ${tp2_flags[*]} ${fp32_flags[*]} --set $(out_flag tp2_fp32)")
for c in "${config_list[@]}"; do
  for line in "${commands[@]}"; do if [[ $line == "$c: "* ]]; then echo "# $line"; fi; done
done
echo "# reps=$reps steps=$steps precision=$precision configs=\"${config_list[*]}\" (order rotates each repetition)"

declare -A all_tokens all_step all_comm rep_step paired_ratios slower_ratios
dp_variants="dp2 dp2_zero0 dp2_zero2 dp2_zero3"
n=${#config_list[@]}
for ((rep = 0; rep < reps; ++rep)); do
  for ((k = 0; k < n; ++k)); do
    c=${config_list[$(((k + rep) % n))]}
    "run_$c"
    extra=""
    [[ $c != two_independent ]] || extra=" slower_step_s=$slower_step_s"
    echo "bench=train_parallel config=$c rep=$rep tokens_per_s=$tokens_per_s step_s=$step_s comm_wait_s=$comm_wait_s$extra"
    all_tokens[$c]+="$tokens_per_s " all_step[$c]+="$step_s " all_comm[$c]+="$comm_wait_s "
    rep_step[$c]=$step_s
  done
  # The same ratio within each repetition: drift between repetitions cancels.
  for d in $dp_variants; do
    if [[ -n ${rep_step[$d]:-} && -n ${rep_step[two_independent]:-} ]]; then
      paired_ratios[$d]+="$(ratio "${rep_step[$d]}" "${rep_step[two_independent]}") "
      slower_ratios[$d]+="$(ratio "${rep_step[$d]}" "$slower_step_s") "
    fi
  done
done

declare -A med_tokens med_step med_comm
for c in single dp2 dp2_zero0 dp2_zero2 dp2_zero3 two_independent pytorch_ddp tp2 dp2_fp32 tp2_fp32; do med_tokens[$c]=NA med_step[$c]=NA med_comm[$c]=NA; done
printf '%-16s %14s %10s %12s\n' config tokens_per_s step_s comm_wait_s
for c in "${config_list[@]}"; do
  med_tokens[$c]=$(tr ' ' '\n' <<< "${all_tokens[$c]}" | grep . | median)
  med_step[$c]=$(tr ' ' '\n' <<< "${all_step[$c]}" | grep . | median)
  med_comm[$c]=$(tr ' ' '\n' <<< "${all_comm[$c]}" | grep . | median)
  printf '%-16s %14s %10s %12s\n' "$c" "${med_tokens[$c]}" "${med_step[$c]}" "${med_comm[$c]}"
done
for c in "${config_list[@]}"; do
  echo "bench=train_parallel config=$c median reps=$reps steps=$steps tokens_per_s=${med_tokens[$c]} step_s=${med_step[$c]} comm_wait_s=${med_comm[$c]}"
done
summary=()
for d in $dp_variants; do
  paired=NA slower=NA
  [[ -z ${paired_ratios[$d]:-} ]] || paired=$(tr ' ' '\n' <<< "${paired_ratios[$d]}" | grep . | median)
  [[ -z ${slower_ratios[$d]:-} ]] || slower=$(tr ' ' '\n' <<< "${slower_ratios[$d]}" | grep . | median)
  echo "# $d step / two_independent step within each repetition: ${paired_ratios[$d]:-NA}"
  echo "# $d step / the slower independent process's step within each repetition: ${slower_ratios[$d]:-NA}"
  summary+=("${d}_step_over_two_independent=$(ratio "${med_step[$d]}" "${med_step[two_independent]}")"
            "${d}_step_over_two_independent_paired=$paired"
            "${d}_step_over_slower_independent_paired=$slower"
            "${d}_tokens_over_pytorch_ddp=$(ratio "${med_tokens[$d]}" "${med_tokens[pytorch_ddp]}")")
done
echo "summary ${summary[*]}" \
     "tp2_tokens_over_single=$(ratio "${med_tokens[tp2]}" "${med_tokens[single]}")" \
     "dp2_tokens_over_dp2_fp32=$(ratio "${med_tokens[dp2]}" "${med_tokens[dp2_fp32]}")" \
     "tp2_tokens_over_tp2_fp32=$(ratio "${med_tokens[tp2]}" "${med_tokens[tp2_fp32]}")" \
     "dp2_zero2_tokens_over_dp2=$(ratio "${med_tokens[dp2_zero2]}" "${med_tokens[dp2]}")" \
     "dp2_zero3_tokens_over_dp2=$(ratio "${med_tokens[dp2_zero3]}" "${med_tokens[dp2]}")" \
     "precision=$precision reps=$reps steps=$steps"
