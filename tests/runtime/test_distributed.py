"""Two-process gloo runs under `trainlint run` via torchrun: DDP with and without no_sync, FSDP2
(fully_shard) and FSDP1 (device_id=cpu). Each rank reports its own findings, at the lines the
programs' ``# expect:`` comments name (the same as the static analyzer's); rank 0 prints the merged
summary without any collective call."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fixture_expectations import expected_findings
from trainlint.catalog import load_catalog
from trainlint.runtime.rules import checkable
from trainlint.static.analyzer import analyze

PROGRAMS = sorted((Path(__file__).resolve().parent / "distributed").glob("*.py"))
WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(program: Path, report: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one thread per process, or gloo crawls on 2 cores
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)  # DETAIL segfaults DDP on gloo CPU
    command = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={WORLD}", f"--master_port={free_port()}",
        "-m", "trainlint", "run", "--mode", "collect", "--report", str(report), str(program),
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, cwd=program.parent)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_each_rank_reports_the_expected_findings(program, tmp_path):
    report = tmp_path / "findings.json"
    result = torchrun(program, report)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = expected_findings(program.read_text(encoding="utf-8"))
    for rank in range(WORLD):
        findings = json.loads(Path(f"{report}.rank{rank}").read_text())["findings"]
        assert {(f["line"], f["rule"]) for f in findings} == expected, f"rank {rank}"
        assert all(f["message"].startswith(f"[rank {rank}] ") for f in findings)
    summary = result.stderr[result.stderr.index("trainlint: "):]
    assert f"across {WORLD} rank(s)" in summary
    for line, rule in expected:
        assert f"{program.name}:{line}:1: {rule}" in summary and "(ranks 0, 1)" in summary
    # The static analyzer says the same about the same program, on the rules it checks.
    both = checkable() - {r.id for r in load_catalog().values() if not r.static}
    static = {(span[0], rule) for rule, span, _ in analyze(program.read_text(encoding="utf-8"), both)}
    assert static == {(line, rule) for line, rule in expected if rule in both}
