"""Run every reference program under the guard, clean and with each bug switched on, and check
that the guard reports exactly the bug's rules, at lines of the program itself, on every rank.

    python runtime_checks/check.py [--device cpu|cuda] [--program gpt.py ...]

Each program lists its bugs in ``BUGS`` (``--bug`` name -> the rule ids the guard must report);
its clean run must report nothing. Distributed programs run on 2 processes under torchrun. Prints
one line per run and exits 1 if any run disagrees.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

HERE = Path(__file__).resolve().parent
PROCESSES = {"gpt.py": 1, "amp.py": 1, "manual_sgd.py": 1, "ddp_accum.py": 2, "fsdp.py": 2}
TIMEOUT_S = 300


@dataclass(frozen=True)
class Variant:
    program: str
    bug: Optional[str]  # None: the clean run
    expected: Tuple[str, ...]  # rule ids the guard must report, and no others
    processes: int

    @property
    def name(self) -> str:
        return f"{self.program}:{self.bug or 'clean'}"


@dataclass
class Outcome:
    variant: Variant
    ok: bool
    found: List[Tuple[int, str, int]]  # (rank, rule, line)
    seconds: float
    problem: str = ""


def bugs_of(program: Path) -> dict:
    """The program's BUGS table, read from its source: the program stays the one place it is written."""
    for node in ast.parse(program.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BUGS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{program.name} has no BUGS table")


def variants(programs: Optional[List[str]] = None) -> List[Variant]:
    result = []
    for program in programs or list(PROCESSES):
        processes = PROCESSES[program]
        result.append(Variant(program, None, (), processes))
        for bug, rules in bugs_of(HERE / program).items():
            result.append(Variant(program, bug, tuple(rules), processes))
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(variant: Variant, device: str, report: Path) -> List[str]:
    guard = ["-m", "trainlint", "run", "--mode", "collect", "--report", str(report)]
    script = [str(HERE / variant.program), "--device", device] + (["--bug", variant.bug] if variant.bug else [])
    if variant.processes == 1:
        return [sys.executable] + guard + script
    launcher = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={variant.processes}",
                f"--master_port={free_port()}"]
    return launcher + guard + script


def run_variant(variant: Variant, device: str, workdir: Path) -> Outcome:
    report = workdir / f"{variant.program}-{variant.bug or 'clean'}.json"
    env = dict(os.environ)
    if variant.processes > 1:
        env["OMP_NUM_THREADS"] = "1"  # one thread per process, or gloo crawls on small machines
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)  # DETAIL segfaults DDP on gloo CPU
    start = time.perf_counter()
    result = subprocess.run(command(variant, device, report), env=env, capture_output=True, text=True,
                            timeout=TIMEOUT_S, cwd=workdir)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        return Outcome(variant, False, [], seconds, f"exit {result.returncode}:\n{result.stderr[-3000:]}")
    reports = [report] if variant.processes == 1 else [Path(f"{report}.rank{r}") for r in range(variant.processes)]
    found, problems = [], []
    for rank, path in enumerate(reports):
        findings = json.loads(path.read_text(encoding="utf-8"))["findings"]
        found += [(rank, f["rule"], f["line"]) for f in findings]
        rules = sorted({f["rule"] for f in findings})
        if rules != sorted(variant.expected):
            problems.append(f"rank {rank} reported {rules or 'nothing'}, expected {list(variant.expected) or 'nothing'}")
        elsewhere = sorted({f["path"] for f in findings if Path(f["path"]).name != variant.program})
        if elsewhere:
            problems.append(f"rank {rank} reported findings outside the program: {elsewhere}")
    return Outcome(variant, not problems, found, seconds, "; ".join(problems))


def describe(outcome: Outcome) -> str:
    lines = sorted({f"{rule}@{line}" for _, rule, line in outcome.found})
    status = "ok" if outcome.ok else "FAIL"
    text = f"{status:<5}{outcome.variant.name:<36}{' '.join(lines) or '-':<28}{outcome.seconds:6.1f} s"
    return text + (f"\n     {outcome.problem}" if outcome.problem else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--program", action="append", choices=sorted(PROCESSES), help="default: all")
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="trainlint-runtime-checks-") as workdir:
        for variant in variants(args.program):
            outcome = run_variant(variant, args.device, Path(workdir))
            failures += not outcome.ok
            print(describe(outcome), flush=True)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
