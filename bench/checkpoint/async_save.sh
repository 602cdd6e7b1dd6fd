#!/usr/bin/env bash
# Asynchronous checkpoints: the step time while a background save is being
# written against the steps without one, and the stall at the step boundary
# (copying the state to host memory) against a synchronous save's.
# A 353M-parameter GPT (28 layers, hidden 1024) on 2 ranks (dp=2, ZeRO-1),
# 10 steps, checkpoint.every=5: steps 2-5 run without a save, the save of
# step 5 is written while steps 6-10 run. RUNS (default 5) runs of each
# kind, interleaved; medians. Prints key=value lines and the ratio.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
giant=${GIANT:-$root/build/bin/giant}
runs=${RUNS:-5}
tmp=$(mktemp -d /tmp/giant-bench-async.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bench_script=async_save.sh
source "$root/bench/train/common.sh"
model=(--set model.layers="${LAYERS:-28}" --set model.hidden="${HIDDEN:-1024}" --set model.heads=16 --set model.seq_len=64
       --set train.global_batch=4 --set train.micro_batch=2 --set parallel.dp=2 --set parallel.zero=1
       --set train.threads=1 --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0
       --set train.precision=fp32 --set train.steps=10 --set checkpoint.every=5 --set train.tensorboard=false
       --set train.resume='""' --set data.path="\"$root/examples/data/kjv.txt\"")

# step_times METRICS -> "median step_s without a save in flight (steps 2-5), median with one"
step_times() {
  /usr/bin/python3 -c 'import json, sys
quiet, writing = [], []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "step_s" not in r or r.get("summary"):
        continue
    if r.get("checkpoint_writing"):
        writing.append(r["step_s"])
    elif 2 <= r["step"] <= 5:
        quiet.append(r["step_s"])
med = lambda v: sorted(v)[(len(v) - 1) // 2] if v else float("nan")
print(med(quiet), med(writing), len(writing))' "$1"
}
held_of() { sed -n 's/.*checkpoint of step 5: .*training held \([0-9.]*\) s).*/\1/p' "$1" | head -1; }

quiet=() writing=() held_async=() held_sync=()
for run in $(seq 1 "$runs"); do
  for mode in async sync; do
    log=$tmp/$mode.log
    rm -rf "${tmp:?}/$mode"
    "$giant" launch --nproc 2 -- "$giant" train "${model[@]}" --set checkpoint.async="$([[ $mode == async ]] && echo true || echo false)" \
      --set train.out_dir="\"$tmp/$mode\"" > "$log" 2>&1 || fail "$log" "$mode run"
    if [[ $mode == async ]]; then
      read -r q w n < <(step_times "$tmp/$mode/metrics.jsonl")
      quiet+=("$q"); writing+=("$w"); held_async+=("$(held_of "$log")")
      echo "run=$run mode=async quiet_step_s=$q writing_step_s=$w writing_steps=$n held_s=${held_async[-1]}"
    else
      held_sync+=("$(held_of "$log")")
      echo "run=$run mode=sync held_s=${held_sync[-1]}"
    fi
  done
done
med() { printf '%s\n' "$@" | median; }
awk -v q="$(med "${quiet[@]}")" -v w="$(med "${writing[@]}")" -v ha="$(med "${held_async[@]}")" \
    -v hs="$(med "${held_sync[@]}")" 'BEGIN {
  printf "summary quiet_step_s=%.4f writing_step_s=%.4f writing_vs_quiet=%.3f async_stall_s=%.3f sync_save_s=%.3f\n",
         q, w, w / q, ha, hs
}'
