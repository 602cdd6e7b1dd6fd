#!/usr/bin/env bash
# The fault matrix: every fault x phase x layout, each hit on purpose
# (train.fault) in a small run of 8 steps checkpointed every 4, under
# `giant launch --max-restarts 1` on emulated hosts (root): dp2, tp2 and pp2
# on two hosts of one rank, dp2 x pp2 on two hosts of two. Faults: SIGKILL,
# SIGSTOP, the host's link down for 8 s, and (at the checkpoint write only)
# a full disk under checkpoint.dir (a tmpfs with room for 1.5 checkpoints).
# Phases: forward, backward, optimizer (step 6), checkpoint (the write of
# step 8's) and evaluation (at the end, step 8). ccl.timeout is 5 s.
#
# For each case: the cause the launcher named, the seconds from the fault to
# the first step of the restart (from metrics.jsonl's times), orphans (giant
# train processes of the case left), whether the newest committed
# checkpoint verifies, and whether the final checkpoint's tensors equal the
# uninterrupted run's bitwise (a full disk cannot finish: it must end
# named, with its checkpoint intact).
#
# usage: bench/train/fault_matrix.sh [BUILD_DIR] [--layouts "dp2 tp2 pp2 dp2xpp2"] [--faults "kill stop link_down disk_full"]
# Lines: `bench=fault_matrix layout=L fault=F phase=P status=S cause="..." restart_s=X orphans=N intact=yes|no bitwise=yes|no|n/a`
# then `summary cases=N passed=K`. Exit status 1 when a case fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
build_dir=build
layouts="dp2 tp2 pp2 dp2xpp2"
faults="kill stop link_down disk_full"
phases="forward backward optimizer checkpoint evaluation"
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --layouts) layouts=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "fault_matrix.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$(realpath "$build_dir/bin/giant" 2>/dev/null) || { echo "fault_matrix.sh: $build_dir/bin/giant is missing" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "fault_matrix.sh: emulated hosts need root" >&2; exit 2; }
data=$PWD/examples/data/kjv.txt
work=$(mktemp -d /tmp/giant-fault-matrix-XXXXXX)
cleanup() { umount "$work"/*/disk 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

layout_flags() {  # layout -> giant train flags
  case $1 in
    dp2) echo "--set parallel.dp=2" ;;
    tp2) echo "--set parallel.tp=2" ;;
    pp2) echo "--set parallel.pp=2" ;;
    dp2xpp2) echo "--set parallel.dp=2 --set parallel.pp=2" ;;
  esac
}
emulate_of() { [[ $1 == dp2xpp2 ]] && echo 2x2 || echo 2x1; }
fault_rank() { [[ $1 == dp2xpp2 ]] && echo 2 || echo 1; }  # a rank of the second host
step_of() { case $1 in checkpoint|evaluation) echo 8 ;; *) echo 6 ;; esac; }

# run LAYOUT OUT [FLAGS...]: the small run under giant launch, its log in OUT.log.
run() {
  local layout=$1 out=$2
  shift 2
  "$giant" launch --emulate "$(emulate_of "$layout")" --restart-backoff 0 "${LAUNCH_FLAGS[@]}" -- \
    "$giant" train --set model.layers=4 --set model.hidden=32 --set model.heads=4 --set model.seq_len=16 \
    --set train.global_batch=8 --set train.micro_batch=2 --set train.steps=8 --set train.lr=3e-3 \
    --set train.min_lr=3e-3 --set train.warmup_steps=0 --set train.threads=1 --set train.eval_every=0 \
    --set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32 --set ccl.timeout=5s \
    --set checkpoint.every=4 --set data.val_fraction=0.2 --set data.path="\"$data\"" \
    --set train.out_dir="\"$out\"" $(layout_flags "$layout") "$@" > "$out.log" 2>&1
}

# Seconds from the last step logged before the fault to the restart's first
# step record (the restart record's step + 1), from metrics.jsonl.
restart_seconds() {
  /usr/bin/python3 - "$1" <<'EOF'
import json, sys, datetime
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
restart = next((i for i, r in enumerate(records) if "restart" in r), None)
if restart is None:
    print("NA"); sys.exit()
def when(r): return datetime.datetime.fromisoformat(r["time"].replace("Z", "+00:00"))
before = [r for r in records[:restart] if "loss" in r]
after = [r for r in records[restart:] if "loss" in r]
print("NA" if not before or not after else "%.1f" % (when(after[0]) - when(before[-1])).total_seconds())
EOF
}

same_tensors() {  # REFERENCE_CHECKPOINT CHECKPOINT
  local f
  for f in "$1"/rank_*.safetensors; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
  [[ -n $(ls "$1"/rank_*.safetensors 2>/dev/null) ]]
}

cases=0
passed=0
for layout in $layouts; do
  reference=$work/$layout-reference
  LAUNCH_FLAGS=()
  run "$layout" "$reference" || { echo "fault_matrix.sh: the uninterrupted $layout run failed (see $reference.log)" >&2; exit 1; }
  for fault in $faults; do
    for phase in $phases; do
      [[ $fault == disk_full && $phase != checkpoint ]] && continue
      case_dir=$work/$layout-$fault-$phase
      mkdir -p "$case_dir"
      out=$case_dir/out
      spec="$phase@$(step_of "$phase"),rank=$(fault_rank "$layout")"
      extra=()
      case $fault in
        kill) ;;
        stop) spec+=",action=stop" ;;
        link_down) spec+=",action=link_down,for=8" ;;
        disk_full)
          spec=""
          one=$(du -sb "$reference/checkpoints/step_00000004" | cut -f1)
          mkdir -p "$case_dir/disk"
          mount -t tmpfs -o size=$((one * 3 / 2)) tmpfs "$case_dir/disk"
          extra=(--set checkpoint.dir="\"$case_dir/disk\"") ;;
      esac
      [[ -n $spec ]] && extra+=(--set train.fault="\"$spec\"")
      LAUNCH_FLAGS=(--max-restarts 1)
      run "$layout" "$out" "${extra[@]}"
      status=$?
      cause=$(grep -oE 'restart 1 of 1 after [^(]*|giving up after [^;]*; the last failure: .*|again, as in the attempt before' "$out.log" | head -n 1)
      orphans=$(pgrep -fc "giant train .*$case_dir" || true)
      checkpoints=$out/checkpoints
      [[ $fault == disk_full ]] && checkpoints=$case_dir/disk
      newest=$(ls -d "$checkpoints"/step_* 2>/dev/null | sort | tail -n 1)
      intact=no
      [[ -n $newest ]] && "$giant" checkpoint verify "$newest" > /dev/null 2>&1 && intact=yes
      bitwise=n/a
      if [[ $fault != disk_full ]]; then
        bitwise=no
        same_tensors "$reference/checkpoints/step_00000008" "$out/checkpoints/step_00000008" && bitwise=yes
      fi
      ok=no
      if [[ $fault == disk_full ]]; then
        [[ $status != 0 && -n $cause && $orphans == 0 && $intact == yes ]] && ok=yes
        umount "$case_dir/disk"
      else
        [[ $status == 0 && -n $cause && $orphans == 0 && $intact == yes && $bitwise == yes ]] && ok=yes
      fi
      cases=$((cases + 1))
      [[ $ok == yes ]] && passed=$((passed + 1))
      echo "bench=fault_matrix layout=$layout fault=$fault phase=$phase status=$status cause=\"${cause:-none}\"" \
        "restart_s=$(restart_seconds "$out/metrics.jsonl" 2>/dev/null || echo NA) orphans=$orphans intact=$intact" \
        "bitwise=$bitwise ok=$ok"
    done
  done
done
echo "summary cases=$cases passed=$passed"
[[ $cases == "$passed" ]]
