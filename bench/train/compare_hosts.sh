#!/usr/bin/env bash
# Pipeline against data parallelism across two hosts on a slow link: two
# network namespaces joined by a veth pair capped with `tc tbf` (--rate
# 100mbit on each end; bench/netns_hosts.sh, made here and removed on exit;
# root only), one rank per host under `giant launch --hosts
# netns:A:1,netns:B:1`, on the model of compare_parallel.sh (4 layers, hidden
# 256, 4 heads, sequence 128, vocabulary 256, AdamW, the bundled corpus),
# global batch 16, 1 thread per rank:
#   dp2      parallel.dp=2, micro-batch 8 per rank (the default ZeRO stage 1)
#   pp2_m4   parallel.pp=2, parallel.schedule=1f1b, 4 micro-batches of 4
#   pp2_m8   the same, 8 micro-batches of 2
#   dp2_zero2, dp2_zero3  dp2 at parallel.zero=2 and 3 (not run unless named in --configs)
# and what the planner predicts for each: `giant plan --calibrate --devices 2`
# (two ranks computing at once, as here: both hosts share this machine's
# cores), the file then edited to 2 hosts x 1 device with the inter-host link
# at --rate (`bandwidth_gbit_per_s`, TCP at the planner's default goodput),
# and `giant plan --layout` for each configuration. --calibrated FILE uses
# FILE (from `giant plan --calibrate --devices 2 --out FILE`) instead of
# calibrating again.
# R repetitions, the order rotating by one each repetition; each run reports
# its median over its steady steps (the first is not counted), then the median
# of the R medians per configuration.
#
# usage: bench/train/compare_hosts.sh [BUILD_DIR] [--reps 5] [--steps 20] [--rate 100mbit]
#            [--configs "dp2 pp2_m4 pp2_m8"] [--calibrated FILE]
# Lines: `bench=train_hosts config=C rep=R tokens_per_s=.. step_s=.. comm_wait_s=..`
# per run; `bench=train_hosts config=C median ... pred_step_s=.. pred_tokens_per_s=..
# pred_error=..` per configuration (pred_error: predicted / measured step - 1);
# last `summary rate=.. winner=C pred_winner=C agree=yes|no` and every
# configuration's tokens/s, predicted tokens/s and its tokens/s over dp2's.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
source bench/netns_hosts.sh
bench_script=compare_hosts.sh
build_dir=build
reps=5
steps=20
rate=100mbit
known="dp2 pp2_m4 pp2_m8 dp2_zero2 dp2_zero3"
configs="dp2 pp2_m4 pp2_m8"
calibrated=
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --calibrated) calibrated=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$bench_script: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "$bench_script: --reps must be a positive integer, got '$reps'" >&2; exit 2; }
if ! [[ $steps =~ ^[0-9]+$ ]] || (( steps < 2 )); then
  echo "$bench_script: --steps must be at least 2 (the first is not measured), got '$steps'" >&2; exit 2
fi
# tc's rate -> Gbit/s, for the cluster file
rate_gbit=$(awk -v r="$rate" 'BEGIN {
  if (match(r, /^[0-9]+(\.[0-9]+)?/) == 0) exit 1
  n = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
  if (u == "kbit") f = 1e-6; else if (u == "mbit") f = 1e-3; else if (u == "gbit") f = 1; else exit 1
  printf "%.9g", n * f }') ||
  { echo "$bench_script: --rate must be a number with kbit, mbit or gbit (tc's units), got '$rate'" >&2; exit 2; }
read -r -a config_list <<< "$configs"
for c in "${config_list[@]}"; do
  [[ " $known " == *" $c "* ]] || { echo "$bench_script: --configs: unknown configuration '$c' (known: $known)" >&2; exit 2; }
