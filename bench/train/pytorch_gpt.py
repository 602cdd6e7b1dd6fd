#!/usr/bin/python3
"""The fixed PyTorch peer for Giant's single-process training throughput.

The same GPT as Giant's C++ one (src/giant/models), trained the same way, so
tokens/s can be compared side by side. Run it with Debian's python3-torch:

    /usr/bin/python3 bench/train/pytorch_gpt.py --threads 1 --steps 30 --warmup 5

Model: wte [V, h] (V = --vocab rounded up to a multiple of --vocab-pad) and a
learned position embedding wpe [seq, h]; x = dropout(wte[idx] + wpe[pos]);
L pre-LayerNorm blocks
    x = x + dropout(proj(attn(ln1(x))))
    x = x + dropout(fc2(gelu(fc1(ln2(x)))))
with causal multi-head attention (one qkv Linear, scale 1/sqrt(head_dim),
masked_fill of the upper triangle with -inf, softmax, dropout) and exact (erf)
GELU; final LayerNorm; logits = x @ wte^T (tied, no bias); cross-entropy.
Init: N(0, 0.02) for Linear and Embedding weights, N(0, 0.02/sqrt(2L)) for
proj and fc2 weights, zero biases, LayerNorm weight 1 and bias 0.
AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8), weight decay 0.1 on 2-D weights
only (embeddings included; LayerNorm parameters and biases excluded),
clip_grad_norm_(1.0). One step: zero_grad(set_to_none=True), forward,
backward, clip, optimizer.step().

Steps: --steps in all, the first --warmup of them unmeasured. One line per
measured step, `impl=pytorch step=N loss=... step_s=...`, then one summary:
`impl=pytorch threads=T ... tokens_per_s_median=X step_s_median=Y
loss_first=.. loss_last=..`, medians over the measured steps. step_s covers
the whole iteration, fetching the batch included, as a trainer's would.
loss_first is step 1's loss (the untrained model), loss_last the last step's.

--bf16 runs the forward (and so the backward) under PyTorch's CPU autocast
in bfloat16, the way a PyTorch user trains in mixed precision on a CPU: the
weights, gradients and AdamW stay float32; matrix products run in bfloat16;
autocast keeps LayerNorm, softmax and the loss in float32.

Data: --data PATH reads the file as byte tokens (ids = byte values) and takes
windows of seq+1 bytes at uniformly random offsets from a generator seeded
with --seed; without it, uniformly random tokens in [0, vocab).
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=0, help="MLP width; 0 means 4 * hidden")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--vocab-pad", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=30, help="all steps, warmup included")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured steps at the start")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--data", default=None, help="a text file read as byte tokens")
    p.add_argument("--bf16", action="store_true",
                   help="forward under torch.autocast('cpu', dtype=torch.bfloat16) (fp32 weights and AdamW)")
    args = p.parse_args(argv)
    # Bad input fails before any work, naming the flag.
    for name in ("layers", "hidden", "heads", "seq_len", "vocab", "vocab_pad", "batch", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.ffn < 0:
        p.error(f"--ffn must be >= 0, got {args.ffn}")
    if args.hidden % args.heads != 0:
        p.error(f"--heads {args.heads} must divide --hidden {args.hidden}")
    if not 0 <= args.warmup < args.steps:
        p.error(f"need 0 <= --warmup < --steps, got warmup {args.warmup} and steps {args.steps}")
    if not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.data is not None and args.vocab < 256:
        p.error(f"--data gives byte tokens, which need --vocab >= 256, got {args.vocab}")
    return args


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=True)
        self.proj = nn.Linear(hidden, hidden, bias=True)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc1 = nn.Linear(hidden, ffn, bias=True)
        self.fc2 = nn.Linear(ffn, hidden, bias=True)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)

    def attention(self, x, causal_mask):
        b, s, h = x.shape
        head_dim = h // self.heads
        q, k, v = self.qkv(x).split(h, dim=2)
        q = q.view(b, s, self.heads, head_dim).transpose(1, 2)  # [B, heads, s, head_dim]
        k = k.view(b, s, self.heads, head_dim).transpose(1, 2)
        v = v.view(b, s, self.heads, head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        att = att.masked_fill(causal_mask[:s, :s], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = att @ v
        return y.transpose(1, 2).contiguous().view(b, s, h)

    def forward(self, x, causal_mask):
        x = x + self.resid_drop(self.proj(self.attention(self.ln1(x), causal_mask)))
        x = x + self.resid_drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_padded, seq_len, layers, hidden, heads, ffn, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab_padded, hidden)
        self.wpe = nn.Embedding(seq_len, hidden)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        # True above the diagonal: the future positions a token may not see.
        mask = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)
        self.init_weights(layers)

    def init_weights(self, layers):
        residual_std = 0.02 / math.sqrt(2 * layers)  # proj and fc2 feed the residual stream
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            nn.init.normal_(block.proj.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.fc2.weight, mean=0.0, std=residual_std)

    def forward(self, idx, targets):
        s = idx.shape[1]
        pos = torch.arange(s, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x, self.causal_mask)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # tied LM head, no bias
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def make_optimizer(model, lr=3e-4, weight_decay=0.1):
    # Decay only 2-D weights (Linear and Embedding); LayerNorm parameters and biases are 1-D.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


class Batches:
    """Batches of (inputs, targets), each [batch, seq_len] int64, targets shifted by one."""

    def __init__(self, args):
        self.batch, self.seq_len, self.vocab = args.batch, args.seq_len, args.vocab
        self.generator = torch.Generator().manual_seed(args.seed)
        self.tokens = None
        if args.data is not None:
            try:
                with open(args.data, "rb") as f:
                    raw = f.read()
            except OSError as e:
                sys.exit(f"pytorch_gpt.py: --data: cannot read '{args.data}': {e.strerror}")
            if len(raw) < self.seq_len + 1:
                sys.exit(f"pytorch_gpt.py: --seq-len {self.seq_len} is larger than the data allows: "
                         f"'{args.data}' has {len(raw)} bytes, needs at least {self.seq_len + 1}")
            self.tokens = torch.tensor(list(raw), dtype=torch.int64)

    def next(self):
        if self.tokens is None:
            window = torch.randint(0, self.vocab, (self.batch, self.seq_len + 1),
                                   generator=self.generator)
        else:
            starts = torch.randint(0, self.tokens.numel() - self.seq_len, (self.batch,),
                                   generator=self.generator)
            offsets = torch.arange(self.seq_len + 1)
            window = self.tokens[starts[:, None] + offsets[None, :]]
        return window[:, :-1].contiguous(), window[:, 1:].contiguous()


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)

    vocab_padded = (args.vocab + args.vocab_pad - 1) // args.vocab_pad * args.vocab_pad
    ffn = args.ffn or 4 * args.hidden
    model = GPT(vocab_padded, args.seq_len, args.layers, args.hidden, args.heads, ffn, args.dropout)
    model.train()
    optimizer = make_optimizer(model)
    batches = Batches(args)
    params = list(model.parameters())
    tokens_per_step = args.batch * args.seq_len

    losses, step_seconds = [], []
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        inputs, targets = batches.next()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        loss_value = loss.item()
        elapsed = time.perf_counter() - start
        losses.append(loss_value)
        if step > args.warmup:
            step_seconds.append(elapsed)
            print(f"impl=pytorch step={step} loss={loss_value:.4f} step_s={elapsed:.4f}", flush=True)

    step_s_median = statistics.median(step_seconds)
    tokens_per_s_median = statistics.median(tokens_per_step / s for s in step_seconds)
    n_params = sum(p.numel() for p in params)
    print(f"impl=pytorch threads={args.threads} layers={args.layers} hidden={args.hidden} "
          f"heads={args.heads} seq_len={args.seq_len} batch={args.batch} steps={args.steps} "
          f"tokens_per_s_median={tokens_per_s_median:.1f} step_s_median={step_s_median:.4f} "
          f"loss_first={losses[0]:.4f} loss_last={losses[-1]:.4f} "
          f"warmup={args.warmup} measured={len(step_seconds)} ffn={ffn} vocab={args.vocab} "
          f"vocab_padded={vocab_padded} dropout={args.dropout} params={n_params} "
          f"data={'file' if args.data else 'random'} precision={'bf16' if args.bf16 else 'fp32'} "
          f"torch={torch.__version__}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
