#!/usr/bin/env bash
# scripts/check-doc-links on a tiny tree (fixture/) holding good links of
# every kind and one of each fault: a missing file, a missing heading in
# another page and in its own, a link out of the tree, a page citing what
# lies outside the repository, and a page no link reaches. Each is named
# with page and line, links in code are ignored, and the check fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=$here/../../scripts/check-doc-links
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The citation of what lies outside is planted here, so that no file of the
# repository names it.
cp -r "$here/fixture" "$work/tree"
outside="../""shared/x.md"
echo "This page cites $outside." >> "$work/tree/docs/a.md"

status=0
"$check" "$work/tree" > "$work/out" || status=$?
cat "$work/out"
expect() {
  grep -qxF -- "$1" "$work/out" || { echo "FAIL: expected the line: $1"; exit 1; }
}
[ "$status" -eq 1 ] || { echo "FAIL: exit status $status on a tree with broken links, expected 1"; exit 1; }
expect 'README.md:7: link docs/missing.md: no such file docs/missing.md'
expect 'README.md:7: link docs/a.md#nope: no heading #nope in docs/a.md'
expect 'README.md:8: link ../check_doc_links_on_fixture.sh: outside the repository'
expect 'README.md:8: link #nowhere: no heading #nowhere in README.md'
expect "docs/a.md:10: cites ${outside%/x.md}, which is outside the repository"
expect 'docs/orphan.md: not reachable from README.md by links'
expect 'check-doc-links: 6 problem(s) in 3 pages'

rm "$work/tree/docs/orphan.md"
sed -i '/do not:/,/own heading/d; /cites/d' "$work/tree/README.md" "$work/tree/docs/a.md"
"$check" "$work/tree" || { echo "FAIL: the tree without its faults was refused"; exit 1; }
echo "PASS"
