"""Shared helpers for the command-line tests."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from trainlint.cli import main

CLIP_AFTER_STEP = textwrap.dedent(
    """\
    import torch
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    """
)
CLEAN = CLIP_AFTER_STEP.replace(
    "    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    optimizer.step()\n",
)
assert CLEAN != CLIP_AFTER_STEP
BOTH = CLIP_AFTER_STEP.replace("    optimizer.step()\n", "    scheduler.step()\n    optimizer.step()\n").replace(
    "for x, y", "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)\nfor x, y"
)


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def run_json(*args: str):
    result = run("--format", "json", *args)
    return result, json.loads(result.stdout)
