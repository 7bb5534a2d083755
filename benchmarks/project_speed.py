"""Cross-module projects against single files: per-file time and peak memory.

    python benchmarks/project_speed.py [--files 200] [--fanout 3]

Generates a project of N modules where every module's training loop calls helpers of `fanout`
other modules (which the engine follows, see trainlint/static/project.py), and the same modules
each alone in a directory of its own (the imports then resolve to nothing: the single-file
cost). Prints seconds per file for both, their ratio, and the peak resident memory of a child
process checking the project. The bar (issue 13): the project no slower per file than single
files, memory bounded.
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

_MODULE = textwrap.dedent(
    """\
    import torch
    {imports}


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


def _module(i: int, n: int, fanout: int) -> str:
    others = [(i + k + 1) % n for k in range(fanout)]
    imports = "\n".join(f"from mod_{j} import clip_and_step_{j}, evaluate_{j}" for j in others)
    # the first neighbour's helper steps the optimizer; every neighbour's evaluation runs per epoch
    step_call = f"clip_and_step_{others[0]}(model, optimizer, scaler)"
    evals = "\n".join(f"        evaluate_{j}(model, loader)" for j in others)
    return _MODULE.format(i=i, imports=imports, step_call=step_call, evals=evals)


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
        project, alone = Path(tmp) / "project", Path(tmp) / "alone"
        project.mkdir()
        singles = []
        for i in range(args.files):
            text = _module(i, args.files, args.fanout)
            (project / f"mod_{i}.py").write_text(text, encoding="utf-8")
            own = alone / f"d{i}"
            own.mkdir(parents=True)
            (own / f"mod_{i}.py").write_text(text, encoding="utf-8")
            singles.append(own)
        (project / "pyproject.toml").write_text("", encoding="utf-8")
        start = time.perf_counter()
        whole = _check([project])
        single = _check(singles)
        per_project = whole["seconds"] / args.files
        per_single = single["seconds"] / args.files
        print(f"{args.files} modules, each calling into {args.fanout} others")
        print(f"project      {whole['seconds']:8.2f} s  {per_project * 1000:7.1f} ms/file  "
              f"{whole['findings']} findings  peak {whole['peak_mib']:.0f} MiB")
        print(f"single files {single['seconds']:8.2f} s  {per_single * 1000:7.1f} ms/file  "
              f"{single['findings']} findings  peak {single['peak_mib']:.0f} MiB")
        print(f"project / single per file: {per_project / per_single:.2f}x  (wall {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
