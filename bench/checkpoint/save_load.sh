#!/usr/bin/env bash
# Checkpoint save and load against the disk and against torch.save, in one
# run, interleaved, medians of RUNS (default 5):
#   giant: the state of a 353M-parameter GPT (28 layers, hidden 1024; fp32
#     master weights + AdamW's two moments, 12 bytes per parameter, 4.2 GB)
#     saved by 2 ranks (dp=2, ZeRO-1: each writes its half) and loaded back
#     (verification of every checksum, then each rank reads its slices);
#   dd: the same number of bytes written sequentially with fsync
#     (conv=fsync) and read back, page cache dropped before each read;
#   torch.save / torch.load (python3-torch) of the same tensors, fsynced.
# The page cache is dropped before every load and read. Prints key=value
# lines and the ratios to dd. Needs root (drop_caches) and ~9 GB of disk in
# $CHECKPOINT_BENCH_DIR (default /tmp/giant-bench-checkpoint) and ~12 GB of memory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
giant=${GIANT:-$root/build/bin/giant}
runs=${RUNS:-5}
dir=${CHECKPOINT_BENCH_DIR:-/tmp/giant-bench-checkpoint}
layers=${LAYERS:-28}
hidden=${HIDDEN:-1024}
python=/usr/bin/python3
bench_script=save_load.sh
source "$root/bench/train/common.sh"

rm -rf "$dir"; mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
model=(--set model.layers="$layers" --set model.hidden="$hidden" --set model.heads=16 --set model.seq_len=64
       --set train.global_batch=2 --set train.micro_batch=1 --set parallel.dp=2 --set parallel.zero=1
       --set train.threads=1 --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0
       --set train.precision=fp32 --set train.steps=1 --set train.tensorboard=false
       --set data.path="\"$root/examples/data/kjv.txt\"")

# giant_save -> seconds of the save and its bytes, from the checkpoint line
giant_save() {
  local out=$dir/giant log=$dir/giant_save.log
  rm -rf "$out"
  "$giant" launch --nproc 2 -- "$giant" train "${model[@]}" --set train.resume='""' \
    --set train.out_dir="\"$out\"" > "$log" 2>&1 || fail "$log" "giant save"
  sed -n 's/.*checkpoint of step 1: .* (\([0-9.]*\) GB in \([0-9.]*\) s,.*/\2 \1/p' "$log" | head -1
}
# giant_load -> seconds of verification and of loading
giant_load() {
  local out=$dir/giant log=$dir/giant_load.log
  drop_caches
  "$giant" launch --nproc 2 -- "$giant" train "${model[@]}" --set train.resume='"auto"' \
    --set train.out_dir="\"$out\"" > "$log" 2>&1 || fail "$log" "giant load"
  local verify load
  verify=$(sed -n 's/.*verified in \([0-9.]*\) s.*/\1/p' "$log" | head -1)
  load=$(sed -n 's/.*loaded in \([0-9.]*\) s).*/\1/p' "$log" | head -1)
  echo "$verify $load"
}
dd_seconds() { sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p' | tail -1; }

torch_script='
import os, sys, time, torch
layers, hidden, mode, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.set_num_threads(1)
if mode == "save":
    state = {}
    shapes = [(3 * hidden, hidden), (3 * hidden,), (hidden, hidden), (hidden,), (4 * hidden, hidden), (4 * hidden,),
              (hidden, 4 * hidden), (hidden,), (hidden,), (hidden,), (hidden,), (hidden,)]
    for kind in ("model", "exp_avg", "exp_avg_sq"):
        state[kind + "/wte"] = torch.randn(256, hidden)
        state[kind + "/wpe"] = torch.randn(64, hidden)
        for i in range(layers):
            for j, shape in enumerate(shapes):
                state["%s/block_%d.%d" % (kind, i, j)] = torch.randn(*shape)
    start = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    print(time.perf_counter() - start, os.path.getsize(path))
else:
    start = time.perf_counter()
    state = torch.load(path)
    print(time.perf_counter() - start, sum(t.numel() * 4 for t in state.values()))
'

gs=() gl=() gv=() dw=() dr=() ts=() tl=()
for run in $(seq 1 "$runs"); do
  read -r save_s bytes_gb < <(giant_save)
  read -r verify_s load_s < <(giant_load)
  bytes=$(awk -v g="$bytes_gb" 'BEGIN {printf "%.0f", g * 1e9}')
  blocks=$(( (bytes + (64 << 20) - 1) / (64 << 20) ))
  rm -rf "$dir/giant"
  write_s=$(dd if=/dev/zero of="$dir/dd.bin" bs=64M count="$blocks" conv=fsync 2>&1 | dd_seconds)
  drop_caches
  read_s=$(dd if="$dir/dd.bin" of=/dev/null bs=64M 2>&1 | dd_seconds)
  rm -f "$dir/dd.bin"
  read -r tsave _ < <("$python" -c "$torch_script" "$layers" "$hidden" save "$dir/torch.pt")
  drop_caches
  read -r tload _ < <("$python" -c "$torch_script" "$layers" "$hidden" load "$dir/torch.pt")
  rm -f "$dir/torch.pt"
  echo "run=$run bytes=$bytes giant_save_s=$save_s giant_verify_s=$verify_s giant_load_s=$load_s dd_write_s=$write_s dd_read_s=$read_s torch_save_s=$tsave torch_load_s=$tload"
  gs+=("$save_s"); gv+=("$verify_s"); gl+=("$load_s"); dw+=("$write_s"); dr+=("$read_s"); ts+=("$tsave"); tl+=("$tload")
done
med() { printf '%s\n' "$@" | median; }
gs_m=$(med "${gs[@]}"); gv_m=$(med "${gv[@]}"); gl_m=$(med "${gl[@]}")
dw_m=$(med "${dw[@]}"); dr_m=$(med "${dr[@]}"); ts_m=$(med "${ts[@]}"); tl_m=$(med "${tl[@]}")
awk -v b="$bytes" -v gs="$gs_m" -v gv="$gv_m" -v gl="$gl_m" -v dw="$dw_m" -v dr="$dr_m" -v ts="$ts_m" -v tl="$tl_m" 'BEGIN {
  gb = b / 1e9
  printf "summary bytes=%.0f giant_save_gbps=%.3f dd_write_gbps=%.3f torch_save_gbps=%.3f save_vs_dd=%.2f save_vs_torch=%.2f\n",
         b, gb / gs, gb / dw, gb / ts, dw / gs, ts / gs
  printf "summary giant_load_gbps=%.3f giant_verify_load_gbps=%.3f dd_read_gbps=%.3f torch_load_gbps=%.3f load_vs_dd=%.2f verify_load_vs_dd=%.2f load_vs_torch=%.2f\n",
         gb / gl, gb / (gv + gl), gb / dr, gb / tl, dr / gl, dr / (gv + gl), tl / gl
}'