done
(( ${#config_list[@]} > 0 )) || { echo "$bench_script: --configs is empty" >&2; exit 2; }
[[ -z $calibrated || -r $calibrated ]] || { echo "$bench_script: cannot read --calibrated $calibrated" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "$bench_script: needs root (ip netns, tc)" >&2; exit 2; }
if ! command -v ip > /dev/null || ! command -v tc > /dev/null; then
  echo "$bench_script: needs iproute2 (ip, tc): apt-get install iproute2" >&2; exit 2
fi

giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "$bench_script: $giant is missing (build it first)" >&2; exit 2; }
giant=$(realpath "$giant")
tmp=$(mktemp -d /tmp/giant-hosts-XXXXXX)
trap 'stop_background; netns_hosts_down; rm -rf "$tmp"' EXIT

# config -> "layout flags of giant train | the planner's --layout"
declare -A flags=(
  [dp2]="--set parallel.dp=2 --set train.micro_batch=8|tp=1,pp=1,dp=2,mb=8,zero=1"
  [dp2_zero2]="--set parallel.dp=2 --set train.micro_batch=8 --set parallel.zero=2|tp=1,pp=1,dp=2,mb=8,zero=2"
  [dp2_zero3]="--set parallel.dp=2 --set train.micro_batch=8 --set parallel.zero=3|tp=1,pp=1,dp=2,mb=8,zero=3"
  [pp2_m4]="--set parallel.pp=2 --set parallel.schedule=1f1b --set train.micro_batch=4|tp=1,pp=2,dp=1,mb=4,schedule=1f1b"
  [pp2_m8]="--set parallel.pp=2 --set parallel.schedule=1f1b --set train.micro_batch=2|tp=1,pp=2,dp=1,mb=2,schedule=1f1b")
tokens_per_step=$((16 * 128))

# ------------------------------------------------------------ the planner
printf '[model]\nname = "bench"\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 256\n[train]\nglobal_batch = 16\n' \
  > "$tmp/model.toml"
if [[ -n $calibrated ]]; then
  echo "# plan: calibrated cluster $calibrated"
  cp "$calibrated" "$tmp/calibrated.toml"
else
  echo "# plan: $giant plan --calibrate --devices 2 --out $tmp/calibrated.toml"
  "$giant" plan --calibrate --devices 2 --out "$tmp/calibrated.toml" > "$tmp/calibrate.log" 2>&1 ||
    fail "$tmp/calibrate.log" "giant plan --calibrate"
  grep '^calibrate=' "$tmp/calibrate.log" | sed 's/^/# /' || true
fi
# 2 hosts x 1 device; the inter-host link at the tbf rate, TCP at the planner's default goodput.
/usr/bin/python3 - "$tmp/calibrated.toml" "$tmp/cluster.toml" "$rate_gbit" <<'EOF'
import re, sys
text, out, gbit = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
text = re.sub(r"(?m)^hosts = .*$", "hosts = 2", text)
text = re.sub(r"(?m)^devices_per_host = .*$", "devices_per_host = 1", text)
head, inter = text.split("[inter_host]", 1)
inter, sep, rest = inter.partition("\n[")
inter = re.sub(r"(?m)^bandwidth_gb(ytes|it)_per_s = .*$", f"bandwidth_gbit_per_s = {gbit}  # tc tbf rate", inter)
inter = re.sub(r"(?m)^transport = .*$", 'transport = "tcp"', inter)
inter = re.sub(r"(?m)^efficiency = .*\n", "", inter)  # the default: TCP's goodput
open(out, "w").write(head + "[inter_host]" + inter + sep + rest)
EOF
sed -n '/^\[inter_host\]/,/^\[/p' "$tmp/cluster.toml" | sed 's/^/# cluster: /'
declare -A pred_step pred_line
for c in "${config_list[@]}"; do
  layout=${flags[$c]#*|}
  echo "# plan $c: $giant plan --model $tmp/model.toml --cluster $tmp/cluster.toml --layout $layout,recompute=none,sp=0 --top 1 --json"
  json=$("$giant" plan --model "$tmp/model.toml" --cluster "$tmp/cluster.toml" --layout "$layout,recompute=none,sp=0" \
         --top 1 --json 2> "$tmp/plan-$c.log") || fail "$tmp/plan-$c.log" "giant plan --layout $layout"
  parsed=$(/usr/bin/python3 -c 'import json, sys
plan = json.loads(sys.argv[1])["plans"][0]
print("%.4f" % plan["step_s"], " ".join("%s_s=%.4f" % kv for kv in plan["components_s"].items()))' "$json") ||
    fail "$tmp/plan-$c.log" "reading giant plan's JSON for $c"
  read -r "pred_step[$c]" "pred_line[$c]" <<< "$parsed"
  echo "bench=train_hosts config=$c predicted pred_step_s=${pred_step[$c]} ${pred_line[$c]}"
done

# ------------------------------------------------------------ the runs
netns_hosts_up giantpp gtpp "$rate" || exit 1
launch=(ip netns exec "$ns_a" "$giant" launch --store-addr "$addr_a" --hosts "netns:$ns_a:1,netns:$ns_b:1" --)
bench_model_flags "$steps" fp32
command_of() {  # config -> its command line, into the array cmd
  # shellcheck disable=SC2206
  cmd=("${launch[@]}" "$giant" train "${bench_model[@]}" --set train.global_batch=16 ${flags[$1]%|*})
}
for c in "${config_list[@]}"; do command_of "$c"; echo "# $c: ${cmd[*]} --set $(out_flag "$c")"; done
echo "# reps=$reps steps=$steps rate=$rate configs=\"${config_list[*]}\" (order rotates each repetition)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
declare -A all_tokens all_step all_comm
n=${#config_list[@]}
for ((rep = 0; rep < reps; ++rep)); do
  for ((k = 0; k < n; ++k)); do
    c=${config_list[$(((k + rep) % n))]}
    command_of "$c"
    run_giant "$c" "${cmd[@]}"
    echo "bench=train_hosts config=$c rep=$rep tokens_per_s=$tokens_per_s step_s=$step_s comm_wait_s=$comm_wait_s"
    all_tokens[$c]+="$tokens_per_s " all_step[$c]+="$step_s " all_comm[$c]+="$comm_wait_s "
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

declare -A med_tokens med_step
printf '%-8s %14s %10s %12s %12s %18s %10s\n' config tokens_per_s step_s comm_wait_s pred_step_s pred_tokens_per_s pred_error
lines=()
for c in "${config_list[@]}"; do
  med_tokens[$c]=$(tr ' ' '\n' <<< "${all_tokens[$c]}" | grep . | median)
  med_step[$c]=$(tr ' ' '\n' <<< "${all_step[$c]}" | grep . | median)
  comm=$(tr ' ' '\n' <<< "${all_comm[$c]}" | grep . | median)
  pred_tokens=$(awk -v t="$tokens_per_step" -v s="${pred_step[$c]}" 'BEGIN {printf "%.1f", t / s}')
  error=$(awk -v p="${pred_step[$c]}" -v m="${med_step[$c]}" 'BEGIN {printf "%+.1f%%", 100 * (p / m - 1)}')
  printf '%-8s %14s %10s %12s %12s %18s %10s\n' "$c" "${med_tokens[$c]}" "${med_step[$c]}" "$comm" "${pred_step[$c]}" \
    "$pred_tokens" "$error"
  lines+=("bench=train_hosts config=$c median reps=$reps steps=$steps tokens_per_s=${med_tokens[$c]} step_s=${med_step[$c]}
comm_wait_s=$comm pred_step_s=${pred_step[$c]} pred_tokens_per_s=$pred_tokens pred_error=$error")
done
for line in "${lines[@]}"; do echo "${line//$'\n'/ }"; done
best() {  # "config value" lines -> the config with the highest value
  sort -k2 -g | tail -n 1 | cut -d' ' -f1
}
winner=$(for c in "${config_list[@]}"; do echo "$c ${med_tokens[$c]}"; done | best)
pred_winner=$(for c in "${config_list[@]}"; do awk -v c="$c" -v s="${pred_step[$c]}" 'BEGIN {print c, 1 / s}'; done | best)
summary=("rate=$rate" "winner=$winner" "pred_winner=$pred_winner")
if [[ $winner == "$pred_winner" ]]; then summary+=(agree=yes); else summary+=(agree=no); fi
for c in "${config_list[@]}"; do
  summary+=("${c}_tokens_per_s=${med_tokens[$c]}"
            "${c}_pred_tokens_per_s=$(awk -v t="$tokens_per_step" -v s="${pred_step[$c]}" 'BEGIN {printf "%.1f", t / s}')"
            "${c}_tokens_over_dp2=$(ratio "${med_tokens[$c]}" "${med_tokens[dp2]:-NA}")")
done
echo "summary ${summary[*]} reps=$reps steps=$steps"
