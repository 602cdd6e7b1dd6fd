#!/usr/bin/env bash
# The pipeline schedules' logic, timed: `giant bench pipeline` under
# `giant launch --nproc 4` (one process per pipeline rank), every stage's
# forward and backward a sleep, so the step is the schedule's own whatever
# the cores (4 ranks on 2 cores would blur idle time with real compute):
#   gpipe        p=4, m=8
#   1f1b         p=4, m=8
#   interleaved  p=4, v=2, m=8 (each chunk sleeps half a rank's time)
# A rank sleeps --forward-ms (20) and --backward-ms (40) per micro-batch.
# Each repetition is one launch running the three, their order rotating by
# one each repetition; each reports its median step over --steps steps
# after one untimed. The simulator's step is simulate_schedule's on the
# same lowered schedule with the sleeps as costs and transfer_s the
# launch's measured one-way time of one activation (64 KiB); it is also
# simulated with the executor's measured compute time per action as costs
# (ratio_measured_costs): they hold what each action takes beyond its sleep
# (the wake-up, the stage's copies, autograd), so what is left between
# that and the measured step is the schedule's logic: waits, the order
# receives are posted in, transfers.
#
# usage: bench/train/pipeline_schedule.sh [BUILD_DIR] [--reps 5] [--steps 5]
#            [--forward-ms 20] [--backward-ms 40] [--micro-batches 8]
# Lines: `bench=pipeline_schedule schedule=S rep=R measured_step_s=..
# simulated_step_s=.. ratio=.. ratio_measured_costs=.. peaks_match=..` per run;
# `bench=pipeline_schedule schedule=S median measured_step_s=..
# simulated_step_s=.. ratio=.. ratio_measured_costs=.. measured_bubble=..
# simulated_bubble=.. sleep_overshoot_us=.. compute_overhead_us=..
# peak_in_flight=.. simulated_peak_in_flight=..` per schedule (ratio: the
# median of the runs' measured / simulated); last `summary gpipe_ratio=..
# 1f1b_ratio=.. interleaved_ratio=.. within_5pct=yes|no peaks_match=yes|no
# gpipe_ratio_measured_costs=.. 1f1b_ratio_measured_costs=..
# interleaved_ratio_measured_costs=..`.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
build_dir=build
reps=5
steps=5
forward_ms=20
backward_ms=40
micro_batches=8
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --forward-ms) forward_ms=$2; shift 2 ;;
    --backward-ms) backward_ms=$2; shift 2 ;;
    --micro-batches) micro_batches=$2; shift 2 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "pipeline_schedule.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ! [[ $reps =~ ^[1-9][0-9]*$ ]]; then
  echo "pipeline_schedule.sh: --reps must be a positive integer, got '$reps'" >&2; exit 2
fi
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "pipeline_schedule.sh: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-pipeline-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

schedules=(gpipe 1f1b interleaved)
# field LINE KEY: the value of KEY=VALUE in LINE.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<< "$1"; }

echo "# giant launch --nproc 4 -- giant bench pipeline --micro-batches $micro_batches --virtual-stages 2" \
     "--forward-ms $forward_ms --backward-ms $backward_ms --steps $steps; $reps repetitions; $(uptime)"
for ((rep = 0; rep < reps; rep++)); do
  order=()
  for ((i = 0; i < ${#schedules[@]}; i++)); do order+=("${schedules[(i + rep) % ${#schedules[@]}]}"); done
  list=$(IFS=,; echo "${order[*]}")
  log=$tmp/rep$rep.log
  status=0
  "$giant" launch --nproc 4 -- "$giant" bench pipeline --schedule "$list" --virtual-stages 2 \
      --micro-batches "$micro_batches" --forward-ms "$forward_ms" --backward-ms "$backward_ms" \
      --steps "$steps" --warmup 1 > "$log" 2>&1 || status=$?
  if ! grep -q '^\[rank 0\] bench=pipeline ' "$log"; then
    echo "pipeline_schedule.sh: repetition $rep printed no result (exit status $status):" >&2
    cat "$log" >&2
    exit 1
  fi
  for s in "${order[@]}"; do
    line=$(grep "^\[rank 0\] bench=pipeline schedule=$s " "$log" || true)
    [[ -n $line ]] || { echo "pipeline_schedule.sh: no result for $s in repetition $rep:" >&2; cat "$log" >&2; exit 1; }
    echo "$line" >> "$tmp/$s.lines"
    echo "bench=pipeline_schedule schedule=$s rep=$rep measured_step_s=$(field "$line" measured_step_s)" \
         "simulated_step_s=$(field "$line" simulated_step_s) ratio=$(field "$line" ratio)" \
         "ratio_measured_costs=$(field "$line" ratio_measured_costs) peaks_match=$(field "$line" peaks_match)"
  done
done

summary="summary"
measured_costs=""
within=yes
peaks=yes
for s in "${schedules[@]}"; do
  lines=$tmp/$s.lines
  med() { while IFS= read -r l; do field "$l" "$1"; done < "$lines" | median; }
  ratio=$(med ratio)
  ratio_measured_costs=$(med ratio_measured_costs)
  last=$(tail -n 1 "$lines")
  echo "bench=pipeline_schedule schedule=$s median measured_step_s=$(med measured_step_s)" \
       "simulated_step_s=$(med simulated_step_s) ratio=$ratio ratio_measured_costs=$ratio_measured_costs" \
       "measured_bubble=$(med measured_bubble) simulated_bubble=$(med simulated_bubble)" \
       "sleep_overshoot_us=$(med sleep_overshoot_us) compute_overhead_us=$(med compute_overhead_us)" \
       "peak_in_flight=$(field "$last" peak_in_flight)" \
       "simulated_peak_in_flight=$(field "$last" simulated_peak_in_flight)"
  grep -q ' peaks_match=no ' "$lines" && peaks=no
  awk -v r="$ratio" 'BEGIN {exit !(r >= 0.95 && r <= 1.05)}' || within=no
  summary+=" ${s}_ratio=$ratio"
  measured_costs+=" ${s}_ratio_measured_costs=$ratio_measured_costs"
done
echo "$summary within_5pct=$within peaks_match=$peaks$measured_costs"
