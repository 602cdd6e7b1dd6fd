#!/usr/bin/env bash
# The headline experiment, scaled to this machine: Giant's automatic layout
# against a Megatron-style layout, ZeRO-3 and plain data parallelism, on an
# emulated cluster (giant launch --emulate HxR, root) at three link rates.
#
# The link rates keep the published runs' FLOP per bit of host link: a V100
# host (8 x 125 TFLOP/s on 100 Gbit/s TCP: 10,000 FLOP per bit) and an A100
# host (8 x 312 TFLOP/s on 800 Gbit/s: 3,120 FLOP per bit), from this
# machine's measured fp32 rate per rank while all H x R ranks of the
# emulated cluster compute (`giant plan --calibrate --devices HxR`: the
# hosts share this machine's cores) times R; and one 10x below the lower. The model
# is GPT-13B's shape (heads of 128, sequence 256) scaled down in depth and
# width together; the global batch keeps the published run's tokens per
# device per step (1536 x 256 over 32 GPUs) in the full mode.
#
# Systems, all Giant, fp32, one thread per rank:
#   auto      parallel.auto=true (the cluster measured at start-up)
#   megatron  tp = ranks per host (inside a host), pp = hosts (across), 1F1B, micro-batch 1, ZeRO 0
#   zero3     dp = all ranks, parallel.zero=3 (DeepSpeed's default ZeRO-3 shape)
#   dp        dp = all ranks, parallel.zero=0
# The others run on the cluster the auto run measured at that rate
# (parallel.cluster), so that ccl chooses its algorithms on its links as in
# the auto run (without auto in --systems, on ccl's defaults).
# Repetitions interleave the systems and rates; each figure is the median
# over repetitions of a run's median step. Beside each: the planner's
# prediction on the cluster the auto run measured at that rate.
#
# usage: bench/cluster/seed_experiment.sh [BUILD_DIR] [--quick] [--reps 3] [--steps 4 (quick: 3)]
#            [--topologies "2x2 4x1"] [--systems "auto megatron zero3 dp"] [--rates "a100 v100 slow"] [--out DIR]
#            [--link-rates "A100 V100 SLOW"]
#   --quick: 2 layers x hidden 256, global batch 32, 3 steps a run, 2x2 unless --topologies says
#   --systems, --rates: subsets, so that a long experiment can be split over runs
#     (without auto there is no measured cluster, so no predictions; the
#     rates: a100 the A100-matched, v100 the V100-matched, slow the 10x-slower)
#   --link-rates: the three rates in bit/s instead of those derived from this
#     run's calibration (a split experiment's later parts at the first one's rates)
# Output: one line per run, then the table (text) and DIR/seed_experiment.json
# (beside it, written as the experiment goes: runs.txt, the model, the clusters
# the auto runs measured and predictions.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
bench_script=seed_experiment.sh
build_dir=build
quick=false
reps=3
steps=
topologies=
systems="auto megatron zero3 dp"
rate_names="a100 v100 slow"
out=
link_rates=
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=true; shift ;;
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --topologies) topologies=$2; shift 2 ;;
    --systems) systems=$2; shift 2 ;;
    --rates) rate_names=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --link-rates) link_rates=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$bench_script: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "$bench_script: needs root (giant launch --emulate makes network namespaces)" >&2; exit 2; }
for name in $rate_names; do
  [[ $name =~ ^(a100|v100|slow)$ ]] || { echo "$bench_script: --rates: unknown rate $name (a100, v100, slow)" >&2; exit 2; }
done
[[ -z $link_rates || $link_rates =~ ^[1-9][0-9]*\ [1-9][0-9]*\ [1-9][0-9]*$ ]] ||
  { echo "$bench_script: --link-rates takes three rates in bit/s, e.g. \"36035481 11243070 1124307\"" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "$bench_script: --reps must be a positive integer" >&2; exit 2; }
for system in $systems; do
  [[ $system =~ ^(auto|megatron|zero3|dp)$ ]] || { echo "$bench_script: --systems: unknown system $system (auto, megatron, zero3, dp)" >&2; exit 2; }
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "$bench_script: no $giant (build the target giant)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${out:-$tmp}
mkdir -p "$out"

if $quick; then
  layers=2 hidden=256 heads=2 global_batch=32
  topologies=${topologies:-2x2}
  steps=${steps:-3}
else
  layers=4 hidden=256 heads=2 global_batch=192
  topologies=${topologies:-2x2 4x1}
  steps=${steps:-4}
