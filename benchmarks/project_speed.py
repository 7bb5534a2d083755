"""Cross-module projects against single files: per-file time and peak memory.

    python benchmarks/project_speed.py [--files 200] [--fanout 3]

Generates a project of N modules where every module's training loop calls helpers of `fanout`
other modules (which the engine follows, see trainlint/static/project.py), and checks it against
the same code as single files, two ways:

- **self-contained**: each module in a directory of its own with the helpers it calls defined
  in the file itself, so the single-file check follows the same calls through the same bodies:
  the same analysis, without a project. This isolates what the project machinery costs (finding
  and parsing other modules, summaries shared between the files that call them).
- **isolated**: each module alone, its imports resolving to nothing: the calls into other modules
  are not followed at all (they are unknown calls the rules abstain around), so this check does
  less analysis than the project one.

Prints seconds per file for each, the ratios, and the peak resident memory of a child process
checking the project. The bar (issue 13): the project no slower per file than single files,
memory bounded.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_HELPERS = textwrap.dedent(
    """\


    def clip_and_step_{i}(model, optimizer, scaler):
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()


    def evaluate_{i}(model, loader):
        model.eval()
        with torch.no_grad():
            total = sum(float(model(x).sum()) for x, _ in loader)
        model.train()
        return total
    """
)

_TRAIN = textwrap.dedent(
    """\


    def train_{i}(model, loader, optimizer, scaler, epochs):
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs * len(loader))
        for epoch in range(epochs):
            for step, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                scaler.scale(loss).backward()
                {step_call}
                scheduler.step()
            evaluate_{i}(model, loader)
    {evals}
    """
)


def _module(i: int, n: int, fanout: int, self_contained: bool = False) -> str:
    """Module ``i``: its helpers and a training loop that calls helpers of ``fanout`` other
    modules, imported from them or (``self_contained``) defined in this file too."""
    others = [(i + k + 1) % n for k in range(fanout)]
    head = "import torch\n"
    if not self_contained:
        head += "".join(f"from mod_{j} import clip_and_step_{j}, evaluate_{j}\n" for j in others)
    # the first neighbour's helper steps the optimizer; every neighbour's evaluation runs per epoch
    step_call = f"clip_and_step_{others[0]}(model, optimizer, scaler)"
    evals = "\n".join(f"        evaluate_{j}(model, loader)" for j in others)
    helpers = [i] + (others if self_contained else [])
    return head + "".join(_HELPERS.format(i=j) for j in helpers) + _TRAIN.format(i=i, step_call=step_call, evals=evals)


_CHILD = textwrap.dedent(
    """\
    import json, resource, sys, time
    from trainlint.config import Config, resolve_rules
    from trainlint.engine import Settings, check_paths
    settings = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=False, jobs=1,
                        respect_gitignore=False)
    start = time.perf_counter()
    report = check_paths(sys.argv[1:], settings)
    print(json.dumps({"seconds": time.perf_counter() - start, "findings": len(report.findings),
                      "errors": len(report.errors),
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    """
)


def _check(paths) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, *map(str, paths)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--fanout", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainlint-project-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        singles: dict = {"self-contained": [], "isolated": []}
        for i in range(args.files):
            (project / f"mod_{i}.py").write_text(_module(i, args.files, args.fanout), encoding="utf-8")
            for kind, self_contained in (("self-contained", True), ("isolated", False)):
                own = Path(tmp) / kind / f"d{i}"
                own.mkdir(parents=True)
                (own / f"mod_{i}.py").write_text(_module(i, args.files, args.fanout, self_contained), encoding="utf-8")
                singles[kind].append(own)
        (project / "pyproject.toml").write_text("", encoding="utf-8")
        start = time.perf_counter()
        runs = {"project": _check([project])}
        runs.update((f"single, {kind}", _check(paths)) for kind, paths in singles.items())
        print(f"{args.files} modules, each calling into {args.fanout} others")
        per_file = {name: run["seconds"] / args.files for name, run in runs.items()}
        for name, run in runs.items():
            print(f"{name:24s} {run['seconds']:8.2f} s  {per_file[name] * 1000:7.1f} ms/file  "
                  f"{run['findings']} findings  peak {run['peak_mib']:.0f} MiB")
        for kind in singles:
            print(f"project / single ({kind}) per file: {per_file['project'] / per_file[f'single, {kind}']:.2f}x")
        print(f"(wall {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
