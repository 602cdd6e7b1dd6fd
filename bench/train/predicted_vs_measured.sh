#!/usr/bin/env bash
# The planner's predicted step time against the measured one on this machine
# after `giant plan --calibrate --devices 2`, for the bench model (4 layers,
# hidden 256, 4 heads, sequence 128, vocabulary 256, AdamW, 1 thread per rank)
# at dp=2, batch 8 per rank:
#   zero1       parallel.zero=1 (the default)
#   zero2       parallel.zero=2
#   zero3       parallel.zero=3
#   zero1_full  parallel.zero=1 with train.recompute="full"
# Each configuration is predicted with `giant plan --layout ... --json` and
# measured with `giant launch --nproc 2 -- giant train ... --set
# parallel.zero=N`; R repetitions, the order rotating by one each repetition,
# each run's median over its steady steps, then the median of the R medians.
# A configuration the trainer refuses (a ZeRO stage or recomputation not
# built yet) is reported with status=failed and its error, and the others go on.
# Run it on a quiet machine: other work on the 2 cores moves the measurement.
#
# usage: bench/train/predicted_vs_measured.sh [BUILD_DIR] [--reps 5] [--steps 20]
#            [--precision fp32|bf16] [--configs "zero1 zero2 zero3 zero1_full"]
# Lines: the calibration (calibrate=...), `bench=predicted_vs_measured config=C
# rep=R step_s=..` per run, `bench=predicted_vs_measured config=C median reps=R
# measured_step_s=.. pred_step_s=.. measured_over_pred=.. within_20pct=yes|no`
# (or `status=failed error="..."`) per configuration, and a last `summary` line
# with each configuration's measured_over_pred.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
steps=20
precision=fp32
configs="zero1 zero2 zero3 zero1_full"
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "predicted_vs_measured.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "predicted_vs_measured.sh: --reps must be a positive integer, got '$reps'" >&2; exit 2; }
if ! [[ $steps =~ ^[0-9]+$ ]] || (( steps < 2 )); then
  echo "predicted_vs_measured.sh: --steps must be at least 2 (the first is not measured), got '$steps'" >&2; exit 2
fi
case $precision in fp32|bf16) ;; *) echo "predicted_vs_measured.sh: --precision must be fp32 or bf16, got '$precision'" >&2; exit 2 ;; esac
read -r -a config_list <<< "$configs"
(( ${#config_list[@]} > 0 )) || { echo "predicted_vs_measured.sh: --configs is empty" >&2; exit 2; }
zero_of() { case $1 in zero1|zero1_full) echo 1 ;; zero2) echo 2 ;; zero3) echo 3 ;; *) return 1 ;; esac; }
recompute_of() { [[ $1 == *_full ]] && echo full || echo none; }
for c in "${config_list[@]}"; do
  zero_of "$c" > /dev/null || { echo "predicted_vs_measured.sh: --configs: unknown configuration '$c'" \
                                     "(known: zero1 zero2 zero3 zero1_full)" >&2; exit 2; }
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "predicted_vs_measured.sh: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-predicted-XXXXXX)
bench_script=predicted_vs_measured.sh
trap 'stop_background; rm -rf "$tmp"' EXIT

# The prediction: the same model, batch and dtypes as the runs below.
printf '[model]\nname = "bench"\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 256\n[train]\nglobal_batch = 16\n' \
  > "$tmp/model.toml"
"$giant" plan --calibrate --devices 2 --out "$tmp/cluster.toml" | grep '^calibrate=' || true
declare -A predicted
for c in "${config_list[@]}"; do
  layout="tp=1,dp=2,pp=1,mb=8,zero=$(zero_of "$c"),recompute=$(recompute_of "$c"),sp=0"
  json=$("$giant" plan --model "$tmp/model.toml" --cluster "$tmp/cluster.toml" --precision "$precision" \
           --grad-dtype fp32 --layout "$layout" --top 1 --json)
  predicted[$c]=$(/usr/bin/python3 -c 'import json, sys; print("%.6f" % json.loads(sys.argv[1])["plans"][0]["step_s"])' "$json")
  echo "# $c: giant plan --layout $layout: pred_step_s=${predicted[$c]}"
done

bench_model_flags "$steps" "$precision"
dp2_flags=(--set parallel.dp=2 --set train.global_batch=16 --set train.micro_batch=8)
launch=("$giant" launch --nproc 2 --)
declare -A all_step failed
n=${#config_list[@]}
for ((rep = 0; rep < reps; ++rep)); do
  for ((k = 0; k < n; ++k)); do
    c=${config_list[$(((k + rep) % n))]}
    [[ -z ${failed[$c]:-} ]] || continue
    flags=("${bench_model[@]}" "${dp2_flags[@]}" --set parallel.zero="$(zero_of "$c")"
           --set train.recompute="$(recompute_of "$c")")
    log=$tmp/$c.log
    rm -rf "${tmp:?}/$c"
    if ! "${launch[@]}" "$giant" train "${flags[@]}" --set "$(out_flag "$c")" > "$log" 2>&1; then
      failed[$c]=$(grep -m1 -i 'error' "$log" | tr '"' "'" | cut -c1-200 || echo "exit status non-zero")
      continue
    fi
    values=$(giant_summary "$tmp/$c/metrics.jsonl" 2>> "$log") || fail "$log" "$c (reading metrics.jsonl)"
    read -r tokens_per_s step_s comm_wait_s <<< "$values"
    echo "bench=predicted_vs_measured config=$c rep=$rep step_s=$step_s tokens_per_s=$tokens_per_s comm_wait_s=$comm_wait_s"
    all_step[$c]+="$step_s "
  done
done

summary=()
for c in "${config_list[@]}"; do
  if [[ -n ${failed[$c]:-} ]]; then
    echo "bench=predicted_vs_measured config=$c median status=failed error=\"${failed[$c]}\" pred_step_s=${predicted[$c]}"
    summary+=("${c}_measured_over_pred=NA")
    continue
  fi
  measured=$(tr ' ' '\n' <<< "${all_step[$c]}" | grep . | median)
  over=$(ratio "$measured" "${predicted[$c]}")
  within=$(/usr/bin/python3 -c 'import sys; print("yes" if abs(float(sys.argv[1]) - 1) <= 0.2 else "no")' "$over")
  echo "bench=predicted_vs_measured config=$c median reps=$reps steps=$steps measured_step_s=$measured" \
       "pred_step_s=${predicted[$c]} measured_over_pred=$over within_20pct=$within"
  summary+=("${c}_measured_over_pred=$over")
done
echo "summary ${summary[*]} precision=$precision reps=$reps steps=$steps"
