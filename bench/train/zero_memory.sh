#!/usr/bin/env bash
# Memory per rank by ZeRO stage, measured by Giant's own accounting (the
# summary's peak_memory_bytes of rank 0's metrics.jsonl), against the
# formulas; and activation memory per recomputation choice against
# Korthikanti et al. 2022 (planner::layer_activation_bytes, restated here).
#
# Model states in fp32 (weights 4, gradients 4, AdamW's two moments 8), in
# bytes per parameter on one of d ranks: ZeRO-0 16; ZeRO-1 4 + 4 + 8/d;
# ZeRO-2 4 + (4 + 8)/d; ZeRO-3 16/d plus the layers gathered at once.
# Activations of one micro-batch of b sequences, per layer, in 4-byte
# elements: none s b h (34 + 5 a s / h) x 2; selective s b h 34 x 2; full
# 2 s b h x 2 plus one layer rebuilt (none's); plus the logits s b V (4 + 4).
# A stage or choice the build does not run prints status=unavailable.
#
# usage: bench/train/zero_memory.sh [BUILD_DIR] [--steps 2] [--dps "2 4"]
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/train/common.sh
bench_script=zero_memory.sh
build_dir=build
steps=2
dps="2 4"
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --dps) dps=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "$bench_script: unknown argument $1" >&2; exit 2 ;;
  esac
done
giant=$build_dir/bin/giant
[[ -x $giant ]] || { echo "$bench_script: $giant is missing (build it first)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/giant-zero-memory-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bench_model_flags "$steps" fp32
micro=4
common=("${bench_model[@]}" --set train.micro_batch=$micro)

# peak KIND... -> rank 0's peak bytes of each kind from the run's summary.
peak() {
  /usr/bin/python3 -c 'import json, sys
found = None
for line in open(sys.argv[1]):
    if line.strip() and json.loads(line).get("summary"):
        found = json.loads(line)
print(" ".join(str(found["peak_memory_bytes"][k]) for k in sys.argv[2:]))' "$@"
}
parameters_of() { sed -n 's/^\(\[rank 0\] \)*model: \([0-9]*\) parameters.*/\2/p' "$1" | head -1; }

# try NAME COMMAND...: runs; 0 when it trained, else prints why on stderr.
try() {
  local name=$1; shift
  rm -rf "${tmp:?}/$name"
  if "$@" --set "$(out_flag "$name")" > "$tmp/$name.log" 2>&1; then return 0; fi
  echo "$bench_script: $name did not run: $(grep -m1 -i 'error' "$tmp/$name.log" || tail -1 "$tmp/$name.log")" >&2
  return 1
}

for dp in $dps; do
  for zero in 0 1 2 3; do
    name=dp${dp}_zero$zero
    if ! try "$name" "$giant" launch --nproc "$dp" -- "$giant" train "${common[@]}" --set parallel.dp="$dp" \
        --set parallel.zero="$zero" --set train.global_batch=$((micro * dp)); then
      echo "bench=zero_memory dp=$dp zero=$zero status=unavailable"
      continue
    fi
    n=$(parameters_of "$tmp/$name.log")
    read -r p g o c a <<< "$(peak "$tmp/$name/metrics.jsonl" parameters gradients optimizer_state comm_buffers activations)"
    awk -v dp="$dp" -v z="$zero" -v n="$n" -v p="$p" -v g="$g" -v o="$o" -v c="$c" -v a="$a" 'BEGIN {
      split("16|4 + 4 + 8/d|4 + (4 + 8)/d|16/d", text, "|")
      f[0] = 16; f[1] = 8 + 8 / dp; f[2] = 4 + 12 / dp; f[3] = 16 / dp
      measured = (p + g + o) / n
      printf "bench=zero_memory dp=%d zero=%d parameters=%d parameters_bytes=%d gradients_bytes=%d optimizer_state_bytes=%d comm_buffers_bytes=%d activations_bytes=%d bytes_per_parameter=%.3f formula=\"%s\" formula_bytes_per_parameter=%.3f ratio=%.3f\n",
        dp, z, n, p, g, o, c, a, measured, text[z + 1], f[z], measured / f[z] }'
  done
done

# Activations by recomputation choice, one rank (ZeRO does not change them).
read -r layers h a s v <<< "4 256 4 128 256"
for recompute in none selective full; do
  name=recompute_$recompute
  if ! try "$name" "$giant" train "${common[@]}" --set train.global_batch=$micro \
      --set train.recompute="\"$recompute\""; then
    echo "bench=activation_memory recompute=$recompute status=unavailable"
    continue
  fi
  read -r measured <<< "$(peak "$tmp/$name/metrics.jsonl" activations)"
  awk -v r="$recompute" -v m="$measured" -v L="$layers" -v h="$h" -v a="$a" -v s="$s" -v v="$v" -v b="$micro" 'BEGIN {
    sbh = s * b * h * 2  # 4-byte elements: twice the published 2-byte formula
    none = sbh * (34 + 5 * a * s / h); selective = sbh * 34; full = 2 * sbh
    if (r == "none") kept = L * none; else if (r == "selective") kept = L * selective; else kept = L * full + none
    logits = s * b * v * 8
    printf "bench=activation_memory recompute=%s layers=%d micro_batch=%d measured_bytes=%d korthikanti_bytes=%d formula=\"L s b h (34 + 5 a s / h) x 2 (selective: 34; full: L x 2 s b h x 2 + one layer) + s b V x 8\" ratio=%.3f\n",
      r, L, b, m, kept + logits, m / (kept + logits) }'
done
