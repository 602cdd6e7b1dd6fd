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

# median: the median of the numbers on standard input (lines "NA" ignored), NA
# if none; for an even count the mean of the two middle ones (as giant::median).
median() {
  { grep -v '^NA$' || true; } | sort -g | awk '{v[NR]=$1} END {
    if (!NR) print "NA"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}

# The PyTorch peers run with the heap settings that giant train applies itself
# (train.retain_memory_mb=1024: blocks up to 32 MiB from the heap, 1 GiB of
# freed memory kept), so both sides are compared on the same allocator.
# Prefix a peer's command line with "${peer_malloc[@]}".
peer_malloc=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824)

# The model of the parallel benchmarks (the parity bench's: 4 layers, hidden
# 256, 4 heads, sequence 128, vocabulary 256, the bundled corpus, AdamW), 1
# thread per rank, no evaluation or sample. bench_model_flags STEPS PRECISION
# sets the array bench_model to those flags of giant train.
bench_model_flags() {
  bench_model=(--set model.layers=4 --set model.hidden=256 --set model.heads=4 --set model.seq_len=128
               --set model.vocab=256 --set train.threads=1 --set train.steps="$1"
               --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0
               --set train.precision="$2")
}

# Running giant and reading its summary. The script sets bench_script (the
# name its messages carry) and tmp (a scratch folder, one subfolder and log
# per run); its EXIT trap calls stop_background.
out_flag() { printf '%s' "train.out_dir=\"$tmp/$1\""; }  # a TOML string
background=()  # the concurrent runs of run_two_copies, stopped if the script stops early
stop_background() { local p; for p in "${background[@]}"; do kill "$p" 2>/dev/null || true; done; }
fail() {  # log name -> shows the log and stops
  echo "$bench_script: $2 failed; its log:" >&2
  cat "$1" >&2
  exit 1
}
# metrics.jsonl -> "tokens_per_s step_s comm_wait_s" from its summary record.
giant_summary() {
  local fields tokens step comm
  fields=$(summary_fields "$1" tokens_per_s_median step_s_median comm_wait_s_median) || return 1
  read -r tokens step comm <<< "$fields"
  [[ $comm == NA ]] || comm=$(printf '%.6f' "$comm")
  printf '%.1f %.6f %s\n' "$tokens" "$step" "$comm"
}
# run_giant NAME COMMAND...: runs the command with train.out_dir=$tmp/NAME, its
# output in $tmp/NAME.log, and sets tokens_per_s, step_s and comm_wait_s (call
# it without a subshell, so that a failure stops the script).
run_giant() {
  local name=$1; shift
  local log=$tmp/$name.log
  rm -rf "${tmp:?}/$name"
  "$@" --set "$(out_flag "$name")" > "$log" 2>&1 || fail "$log" "$name"
  local values
  values=$(giant_summary "$tmp/$name/metrics.jsonl" 2>> "$log") || fail "$log" "$name (reading metrics.jsonl)"
  read -r tokens_per_s step_s comm_wait_s <<< "$values"
}
# run_two_copies NAME COMMAND...: two concurrent copies of a giant train
# command, no communication between them (NAME0 and NAME1); sets tokens_per_s
# (the sum), step_s (the mean of the two), slower_step_s and comm_wait_s=0.
run_two_copies() {
  local name=$1 i; shift
  background=()
  for i in 0 1; do
    rm -rf "${tmp:?}/$name$i"
    "$@" --set "$(out_flag "$name$i")" > "$tmp/$name$i.log" 2>&1 &
    background+=($!)
  done
  local t0 s0 t1 s1 v0 v1
  for i in 0 1; do wait "${background[$i]}" || fail "$tmp/$name$i.log" "$name (process $i)"; done
  background=()
  v0=$(giant_summary "$tmp/${name}0/metrics.jsonl" 2>> "$tmp/${name}0.log") ||
    fail "$tmp/${name}0.log" "$name (reading metrics.jsonl of process 0)"
  v1=$(giant_summary "$tmp/${name}1/metrics.jsonl" 2>> "$tmp/${name}1.log") ||
    fail "$tmp/${name}1.log" "$name (reading metrics.jsonl of process 1)"
  read -r t0 s0 _ <<< "$v0"
  read -r t1 s1 _ <<< "$v1"
  tokens_per_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", a + b}')
  step_s=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.6f", (a + b) / 2}')
  slower_step_s=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.6f", (a + 0 > b + 0 ? a : b)}')
  comm_wait_s=0
}

# ratio A B: A / B to 3 decimals, NA when either is NA or B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.3f", a / b}'; }
