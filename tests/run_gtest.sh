#!/usr/bin/env bash
# Runs one GoogleTest binary for ctest, whose exit status it keeps, except
# that a run that passed but skipped cases (GTEST_SKIP) exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE): a skipped test is not a
# passed one. (ctest's SKIP_REGULAR_EXPRESSION would also mark a failed run
# as skipped when its output names a skip.)
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ] && grep -qE '^\[  SKIPPED \] [0-9]+ tests?, listed below' "$log"; then
  exit 77
fi
exit "$status"
