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
    # (a few multi-file projects: the script's rows, not a measurement; tests/ stays under 10 minutes)
    out = _benchmark("static_speed.py", *(str(ROOT / "fixtures" / "projects" / name) for name in
                                          ("engine_split_bad", "relative_package_bad", "trainer_class_module_good")), "--jobs", "1")
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


def test_add_noqa_check_prints_its_figures(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_support import BOTH

    commit = "0123456789abcdef0123456789abcdef01234567"
    tree = tmp_path / "clones" / f"someone+project@{commit[:12]}"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "train.py").write_text(BOTH.replace("1.0)\n", "\\\n        1.0)\n"), encoding="utf-8")
    (tree / "clean.py").write_text("import torch\n", encoding="utf-8")
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text(f"repo\tcommit\tpath\nsomeone/project\t{commit}\tpkg/train.py\nsomeone/project\t{commit}\tclean.py\n")
    before = (tree / "pkg" / "train.py").read_bytes()
    out = _benchmark("add_noqa_check.py", "--corpus", str(corpus), "--clones", str(tmp_path / "clones"),
                     "--work", str(tmp_path / "work"))
    for row in ("listed files 2", "findings before: 2", "noqa comments added: 2, files changed: 1",
                "findings after: 0 (default rules), 0 (--extend-select ADVICE)", "idempotent: yes",
                "compile: 1 of 1 changed files", "AST identical: 1 of 1 changed files"):
        assert row in out
    assert (tree / "pkg" / "train.py").read_bytes() == before  # the harness's tree is only read
