#!/usr/bin/python3
"""torch_allreduce_bench.py: PyTorch's gloo backend as a peer of `giant bench ccl`.

torch.distributed.all_reduce (f32, sum) over the gloo process group, on
loopback (GLOO_SOCKET_IFNAME=lo), one process per rank, started here with
torch.multiprocessing (fork) and met through a FileStore. Run it with Debian's
python3-torch (PyTorch 1.13), not another python on PATH:

    /usr/bin/python3 bench/ccl/torch_allreduce_bench.py --nproc 2 --bytes 64MiB --iters 5 --warmup 2

Prints the table rows and key=value lines of the other ccl benchmarks
(bench=torch), so bench/ccl/compare.sh parses them all alike. all_reduce is in
place, so results are checked once on fresh inputs before the timed runs
(which go on with zeros: float adds cost the same for any value), as in
gloo-allreduce-bench. Exit status: 0, 3 on wrong results, 4 if a rank fails,
2 on bad flags.
"""

import argparse
import datetime
import os
import re
import shutil
import sys
import tempfile
import time

EXIT_WRONG_RESULTS = 3
EXIT_ERROR = 4

UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "k": 1024, "kib": 1024,
         "m": 1024 ** 2, "mib": 1024 ** 2, "g": 1024 ** 3, "gib": 1024 ** 3}


def parse_size(text):
    """'64MiB', '4KiB', '8' (bytes), as bench_common.h's parse_size."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).lower() not in UNITS:
        raise argparse.ArgumentTypeError(f"expected a byte size such as 64MiB, got '{text}'")
    return int(round(float(match.group(1)) * UNITS[match.group(2).lower()]))


def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch gloo-backend allreduce (f32 sum), one process per rank.")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--bytes", type=parse_size, help="one size (sets --min-bytes and --max-bytes)")
    p.add_argument("--min-bytes", type=parse_size, default=64 << 20)
    p.add_argument("--max-bytes", type=parse_size, default=64 << 20)
    p.add_argument("--step-factor", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank (torch.set_num_threads)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds, for the process group")
    args = p.parse_args(argv)
    if args.bytes is not None:
        args.min_bytes = args.max_bytes = args.bytes
    if args.nproc < 1 or args.iters < 1 or args.warmup < 0 or args.repeat < 1 or args.step_factor < 2:
        p.error("need --nproc >= 1, --iters >= 1, --warmup >= 0, --repeat >= 1, --step-factor >= 2")
    if args.min_bytes < 4 or args.max_bytes < args.min_bytes:
        p.error("need 4 <= --min-bytes <= --max-bytes")
    return args


def busbw_factor(nproc):
    return 2.0 * (nproc - 1) / nproc if nproc > 1 else 1.0


def print_table_header(title):
    print(f"#\n# {title}")
    print("# %12s %12s %6s %6s %5s %5s %4s %11s %8s %8s %8s" % (
        "size", "count", "type", "redop", "root", "iters", "rep", "time", "algbw", "busbw", "#wrong"))
    print("# %12s %12s %6s %6s %5s %5s %4s %11s %8s %8s %8s" % (
        "(B)", "(elements)", "", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""))


def print_measurement(nproc, count, iters, rep, time_us, wrong, extra):
    """One table row and one key=value line, formatted as bench_common.h's print_measurement."""
    nbytes = count * 4
    algbw = nbytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    busbw = algbw * busbw_factor(nproc)
    print("  %12d %12d %6s %6s %5d %5d %4d %11.2f %8.3f %8.3f %8d" % (
        nbytes, count, "f32", "sum", -1, iters, rep, time_us, algbw, busbw, wrong))
    line = (f"bench=torch collective=allreduce nproc={nproc} bytes={nbytes} count={count} dtype=f32 op=sum "
            f"root=-1 algorithm=process_group_gloo iters={iters} rep={rep} time_us={time_us:.2f} "
            f"algbw_gbps={algbw:.4f} busbw_gbps={busbw:.4f} wrong={wrong} transport=tcp")
    print(line + "".join(f" {k}={v}" for k, v in extra))
    sys.stdout.flush()


def sizes(args):
    size = args.min_bytes
    while size <= args.max_bytes:
        yield size
        size *= args.step_factor


def run_rank(rank, args, store_path):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=args.nproc,
                            timeout=datetime.timedelta(seconds=args.timeout))
    nproc = args.nproc
    extra = [("torch", torch.__version__), ("threads", str(args.threads)), ("transports", "all:tcp")]
    if rank == 0:
        print_table_header("allreduce (torch.distributed gloo backend, tcp 127.0.0.1)")
    total_wrong = 0
    for nbytes in sizes(args):
        count = nbytes // 4
        index = torch.arange(count, dtype=torch.int64)
        # Small integers, so the sum is exact in float in any order (tolerance 0),
        # the inputs of gloo-allreduce-bench.
        data = ((index * 7 + rank * 5) % 8).to(torch.float32)
        expected = torch.zeros(count, dtype=torch.float32)
        for r in range(nproc):
            expected += ((index * 7 + r * 5) % 8).to(torch.float32)
        dist.all_reduce(data)
        wrong = torch.tensor([float((data != expected).sum().item())], dtype=torch.float64)
        dist.all_reduce(wrong)
        wrong = int(wrong.item())
        if wrong and rank == 0:
            print(f"[rank {rank}] {wrong} wrong elements (all ranks) at {nbytes} bytes", file=sys.stderr)
        total_wrong += wrong
        data.zero_()
        del index, expected
        for _ in range(args.warmup):
            dist.all_reduce(data)
        for rep in range(args.repeat):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(args.iters):
                dist.all_reduce(data)
            slowest = torch.tensor([(time.perf_counter() - start) / args.iters], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            if rank == 0:
                print_measurement(nproc, count, args.iters, rep, slowest.item() * 1e6, wrong, extra)
    dist.barrier()
    dist.destroy_process_group()
    if total_wrong:
        sys.exit(EXIT_WRONG_RESULTS)


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.multiprocessing as mp

    store_dir = tempfile.mkdtemp(prefix="torch-allreduce-bench.")
    store_path = os.path.join(store_dir, "store")
    print(f"# torch_allreduce_bench nproc={args.nproc} bytes={args.min_bytes}..{args.max_bytes} "
          f"step_factor={args.step_factor} iters={args.iters} warmup={args.warmup} repeat={args.repeat} "
          f"threads={args.threads} timeout={args.timeout:g}s torch={torch.__version__} python={sys.executable} "
          f"GLOO_SOCKET_IFNAME={os.environ['GLOO_SOCKET_IFNAME']} rendezvous=FileStore({store_path})")
    sys.stdout.flush()
    try:
        mp.start_processes(run_rank, args=(args, store_path), nprocs=args.nproc, join=True, start_method="fork")
    except mp.ProcessExitedException as e:
        print(f"torch_allreduce_bench: rank {e.error_index} exited with code {e.exit_code}", file=sys.stderr)
        return EXIT_WRONG_RESULTS if e.exit_code == EXIT_WRONG_RESULTS else EXIT_ERROR
    except mp.ProcessRaisedException as e:
        print(f"torch_allreduce_bench: a rank failed:\n{e}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
