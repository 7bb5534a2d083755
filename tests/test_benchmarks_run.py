"""The shipped speed benchmark runs end to end on a small input (so it cannot rot unnoticed)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _benchmark(script: str, *args: str, timeout: int = 300) -> str:
    """The benchmark's output; it must exit 0."""
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                         capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_static_speed_benchmark_prints_its_figures():
    out = _benchmark("static_speed.py", str(ROOT / "fixtures" / "projects"), "--jobs", "1")
    for row in ("libcst.parse_module", "trainlint cold, 1 job", "trainlint warm (cache)", "cold 1 job / parse floor"):
        assert row in out


def test_project_speed_benchmark_prints_its_figures():
    out = _benchmark("project_speed.py", "--files", "6", "--fanout", "2")
    for row in ("6 modules, each calling into 2 others", "project ", "single, self-contained", "single, isolated",
                "project / single (self-contained) per file", "project / single (isolated) per file"):
        assert row in out


def test_startup_benchmark_prints_its_figures():
    out = _benchmark("startup.py", "--runs", "1")
    for row in ("import libcst", "trainlint --version", "a file no rule can fire on", "an 18-line training file"):
        assert row in out


def test_scaling_benchmark_prints_its_table():
    out = _benchmark("scaling.py", "--quick", "--timeout", "120", timeout=600)
    assert "cpu s" in out and "exponent" in out
    for shape in ("ifs-clip", "ifs-zero-grad", "nesting", "helpers", "big-file", "elifs"):
        assert f"\n{shape} " in out
    assert "TIMEOUT" not in out and "CRASHED" not in out
