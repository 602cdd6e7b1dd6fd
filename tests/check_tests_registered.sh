#!/usr/bin/env bash
# check_tests_registered.sh BUILD_DIR LAYER...
#
# Every tests/<layer>/**/test_*.cc of the built LAYERs (outside support/
# and helpers/) is a ctest of BUILD_DIR named <layer>_<subfolders>_test_<name>:
# a test source that is not built and run fails here instead of passing
# unnoticed.
set -euo pipefail
build_dir=$1
shift
tests_dir=$(cd "$(dirname "$0")" && pwd)
registered=$(ctest --test-dir "$build_dir" -N | sed -nE 's/^ *Test +#[0-9]+: //p')
missing=0
for layer in "$@"; do
  while IFS= read -r src; do
    rel=${src#"$tests_dir/$layer/"}
    name=${layer}_$(tr / _ <<< "${rel%.cc}")
    if ! grep -qxF "$name" <<< "$registered"; then
      echo "tests/$layer/$rel is not the ctest $name"
      missing=$((missing + 1))
    fi
  done < <(find "$tests_dir/$layer" -name 'test_*.cc' -not -path '*/support/*' -not -path '*/helpers/*' 2>/dev/null)
done
[ "$missing" -eq 0 ] || exit 1
echo "every test source is a ctest"
