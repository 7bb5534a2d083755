"""Adversarial input shapes: how analysis time, memory and findings scale with the input (issue 16).

    python benchmarks/scaling.py [--quick] [--shape NAME ...] [--timeout S] [--mem-limit MIB]

For each shape and size N it generates one Python file and checks it the way
``trainlint --no-cache --jobs 1 FILE`` does (``engine.check_paths`` with the config found
upward from the file, no cache, one job), each case in a child process of its own with a
CPU-time limit (``--timeout``, and a wall-clock backstop), so a hang is reported as ``timeout``
and not a stall. Printed per case: lines, seconds of analysis (wall clock and CPU: on a shared
machine CPU seconds are the steadier figure), CPU seconds of a bare ``libcst.parse_module`` of
the same text (the floor, automatic garbage collection off as while the engine checks files),
the child's peak resident memory (and its peak after the parse floor, before the analysis:
imports, text and one libcst tree), expected and reported findings, file errors (e.g. "nesting
too deep to analyze") and flags: ``SLOW`` past 10 s (wall or CPU), ``MEM`` past 200 MiB peak,
``LOST`` when fewer findings than planted are reported. Per shape, least-squares fits of log
CPU seconds over the cases analyzed to the end: against log N (the exponent: 1 linear, 2
quadratic, ...) and against N (the factor per +1 of N: the nesting shapes grow exponentially).

Shapes (the expected findings hold for every N: each planted bug is on some path the program
runs; checked by hand at small N, where no bound of the engine is reached):
  ifs-clip          N ``if cfg.flag_i:`` blocks in one loop body after the step, each a clip
                    (TL101 each, +1 TL101)
  ifs-step-clip     N blocks, each ``optimizer.step(); clip`` (TL101 each, TL105 each, +1 TL101)
  ifs-zero-grad     N blocks between backward and step, each ``optimizer.zero_grad()`` (TL104
                    each, +1 TL101 after the step)
  ifs-scheduler     N blocks between backward and step, each ``scheduler.step()`` (TL102 each,
                    +1 TL101)
  nesting           depth D of alternating ``for``/``if`` around one training step (TL101)
  nesting-loops     depth D of nested ``for`` loops around one training step (TL101)
  nesting-first-pass  the same, each loop also testing ``if e_i == 0:`` (its first pass) (TL101)
  helpers           a chain of N functions, each calling the next, the last doing backward and
                    step; the clip after the call in the training loop (TL101 across the chain)
  helpers-local     the same chain, the last function doing backward, step and clip (TL101)
  big-file          ~N lines of training functions, each with a loop and a TL101 (N = 5k..50k)
  elifs             one loop body with an ``if``/``elif`` chain of N branches, each a
                    ``scheduler.step()`` before the step (TL102 each, +1 TL101)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

SLOW_S = 10.0
BIG_MIB = 200.0

Generated = Tuple[str, Dict[str, int]]  # source, expected finding count per rule

_HEAD = [
    "import torch",
    "",
    "",
    "def train(model, loader, cfg):",
    "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
    "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)",
    "    for x, y in loader:",
    "        optimizer.zero_grad()",
    "        loss = torch.nn.functional.mse_loss(model(x), y)",
    "        loss.backward()",
]
_CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"


def _ifs(n: int, block: List[str], before_step: bool) -> str:
    lines = list(_HEAD)
    blocks = []
    for i in range(n):
        blocks += [f"        if cfg.flag_{i}:"] + ["            " + b for b in block]
    tail = ["        optimizer.step()", "        " + _CLIP]
    lines += blocks + tail if before_step else tail + blocks
    return "\n".join(lines) + "\n"


def ifs_clip(n: int) -> Generated:
    return _ifs(n, [_CLIP], before_step=False), {"TL101": n + 1}


def ifs_step_clip(n: int) -> Generated:
    return _ifs(n, ["optimizer.step()", _CLIP], before_step=True), {"TL101": n + 1, "TL105": n}


def ifs_zero_grad(n: int) -> Generated:
    return _ifs(n, ["optimizer.zero_grad()"], before_step=True), {"TL104": n, "TL101": 1}


def ifs_scheduler(n: int) -> Generated:
    return _ifs(n, ["scheduler.step()"], before_step=True), {"TL102": n, "TL101": 1}


def _nested(depth: int, loops_only: bool, first_pass_tests: bool = False) -> str:
    lines = ["import torch", "", "", "def train(model, loader, cfg):",
             "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)"]
    indent = "    "
    for level in range(depth):
        if loops_only or level % 2 == 0:
            lines.append(f"{indent}for e_{level} in range(cfg.n_{level}):")
            if first_pass_tests:  # each pass counter tested: its first and later passes differ
                lines += [f"{indent}    if e_{level} == 0:", f"{indent}        print(e_{level})"]
        else:
            lines.append(f"{indent}if cfg.flag_{level}:")
        indent += "    "
    lines.append(f"{indent}for x, y in loader:")
    indent += "    "
    lines += [indent + s for s in (
        "optimizer.zero_grad()", "loss = torch.nn.functional.mse_loss(model(x), y)", "loss.backward()",
        "optimizer.step()", _CLIP)]
    return "\n".join(lines) + "\n"


def nesting(n: int) -> Generated:
    return _nested(n, loops_only=False), {"TL101": 1}


def nesting_loops(n: int) -> Generated:
    return _nested(n, loops_only=True), {"TL101": 1}


def nesting_first_pass(n: int) -> Generated:
    return _nested(n, loops_only=True, first_pass_tests=True), {"TL101": 1}


def _chain(n: int, local: bool) -> str:
    lines = ["import torch", ""]
    for i in range(1, n):
        lines += ["", f"def step_{i}(model, optimizer, x, y):", f"    return step_{i + 1}(model, optimizer, x, y)", ""]
    lines += ["", f"def step_{n}(model, optimizer, x, y):",
              "    optimizer.zero_grad()",
              "    loss = torch.nn.functional.mse_loss(model(x), y)",
              "    loss.backward()",
              "    optimizer.step()"]
    if local:
        lines.append("    " + _CLIP)
    lines += ["    return loss", "", "",
              "def train(model, loader):",
              "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
              "    for x, y in loader:",
              "        step_1(model, optimizer, x, y)"]
    if not local:
        lines.append("        " + _CLIP)
    return "\n".join(lines) + "\n"


def helpers(n: int) -> Generated:
    return _chain(n, local=False), {"TL101": 1}


def helpers_local(n: int) -> Generated:
    return _chain(n, local=True), {"TL101": 1}


_TRAIN_FUNCTION = textwrap.dedent(
    """\


    def loss_{i}(model, x, y):
        return torch.nn.functional.mse_loss(model(x), y)


    def train_{i}(model, loader, cfg):
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        for epoch in range(cfg.epochs):
            model.train()
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = loss_{i}(model, x, y)
                loss.backward()
                if cfg.log and step % 100 == 0:
                    print(epoch, step, loss.item())
                optimizer.step()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            model.eval()
    """
)


def big_file(n: int) -> Generated:
    per_function = _TRAIN_FUNCTION.count("\n")
    count = max(1, n // per_function)
    source = "import torch\n" + "".join(_TRAIN_FUNCTION.format(i=i) for i in range(count))
    return source, {"TL101": count}


def elifs(n: int) -> Generated:
    lines = list(_HEAD)
    for i in range(n):
        lines += [f"        {'if' if i == 0 else 'elif'} cfg.mode == {i}:", "            scheduler.step()"]
    lines += ["        optimizer.step()", "        " + _CLIP]
    return "\n".join(lines) + "\n", {"TL102": n, "TL101": 1}


# name: (generator, full sizes, quick sizes)
SHAPES: Dict[str, Tuple[Callable[[int], Generated], List[int], List[int]]] = {
    "ifs-clip": (ifs_clip, [10, 20, 40, 80, 160, 320], [4, 8]),
    "ifs-step-clip": (ifs_step_clip, [10, 20, 40, 80, 160, 320], [4, 8]),
    "ifs-zero-grad": (ifs_zero_grad, [10, 20, 40, 80, 160, 320], [4, 8]),
    "ifs-scheduler": (ifs_scheduler, [10, 20, 40, 80, 160, 320], [4, 8]),
    "nesting": (nesting, [6, 8, 10, 12, 14, 16, 18], [2, 4]),
    "nesting-loops": (nesting_loops, [6, 8, 10, 12, 14, 16, 18], [2, 4]),
    "nesting-first-pass": (nesting_first_pass, [6, 8, 10, 12, 14, 16, 18], [2, 4]),
    "helpers": (helpers, [2, 4, 8, 16, 32, 64, 128, 256, 512], [2, 4]),
    "helpers-local": (helpers_local, [2, 4, 8, 16, 32, 64, 128, 256, 512], [2, 4]),
    "big-file": (big_file, [5000, 10000, 20000, 50000], [200, 400]),
    "elifs": (elifs, [100, 200, 300, 400, 500], [10, 20]),
}


# ---------------------------------------------------------------------------- child process
def _rss_mib() -> float:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere


def _child(shape: str, n: int, mem_limit_mib: int, cpu_limit: float) -> None:
    """One case: print a JSON line with the parse floor, then one with the analysis. The analysis
    may use ``cpu_limit`` CPU seconds (then SIGXCPU ends the process)."""
    import resource

    if mem_limit_mib > 0:
        limit = mem_limit_mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import gc

    import libcst

    from trainlint.config import configs_for, resolve_rules
    from trainlint.engine import Settings, check_paths

    source, _ = SHAPES[shape][0](n)
    base = _rss_mib()
    gc.disable()  # as the engine checks files (trainlint/pacing.py): the floor under the same terms
    start = time.process_time()
    try:
        module = libcst.parse_module(source)
        parse = time.process_time() - start
    except RecursionError:
        parse = None
    module = None  # noqa: F841 - freed before the analysis
    gc.enable()
    gc.collect()
    print(json.dumps({"parse": parse, "parse_peak_mib": _rss_mib()}), flush=True)
    with tempfile.TemporaryDirectory(prefix="trainlint-scaling-") as tmp:
        path = Path(tmp) / f"{shape.replace('-', '_')}_{n}.py"
        path.write_text(source, encoding="utf-8")
        ((config, _),) = configs_for([str(path)])
        settings = Settings(rules=resolve_rules(config, None, []), config=config, cache=False, jobs=1,
                            respect_gitignore=False)
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(used.ru_utime + used.ru_stime + cpu_limit)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))
        start, cpu = time.perf_counter(), time.process_time()
        report = check_paths([str(path)], settings)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({
        "seconds": seconds, "cpu": cpu, "peak_mib": _rss_mib(), "base_mib": base,
        "findings": dict(Counter(f.rule for f in report.findings)),
        "errors": [e.message for e in report.errors],
        # what the analysis budget left out, where the engine reports it with the file
        "incomplete": [getattr(note, "message", str(note)) for note in getattr(report, "incomplete", None) or []],
    }), flush=True)


# ---------------------------------------------------------------------------- parent
def run_case(shape: str, n: int, timeout: float, mem_limit_mib: int) -> dict:
    """One case in a child process: ``timeout`` CPU seconds for the analysis (steady on a busy
    machine), and a wall-clock backstop of ten times that (plus start-up) for a child that sleeps."""
    source, expected = SHAPES[shape][0](n)
    row: dict = {"shape": shape, "n": n, "lines": source.count("\n"), "expected": expected, "status": "ok"}
    command = [sys.executable, os.path.abspath(__file__), "--child", shape, str(n), "--mem-limit", str(mem_limit_mib),
               "--timeout", str(timeout)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10 * timeout + 30)
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, code = "", None
        row["status"] = "timeout (wall clock)"
    row["wall"] = time.perf_counter() - start
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        row["status"], code = "timeout", None
    for line in out.splitlines():
        try:
            row.update(json.loads(line))
        except ValueError:
            continue
    if code not in (0, None):
        row["status"] = f"crashed (exit {code})"
        row["stderr"] = err.strip().splitlines()[-1:] if err.strip() else []
    return row


def _flags(row: dict) -> List[str]:
    flags = []
    if row["status"] != "ok":
        flags.append(row["status"].upper())
    if row.get("cpu") is not None and max(row["cpu"], row["seconds"]) > SLOW_S:
        flags.append("SLOW")
    if row.get("peak_mib") is not None and row["peak_mib"] > BIG_MIB:
        flags.append("MEM")
    if "findings" in row:
        lost = {r: c - row["findings"].get(r, 0) for r, c in row["expected"].items() if row["findings"].get(r, 0) < c}
        if lost:
            flags.append("LOST " + ",".join(f"{r}-{c}" for r, c in sorted(lost.items())))
    if row.get("incomplete"):
        flags.append(f"INCOMPLETE ({len(row['incomplete'])} noted)")
    if row.get("errors"):
        flags.append("ERROR: " + "; ".join(row["errors"]))
    return flags


def _count(counts: Optional[dict]) -> str:
    return "-" if counts is None else str(sum(counts.values()))


def _slope(points: List[Tuple[float, float]]) -> Optional[float]:
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def _completed(row: dict) -> bool:
    """Analyzed to the end: no timeout, no crash, no file error (e.g. nesting too deep)."""
    return bool(row.get("cpu")) and row["status"] == "ok" and not row.get("errors")


def fit_exponent(rows: List[dict]) -> Optional[float]:
    """Slope of log(CPU seconds) against log(N), least squares, over the completed cases: the
    power of N the time grows with."""
    return _slope([(math.log(r["n"]), math.log(r["cpu"])) for r in rows if _completed(r)])


def fit_factor(rows: List[dict]) -> Optional[float]:
    """exp of the slope of log(CPU seconds) against N: the factor per +1 of N, for exponential growth."""
    slope = _slope([(r["n"], math.log(r["cpu"])) for r in rows if _completed(r)])
    return None if slope is None else math.exp(slope)


HEADER = (f"{'shape':<14} {'N':>6} {'lines':>6} {'wall s':>8} {'cpu s':>8} {'parse s':>8} {'peak MiB':>9} {'parse MiB':>9} "
          f"{'expected':>8} {'reported':>8}  flags")


def _print_row(row: dict) -> None:
    seconds = f"{row['seconds']:.3f}" if row.get("seconds") is not None else row["status"]
    cpu = f"{row['cpu']:.3f}" if row.get("cpu") is not None else "-"
    parse = f"{row['parse']:.3f}" if row.get("parse") is not None else "-"
    peak = f"{row['peak_mib']:.0f}" if row.get("peak_mib") is not None else "-"
    parse_peak = f"{row['parse_peak_mib']:.0f}" if row.get("parse_peak_mib") is not None else "-"
    print(f"{row['shape']:<14} {row['n']:>6} {row['lines']:>6} {seconds:>8} {cpu:>8} {parse:>8} {peak:>9} {parse_peak:>9} "
          f"{_count(row['expected']):>8} {_count(row.get('findings')):>8}  {' '.join(_flags(row))}", flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (the test suite's run)")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only this shape (repeatable)")
    parser.add_argument("--sizes", help="comma-separated sizes instead of the shape's own")
    parser.add_argument("--timeout", type=float, default=60.0, help="CPU seconds per case's analysis (default 60)")
    parser.add_argument("--mem-limit", type=int, default=4096, help="address-space limit of a case in MiB (0: none)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--child", nargs=2, metavar=("SHAPE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), args.mem_limit, args.timeout)
        return 0
    shapes = args.shape or list(SHAPES)
    print(f"per case: timeout {args.timeout:g} CPU s; flags: SLOW > {SLOW_S:g} s, MEM > {BIG_MIB:g} MiB peak RSS, "
          "LOST fewer findings than planted")
    print(HEADER)
    rows: List[dict] = []
    for shape in shapes:
        _, full, quick = SHAPES[shape]
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (quick if args.quick else full)
        shape_rows = []
        for n in sizes:
            row = run_case(shape, n, args.timeout, args.mem_limit)
            _print_row(row)
            shape_rows.append(row)
        rows += shape_rows
    print()
    print(f"{'shape':<14} {'exponent':>8} {'x per +1':>8}  (least-squares fits of log CPU seconds, completed cases: "
          "against log N, the power of N; against N, the factor per +1 of N)")
    for shape in shapes:
        shape_rows = [r for r in rows if r["shape"] == shape]
        exponent, factor = fit_exponent(shape_rows), fit_factor(shape_rows)
        note = "  (cases that did not finish or ended in an error left out)" if not all(map(_completed, shape_rows)) else ""
        print(f"{shape:<14} {('%.2f' % exponent) if exponent is not None else '-':>8} "
              f"{('%.3f' % factor) if factor is not None else '-':>8}{note}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
