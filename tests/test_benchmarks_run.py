"""The shipped speed benchmark runs end to end on a small input (so it cannot rot unnoticed)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_static_speed_benchmark_prints_its_figures():
    projects = ROOT / "fixtures" / "projects"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "static_speed.py"), str(projects), "--jobs", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    for row in ("libcst.parse_module", "trainlint cold, 1 job", "trainlint warm (cache)", "cold 1 job / parse floor"):
        assert row in run.stdout


def test_project_speed_benchmark_prints_its_figures():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "project_speed.py"), "--files", "6", "--fanout", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    for row in ("6 modules, each calling into 2 others", "project ", "single, self-contained", "single, isolated",
                "project / single (self-contained) per file", "project / single (isolated) per file"):
        assert row in run.stdout


def test_startup_benchmark_prints_its_figures():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "startup.py"), "--runs", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    for row in ("import libcst", "trainlint --version", "a file no rule can fire on", "an 18-line training file"):
        assert row in run.stdout


def test_scaling_benchmark_prints_its_table():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--quick", "--timeout", "120"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert "cpu s" in run.stdout and "exponent" in run.stdout
    for shape in ("ifs-clip", "ifs-zero-grad", "nesting", "helpers", "big-file", "elifs"):
        assert f"\n{shape} " in run.stdout
    assert "TIMEOUT" not in run.stdout and "CRASHED" not in run.stdout
