"""Static analysis speed against the parse floor.

    python benchmarks/static_speed.py DIR [DIR...] [--jobs N] [--skip-parse]

On the same ``*.py`` files it prints files, lines, seconds and files/s for:
  - bare ``libcst.parse_module`` (the floor: every file parsed, nothing else);
  - trainlint cold, 1 job (no cache: read, pre-filter, parse, analyze every file);
  - trainlint cold, N jobs;
  - trainlint warm (a populated content-hash cache);
  - TorchFix, if it is installed (``torchfix`` on PATH).
Run it e.g. on the installed torch package: ``python benchmarks/static_speed.py $(python -c
"import torch, os; print(os.path.dirname(torch.__file__))")``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcst

from trainlint.engine import default_jobs
from trainlint.files import discover


def _row(name: str, seconds: float, files: int) -> None:
    print(f"{name:<28} {seconds:9.2f} s {files / seconds:10.1f} files/s")


def _parse_floor(files) -> float:
    start = time.perf_counter()
    for path in files:
        try:
            libcst.parse_module(path.read_bytes().decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - the floor counts the attempt, whatever the file
            pass
    return time.perf_counter() - start


# Each trainlint run is timed in a fresh process, as a user runs it: a run in this process would
# inherit what earlier runs left (parsed project modules kept for reuse, a heap the garbage
# collector keeps scanning), which made the warm run here 14x slower than from the command line.
_CHILD = """\
import json, sys, time
from trainlint.config import Config, resolve_rules
from trainlint.engine import Settings, check_paths
jobs, cache, dirs = int(sys.argv[1]), sys.argv[2] == "cache", sys.argv[3:]
settings = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=cache, jobs=jobs, respect_gitignore=False)
start = time.perf_counter()
check_paths(dirs, settings)
print(json.dumps(time.perf_counter() - start))
"""


def _trainlint(dirs, jobs: int, cache: bool) -> float:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(jobs), "cache" if cache else "no-cache", *dirs],
                          capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--skip-parse", action="store_true", help="skip the (slow) parse floor")
    args = parser.parse_args()
    files = discover(args.dirs, Path.cwd(), respect_gitignore=False).files
    files = [f for f in files if f.suffix == ".py"]
    lines = sum(f.read_bytes().count(b"\n") for f in files)
    print(f"{len(files)} files, {lines} lines, {args.jobs} jobs available")
    cache = tempfile.mkdtemp(prefix="trainlint-bench-cache-")
    os.environ["TRAINLINT_CACHE_DIR"] = cache
    try:
        if not args.skip_parse:
            floor = _parse_floor(files)
            _row("libcst.parse_module", floor, len(files))
        cold = _trainlint(args.dirs, 1, cache=False)
        _row("trainlint cold, 1 job", cold, len(files))
        cold_n = _trainlint(args.dirs, args.jobs, cache=False)
        _row(f"trainlint cold, {args.jobs} jobs", cold_n, len(files))
        _trainlint(args.dirs, args.jobs, cache=True)  # populate the cache
        warm = _trainlint(args.dirs, 1, cache=True)
        _row("trainlint warm (cache)", warm, len(files))
        if shutil.which("torchfix"):
            start = time.perf_counter()
            subprocess.run(["torchfix", *args.dirs], capture_output=True)
            _row("torchfix", time.perf_counter() - start, len(files))
        if not args.skip_parse:
            print(f"cold 1 job / parse floor: {cold / floor:.2f}x")
        print(f"cold / warm: {cold / warm:.1f}x")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
