#!/usr/bin/env bash
# Every fuzzer at full length under AddressSanitizer and
# UndefinedBehaviorSanitizer (leaks included): at least 1e6 mutated inputs
# per target (the store's live targets 50,000: each input is a connection),
# no crash, no leak, no input over a second of CPU. Builds the fuzzers
# into BUILD_DIR (default build-fuzz) with GIANT_SANITIZE="address;undefined";
# with --no-torch, without libtorch (the sanitized libtorch layers take most
# of an hour to build): every fuzzer is then built from the sources of what
# it fuzzes, none of which uses libtorch.
# Prints each fuzzer's "fuzz target=NAME iterations=N failures=F seconds=S
# accepted=K" lines; exits non-zero on any failure.
#
# usage: bench/fuzz/fuzz.sh [BUILD_DIR] [--iterations 1000000] [--seconds 0] [--seed 1] [--no-torch]
#   --seconds S: S seconds for each fuzzer instead, shared by its targets (CI runs 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build-fuzz
iterations=1000000
seconds=0
seed=1
torch=ON
if [[ $# -gt 0 && $1 != --* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --iterations) iterations=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --no-torch) torch=OFF; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ $seconds == 0 ]] && (( iterations < 1000000 )); then
  echo "fuzz.sh: at least 1000000 iterations per target (got $iterations), or --seconds" >&2
  exit 2
fi

# fuzzer binary (relative to the build) for each target CMake name
declare -A fuzzers=(
  [giant_wire_fuzz]=bench/ccl/giant_wire_fuzz
  [giant_store_fuzz]=bench/ccl/giant_store_fuzz
  [giant_data_fuzz]=bench/data/giant_data_fuzz
  [giant_vocabulary_fuzz]=bench/data/giant_vocabulary_fuzz
  [giant_sentencepiece_fuzz]=bench/data/giant_sentencepiece_fuzz
  [giant_checkpoint_fuzz]=bench/giant_checkpoint_fuzz
  [giant_config_fuzz]=bench/giant_config_fuzz
)
if [[ $torch == ON ]]; then
  fuzzers[giant_checkpoint_fuzz]=bench/checkpoint/giant_checkpoint_fuzz
  fuzzers[giant_config_fuzz]=bench/config/giant_config_fuzz
fi

source scripts/ccache-env
# The same configuration as CI's sanitized ccl tests (.ci/run), so that
# --no-torch can share their build folder.
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGIANT_SANITIZE="address;undefined" \
  -DGIANT_BUILD_BENCH=OFF -DGIANT_BUILD_TORCH=$torch > "$build_dir/configure.log"
cmake --build "$build_dir" -j2 --target "${!fuzzers[@]}"

# The sanitizers' options are the fuzzers' own defaults (fuzz_driver.cc).
status=0
for name in $(printf '%s\n' "${!fuzzers[@]}" | sort); do
  "$build_dir/${fuzzers[$name]}" --iterations "$iterations" --total-seconds "$seconds" --seed "$seed" || status=1
done
exit "$status"