fi
[[ $steps =~ ^[0-9]+$ ]] && (( steps >= 2 )) || { echo "$bench_script: --steps must be at least 2" >&2; exit 2; }
model=(--set model.layers=$layers --set model.hidden=$hidden --set model.heads=$heads --set model.seq_len=256
       --set model.vocab=256 --set train.global_batch=$global_batch --set train.threads=1 --set train.steps=$steps
       --set train.precision=\"fp32\" --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0
       --set ccl.timeout=600s)
printf '[model]\nlayers = %s\nhidden = %s\nheads = %s\nseq_len = 256\nvocab = 256\n[train]\nglobal_batch = %s\n' \
  "$layers" "$hidden" "$heads" "$global_batch" > "$out/model.toml"

# system H R -> its train flags (one line: the caller reads one)
system_flags() {
  case $1 in
    auto) echo "--set parallel.auto=true" ;;
    megatron) echo "--set parallel.tp=$3 --set parallel.pp=$2 --set parallel.dp=1 --set parallel.schedule=\"1f1b\"" \
                   "--set parallel.zero=0 --set train.micro_batch=1" ;;
    zero3) echo "--set parallel.dp=$(( $2 * $3 )) --set parallel.zero=3 --set train.micro_batch=$(( global_batch / ($2 * $3) ))" ;;
    dp) echo "--set parallel.dp=$(( $2 * $3 )) --set parallel.zero=0 --set train.micro_batch=$(( global_batch / ($2 * $3) ))" ;;
  esac
}
# system H R -> the --layout of giant plan for it (auto: its own choice, read
# from its log; the others send gradients uncompressed, as they run)
system_layout() {
  case $1 in
    megatron) echo "tp=$3,pp=$2,dp=1,mb=1,schedule=1f1b,zero=0,recompute=none,wire=none" ;;
    zero3) echo "tp=1,pp=1,dp=$(( $2 * $3 )),mb=$(( global_batch / ($2 * $3) )),zero=3,recompute=none,wire=none" ;;
    dp) echo "tp=1,pp=1,dp=$(( $2 * $3 )),mb=$(( global_batch / ($2 * $3) )),zero=0,recompute=none,wire=none" ;;
  esac
}

echo "$bench_script: $(lscpu | sed -n 's/^Model name: *//p'); model ${layers}x${hidden} (heads $heads), global batch $global_batch"
declare -A rates
for topology in $topologies; do
  hosts=${topology%x*} ranks=${topology#*x}
  # every rank of the cluster computes on this machine's cores at once
  busy=$(( hosts * ranks ))
  "$giant" plan --calibrate --devices "$busy" --out "$tmp/machine-$topology.toml" > "$tmp/calibrate-$topology.log" 2>&1 ||
    fail "$tmp/calibrate-$topology.log" "giant plan --calibrate"
  peak=$(sed -n 's/^peak_tflops = \([0-9.e+-]*\).*/\1/p' "$tmp/machine-$topology.toml" | head -1)
  # host FLOP/s over FLOP per bit: bits per second
  read -r a100 v100 slow <<< "$(awk -v p="$peak" -v r="$ranks" 'BEGIN {
    h = p * 1e12 * r; printf "%d %d %d", h / 3120, h / 10000, h / 100000 }')"
  [[ -z $link_rates ]] || read -r a100 v100 slow <<< "$link_rates"
  echo "$bench_script: $topology: ${peak} TFLOP/s per rank (fp32, $busy busy) x $ranks a host -> A100-matched $a100 bit/s," \
       "V100-matched $v100 bit/s, 10x below $slow bit/s"
  rates[$topology]=
  for name in $rate_names; do rates[$topology]+="${!name} "; done
done

