#!/usr/bin/env bash
# The Megatron index parser's fuzzer at full length: at least 1e6 mutated
# .idx inputs with mutated .bin sizes, under a 4 GiB address-space limit so
# that an allocation from an unchecked count fails (bad_alloc is a failure)
# instead of succeeding quietly. Prints the fuzzer's "fuzz target=index
# iterations=N failures=F seconds=S accepted=K" line; exits non-zero on any failure.
#
# usage: bench/data/fuzz.sh [BUILD_DIR] [--iterations 1000000] [--seed 1]
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
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if (( iterations < 1000000 )); then
  echo "fuzz.sh: at least 1000000 iterations (got $iterations)" >&2
  exit 2
fi
fuzzer=$build_dir/bench/data/giant_data_fuzz
[[ -x $fuzzer ]] || { echo "fuzz.sh: $fuzzer is missing (build it first)" >&2; exit 2; }
(ulimit -v $((4 * 1024 * 1024)) && "$fuzzer" --iterations "$iterations" --seed "$seed")
