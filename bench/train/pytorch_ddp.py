#!/usr/bin/python3
"""The PyTorch DDP peer for Giant's data-parallel training throughput.

The GPT, initialisation, AdamW groups, clipping and data of
bench/train/pytorch_gpt.py (imported from it, not copied), trained with
torch.nn.parallel.DistributedDataParallel over the gloo backend on loopback.
It starts its own --nproc processes (torch.multiprocessing.spawn, MASTER_ADDR
127.0.0.1 and a free MASTER_PORT), each with --threads intra-op threads and
--batch sequences per step. Run it with Debian's python3-torch:

    /usr/bin/python3 bench/train/pytorch_ddp.py --nproc 2 --threads 1 --batch 8 \
        --steps 20 --warmup 1 --data examples/data/kjv.txt

Every rank builds the same weights (seed --seed) and reads its own windows of
the data (generator seeded with --seed + rank). DDP runs with its defaults
(bucket_cap_mb 25 unless --bucket-mb says otherwise, the built-in C++
allreduce, no comm hook) except broadcast_buffers=False: the only buffer is
the constant causal mask, and broadcasting it before every forward would be a
collective no trainer needs (it is also kept out of DDP's initial sync, since
gloo cannot broadcast bool tensors).

Output: one line per measured step from rank 0,
`impl=pytorch_ddp rank=0 step=N loss=... step_s=... comm_wait_s=...` (loss is
rank 0's own micro-batch loss), then one summary from rank 0:
`impl=pytorch_ddp nproc=P threads=T ... tokens_per_s_median=X step_s_median=Y
comm_wait_s_median=Z ...`, medians over the measured steps; tokens/s counts
every rank's tokens (nproc * batch * seq_len / rank 0's step time).

comm_wait_s is the time rank 0's backward spends blocked on gradient
reduction after its last gradient has been computed: from the moment autograd
hands DDP the last parameter gradient (a tensor hook on every parameter,
which fires just before DDP's own accumulate-grad hook) to the return of
loss.backward(), which DDP holds until every bucket's allreduce has finished
and its result has been copied back into .grad. It is the exposed part of the
communication; reduction hidden behind the rest of the backward is not in it.
"""

import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_gpt  # noqa: E402  (the single-process peer: same model, init, optimizer, data)


def parse_args(argv):
    """--nproc, --bucket-mb here; every other flag (and its checks) is pytorch_gpt.py's."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    own, rest = p.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        print(__doc__)
        print("flags of this script: --nproc P (processes, default 2), --bucket-mb M "
              "(DDP bucket_cap_mb, default 25); the others are pytorch_gpt.py's:\n")
    args = pytorch_gpt.parse_args(rest)
    if own.nproc < 1:
        sys.exit(f"pytorch_ddp.py: --nproc must be at least 1, got {own.nproc}")
    if own.bucket_mb <= 0:
        sys.exit(f"pytorch_ddp.py: --bucket-mb must be positive, got {own.bucket_mb}")
    args.nproc, args.bucket_mb = own.nproc, own.bucket_mb
    return args


def free_port():
    # Port 0 and read it back; the tiny window before gloo binds it is acceptable here.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LastGradClock:
    """Remembers when autograd produced the last parameter gradient of a backward."""

    def __init__(self, params):
        self.last = 0.0
        for p in params:
            p.register_hook(self._tick)

    def _tick(self, grad):
        self.last = time.perf_counter()
        return grad


def worker(rank, args):
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    try:
        train(rank, args)
    finally:
        dist.destroy_process_group()


def train(rank, args):
    torch.manual_seed(args.seed)  # the same weights on every rank (DDP also broadcasts rank 0's)
    # Batches below: each rank its own windows of the data, from seed + rank.
    vocab_padded = (args.vocab + args.vocab_pad - 1) // args.vocab_pad * args.vocab_pad
    ffn = args.ffn or 4 * args.hidden
    model = pytorch_gpt.GPT(vocab_padded, args.seq_len, args.layers, args.hidden, args.heads,
                            ffn, args.dropout)
    model.train()
    params = list(model.parameters())
    clock = LastGradClock(params)
    # gloo cannot broadcast bool tensors ("Invalid scalar type"), and the mask is the same on
    # every rank anyway: keep it out of DDP's initial sync.
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, ["causal_mask"])
    ddp = DistributedDataParallel(model, broadcast_buffers=False, bucket_cap_mb=args.bucket_mb)
    optimizer = pytorch_gpt.make_optimizer(model)
    batches = pytorch_gpt.Batches(argparse.Namespace(**{**vars(args), "seed": args.seed + rank}))
    tokens_per_step = args.nproc * args.batch * args.seq_len

    losses, step_seconds, comm_waits = [], [], []
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        inputs, targets = batches.next()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):  # --bf16: pytorch_gpt.py's
            loss = ddp(inputs, targets)
        loss.backward()
        backward_end = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        loss_value = loss.item()
        elapsed = time.perf_counter() - start
        comm_wait = max(0.0, backward_end - clock.last)
        losses.append(loss_value)
        if step > args.warmup:
            step_seconds.append(elapsed)
            comm_waits.append(comm_wait)
            if rank == 0:
                print(f"impl=pytorch_ddp rank=0 step={step} loss={loss_value:.4f} "
                      f"step_s={elapsed:.4f} comm_wait_s={comm_wait:.4f}", flush=True)

    if rank != 0:
        return
    step_s_median = statistics.median(step_seconds)
    tokens_per_s_median = statistics.median(tokens_per_step / s for s in step_seconds)
    n_params = sum(p.numel() for p in params)
    print(f"impl=pytorch_ddp nproc={args.nproc} threads={args.threads} layers={args.layers} "
          f"hidden={args.hidden} heads={args.heads} seq_len={args.seq_len} batch={args.batch} "
          f"global_batch={args.nproc * args.batch} steps={args.steps} "
          f"tokens_per_s_median={tokens_per_s_median:.1f} step_s_median={step_s_median:.4f} "
          f"comm_wait_s_median={statistics.median(comm_waits):.4f} "
          f"loss_first={losses[0]:.4f} loss_last={losses[-1]:.4f} "
          f"warmup={args.warmup} measured={len(step_seconds)} ffn={ffn} vocab={args.vocab} "
          f"vocab_padded={vocab_padded} dropout={args.dropout} params={n_params} "
          f"data={'file' if args.data else 'random'} backend=gloo bucket_mb={args.bucket_mb:g} "
          f"torch={torch.__version__}", flush=True)


def main(argv):
    args = parse_args(argv)
    if args.data is not None and not os.path.isfile(args.data):
        sys.exit(f"pytorch_ddp.py: --data: cannot read '{args.data}'")
    # Loopback only: the rendezvous and gloo's own sockets (which otherwise follow the hostname).
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    try:
        mp.spawn(worker, args=(args,), nprocs=args.nproc, join=True)
    except mp.ProcessRaisedException as e:
        sys.exit(f"pytorch_ddp.py: a rank failed:\n{e}")
    except mp.ProcessExitedException as e:
        sys.exit(f"pytorch_ddp.py: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
