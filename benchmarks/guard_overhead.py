"""Step time with and without the runtime guard, on CPU.

    python benchmarks/guard_overhead.py [--repeats 5] [--threads N] [--compile [BACKEND]] [--only-gpt]
    python benchmarks/guard_overhead.py --compiled-step [BACKEND] [--repeats 5] [--threads N] [--steps 150]

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

``--compiled-step`` measures, instead, a whole program that compiles part of its step: a small GPT
(SDPA) compiled, trained by a compiled function that calls cross_entropy, backward (a graph
break), clip_grad_norm_, the optimizer step and zero_grad, with the DataLoader and the LR schedule
eager. Each run is a fresh interpreter, compilation included (inductor's cache is warmed by the
first two runs); the figure is the CPU time (user + system) of the whole process, with and without
``trainlint.guard()`` around the training loop, as the median of the paired differences. It also
prints what dynamo did in each (graphs, graph breaks, recompiles: the guard must change none) and
whether the final weights are bitwise equal.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
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


def compiled_step_program(guarded: bool, backend: str, steps: int) -> None:
    """One run of the ``--compiled-step`` program (in its own interpreter): prints dynamo's counts
    and a digest of the final weights as JSON."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    vocab = 2048
    model = GPT(vocab=vocab, dim=64, layers=2, heads=4, context=64)
    tokens = torch.randint(0, vocab, (steps * 8, 65))
    loader = DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:]), batch_size=8)
    forward = torch.compile(model, backend=backend)
    # A tensor learning rate: the schedule changes it without recompiling the optimizer step.
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))

    @torch.compile(backend=backend)
    def train_step(x, y):
        loss = F.cross_entropy(forward(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def train() -> None:
        for x, y in loader:
            train_step(x, y)
            scheduler.step()

    if guarded:
        with trainlint.guard(mode="collect") as g:
            train()
        assert not g.findings, g.findings
    else:
        train()
    weights = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print(json.dumps({"graphs": counters["stats"]["unique_graphs"], "breaks": sum(counters["graph_break"].values()),
                      "weights": weights}))


def _compiled_step_run(guarded: bool, backend: str, steps: int, threads) -> dict:
    """A fresh interpreter running the program: its CPU seconds, dynamo's counts, the weights."""
    command = [sys.executable, os.path.abspath(__file__), "--compiled-step-child", "guard" if guarded else "plain",
               "--compiled-step", backend, "--steps", str(steps)] + (["--threads", str(threads)] if threads else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, TORCH_LOGS="recompiles"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(done.stderr)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["recompiles"] = done.stderr.count("Recompiling function")
    figures["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return figures


def measure_compiled_step(backend: str, steps: int, repeats: int, threads) -> None:
    # warm-up: inductor's compiled code lands in its cache, with and without the guard
    runs = [_compiled_step_run(False, backend, steps, threads), _compiled_step_run(True, backend, steps, threads)]
    plain, guarded = [], []
    for _ in range(repeats):
        plain.append(_compiled_step_run(False, backend, steps, threads))
        guarded.append(_compiled_step_run(True, backend, steps, threads))
    base = statistics.median(r["cpu"] for r in plain)
    differences = sorted(g["cpu"] - p["cpu"] for p, g in zip(plain, guarded))
    overhead = statistics.median(differences)
    spread = f"[{100 * differences[0] / base:+.2f} .. {100 * differences[-1] / base:+.2f}] %"
    print(f"{'compiled step (' + backend + ')':<34} {base:10.2f} s CPU {statistics.median(r['cpu'] for r in guarded):10.2f} s CPU "
          f"{overhead:+10.2f} s {100 * overhead / base:+8.2f} %  pairs {spread}")
    for name, done in (("without guard", runs[0::2] + plain), ("with guard", runs[1::2] + guarded)):
        counts = sorted({(r["graphs"], r["breaks"], r["recompiles"]) for r in done})
        print(f"  {name}: graphs, graph breaks, recompiles per run {', '.join(map(str, counts))}")
    same = len({r["weights"] for r in runs + plain + guarded}) == 1
    print(f"  final weights bitwise equal in every run: {'yes' if same else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--compile", metavar="BACKEND", nargs="?", const="inductor",
                        help="also the GPT under torch.compile (default backend: inductor)")
    parser.add_argument("--only-gpt", action="store_true", help="skip the MLP rows")
    parser.add_argument("--compiled-step", metavar="BACKEND", nargs="?", const="inductor",
                        help="only the program that compiles its train step (default backend: inductor)")
    parser.add_argument("--steps", type=int, default=150, help="--compiled-step: training steps per run")
    parser.add_argument("--compiled-step-child", choices=("plain", "guard"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.compiled_step_child:
        compiled_step_program(args.compiled_step_child == "guard", args.compiled_step, args.steps)
        return
    if args.compiled_step:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.steps} steps per run, "
              f"median of {args.repeats} paired runs, each in a fresh interpreter")
        print(f"{'workload':<34} {'without guard':>16} {'with guard':>16} {'overhead':>14}")
        measure_compiled_step(args.compiled_step, args.steps, args.repeats, args.threads)
        return
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
