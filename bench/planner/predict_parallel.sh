#!/usr/bin/env bash
# The planner's predicted step times for the configurations of
# bench/train/compare_parallel.sh (4 layers, hidden 256, 4 heads, sequence
# 128, vocabulary 256, AdamW, batch 8 per rank, 1 thread per rank) and the
# pipelines of bench/train/compare_pipeline.sh (global batch 8, pp=2) on this
# machine, from `giant plan --calibrate`: single on a cluster calibrated with
# --devices 1, dp2 (ZeRO-1), dp2_zero0, tp2 and the pipelines (pp2_m4,
# pp2_m8: 1F1B on 4 micro-batches of 2 and 8 of 1; pp2_m4_gpipe, pp2_m8_gpipe)
# on one calibrated with --devices 2. With --measured LOG (compare_parallel.sh's
# or compare_pipeline.sh's output; give it once for each), each prediction's
# error against the measured median. Run it on a quiet machine, as the benchmark.
#
# usage: bench/planner/predict_parallel.sh [BUILD_DIR] [--measured LOG]... [--keep DIR]
# Lines: the calibration logs (calibrate=...), then per configuration
# `bench=planner_parallel config=C pred_step_s=.. compute_s=.. comm_s=..
# bubble_s=.. pp_comm_s=.. optimizer_s=.. [measured_step_s=.. measured_over_pred=..
# error=+x.x%]` (error: predicted / measured - 1), and with --measured a last
# `summary` line with each measured configuration's measured_over_pred.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build
measured=()
keep=
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --measured) measured+=("$2"); shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "predict_parallel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "predict_parallel.sh: $giant is missing (build it first)" >&2; exit 2; }
for log in "${measured[@]}"; do [[ -r $log ]] || { echo "predict_parallel.sh: cannot read $log" >&2; exit 2; }; done
tmp=${keep:-$(mktemp -d /tmp/giant-predict-XXXXXX)}
mkdir -p "$tmp"
[[ -n $keep ]] || trap 'rm -rf "$tmp"' EXIT

model() {  # global batch -> a model file for giant plan
  printf '[model]\nname = "bench"\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 256\n'
  printf '[train]\nglobal_batch = %d\n' "$1"
}
model 8 > "$tmp/batch8.toml"
model 16 > "$tmp/batch16.toml"
"$giant" plan --calibrate --devices 1 --out "$tmp/cluster1.toml" | grep '^calibrate=' | sed 's/^/devices=1 /'
"$giant" plan --calibrate --devices 2 --out "$tmp/cluster2.toml" | grep '^calibrate=' | sed 's/^/devices=2 /'

fixed=recompute=none,sp=0
ratios=()
predict() {  # config model cluster layout
  local json line
  json=$("$giant" plan --model "$2" --cluster "$3" --layout "$4,$fixed" --top 1 --json)
  line=$(/usr/bin/python3 - "$1" "$json" "${measured[@]}" <<'EOF'
import json, re, sys
config, plan, logs = sys.argv[1], json.loads(sys.argv[2])["plans"][0], sys.argv[3:]
c = plan["components_s"]
line = (f"bench=planner_parallel config={config} pred_step_s={plan['step_s']:.4f} compute_s={c['compute']:.4f} "
        f"comm_s={c['tp_comm'] + c['dp_comm']:.4f} bubble_s={c['bubble']:.4f} pp_comm_s={c['pp_comm']:.4f} "
        f"optimizer_s={c['optimizer']:.4f}")
for log in logs:
    for text in open(log):
        m = re.match(rf"bench=train_(parallel|pipeline) config={config} median .* step_s=([0-9.]+)", text)
        if m:
            got = float(m.group(2))
            line += (f" measured_step_s={got:.4f} measured_over_pred={got / plan['step_s']:.3f}"
                     f" error={100 * (plan['step_s'] - got) / got:+.1f}%")
print(line)
EOF
  )
  echo "$line"
  [[ $line != *measured_over_pred=* ]] || ratios+=("${1}_measured_over_pred=$(sed 's/.*measured_over_pred=\([^ ]*\).*/\1/' <<< "$line")")
}
predict single "$tmp/batch8.toml" "$tmp/cluster1.toml" tp=1,dp=1,pp=1,mb=8,zero=0
predict dp2 "$tmp/batch16.toml" "$tmp/cluster2.toml" tp=1,dp=2,pp=1,mb=8,zero=1
predict dp2_zero0 "$tmp/batch16.toml" "$tmp/cluster2.toml" tp=1,dp=2,pp=1,mb=8,zero=0
predict tp2 "$tmp/batch8.toml" "$tmp/cluster2.toml" tp=2,dp=1,pp=1,mb=8,zero=0
for schedule in 1f1b gpipe; do
  suffix=; [[ $schedule == 1f1b ]] || suffix=_$schedule
  predict "pp2_m4$suffix" "$tmp/batch8.toml" "$tmp/cluster2.toml" tp=1,dp=1,pp=2,mb=2,schedule=$schedule,zero=0
  predict "pp2_m8$suffix" "$tmp/batch8.toml" "$tmp/cluster2.toml" tp=1,dp=1,pp=2,mb=1,schedule=$schedule,zero=0
done
(( ${#measured[@]} == 0 )) || echo "summary ${ratios[*]}"
