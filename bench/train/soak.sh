#!/usr/bin/env bash
# The soak: a run of 4 ranks (dp2 x pp2 on two emulated hosts of two, root)
# under `giant launch --max-restarts 1000` for --minutes, durable
# checkpoints every --checkpoint-every seconds and local copies
# (checkpoint.local_every, in /dev/shm) every --local-every seconds (0:
# none), with a fault every --min-gap to --max-gap seconds at a random time
# (SIGKILL or SIGSTOP of a random rank, or a host's link down for 8 s), then
# the same steps again uninterrupted. Reports the faults injected, the
# restarts, the effective training time (the step time of the steps the run
# kept, each step's last attempt, over the faulty run's wall time), the
# steps redone beyond the interval between saves (goal 0) and whether the
# final parameters equal the uninterrupted run's bitwise. The uninterrupted
# run's timing plays no part: only its parameters do.
#
# usage: bench/train/soak.sh [BUILD_DIR] [--minutes 60] [--min-gap 60] [--max-gap 300] [--checkpoint-every 60]
#                            [--local-every 5]
# Lines: one per fault (`fault=... at_s=...`), then
# `bench=soak minutes=M faults=F restarts=R steps=S effective=E steps_lost_beyond_interval=L bitwise=yes|no`.
set -uo pipefail
cd "$(dirname "$0")/../.."
build_dir=build
minutes=60
min_gap=60
max_gap=300
every=60
local_every=5
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --min-gap) min_gap=$2; shift 2 ;;
    --max-gap) max_gap=$2; shift 2 ;;
    --checkpoint-every) every=$2; shift 2 ;;
    --local-every) local_every=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$(realpath "$build_dir/bin/giant" 2>/dev/null) || { echo "soak.sh: $build_dir/bin/giant is missing" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "soak.sh: emulated hosts need root" >&2; exit 2; }
work=$(mktemp -d /tmp/giant-soak-XXXXXX)
trap 'rm -rf "$work"' EXIT

# A model whose step takes about a second here; checkpoint.every in steps
# from the seconds asked, once the step time is known.
model=(--set model.layers=4 --set model.hidden=256 --set model.heads=4 --set model.seq_len=128
       --set train.global_batch=16 --set train.micro_batch=4 --set train.threads=1 --set train.eval_every=0
       --set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32 --set ccl.timeout=10s
       --set train.lr=1e-3 --set train.min_lr=1e-3 --set train.warmup_steps=0
       --set parallel.dp=2 --set parallel.pp=2 --set data.path="\"$PWD/examples/data/kjv.txt\"")
launch() {  # OUT STEPS EVERY LOCAL_EVERY [launch flags...]
  local out=$1 steps=$2 every_steps=$3 local_steps=$4
  shift 4
  "$giant" launch --emulate 2x2 --restart-backoff 0 "$@" -- "$giant" train "${model[@]}" \
    --set train.steps="$steps" --set checkpoint.every="$every_steps" --set checkpoint.local_every="$local_steps" \
    --set train.out_dir="\"$out\"" > "$out.log" 2>&1
}
step_seconds() {  # METRICS -> the median step_s
  /usr/bin/python3 -c 'import json, statistics, sys
print(statistics.median(json.loads(l)["step_s"] for l in open(sys.argv[1]) if "\"step_s\"" in l))' "$1"
}

# The step time, from a short run.
launch "$work/probe" 6 6 0 || { echo "soak.sh: the probe run failed (see $work/probe.log)" >&2; exit 1; }
step_s=$(step_seconds "$work/probe/metrics.jsonl")
steps=$(/usr/bin/python3 -c "print(max(10, int($minutes * 60 / $step_s)))")
every_steps=$(/usr/bin/python3 -c "print(max(1, int($every / $step_s)))")
local_steps=$(/usr/bin/python3 -c "print(0 if $local_every <= 0 else max(1, int($local_every / $step_s)))")
# The steps a restart may redo: those since the newest save of either kind.
interval=$(( local_steps > 0 && local_steps < every_steps ? local_steps : every_steps ))
echo "soak: $steps steps of ${step_s} s; durable checkpoints every $every_steps steps, local copies every $local_steps"

faulty=$work/faulty
launch "$faulty" "$steps" "$every_steps" "$local_steps" --max-restarts 1000 &
launcher=$!
start=$SECONDS
faults=0
while kill -0 "$launcher" 2> /dev/null; do
  sleep $((min_gap + RANDOM % (max_gap - min_gap + 1)))
  kill -0 "$launcher" 2> /dev/null || break
  rank=$((RANDOM % 4))
  pid=$(pgrep -f "^$giant train .*$faulty" | sed -n "$((rank + 1))p")  # the ranks, not the launcher
  [[ -n $pid ]] || continue
  case $((RANDOM % 3)) in
    0) kind=kill; kill -KILL "$pid" ;;
    1) kind=stop; kill -STOP "$pid" ;;
    2) kind=link_down
       ns=$(ip netns identify "$pid")
       ip -n "$ns" link set dev veth0 down && (sleep 8; ip -n "$ns" link set dev veth0 up) & ;;
  esac
  faults=$((faults + 1))
  echo "fault=$kind rank_pid=$pid at_s=$((SECONDS - start))"
done
wait "$launcher"
status=$?
wall=$((SECONDS - start))
restarts=$(grep -c "giant launch: restart " "$faulty.log")

reference=$work/reference
launch "$reference" "$steps" "$every_steps" 0 || { echo "soak.sh: the uninterrupted run failed" >&2; exit 1; }
/usr/bin/python3 - "$faulty/metrics.jsonl" "$wall" "$interval" "$minutes" "$faults" "$restarts" "$status" <<'EOF'
import json, sys
faulty, wall, interval, minutes, faults, restarts, status = sys.argv[1:]
records = [json.loads(l) for l in open(faulty) if l.strip()]
lost = sum(max(0, r["steps_redone"] - int(interval)) for r in records if "restart" in r)
kept = {r["step"]: r["step_s"] for r in records if "step_s" in r}  # a redone step's last attempt
useful = sum(kept.values())
steps = max((r["step"] for r in records if "loss" in r), default=0)
print(f"bench=soak minutes={minutes} faults={faults} restarts={restarts} status={status} steps={steps} "
      f"effective={useful / float(wall):.3f} steps_lost_beyond_interval={lost}", end=" ")
EOF
last=$(printf 'step_%08d' "$steps")
same=yes
for f in "$reference/checkpoints/$last"/rank_*.safetensors; do
  cmp -s "$f" "$faulty/checkpoints/$last/$(basename "$f")" || same=no
done
echo "bitwise=$same"
