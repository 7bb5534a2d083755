"""The guard checks the rules `trainlint check` would: the catalog's default set (errors and
warnings; advice such as TL701 only when selected) unless --select, --extend-select,
``guard(select=...)`` or the project's [tool.trainlint] say otherwise."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

from trainlint.catalog import load_catalog
from trainlint.config import Config, resolve_rules
from trainlint.runtime.guard import Guard
from trainlint.runtime.rules import checkable

TL701_BAD = Path(__file__).resolve().parent / "programs" / "tl701_bad.py"


def test_the_default_is_the_check_commands_default():
    advice = {rule.id for rule in load_catalog().values() if rule.tier == "advice"}
    assert "TL701" in advice
    assert Guard().rules == resolve_rules(Config(), None, []) & checkable()
    assert not Guard().rules & advice
    assert Guard(select="TL701").rules == {"TL701"}
    assert "TL701" in Guard(select="ALL").rules
    assert "TL701" in Guard(extend_select="ADVICE").rules and Guard().rules < Guard(extend_select="ADVICE").rules


def test_select_and_ignore_resolve_as_in_the_check_command():
    """The more specific selector wins, as `trainlint check --select TL101 --ignore TL1` does."""
    assert Guard(select="TL101", ignore="TL1").rules == {"TL101"} == resolve_rules(Config(), ["TL101"], ["TL1"])
    assert "TL101" not in Guard(select="TL1", ignore="TL101").rules


def _run(tmp_path, *options):
    script = tmp_path / "train.py"
    shutil.copy(TL701_BAD, script)
    report = tmp_path / "findings.json"
    result = subprocess.run([sys.executable, "-m", "trainlint", "run", *options, "--report", str(report), "train.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return {(f["line"], f["rule"]) for f in json.loads(report.read_text())["findings"]}


def test_trainlint_run_reports_an_advice_rule_only_when_selected(tmp_path):
    assert _run(tmp_path) == set()
    assert _run(tmp_path, "--select", "TL701") == {(8, "TL701")}
    assert _run(tmp_path, "--extend-select", "ADVICE") == {(8, "TL701")}  # the advice tier, as check adds it


def test_trainlint_run_reads_the_projects_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["decay-on-norm-and-bias"]\n')
    assert _run(tmp_path) == {(8, "TL701")}
    (tmp_path / "other.toml").write_text('[tool.trainlint]\nselect = ["TL1"]\n')
    assert _run(tmp_path, "--config", "other.toml") == set()


def test_a_broken_configuration_is_a_usage_error_before_the_script_runs(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nselect = ["TL999"]\n')
    (tmp_path / "train.py").write_text("print('ran')\n")
    result = subprocess.run([sys.executable, "-m", "trainlint", "run", "train.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert "select: unknown rule 'TL999'" in result.stderr
