#!/usr/bin/env bash
# The checkpoint format's fuzzer at full length: at least 1e6 mutated inputs
# per target (safetensors headers with their file sizes, manifests,
# manifest fragments, Hugging Face config.json files), under a 4 GiB
# address-space limit so that an allocation from an unchecked length fails
# (bad_alloc is a failure) instead of succeeding quietly. Prints the fuzzer's "fuzz target=... iterations=N
# failures=F seconds=S" lines; exits non-zero on any failure.
#
# usage: bench/checkpoint/fuzz.sh [BUILD_DIR] [--iterations 1000000] [--seed 1]
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build
iterations=1000000
seed=1
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --iterations) iterations=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if (( iterations < 1000000 )); then
  echo "fuzz.sh: at least 1000000 iterations per target (got $iterations)" >&2
  exit 2
fi
fuzzer=$build_dir/bench/checkpoint/giant_checkpoint_fuzz
[[ -x $fuzzer ]] || { echo "fuzz.sh: $fuzzer is missing (build it first)" >&2; exit 2; }
status=0
for target in safetensors_header manifest fragment; do
  (ulimit -v $((4 * 1024 * 1024)) && "$fuzzer" --target "$target" --iterations "$iterations" --seed "$seed") ||
    status=1
done
exit "$status"
