"""The GitHub Action (action.yml): its structure, the trainlint command it runs (parsed by the
CLI's own click parser), and its shell steps run here as GitHub runs them (bash -eo pipefail)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.cli import check

# PyYAML comes with pre-commit, a test dependency.
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
STEPS = ACTION["runs"]["steps"]
BASH = shutil.which("bash")


def _step(name: str) -> dict:
    return next(step for step in STEPS if step.get("name") == name)


def _command_line() -> list:
    """The trainlint command of the run step, as the shell would pass it, with the action's
    defaults in place of its variables."""
    line = next(line for line in _step("Run trainlint")["run"].splitlines() if line.startswith("trainlint "))
    words = shlex.split(line.split("||")[0])
    default_args = shlex.split(ACTION["inputs"]["args"]["default"])
    expanded = []
    for word in words[1:]:
        expanded.extend(default_args if word == "${args[@]}" else ["report.sarif"] if word == "$SARIF_FILE" else [word])
    return expanded


def test_a_composite_action_with_its_inputs_and_outputs():
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) == {"args", "version", "python-version", "sarif-file", "upload", "category", "fail-on-findings"}
    assert all("description" in spec and "default" in spec for spec in ACTION["inputs"].values())
    assert all("shell" in step for step in STEPS if "run" in step)  # composite run steps must name one
    uses = [step["uses"] for step in STEPS if "uses" in step]
    assert uses == ["actions/setup-python@v5", "github/codeql-action/upload-sarif@v3"]
    # Every expression names a declared input or an output the run step writes.
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    assert set(re.findall(r"inputs\.([\w-]+)", text)) <= set(ACTION["inputs"])
    written = set(re.findall(r'echo "([\w-]+)=', _step("Run trainlint")["run"]))
    assert set(re.findall(r"steps\.run\.outputs\.([\w-]+)", text)) <= written == {"exit-code", "sarif"}


def test_the_report_is_uploaded_even_when_trainlint_found_something():
    upload = _step("Upload to code scanning")
    assert upload["uses"] == "github/codeql-action/upload-sarif@v3"
    assert "always()" in upload["if"] and "inputs.upload == 'true'" in upload["if"]
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert STEPS.index(upload) < STEPS.index(_step("Exit with trainlint's status"))  # the status comes last
    assert "always()" in _step("Exit with trainlint's status")["if"]


def test_the_command_uses_real_options_and_writes_sarif():
    args = _command_line()
    context = check.make_context("check", list(args))  # click's parser: an unknown option or choice raises
    assert context.params["output_format"] == "sarif"
    assert context.params["output_file"] == "report.sarif"
    assert context.params["paths"] == (".",)


def _shims(directory: Path) -> dict:
    """``trainlint`` and ``python`` on PATH: this tree's trainlint, whatever is installed."""
    directory.mkdir()
    for name, command in (("trainlint", f'"{sys.executable}" -m trainlint'), ("python", f'"{sys.executable}"')):
        shim = directory / name
        shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n', encoding="utf-8")
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{directory}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}


def _bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    # How GitHub runs `shell: bash`.
    return subprocess.run([BASH, "--noprofile", "--norc", "-eo", "pipefail", "-c", script], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(BASH is None or sys.platform == "win32", reason="runs the action's bash steps")
def test_the_run_step_records_the_exit_status_and_the_last_step_fails_with_it(tmp_path):
    env = _shims(tmp_path / "bin")
    project = ROOT / "fixtures" / "projects" / "engine_split_bad"
    outputs = tmp_path / "outputs"
    env.update(GITHUB_OUTPUT=str(outputs), RUNNER_TEMP=str(tmp_path), SARIF_FILE="out/trainlint.sarif",
               TRAINLINT_ARGS=f"--no-cache --select 'TL102' {shlex.quote(str(project))}")
    (tmp_path / "out").mkdir()
    done = _bash(_step("Run trainlint")["run"], env, tmp_path)
    assert done.returncode == 0, done.stderr  # findings do not stop the steps that follow
    assert outputs.read_text(encoding="utf-8").splitlines() == ["exit-code=1", "sarif=true"]
    sarif = json.loads((tmp_path / "out" / "trainlint.sarif").read_text(encoding="utf-8"))
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["TL102"]  # --select 'TL102' was passed on
    assert ":17:9: TL102 scheduler.step() runs before" in done.stdout
    assert done.stdout.splitlines()[-1] == "trainlint: 1 finding(s), exit status 1"

    exit_step = _step("Exit with trainlint's status")["run"]
    for status, fail_on_findings, expected in (("0", "true", 0), ("1", "true", 1), ("1", "false", 0), ("2", "false", 2)):
        env.update(TRAINLINT_EXIT=status, FAIL_ON_FINDINGS=fail_on_findings)
        assert _bash(exit_step, env, tmp_path).returncode == expected, (status, fail_on_findings)


@pytest.mark.skipif(BASH is None or sys.platform == "win32", reason="runs the action's bash steps")
def test_a_usage_error_writes_no_report_and_no_upload_is_tried(tmp_path):
    env = _shims(tmp_path / "bin")
    outputs = tmp_path / "outputs"
    env.update(GITHUB_OUTPUT=str(outputs), RUNNER_TEMP=str(tmp_path), SARIF_FILE="trainlint.sarif",
               TRAINLINT_ARGS="--no-such-option .")
    done = _bash(_step("Run trainlint")["run"], env, tmp_path)
    assert done.returncode == 0 and "No such option" in done.stderr
    assert outputs.read_text(encoding="utf-8").splitlines() == ["exit-code=2"]  # no sarif=true: no upload
