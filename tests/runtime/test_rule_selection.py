"""The guard checks the rules `trainlint check` would: the catalog's default set (every rule that
is not opt-in) unless --select, ``guard(select=...)`` or the project's [tool.trainlint] say otherwise.

Which rules the catalog marks opt-in changes with the catalog, so these tests make TL701 (a rule
the guard checks, with a runtime program) opt-in themselves where the catalog does not."""
import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainlint.catalog import load_catalog
from trainlint.config import Config, resolve_rules
from trainlint.runtime.guard import Guard
from trainlint.runtime.rules import checkable

TL701_BAD = Path(__file__).resolve().parent / "programs" / "tl701_bad.py"

# `trainlint run` with TL701 opt-in in the catalog it loads.
RUN_WITH_TL701_OPT_IN = textwrap.dedent('''
    import dataclasses
    import sys

    from trainlint.catalog import load_catalog
    from trainlint.runtime.command import run

    catalog = load_catalog()  # one dictionary for the whole process (cached)
    if not catalog["TL701"].opt_in:
        catalog["TL701"] = dataclasses.replace(catalog["TL701"], opt_in=True)
    run(sys.argv[1:], prog_name="trainlint run")
''')


@pytest.fixture
def tl701_opt_in(monkeypatch):
    catalog = load_catalog()
    if not catalog["TL701"].opt_in:
        monkeypatch.setitem(catalog, "TL701", dataclasses.replace(catalog["TL701"], opt_in=True))


def test_the_default_is_the_check_commands_default(tl701_opt_in):
    opt_in = {rule.id for rule in load_catalog().values() if rule.opt_in}
    assert "TL701" in opt_in
    assert Guard().rules == resolve_rules(Config(), None, []) & checkable()
    assert not Guard().rules & opt_in
    assert Guard(select="TL701").rules == {"TL701"}
    assert "TL701" in Guard(select="ALL").rules


def test_select_and_ignore_resolve_as_in_the_check_command():
    """The more specific selector wins, as `trainlint check --select TL101 --ignore TL1` does."""
    assert Guard(select="TL101", ignore="TL1").rules == {"TL101"} == resolve_rules(Config(), ["TL101"], ["TL1"])
    assert "TL101" not in Guard(select="TL1", ignore="TL101").rules


def _run(tmp_path, *options):
    script = tmp_path / "train.py"
    shutil.copy(TL701_BAD, script)
    report = tmp_path / "findings.json"
    result = subprocess.run([sys.executable, "-c", RUN_WITH_TL701_OPT_IN, *options, "--report", str(report), "train.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return {(f["line"], f["rule"]) for f in json.loads(report.read_text())["findings"]}


def test_trainlint_run_reports_an_opt_in_rule_only_when_selected(tmp_path):
    assert _run(tmp_path) == set()
    assert _run(tmp_path, "--select", "TL701") == {(8, "TL701")}


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
