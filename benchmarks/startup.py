"""Start-up: what a one-file run (pre-commit on one changed file) costs beyond Python and libcst.

    python benchmarks/startup.py [--runs 20]

Runs each command ``--runs`` times, interleaved, each in a fresh process, and prints the median
CPU time (user + system) of each: ``python -c pass``; ``python -c "import libcst"`` (the
reference: issue 16 asks a single small file for at most 1.3x it); ``trainlint --version``; a
file no rule can fire on (it never imports libcst); an 18-line training file. trainlint is run
through the console script next to this interpreter (or ``python -m trainlint`` when there is
none), with ``--no-cache``: what is timed is a check, not a cache hit. For stable figures, run
``python -m compileall trainlint`` first when ``PYTHONDONTWRITEBYTECODE`` is set: otherwise
every run compiles trainlint's modules again.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TRAINING = textwrap.dedent(
    """\
    import torch


    def train(model, loader, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            scheduler.step()


    if __name__ == "__main__":
        print("see train()")
    """
)
PLAIN = "import os\n\n\ndef home():\n    return os.path.expanduser('~')\n"


def _cpu(command, cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("trainlint")
    trainlint = [str(script)] if script.exists() else [sys.executable, "-m", "trainlint"]
    with tempfile.TemporaryDirectory(prefix="trainlint-startup-") as tmp:
        cwd = Path(tmp)
        (cwd / "train.py").write_text(TRAINING, encoding="utf-8")
        (cwd / "plain.py").write_text(PLAIN, encoding="utf-8")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import libcst": [sys.executable, "-c", "import libcst"],
            "trainlint --version": trainlint + ["--version"],
            "a file no rule can fire on": trainlint + ["--no-cache", "plain.py"],
            "an 18-line training file": trainlint + ["--no-cache", "train.py"],
        }
        times = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                times[name].append(_cpu(command, cwd))
    median = {name: statistics.median(values) for name, values in times.items()}
    start, reference = median["python -c pass"], median["import libcst"]
    print(f"median CPU seconds of {args.runs} run(s) each ({' '.join(trainlint)})")
    for name, seconds in median.items():
        print(f"{name:28s} {seconds * 1000:7.1f} ms  beyond Python's start {(seconds - start) * 1000:7.1f} ms  "
              f"/ import libcst {seconds / reference:5.2f}x")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: compile trainlint first (python -m compileall trainlint)")


if __name__ == "__main__":
    sys.exit(main())
