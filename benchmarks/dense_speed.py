"""Speed on repositories that are mostly training scripts, against the parse floor of the same files.

    python benchmarks/dense_speed.py [--clones DIR] [--top 5] [--rounds 5] [--list]

Which repositories: the development harness's clones (``benchmarks/real_world``: the commits that
``corpus.tsv`` and ``bugs.tsv`` pin, one clone per repository, the first listed; the validation
split stays frozen and is not used), ranked by **training files per 1,000 lines**: a training file
is a ``*.py`` file whose text has both a ``.backward(`` and a ``.step(`` call, lines are the
newlines of all the repository's ``*.py`` files (those ``trainlint`` would check). Only
repositories with at least two training files are ranked (a repository of training scripts,
not one script with a few helpers). The ``--top`` densest are timed.

How: in each round, for each repository, one fresh process parses every file with
``libcst.parse_module`` (the floor) and one runs ``trainlint`` cold with 1 job (no cache) on the
directory, back to back. Both processes import libcst and trainlint's analyzer before their
clock starts, so the ratio compares the work per file, not the fixed cost of loading modules
(``benchmarks/startup.py`` measures that). Prints each repository's median ratio over the rounds
and its spread: on a shared machine single runs drift.
"""
from __future__ import annotations

import argparse
import csv
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

from trainlint.files import discover

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "real_world"
_BACKWARD = re.compile(rb"\.backward\(")
_STEP = re.compile(rb"\.step\(")
MIN_TRAINING_FILES = 2

_FLOOR = """\
import json, sys, time
import libcst
files = sys.argv[1:]
start = time.perf_counter()
for name in files:
    try:
        libcst.parse_module(open(name, "rb").read().decode("utf-8", errors="replace"))
    except Exception:
        pass
print(json.dumps(time.perf_counter() - start))
"""

_COLD = """\
import json, sys, time
import libcst, trainlint.static.analyzer
from trainlint.config import Config, resolve_rules
from trainlint.engine import Settings, check_paths
settings = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=False, jobs=1, respect_gitignore=False)
start = time.perf_counter()
check_paths(sys.argv[1:], settings)
print(json.dumps(time.perf_counter() - start))
"""


def python_files(directory: Path) -> List[Path]:
    found = discover([str(directory)], directory, respect_gitignore=False).files
    return [path for path in found if path.suffix == ".py" and path.is_file()]


def development_clones(clones: Path) -> List[Path]:
    """One clone per repository of the development harness, at the first commit listed for it."""
    first = {}
    for table in ("corpus.tsv", "bugs.tsv"):
        with open(HARNESS / table, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                first.setdefault(row["repo"], f"{row['repo'].replace('/', '+')}@{row['commit'][:12]}")
    return [clones / name for name in first.values() if (clones / name).is_dir()]


def density(directory: Path) -> Tuple[float, int, int, int]:
    """(training files per 1,000 lines, training files, files, lines)."""
    lines = training = 0
    files = python_files(directory)
    for path in files:
        text = path.read_bytes()
        lines += text.count(b"\n")
        training += bool(_BACKWARD.search(text) and _STEP.search(text))
    return (1000 * training / lines if lines else 0.0), training, len(files), lines


def densest(clones: Path, top: int) -> List[Tuple[Path, Tuple[float, int, int, int]]]:
    ranked = [(clone, density(clone)) for clone in development_clones(clones)]
    ranked = [entry for entry in ranked if entry[1][1] >= MIN_TRAINING_FILES]
    ranked.sort(key=lambda entry: (-entry[1][0], entry[0].name))
    return ranked[:top]


def _seconds(program: str, args: List[str]) -> float:
    done = subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", default="/tmp/trainlint-real-world")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--list", action="store_true", help="print the ranking only")
    args = parser.parse_args()
    chosen = densest(Path(args.clones), args.top)
    for clone, (per_kloc, training, files, lines) in chosen:
        print(f"{clone.name:<55} {per_kloc:6.2f} training files/kloc ({training} of {files} files, {lines} lines)")
    if args.list:
        return
    ratios = {clone: [] for clone, _ in chosen}
    floors = {clone: [] for clone, _ in chosen}
    for _ in range(args.rounds):
        for clone, _ in chosen:
            floor = _seconds(_FLOOR, [str(path) for path in python_files(clone)])
            cold = _seconds(_COLD, [str(clone)])
            floors[clone].append(floor)
            ratios[clone].append(cold / floor)
    print(f"cold 1 job / parse floor, median of {args.rounds} rounds (min..max):")
    for clone, _ in chosen:
        got = ratios[clone]
        print(f"{clone.name:<55} {statistics.median(got):5.2f}x ({min(got):.2f}..{max(got):.2f})"
              f"  floor {statistics.median(floors[clone]):.2f} s")


if __name__ == "__main__":
    sys.exit(main())
