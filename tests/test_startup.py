"""Start-up: libcst (a third of a small run's time) is imported only for a file that needs parsing.

``trainlint --version`` and a run over files no rule can fire on (most of a repository) never
import it; the engine's libcst-free pre-filter must stay a superset of the analyzer's, or files
the analyzer would have looked at would be skipped.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainlint import engine
from trainlint.catalog import load_catalog
from trainlint.config import Config, resolve_rules
from trainlint.static.project import Project

ROOT = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent(
    """\
    import sys
    from click.testing import CliRunner
    import trainlint.cli

    def invoke(*args):
        return CliRunner().invoke(trainlint.cli.main, list(args), catch_exceptions=False)

    assert invoke("--version").exit_code == 0
    assert "libcst" not in sys.modules, "--version imported libcst"
    result = invoke("--no-cache", sys.argv[1])
    assert result.exit_code == 0, result.output
    assert "libcst" not in sys.modules, "checking a file that is not training code imported libcst"
    result = invoke("--no-cache", sys.argv[2])
    assert result.exit_code == 1, result.output
    assert "libcst" in sys.modules  # a training file is parsed: the probe can see an import
    print("ok")
    """
)


def test_version_and_a_file_that_is_not_training_code_do_not_import_libcst(tmp_path):
    plain = tmp_path / "utils.py"
    plain.write_text(
        '"""Helpers."""\nimport json\nimport os\n\n\ndef load(path):\n    with open(path) as f:\n'
        "        return json.load(f)\n\n\nprint(load(os.path.join('conf', 'a.json')))\n",
        encoding="utf-8",
    )
    training = ROOT / "fixtures" / "TL101" / "bad_flat_script.py"
    result = subprocess.run([sys.executable, "-c", PROBE, str(plain), str(training)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def _sources():
    files = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "trainlint").rglob("*.py"))
    return [(path, path.read_text(encoding="utf-8")) for path in files]


@pytest.fixture(scope="module")
def sources():
    return _sources()


def test_the_engine_prefilter_is_a_superset_of_the_analyzers(sources, monkeypatch):
    # Whenever the engine settles a file without the analyzer, the analyzer, asked itself, must
    # not get past its own pre-filter: it would parse, and parsing is made to fail here.
    from trainlint.static import analyzer

    def parse(source):
        raise AssertionError("the analyzer's pre-filter let through a file the engine skips")

    monkeypatch.setattr(analyzer, "parse", parse)
    monkeypatch.setattr(analyzer, "parsed_before", lambda path, source: None)
    catalog = load_catalog()
    rule_sets = [frozenset(catalog), resolve_rules(Config(), None, [])] + [frozenset({r}) for r in catalog]
    skipped = 0
    for path, source in sources:
        project = Project(path)
        for rules in rule_sets:
            if not engine._may_fire(source, rules, project):
                skipped += 1
                assert analyzer.analyze_results(source, rules, project=project) == [], (path, sorted(rules))
    assert skipped > 1000  # the property was exercised, not vacuous


def _trainlint(*args, cwd):
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_check_ends_with_all_its_output_and_its_exit_status(tmp_path):
    # A check leaves the interpreter without tearing it down (cli.entry): what it printed must all
    # be there, more than a pipe's buffer of it, and its exit status must be the check's.
    done = _trainlint("--no-cache", "--format", "json", str(ROOT / "fixtures"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert len(done.stdout) > 65536
    report = json.loads(done.stdout)
    assert len(report["findings"]) > 100
    clean = tmp_path / "clean.py"
    clean.write_text("import os\n")
    done = _trainlint("--no-cache", str(clean), cwd=tmp_path)
    assert (done.returncode, done.stderr.strip()) == (0, "All checks passed.")


def test_a_check_written_to_a_file_is_complete(tmp_path):
    out = tmp_path / "report.json"
    done = _trainlint("--no-cache", "--format", "json", "--output-file", str(out), str(ROOT / "fixtures" / "TL101"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["findings"]


def test_a_usage_error_still_exits_through_click(tmp_path):
    done = _trainlint("--format", "nonsense", "x.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "nonsense" in done.stderr
