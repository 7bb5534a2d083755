"""The guard's fixed cost per training step in CPU instructions, counted by valgrind.

    python benchmarks/guard_instructions.py [--steps 200] [--every-step]

Wall-clock overhead on a shared machine moves by tens of microseconds from run to run (see the
pairs range that guard_overhead.py prints), which is as large as the cost being tracked. The number
of instructions a step executes does not: it is the same on every run. This runs the tiny-MLP step
of guard_overhead.py (zero_grad, forward, cross_entropy, backward, clip, AdamW step, LR scheduler
step, a DataLoader batch) under callgrind, counting only the timed steps, without and with
``trainlint.guard(mode="collect")``, and prints instructions per step and the difference.

The timed steps follow 300 warm-up steps, after which the guard samples the steady loop (see
trainlint/runtime/sampling.py): the figure is its steady-state cost, sampled cycles included when
``--steps`` spans some (about one step in 50). ``--every-step`` counts the guard checking every step
(``check_every_step=True``), the cost of the first ~110 steps of every run.

Needs valgrind on PATH; the two runs take a few minutes together.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

_TOTALS = re.compile(rb"^totals:\s+(\d+)", re.MULTILINE)


WARM_UP = 300


def child(guarded: bool, steps: int, every_step: bool) -> None:
    """Runs inside valgrind, started with instrumentation off: counts only the timed steps."""
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from guard_overhead import mlp_workload, training

    import trainlint

    torch.set_num_threads(1)
    train = training(mlp_workload, WARM_UP + steps)

    def control(*args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)

    guard = trainlint.guard(mode="collect", check_every_step=every_step) if guarded else None
    if guard is not None:
        guard.__enter__()
    train(WARM_UP)  # lazy imports, the guard's first sight of every call site, its learning steps
    control("--instr=on")
    train(steps)
    control("--dump=timed")
    control("--instr=off")
    if guard is not None:
        guard.__exit__(None, None, None)
        assert not guard.findings, guard.findings


def count(guarded: bool, steps: int, every_step: bool, workdir: str) -> int:
    """Instructions of ``steps`` timed steps."""
    out = os.path.join(workdir, f"callgrind.{'guarded' if guarded else 'plain'}")
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         sys.executable, os.path.abspath(__file__), "--child", "guarded" if guarded else "plain", "--steps", str(steps),
         *(["--every-step"] if every_step else [])],
        check=True, capture_output=True,
    )
    dumps = [name for name in os.listdir(workdir) if name.startswith(os.path.basename(out) + ".")]
    if len(dumps) != 1:
        raise RuntimeError(f"expected one dump of the timed steps, found {dumps}")
    with open(os.path.join(workdir, dumps[0]), "rb") as dump:
        return int(_TOTALS.search(dump.read()).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every-step", action="store_true", help="the guard checks every step")
    parser.add_argument("--child", choices=("plain", "guarded"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child == "guarded", args.steps, args.every_step)
        return
    if shutil.which("valgrind") is None:
        sys.exit("guard_instructions.py needs valgrind (apt install valgrind)")
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(2) as pool:
        plain, guarded = pool.map(lambda g: count(g, args.steps, args.every_step, workdir), (False, True))
    checked = "every step checked" if args.every_step else "steady loop sampled"
    print(f"tiny MLP step, {args.steps} steps after {WARM_UP} counted by callgrind ({checked})")
    print(f"{'without guard':>16} {'with guard':>16} {'guard':>16}")
    print(f"{plain / args.steps:16,.0f} {guarded / args.steps:16,.0f} {(guarded - plain) / args.steps:+16,.0f}"
          "  instructions/step")


if __name__ == "__main__":
    main()