# Each run is recorded in DIR as it ends, so a long experiment that fails part-way keeps what it measured.
runs=$out/runs.txt
: > "$runs"
# Predictions are made only on clusters this experiment's auto runs measured.
rm -f "$out"/cluster-*.toml
for rep in $(seq 1 "$reps"); do
  for topology in $topologies; do
    hosts=${topology%x*} ranks=${topology#*x}
    for rate in ${rates[$topology]}; do
      for system in $systems; do
        run=$tmp/$topology-$rate-$system-$rep
        read -r -a flags <<< "$(system_flags "$system" "$hosts" "$ranks")"
        measured=$out/cluster-$topology-$rate.toml
        [[ $system != auto && -e $measured ]] && flags+=(--set parallel.cluster=\"$measured\")
        "$giant" launch --emulate "$topology" --link-rate "$rate" -- "$giant" train "${model[@]}" "${flags[@]}" \
          --set train.out_dir=\""$run"\" > "$run.log" 2>&1 || fail "$run.log" "$system at $rate bit/s on $topology"
        read -r tokens step _ <<< "$(giant_summary "$run/metrics.jsonl")"
        layout=$(system_layout "$system" "$hosts" "$ranks")
        if [[ $system == auto ]]; then
          # "(tp=2 pp=2 dp=1 mb=1 gpipe zero=1 ...)" of its choice -> tp=2,pp=2,...,schedule=gpipe,...
          layout=$(grep -o 'parallel.auto: dp=[^(]*([^)]*)' "$run.log" | head -1 | sed 's/.*(\(.*\))/\1/' |
            awk '{ for (i = 1; i <= NF; i++) { t = $i; if (t !~ /=/) t = "schedule=" t; printf "%s%s", (i > 1 ? "," : ""), t } }')
          cp "$run/cluster.toml" "$out/cluster-$topology-$rate.toml"
        fi
        echo "$topology $rate $system $rep $tokens $step $layout" >> "$runs"
        echo "bench=seed topology=$topology rate_bit_s=$rate system=$system rep=$rep tokens_per_s=$tokens step_s=$step layout=$layout"
      done
    done
  done
done

# Predictions: giant plan --layout on the cluster the auto run measured (its last repetition).
: > "$out/predictions.txt"
while read -r topology rate system rep tokens step layout; do
  [[ $rep == "$reps" ]] || continue
  # no auto run at this rate: no measured cluster to predict on
  [[ -e $out/cluster-$topology-$rate.toml ]] || { echo "$topology $rate $system NA" >> "$out/predictions.txt"; continue; }
  predicted=$("$giant" plan --model "$out/model.toml" --cluster "$out/cluster-$topology-$rate.toml" --layout "$layout" \
    --json --top 1 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["plans"][0]["step_s"])' 2>/dev/null || echo NA)
  echo "$topology $rate $system $predicted" >> "$out/predictions.txt"
done < "$runs"

/usr/bin/python3 - "$runs" "$out/predictions.txt" "$out/seed_experiment.json" "$global_batch" <<'EOF'
import json, statistics, sys
runs, predictions, out, global_batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
step = {}
for line in open(runs):
    topology, rate, system, rep, tokens, step_s, *_ = line.split()
    step.setdefault((topology, int(rate), system), []).append(float(step_s))
predicted = {}
for line in open(predictions):
    topology, rate, system, p = line.split()
    predicted[(topology, int(rate), system)] = None if p == "NA" else float(p)
rows = []
for (topology, rate, system), steps in sorted(step.items(), key=lambda kv: (kv[0][0], -kv[0][1], kv[0][2])):
    s = statistics.median(steps)
    p = predicted.get((topology, rate, system))
    rows.append({"topology": topology, "rate_bit_s": rate, "system": system, "step_s": s,
                 "samples_per_s": global_batch / s, "predicted_step_s": p,
                 "prediction_error": None if p is None else p / s - 1})
print(f"{'topology':8} {'rate':>12} {'system':9} {'samples/s':>10} {'predicted':>10} {'error':>7} {'auto over':>9}")
for r in rows:
    auto = next((x for x in rows if x["topology"] == r["topology"] and x["rate_bit_s"] == r["rate_bit_s"] and x["system"] == "auto"), None)
    r["auto_speedup"] = None if auto is None else auto["samples_per_s"] / r["samples_per_s"]
    pred = "NA" if r["predicted_step_s"] is None else f"{global_batch / r['predicted_step_s']:.2f}"
    err = "NA" if r["prediction_error"] is None else f"{100 * r['prediction_error']:+.0f}%"
    speedup = "NA" if r["auto_speedup"] is None else f"{r['auto_speedup']:.2f}x"
    print(f"{r['topology']:8} {r['rate_bit_s']:>12} {r['system']:9} {r['samples_per_s']:>10.2f} {pred:>10} {err:>7} {speedup:>9}")
for topology in sorted({r["topology"] for r in rows}):
    for system in ("auto", "megatron", "zero3", "dp"):
        mine = sorted((r for r in rows if r["topology"] == topology and r["system"] == system), key=lambda r: -r["rate_bit_s"])
        if len(mine) >= 2:
            kept = [f"{m['samples_per_s'] / mine[0]['samples_per_s']:.0%}" for m in mine[1:]]
            print(f"{topology} {system}: samples/s kept from the fastest rate: {', '.join(kept)}")
json.dump(rows, open(out, "w"), indent=1)
print("json:", out)
EOF
