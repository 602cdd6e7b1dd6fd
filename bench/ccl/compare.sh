#!/usr/bin/env bash
# Compares ccl's allreduce (f32, sum) with its peers, measured in the same run,
# interleaved (the order alternates every repetition, so no peer always runs
# first) and reported as medians: timings on a shared 2-core machine vary by
# up to 2.5x between runs (docs/reference/published-figures.md).
#
# usage: bench/ccl/compare.sh [BUILD_DIR] [--latency | --hosts] [--reps 5] [--bytes SIZE]
#            [--nprocs "2 4"] [--iters N] [--warmup N] [--peers "gloo mpi torch"]
#            [--rate 1gbit] [--iperf-time 3] [--run-timeout 600] [-- EXTRA `giant bench ccl` FLAGS]
#
# Modes (R = --reps repetitions each; every command line is printed before it runs):
#   default    one host, n in --nprocs: Giant (`giant bench ccl`), Gloo
#              (gloo-allreduce-bench: AllreduceRingChunked over tcp 127.0.0.1),
#              Open MPI (mpi-allreduce-bench: MPI_Allreduce under mpirun, pml ob1,
#              btl self,vader with vader's default single-copy mechanism,
#              --oversubscribe when n exceeds the cores) and PyTorch's gloo backend
#              (torch_allreduce_bench.py under /usr/bin/python3), at --bytes
#              (64MiB; --iters 20, --warmup 2). Ratio: Giant busbw / peer busbw;
#              ratio_nN is against the best of Gloo and Open MPI.
#   --latency  the same peers at 8, 64, 512 and 4096 bytes, time in us (--iters 500,
#              --warmup 500: at well under a microsecond per call, a shorter warmup
#              leaves start-up transients in the first size). Ratio: peer time / Giant
#              time; lat_ratio_nN_SB is against the fastest peer. Like mpirun, `giant
#              bench ccl` binds each rank to a core when each can have its own (--bind).
#   --hosts    two network namespaces joined by a veth pair, `tc tbf rate --rate` on
#              each end, made here and removed on exit (root only). Per repetition:
#              iperf3 --bidir (per-direction TCP goodput of the link), Giant with 2
#              ranks as 2 hosts with and without --wire bf16, and 4 ranks as 2 hosts x 2
#              (ranks 0,1 on host A, 2,3 on host B) with --algorithm hierarchical and
#              ring, all under `giant launch --hosts netns:A:..,netns:B:..`
#              (--bytes 64MiB, --iters 3, --warmup 1). goodput_fraction = Giant's n=2
#              busbw / the slower direction's goodput; bf16_gain and
#              hierarchical_gain are busbw ratios.
# Ratios above 1 mean Giant is better. A peer that is not built or installed is
# skipped with a message saying so. Table rows give the median, every
# repetition's value and the transport of each peer pair; the last line reads
# `summary mode=... KEY=VALUE ...`. Exits non-zero if any run fails or reports
# wrong results (after reporting the rest), 2 on bad usage.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build_dir=build
mode=bandwidth
reps=5
bytes=
nprocs="2 4"
iters=
warmup=
peers="gloo mpi torch"
rate=1gbit
iperf_time=3
run_timeout=600
extra_giant_flags=()
die_usage() { echo "compare.sh: $*" >&2; exit 2; }
if [[ $# -gt 0 && $1 != -* ]]; then build_dir=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --latency) mode=latency; shift ;;
    --hosts) mode=hosts; shift ;;
    --reps) reps=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --nprocs) nprocs=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --iperf-time) iperf_time=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --) shift; extra_giant_flags=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die_usage "unknown argument $1 (see --help)" ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || die_usage "--reps needs a positive integer, got '$reps'"
for p in $peers; do [[ $p == gloo || $p == mpi || $p == torch ]] || die_usage "unknown peer '$p' (gloo mpi torch)"; done
case $mode in
  bandwidth) : "${bytes:=64MiB}" "${iters:=20}" "${warmup:=2}" ;;
  latency) : "${iters:=500}" "${warmup:=500}" ;;
  hosts) : "${bytes:=64MiB}" "${iters:=3}" "${warmup:=1}" ;;
esac

