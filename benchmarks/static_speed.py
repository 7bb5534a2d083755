"""Static analysis speed against the parse floor.

    python benchmarks/static_speed.py DIR [--repeat N]

Prints files, lines, seconds and files/s for bare ``libcst.parse_module`` over every ``*.py`` under
DIR, and for trainlint's full per-file pipeline (read, decode, pre-filter, parse, analyze) over the
same files, plus the ratio. Run it on e.g. the installed torch's ``torch/optim`` and
``torch/nn/modules``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import libcst

from trainlint.catalog import load_catalog
from trainlint.static.analyzer import AnalysisError, analyze


def _files(roots):
    files = []
    for root in roots:
        root = Path(root)
        files += [root] if root.is_file() else sorted(root.rglob("*.py"))
    return files


def _time(fn, files, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for path in files:
            fn(path)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = _files(args.dirs)
    sources = {p: p.read_text(encoding="utf-8", errors="replace") for p in files}
    lines = sum(s.count("\n") for s in sources.values())
    rules = frozenset(r.id for r in load_catalog().values() if not r.opt_in)

    def parse_only(path):
        libcst.parse_module(path.read_bytes().decode("utf-8", errors="replace"))

    def trainlint_file(path):
        try:
            analyze(path.read_bytes().decode("utf-8", errors="replace"), rules)
        except AnalysisError:
            pass

    parse_s = _time(parse_only, files, args.repeat)
    lint_s = _time(trainlint_file, files, args.repeat)
    print(f"{len(files)} files, {lines} lines (best of {args.repeat})")
    print(f"{'libcst.parse_module':<22} {parse_s:8.3f} s  {len(files) / parse_s:9.1f} files/s")
    print(f"{'trainlint':<22} {lint_s:8.3f} s  {len(files) / lint_s:9.1f} files/s")
    print(f"ratio trainlint/parse: {lint_s / parse_s:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
