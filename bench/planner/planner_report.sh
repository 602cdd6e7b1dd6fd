#!/usr/bin/env bash
# The planner's accuracy on the published runs (median absolute error
# in-sample and leaving each source out) and its planning time for GPT-175B
# on 1024 A100s, one key=value line each.
# usage: bench/planner/planner_report.sh [PATH/TO/giant] [PATH/TO/published-runs.csv]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
giant=${1:-$here/build/bin/giant}
csv=${2:-$here/tests/planner/data/published-runs.csv}
"$giant" plan --eval-csv "$csv" --report-error | grep -E '^(median_abs_error|# (built-in|fitted|row| +[0-9]))'
start=$(date +%s.%N)
"$giant" plan --model gpt-175b --cluster a100-80g-ib --hosts 128 --top 1 | grep -E '^(1 |searched)'
end=$(date +%s.%N)
echo "bench=planner name=plan_gpt175b_1024 wall_s=$(echo "$end - $start" | bc)"