giant_bin=$build_dir/bin/giant
gloo_bin=$build_dir/bench/ccl/gloo-allreduce-bench
mpi_bin=$build_dir/bench/ccl/mpi-allreduce-bench
torch_script=$script_dir/torch_allreduce_bench.py
python=/usr/bin/python3  # Debian's, with python3-torch (not a pyenv python on PATH)
[[ -x $giant_bin ]] || { echo "compare.sh: $giant_bin is missing (build it first: cmake --build $build_dir --target giant)" >&2; exit 2; }
cores=$(nproc)

work=$(mktemp -d /tmp/giant-compare.XXXXXX)
results=$work/results  # peer n bytes rep time_us busbw_gbps transports
: >"$results"
failures=()
background_pids=()  # running now: the current run, an iperf3 server
source "$script_dir/../netns_hosts.sh"  # netns_hosts_up, netns_hosts_down
source "$script_dir/../train/common.sh"  # median
cleanup() {
  local pid
  for pid in "${background_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${background_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  netns_hosts_down
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

skipped=()
say_skip() { echo "# SKIPPED $1" ; echo "compare.sh: skipping $1" >&2; skipped+=("${1%%:*}"); }

# ----------------------------------------------------------------- peers
active_peers=()
if [[ $mode != hosts ]]; then
  for p in $peers; do
    case $p in
      gloo) if [[ -x $gloo_bin ]]; then active_peers+=(gloo)
            else say_skip "gloo: $gloo_bin is not built (install libgloo-dev, then build the target gloo-allreduce-bench)"; fi ;;
      mpi) if [[ ! -x $mpi_bin ]]; then
             say_skip "mpi: $mpi_bin is not built (install libopenmpi-dev, then build the target mpi-allreduce-bench)"
           elif ! command -v mpirun >/dev/null; then say_skip "mpi: mpirun is not installed (openmpi-bin)"
           else active_peers+=(mpi); fi ;;
      torch) if [[ -x $python ]] && "$python" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null
             then active_peers+=(torch)
             else say_skip "torch: $python cannot import torch.distributed with gloo (install python3-torch)"; fi ;;
    esac
  done
fi

# The command line of one run, into the array `cmd`.
size_flags() {
  if [[ $mode == latency ]]; then echo "--min-bytes 8 --max-bytes 4096 --step-factor 8"; else echo "--bytes $bytes"; fi
}
make_cmd() {  # PEER N
  local peer=$1 n=$2
  # shellcheck disable=SC2207
  local sizes=($(size_flags))
  case $peer in
    giant) cmd=("$giant_bin" bench ccl --nproc "$n" --collectives allreduce --dtype f32 --op sum "${sizes[@]}"
                --iters "$iters" --warmup "$warmup" "${extra_giant_flags[@]}") ;;
    gloo) cmd=("$gloo_bin" --nproc "$n" "${sizes[@]}" --iters "$iters" --warmup "$warmup") ;;
    mpi) cmd=(mpirun --allow-run-as-root -np "$n")
         if [[ $n =~ ^[0-9]+$ ]] && ((n > cores)); then cmd+=(--oversubscribe); fi
         cmd+=(--mca pml ob1 --mca btl "self,vader" "$mpi_bin" "${sizes[@]}" --iters "$iters" --warmup "$warmup") ;;
    torch) cmd=("$python" "$torch_script" --nproc "$n" "${sizes[@]}" --iters "$iters" --warmup "$warmup") ;;
  esac
}

