"""Reports in the CLI's JSON format, one per rank, and rank 0's merged summary.

Ranks never talk to each other for this: each writes its own file, and rank 0 reads the others'
files after its own run, waiting a bounded time. A collective call could hang when ranks diverge,
which is exactly when a training bug has been found.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..findings import FileError, Finding


def rank_and_world() -> Tuple[int, int]:
    """As torchrun (and torch.distributed.launch, SLURM wrappers, ...) set them."""
    return int(os.environ.get("RANK", "0") or 0), int(os.environ.get("WORLD_SIZE", "1") or 1)


def report_path(path: str, rank: Optional[int] = None) -> str:
    own_rank, world = rank_and_world()
    return f"{path}.rank{own_rank if rank is None else rank}" if world > 1 else path


def write_report(path: str, findings: Sequence[Finding], errors: Sequence[FileError] = ()) -> None:
    """Through the CLI's own JSON reporter; ``errors``: worker processes that died or went unchecked."""
    from ..engine import Report  # the static engine's modules: only loaded when a report is written
    from ..reporters.json import render

    # A worker's findings sort after the process's own on the same line, then by worker.
    ordered = sorted(findings, key=lambda f: (f.path, f.line, f.column, f.rule, -1 if f.worker is None else f.worker, f.message))
    write_atomically(path, render(Report(findings=ordered, errors=sorted(errors, key=lambda e: (e.path, e.worker or 0, e.message)))))


def write_atomically(path: str, text: str) -> None:
    """A reader (rank 0, a guarded parent) never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)


def read_findings(path: str) -> List[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["findings"]


def collect_ranks(path: str, world: int, since: float, timeout: float) -> Tuple[Dict[int, List[dict]], List[int]]:
    """Every rank's findings from ``path.rankN`` files written after ``since``, waiting at most
    ``timeout`` seconds for late ranks; also the ranks that never reported (crashed, hung, or on
    another node whose files this one cannot see)."""
    deadline = time.monotonic() + timeout
    found: Dict[int, List[dict]] = {}
    while True:
        for rank in range(world):
            if rank in found:
                continue
            candidate = report_path(path, rank)
            try:
                if os.stat(candidate).st_mtime >= since:
                    found[rank] = read_findings(candidate)
            except (OSError, ValueError, KeyError):
                pass  # not written yet (or being replaced): try again
        if len(found) == world or time.monotonic() >= deadline:
            return found, [r for r in range(world) if r not in found]
        time.sleep(0.1)


def merged_summary(by_rank: Dict[int, List[dict]], missing: List[int]) -> str:
    """One line per rule and source line, with the ranks it fired on."""
    ranks: Dict[Tuple[str, int, str, str], List[int]] = {}
    for rank, findings in sorted(by_rank.items()):
        for f in findings:
            ranks.setdefault((f["path"], f["line"], f["rule"], f["name"]), []).append(rank)
    total = len(ranks)
    lines = [f"trainlint: {total} training invariant finding{'s' if total != 1 else ''} across {len(by_rank)} rank(s)"]
    for (path, line, rule, name), on in sorted(ranks.items()):
        lines.append(f"  {path}:{line}:1: {rule} {name} (ranks {', '.join(map(str, on))})")
    if missing:
        lines.append(f"  no report from rank(s) {', '.join(map(str, missing))} in time")
    return "\n".join(lines) + "\n"
