#!/usr/bin/env bash
# The planner's predicted step times for the configurations of
# bench/train/compare_parallel.sh (4 layers, hidden 256, 4 heads, sequence
# 128, vocabulary 256, AdamW, batch 8 per rank, 1 thread per rank) on this
# machine, from `giant plan --calibrate`: single on a cluster calibrated with
# --devices 1, dp2 and tp2 on one calibrated with --devices 2. With
# --measured LOG (compare_parallel.sh's output), each prediction's error
# against the measured median. Run it on a quiet machine, as the benchmark.
#
# usage: bench/planner/predict_parallel.sh [BUILD_DIR] [--measured LOG] [--keep DIR]
# Lines: the calibration logs (calibrate=...), then per configuration
# `bench=planner_parallel config=C pred_step_s=.. compute_s=.. comm_s=..
# optimizer_s=.. [measured_step_s=.. error=+x.x%]`.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build
measured=
keep=
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --measured) measured=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "predict_parallel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "predict_parallel.sh: $giant is missing (build it first)" >&2; exit 2; }
[[ -z $measured || -r $measured ]] || { echo "predict_parallel.sh: cannot read $measured" >&2; exit 2; }
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

fixed=pp=1,mb=8,zero=0,recompute=none,sp=0
predict() {  # config model cluster layout
  local json
  json=$("$giant" plan --model "$2" --cluster "$3" --layout "$4,$fixed" --top 1 --json)
  /usr/bin/python3 - "$1" "$json" "$measured" <<'EOF'
import json, re, sys
config, plan, measured = sys.argv[1], json.loads(sys.argv[2])["plans"][0], sys.argv[3]
c = plan["components_s"]
line = (f"bench=planner_parallel config={config} pred_step_s={plan['step_s']:.4f} compute_s={c['compute']:.4f} "
        f"comm_s={c['tp_comm'] + c['dp_comm']:.4f} optimizer_s={c['optimizer']:.4f}")
if measured:
    for text in open(measured):
        m = re.match(rf"bench=train_parallel config={config} median .*step_s=([0-9.]+)", text)
        if m:
            got = float(m.group(1))
            line += f" measured_step_s={got:.4f} error={100 * (plan['step_s'] - got) / got:+.1f}%"
print(line)
EOF
}
predict single "$tmp/batch8.toml" "$tmp/cluster1.toml" tp=1,dp=1
predict dp2 "$tmp/batch16.toml" "$tmp/cluster2.toml" tp=1,dp=2
predict tp2 "$tmp/batch8.toml" "$tmp/cluster2.toml" tp=2,dp=1
