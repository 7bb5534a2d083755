"""Step time with and without the runtime guard, on CPU.

    python benchmarks/guard_overhead.py [--repeats 5] [--threads N] [--compile [BACKEND]] [--only-gpt]

Two workloads, each a full training step (zero_grad, forward, backward, clip, AdamW step, LR
scheduler step, a DataLoader batch): a tiny MLP, where the guard's fixed cost per step shows, and a
10M-parameter GPT on scaled_dot_product_attention, where the relative overhead matters. Each
figure is the median over ``--repeats`` timed runs (after a warm-up run), with and without
``trainlint.guard(mode="collect")``, interleaved so drift affects both alike; the overhead is the
median of the paired differences, printed with their range (the machine's noise).

The MLP runs 2000 steps: the guard checks the first ~110 in full and then samples the steady loop
(see trainlint/runtime/sampling.py), so its row is what such a run pays on average; the
``check_every_step`` rows pay for every step in full. The GPT's 12 steps are all checked in full.
``--compile`` adds the GPT under ``torch.compile`` (compiled once, in the warm-up runs): the guard
hands compiled code torch's own functions, so its overhead should be eager mode's.
benchmarks/guard_instructions.py counts the steady-state cost alone, in instructions.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import trainlint


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 8192, dim: int = 320, layers: int = 6, heads: int = 8, context: int = 64) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        return self.head(self.ln(self.blocks(x)))


def mlp_workload(steps: int):
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    data = TensorDataset(torch.randn(steps * 16, 32), torch.randint(0, 10, (steps * 16,)))
    return model, DataLoader(data, batch_size=16), lambda out, y: F.cross_entropy(out, y)


def gpt_workload(steps: int):
    model = GPT()
    tokens = torch.randint(0, 8192, (steps * 8, 65))
    data = TensorDataset(tokens[:, :-1], tokens[:, 1:])
    return model, DataLoader(data, batch_size=8), lambda out, y: F.cross_entropy(out.reshape(-1, out.size(-1)), y.reshape(-1))


def training(workload, steps: int, built=None):
    """The benchmarked loop over ``steps`` batches of ``workload``, ready to run: ``train(n)`` trains
    on the next ``n`` batches (all of them by default). ``built``: (model, module to call) reused
    from an earlier run, its weights reset: a compiled model is compiled once, not per run."""
    torch.manual_seed(0)
    model, loader, criterion = workload(steps)
    forward = model
    if built is not None:
        model, forward, initial = built
        model.load_state_dict(initial)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))

    batches = iter(loader)

    def train(n: int = steps):
        for _ in range(n):
            x, y = next(batches)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(forward(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()

    return train


def run(workload, steps: int, guarded: bool, ignore=None, every_step: bool = False, built=None) -> float:
    """Seconds per step of one run."""
    train = training(workload, steps, built)
    start = time.perf_counter()
    if guarded:
        with trainlint.guard(mode="collect", ignore=ignore, check_every_step=every_step) as g:
            train()
        assert not g.findings, g.findings
    else:
        train()
    return (time.perf_counter() - start) / steps


def compiled(workload, backend: str):
    """(model, its torch.compile'd module, initial weights) for ``run``'s ``built``."""
    torch.manual_seed(0)
    model = workload(1)[0]
    return model, torch.compile(model, backend=backend), {k: v.clone() for k, v in model.state_dict().items()}


def measure(name: str, workload, steps: int, repeats: int, ignore=None, every_step: bool = False,
            built=None) -> None:
    # warm-up: allocator, kernels, lazy imports; a compiled model compiles here, with and without
    # the guard (the guard's hooks must not make it compile again)
    run(workload, max(2, steps // 4), False, built=built)
    run(workload, max(2, steps // 4), True, ignore, every_step, built=built)
    plain, guarded = [], []
    for _ in range(repeats):
        plain.append(run(workload, steps, False, built=built))
        guarded.append(run(workload, steps, True, ignore, every_step, built=built))
    base, with_guard = statistics.median(plain), statistics.median(guarded)
    # The overhead is the median of the paired differences: each pair ran back to back, so slow
    # drift of the machine (frequency, other processes) cancels out of it.
    differences = sorted(g - p for p, g in zip(plain, guarded))
    overhead = statistics.median(differences)
    # The spread of the paired differences is the noise of the machine: an overhead inside it
    # is not distinguishable from zero.
    spread = f"[{100 * differences[0] / base:+.2f} .. {100 * differences[-1] / base:+.2f}] %"
    print(
        f"{name:<34} {base * 1e6:12.1f} us/step {with_guard * 1e6:12.1f} us/step "
        f"{overhead * 1e6:+10.1f} us/step {100 * overhead / base:+8.2f} %  pairs {spread}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--compile", metavar="BACKEND", nargs="?", const="inductor",
                        help="also the GPT under torch.compile (default backend: inductor)")
    parser.add_argument("--only-gpt", action="store_true", help="skip the MLP rows")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    params = sum(p.numel() for p in GPT().parameters())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats} runs")
    print(f"{'workload':<34} {'without guard':>20} {'with guard':>20} {'overhead':>18} {'':>10}")
    if not args.only_gpt:
        measure("tiny MLP", mlp_workload, steps=2000, repeats=args.repeats)
        measure("tiny MLP, check_every_step", mlp_workload, steps=2000, repeats=args.repeats, every_step=True)
        # TL810 reads the loss and the gradient norm every checked step (a device sync on GPU).
        measure("tiny MLP, every step, ignore=TL810", mlp_workload, steps=2000, repeats=args.repeats,
                ignore="TL810", every_step=True)
    measure(f"GPT {params / 1e6:.1f}M params", gpt_workload, steps=12, repeats=args.repeats)
    if args.compile:
        # The guard's hooks hand compiled code torch's own functions (trainlint/runtime/patches.py):
        # its overhead should match eager mode's.
        measure(f"GPT, torch.compile({args.compile})", gpt_workload, steps=12, repeats=args.repeats,
                built=compiled(gpt_workload, args.compile))


if __name__ == "__main__":
    main()
