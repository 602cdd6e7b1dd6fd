# Shared by the training benchmarks (sourced, not run).

# summary_fields METRICS_JSONL FIELD... -> the fields of giant train's summary
# record (the last line with "summary": true), space-separated, NA for a field
# the record lacks; fails when there is no summary record.
summary_fields() {
  /usr/bin/python3 -c 'import json, sys
found = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        record = json.loads(line)
        if record.get("summary"):
            found = record
if found is None:
    sys.exit(sys.argv[1] + ": no summary record")
print(" ".join("NA" if found.get(k) is None else repr(found[k]) for k in sys.argv[2:]))' "$@"
}

# median: the median of the numbers on standard input (lines "NA" ignored), NA if none.
median() {
  { grep -v '^NA$' || true; } | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "NA"}'
}

# The PyTorch peers run with the heap settings that giant train applies itself
# (train.retain_memory_mb=1024: blocks up to 32 MiB from the heap, 1 GiB of
# freed memory kept), so both sides are compared on the same allocator.
# Prefix a peer's command line with "${peer_malloc[@]}".
peer_malloc=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824)