show_cmd() {  # the words of a command, quoted only where the shell needs it
  local word words=()
  for word in "$@"; do
    if [[ $word =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then words+=("$word"); else words+=("$(printf '%q' "$word")"); fi
  done
  echo "${words[*]}"
}
# Runs "$@" for at most SECONDS, output into FILE, as a background job that
# is waited for, so that a signal to this script stops it at once (cleanup
# kills it). Returns its exit status (124 or 137: timed out).
run_bounded() {  # SECONDS FILE COMMAND...
  local seconds=$1 file=$2 pid rc=0
  shift 2
  timeout -k 10 "$seconds" "$@" >"$file" 2>&1 &
  pid=$!
  background_pids+=("$pid")
  wait "$pid" || rc=$?
  forget_pid "$pid"
  return "$rc"
}
forget_pid() {
  local kept=() p
  for p in "${background_pids[@]}"; do if [[ $p != "$1" ]]; then kept+=("$p"); fi; done
  background_pids=("${kept[@]}")
}
field() { grep -o " $1=[^ ]*" <<<"$2" | head -n 1 | cut -d= -f2- || true; }  # KEY LINE: its value

# Runs cmd (bounded by --run-timeout), checks it, prints its key=value lines
# and appends "LABEL n bytes rep time_us busbw transports" per size to $results.
# A failure is reported and recorded; the comparison goes on.
run_measured() {  # LABEL N REP BENCH_NAME
  local label=$1 n=$2 rep=$3 bench=$4 out=$work/out rc=0 lines wrong
  echo "# run: rep=$rep n=$n $label: $(show_cmd "${cmd[@]}")"
  run_bounded "$run_timeout" "$out" "${cmd[@]}" || rc=$?
  # `giant launch` prefixes each rank's lines with "[rank R] ".
  lines=$(sed 's/^\[rank [0-9]*\] //' "$out" | grep "^bench=$bench " | grep -v ' rep=-1 ' || true)
  grep -h '^bench=limit ' <(sed 's/^\[rank [0-9]*\] //' "$out") | sed "s/^/# rep=$rep n=$n /" || true
  wrong=$(grep -o ' wrong=[0-9]*' <<<"$lines" | cut -d= -f2 | sort -un | tail -n 1 || true)
  if ((rc != 0)) || [[ -z $lines || ${wrong:-1} != 0 ]]; then
    tail -n 40 "$out" | sed 's/^/    | /' >&2
    local why="exit status $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${run_timeout}s"
    [[ -z $lines ]] && why+=", no result line"
    [[ -n $lines && ${wrong:-1} != 0 ]] && why+=", wrong=$wrong"
    echo "compare.sh: FAILED $label n=$n rep=$rep: $why" >&2
    echo "# FAILED $label n=$n rep=$rep: $why"
    failures+=("$label n=$n rep=$rep: $why")
    return 0
  fi
  echo "$lines"
  while read -r line; do
    local b t bw tr
    b=$(field bytes "$line") t=$(field time_us "$line") bw=$(field busbw_gbps "$line") tr=$(field transports "$line")
    [[ -n $tr ]] || tr="all:$(field transport "$line")"
    echo "$label $n $b $rep $t $bw $tr" >>"$results"
  done <<<"$lines"
}

# ---------------------------------------------------------------- medians
values() {  # FIELD LABEL N BYTES: the values in run order
  awk -v f="$1" -v l="$2" -v n="$3" -v b="$4" '$1 == l && $2 == n && $3 == b { printf "%s ", $f }' "$results"
}
median_of() { values "$@" | tr ' ' '\n' | { grep . || true; } | median | sed 's/^NA$/nan/'; }
transports_of() {  # LABEL N BYTES
  awk -v l="$1" -v n="$2" -v b="$3" '$1 == l && $2 == n && $3 == b { print $7 }' "$results" | sort -u | paste -sd'|'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0 && a != "nan" && b != "nan") printf "%.3f", a / b; else printf "nan" }'; }
best_of() {  # high|low, then "label value" pairs: the best label and value
  local how=$1; shift
  local best_label=none best_value=nan
  while [[ $# -gt 0 ]]; do
    if [[ $2 != nan ]] && { [[ $best_value == nan ]] ||
        awk -v a="$2" -v b="$best_value" -v h="$how" 'BEGIN { exit !(h == "high" ? a > b : a < b) }'; }; then
      best_label=$1 best_value=$2
    fi
    shift 2
  done
  echo "$best_label $best_value"
}
size_label() { awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) printf "%dMiB", b / 1048576;
  else if (b >= 1024 && b % 1024 == 0) printf "%dKiB", b / 1024; else printf "%dB", b }'; }

header() {
  echo "# compare.sh mode=$mode reps=$reps host=$(hostname) cores=$cores build=$build_dir $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# each run is limited to ${run_timeout}s (timeout -k 10); runs of a repetition alternate their order"
}

# ============================================================ one host
run_one_host() {
  local all=(giant "${active_peers[@]}") n rep peer order
  header
  echo "# peers: ${all[*]}  nprocs: $nprocs  iters=$iters warmup=$warmup sizes: $(size_flags)"
  for peer in "${all[@]}"; do make_cmd "$peer" N; echo "# $peer flags: $(show_cmd "${cmd[@]}")"; done
  if [[ " ${active_peers[*]} " == *" mpi "* ]]; then
    echo "# mpi: $(mpirun --version 2>&1 | head -n 1); vader single-copy default: $(ompi_info --param btl vader --level 9 2>/dev/null |
      grep -o 'btl_vader_single_copy_mechanism" (current value: "[^"]*"' | sed 's/.*: //')"
  fi
  for ((rep = 0; rep < reps; rep++)); do
    for n in $nprocs; do
      order=("${all[@]}")
      if ((rep % 2 == 1)); then order=(); for ((i = ${#all[@]} - 1; i >= 0; i--)); do order+=("${all[i]}"); done; fi
      for peer in "${order[@]}"; do
        make_cmd "$peer" "$n"
        local bench=$peer; [[ $peer == giant ]] && bench=ccl
        run_measured "$peer" "$n" "$rep" "$bench"
      done
    done
  done

  local summary="summary mode=$mode reps=$reps" sizes b field unit how
  if [[ $mode == latency ]]; then sizes="8 64 512 4096" field=5 unit="time (us)" how=low
  else sizes=$(awk '{ print $3 }' "$results" | sort -un | head -n 1) field=6 unit="busbw (GB/s)" how=high
    [[ -n $sizes ]] || sizes=0; summary+=" bytes=$bytes"; fi
  for n in $nprocs; do
    for b in $sizes; do
      local g
      g=$(median_of $field giant "$n" "$b")
      echo "#"
      echo "# n=$n size=$(size_label "$b"): median $unit over $reps interleaved repetitions; ratio > 1: Giant better"
      printf '# %-6s %12s %9s  %-40s %s\n' peer median ratio transports "values (rep 0..$((reps - 1)))"
      local args=() peer m r
      for peer in "${all[@]}"; do
        m=$(median_of $field "$peer" "$n" "$b")
        if [[ $how == high ]]; then r=$(ratio "$g" "$m"); else r=$(ratio "$m" "$g"); fi
        printf '# %-6s %12s %9s  %-40s %s\n' "$peer" "$m" "$r" "$(transports_of "$peer" "$n" "$b")" "$(values $field "$peer" "$n" "$b")"
        if [[ $peer == giant ]]; then continue; fi
        args+=("$peer" "$m")
        if [[ $mode == latency ]]; then summary+=" ${peer}_n${n}_${b}B_us=$m"
        else summary+=" ${peer}_n$n=$m ratio_${peer}_n$n=$r"; fi
      done
      if [[ $mode == latency ]]; then
        local best; read -r best m <<<"$(best_of low "${args[@]}")"
        summary+=" giant_n${n}_${b}B_us=$g best_n${n}_${b}B=$best lat_ratio_n${n}_${b}B=$(ratio "$m" "$g")"
      else
        # The issue's target: the best of Gloo and Open MPI (PyTorch's gloo is in the table).
        local bw_args=() i best
        for ((i = 0; i < ${#args[@]}; i += 2)); do
          if [[ ${args[i]} == gloo || ${args[i]} == mpi ]]; then bw_args+=("${args[i]}" "${args[i + 1]}"); fi
        done
        read -r best m <<<"$(best_of high "${bw_args[@]}")"
        summary+=" giant_n$n=$g best_n$n=$best ratio_n$n=$(ratio "$g" "$m")"
      fi
    done
  done
  final_summary=$summary
}

# ====================================================== namespace hosts
run_hosts() {
  [[ $(id -u) == 0 ]] || { echo "compare.sh: --hosts needs root (ip netns, tc)" >&2; exit 2; }
  command -v iperf3 >/dev/null || { echo "compare.sh: --hosts needs iperf3 (apt-get install iperf3)" >&2; exit 2; }
  local ns_a ns_b addr_a addr_b  # set by netns_hosts_up
  header
  netns_hosts_up giantcmp gcmp "$rate" || exit 1
  echo "# link: namespaces $ns_a (host A, $addr_a) and $ns_b (host B, $addr_b), veth pair, tbf rate $rate on each end"

  local launch=(ip netns exec "$ns_a" "$giant_bin" launch --store-addr "$addr_a")
  local bench_flags=(--launched --collectives allreduce --dtype f32 --op sum --bytes "$bytes" --iters "$iters"
               --warmup "$warmup" "${extra_giant_flags[@]}")
  local items=(iperf3 giant_n2 giant_n2_bf16 giant_n4_hierarchical giant_n4_ring) order rep item i
  echo "# iperf3: server in $ns_a, client in $ns_b: iperf3 --bidir -c $addr_a -t $iperf_time -J"
  echo "# giant: ${launch[*]} --hosts netns:$ns_a:K,netns:$ns_b:K -- $giant_bin bench ccl ${bench_flags[*]} [--wire bf16] [--algorithm hierarchical|ring]"
  for ((rep = 0; rep < reps; rep++)); do
    order=("${items[@]}")
    if ((rep % 2 == 1)); then order=(); for ((i = ${#items[@]} - 1; i >= 0; i--)); do order+=("${items[i]}"); done; fi
    for item in "${order[@]}"; do
      case $item in
        iperf3) run_iperf "$rep" "$ns_a" "$ns_b" "$addr_a"; continue ;;
        giant_n2) cmd=("${launch[@]}" --hosts "netns:$ns_a:1,netns:$ns_b:1" -- "$giant_bin" bench ccl "${bench_flags[@]}") ;;
        giant_n2_bf16) cmd=("${launch[@]}" --hosts "netns:$ns_a:1,netns:$ns_b:1" -- "$giant_bin" bench ccl "${bench_flags[@]}"
                            --wire bf16) ;;
        giant_n4_hierarchical) cmd=("${launch[@]}" --hosts "netns:$ns_a:2,netns:$ns_b:2" -- "$giant_bin" bench ccl
                                    "${bench_flags[@]}" --algorithm hierarchical) ;;
        giant_n4_ring) cmd=("${launch[@]}" --hosts "netns:$ns_a:2,netns:$ns_b:2" -- "$giant_bin" bench ccl "${bench_flags[@]}"
                            --algorithm ring) ;;
      esac
      local n=2; [[ $item == giant_n4* ]] && n=4
      run_measured "$item" "$n" "$rep" ccl
    done
  done

  local b
  b=$(awk '$1 ~ /^giant/ { print $3 }' "$results" | sort -un | head -n 1); b=${b:-0}
  echo "#"
  echo "# median over $reps interleaved repetitions: busbw (GB/s) for Giant, per-direction TCP goodput (GB/s) for iperf3"
  printf '# %-22s %2s %10s %9s  %-44s %s\n' run n median ratio transports "values (rep 0..$((reps - 1)))"
  local ab ba slow g2 g2w h4 r4 row label n m r
  ab=$(median_of 6 iperf3_a_to_b 2 0) ba=$(median_of 6 iperf3_b_to_a 2 0)
  slow=$(awk -v a="$ab" -v b="$ba" 'BEGIN { if (a == "nan" || b == "nan") print "nan"; else print (a < b ? a : b) }')
  g2=$(median_of 6 giant_n2 2 "$b") g2w=$(median_of 6 giant_n2_bf16 2 "$b")
  h4=$(median_of 6 giant_n4_hierarchical 4 "$b") r4=$(median_of 6 giant_n4_ring 4 "$b")
  for row in "iperf3_a_to_b 2 0 -" "iperf3_b_to_a 2 0 -" "giant_n2 2 $b $slow" "giant_n2_bf16 2 $b $g2" \
             "giant_n4_hierarchical 4 $b $r4" "giant_n4_ring 4 $b -"; do
    read -r label n bb ref <<<"$row"
    m=$(median_of 6 "$label" "$n" "$bb")
    r=-; [[ $ref != - ]] && r=$(ratio "$m" "$ref")
    printf '# %-22s %2s %10s %9s  %-44s %s\n' "$label" "$n" "$m" "$r" "$(transports_of "$label" "$n" "$bb")" \
      "$(values 6 "$label" "$n" "$bb")"
  done
  echo "# ratios: giant_n2 / slower iperf3 direction (goodput_fraction); bf16 / giant_n2 (bf16_gain);"
  echo "#         hierarchical / ring (hierarchical_gain)"
  final_summary="summary mode=hosts rate=$rate bytes=$bytes reps=$reps iperf_a_to_b_gbps=$ab iperf_b_to_a_gbps=$ba"
  final_summary+=" giant_n2=$g2 goodput_fraction=$(ratio "$g2" "$slow") giant_n2_bf16=$g2w bf16_gain=$(ratio "$g2w" "$g2")"
  final_summary+=" hierarchical_n4=$h4 ring_n4=$r4 hierarchical_gain=$(ratio "$h4" "$r4")"
}

# iperf3 --bidir across the link: per-direction goodput (GB/s, as busbw_gbps),
# taken at each receiver, appended to $results as iperf3_a_to_b / iperf3_b_to_a.
run_iperf() {  # REP NS_A NS_B ADDR_A
  local rep=$1 ns_a=$2 ns_b=$3 addr=$4 port=5201 json=$work/iperf.json server_log=$work/iperf-server.log rc=0 tries
  echo "# run: rep=$rep iperf3: ip netns exec $ns_a iperf3 -s -1 -B $addr -p $port &" \
       "ip netns exec $ns_b iperf3 --bidir -c $addr -p $port -t $iperf_time -J"
  ip netns exec "$ns_a" iperf3 -s -1 -B "$addr" -p "$port" >"$server_log" 2>&1 &
  local server=$!
  background_pids+=("$server")
  for ((tries = 0; tries < 50; tries++)); do
    ip netns exec "$ns_a" ss -ltnH "sport = :$port" | grep -q . && break
    sleep 0.1
  done
  run_bounded $((iperf_time + 30)) "$json" ip netns exec "$ns_b" iperf3 --bidir -c "$addr" -p "$port" \
    -t "$iperf_time" -J || rc=$?
  if ((rc != 0)); then kill "$server" 2>/dev/null || true; fi
  wait "$server" 2>/dev/null || true
  forget_pid "$server"
  local parsed
  if ((rc != 0)) || ! parsed=$("$python" - "$json" <<'EOF'
import json, sys
end = json.load(open(sys.argv[1]))["end"]
# sum_received: client -> server (B -> A) at its receiver; *_bidir_reverse: A -> B.
b_to_a = end["sum_received"]["bits_per_second"]
a_to_b = end["sum_received_bidir_reverse"]["bits_per_second"]
retr = end["sum_sent"].get("retransmits", 0) + end["sum_sent_bidir_reverse"].get("retransmits", 0)
print(f"{a_to_b / 8e9:.4f} {b_to_a / 8e9:.4f} {a_to_b / 1e9:.3f} {b_to_a / 1e9:.3f} {retr}")
EOF
  ); then
    tail -n 20 "$json" "$server_log" | sed 's/^/    | /' >&2
    echo "compare.sh: FAILED iperf3 rep=$rep (exit status $rc)" >&2
    echo "# FAILED iperf3 rep=$rep: exit status $rc"
    failures+=("iperf3 rep=$rep: exit status $rc")
    return 0
  fi
  local ab ba ab_bits ba_bits retr
  read -r ab ba ab_bits ba_bits retr <<<"$parsed"
  echo "bench=iperf3 mode=bidir rate=$rate seconds=$iperf_time rep=$rep a_to_b_gbps=$ab b_to_a_gbps=$ba" \
       "a_to_b_gbit_per_s=$ab_bits b_to_a_gbit_per_s=$ba_bits retransmits=$retr transport=tcp"
  echo "iperf3_a_to_b 2 0 $rep 0 $ab A-B:tcp(veth,tbf-$rate)" >>"$results"
  echo "iperf3_b_to_a 2 0 $rep 0 $ba B-A:tcp(veth,tbf-$rate)" >>"$results"
}

final_summary=
if [[ $mode == hosts ]]; then run_hosts; else run_one_host; fi
if ((${#skipped[@]} > 0)); then final_summary+=" skipped=$(IFS=,; echo "${skipped[*]}")"; fi
if ((${#failures[@]} > 0)); then
  echo "#"
  echo "# FAILED runs (${#failures[@]}):"
  for f in "${failures[@]}"; do echo "#   $f"; done
  echo "$final_summary failed=${#failures[@]}"
  exit 1
fi
echo "$final_summary failed=0"
