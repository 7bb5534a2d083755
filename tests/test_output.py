"""Output people read: --output-format full and concise (and --format, its older name),
--statistics, and colour (a terminal only, NO_COLOR, FORCE_COLOR)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import BOTH, CLIP_AFTER_STEP, run, run_json, write
from trainlint.catalog import load_catalog
from trainlint.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = ROOT / "fixtures" / "projects"
ANSI = "\x1b["


def _frames(stdout: str) -> list:
    """The lines under each finding's first line."""
    return stdout.splitlines()[1:]


# --------------------------------------------------------------------------- the formats' names
def test_concise_is_the_default_off_a_terminal_and_text_is_its_old_name(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    default = run("--no-cache", path)
    assert default.exit_code == 1
    assert default.stdout.startswith(f"{path.as_posix()}:9:5: TL102 [scheduler-before-step] ")
    for args in (("--output-format", "concise"), ("--format", "text"), ("--output-format", "text"), ("--format", "concise")):
        result = run("--no-cache", *args, path)
        assert (result.exit_code, result.stdout, result.stderr) == (1, default.stdout, default.stderr), args


def test_format_and_output_format_are_one_option(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    _, old = run_json(path)
    new = run("--output-format", "json", path)
    assert json.loads(new.stdout) == old
    assert run("--format", "json", "--output-format", "json", path).exit_code == 1  # agreeing: fine
    clash = run("--format", "json", "--output-format", "sarif", path)
    assert clash.exit_code == 2 and "disagree" in clash.stderr
    assert run("--output-format", "xml", path).exit_code == 2


# --------------------------------------------------------------------------- full
def test_full_shows_the_statement_and_the_other_file_the_message_names(monkeypatch):
    monkeypatch.chdir(PROJECTS / "engine_split_bad")
    result = run("--no-cache", "--select", "TL102", "--output-format", "full", "main.py")
    assert result.exit_code == 1
    header = result.stdout.splitlines()[0]
    assert header == run("--no-cache", "--select", "TL102", "main.py").stdout.rstrip("\n")  # the concise line
    assert "(engine.py line 14)" in header
    assert _frames(result.stdout) == [
        "   |",
        "15 |     criterion = torch.nn.CrossEntropyLoss()",
        "16 |     for epoch in range(epochs):  # expect: TL301",
        "17 |         scheduler.step()  # expect: TL102",
        "   |         ^^^^^^^^^^^^^^^^ TL102",
        "18 |         train_one_epoch(model, criterion, data_loader_train, optimizer, loss_scaler)",
        "   |",
        "  ::: engine.py:14:9",
        "   |",
        "12 |         loss_scaler.unscale_(optimizer)",
        "13 |         torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)",
        "14 |         loss_scaler.step(optimizer)",
        "   |         --------------------------- step",
        "15 |         loss_scaler.update()",
        "   |",
    ]
    assert result.stderr == "Found 1 finding in 1 file.\n"


def test_full_shows_the_other_modules_statement_a_call_runs(tmp_path, monkeypatch):
    # main.py orders the helper's clip after its step: reported at main.py's call, with a frame
    # for the clip in pkg/engine.py that the message names.
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/engine.py", "import torch\n\n\ndef clip(model):\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n")
    write(tmp_path, "main.py", "from pkg.engine import clip\n" + CLIP_AFTER_STEP.replace(
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "clip(model)"))
    monkeypatch.chdir(tmp_path)
    result = run("--no-cache", "--output-format", "full", "main.py")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("main.py:10:5: TL101 [clip-after-step] clip(model) runs torch.nn.utils.clip_grad_norm_(...) "
                               "(pkg/engine.py line 5) here: ")
    assert " 9 |     optimizer.step()" in lines and "   |     ---------------- step" in lines
    assert "  ::: pkg/engine.py:5:5" in lines
    frame = lines[lines.index("  ::: pkg/engine.py:5:5"):]
    assert " 5 |     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)" in frame
    assert any(line.strip().endswith("- runs") for line in frame)


def test_full_same_file_statements_share_a_frame_and_trace_adds_the_witness(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    plain = run("--no-cache", "--output-format", "full", path).stdout
    assert _frames(plain) == [
        "  |",
        "5 |     optimizer.zero_grad()",
        "6 |     loss = torch.nn.functional.mse_loss(model(x), y)",
        "7 |     loss.backward()",
        "  |     --------------- backward",
        "8 |     optimizer.step()",
        "  |     ---------------- step",
        "9 |     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ TL101",
        "  |",
    ]
    traced = run("--no-cache", "--trace", "--output-format", "full", path).stdout
    concise = run("--no-cache", "--trace", path).stdout.splitlines()
    assert _frames(traced)[: len(_frames(plain))] == _frames(plain)
    assert _frames(traced)[len(_frames(plain)):] == ["  = " + step.strip() for step in concise[1:]]


def test_full_frames_a_pattern_rules_message_lines(monkeypatch):
    # TL901 has no witness path; its message names lines 12 and 13 of the same file.
    monkeypatch.chdir(PROJECTS / "state_saved_by_helper_bad")
    frames = _frames(run("--no-cache", "--output-format", "full", "train.py").stdout)
    assert frames[frames.index("12 |     model.load_state_dict(base)") + 1] == "   |     " + "-" * 27 + " named in the message"
    assert frames[frames.index("13 |     optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)") + 1].endswith("- named in the message")
    assert "..." in frames  # lines 16 to 20 are far from every statement shown
    assert frames[-3].endswith("^ TL901") and frames[-4].startswith("23 |         torch.save(")


def test_full_columns_survive_tabs_and_notebooks_show_the_cell(tmp_path):
    tabs = write(tmp_path, "tabs.py", CLIP_AFTER_STEP.replace("    ", "\t"))
    frames = _frames(run("--no-cache", "--output-format", "full", "--select", "TL101", tabs).stdout)
    assert frames[frames.index("9 |     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)") + 1].startswith("  |     ^^^")
    cells = [CLIP_AFTER_STEP.split("for x, y")[0], "for x, y" + CLIP_AFTER_STEP.split("for x, y")[1]]
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": cell.splitlines(keepends=True)} for cell in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    result = run("--no-cache", "--output-format", "full", path)
    assert result.stdout.splitlines()[0].startswith(f"{path.as_posix()}:cell 2:6:5: TL101 ")
    frames = _frames(result.stdout)
    assert "6 |     torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)" in frames
    assert "5 |     optimizer.step()" in frames and "  |     ---------------- step" in frames


def test_full_without_the_source_says_so(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    from trainlint.engine import Report
    from trainlint.findings import Finding
    from trainlint.reporters.full import render

    finding = Finding((tmp_path / "gone.py").as_posix(), 9, 5, "TL101", "clip-after-step", "error", "m", 9, 60)
    assert render(Report(findings=[finding])).splitlines()[1:] == ["  = note: the source could not be read"]
    assert path.exists()


# --------------------------------------------------------------------------- statistics
STATISTICS_LINE = re.compile(r"^ *(?P<count>\d+)  (?P<rule>TL\d{3})  (?P<mark>\[\*\]|\[ \]|   ) (?P<name>[a-z0-9-]+)"
                             r"(?: \((?P<fixable>\d+) of (?P=count) fixable\))?$")


def test_statistics_counts_each_rule_sorted_by_count_then_id(tmp_path):
    write(tmp_path, "a.py", BOTH)
    write(tmp_path, "b.py", CLIP_AFTER_STEP)
    result = run("--no-cache", "--statistics", tmp_path)
    assert result.exit_code == 1  # the exit status of the findings, as without --statistics
    assert result.stdout == "2  TL101  [*] clip-after-step\n1  TL102  [*] scheduler-before-step\n"
    summary, legend = result.stderr.splitlines()
    assert summary == "Found 3 findings in 2 files."
    assert legend.startswith("[*] fixable with `trainlint --fix`")
    assert run("--no-cache", "--statistics", "--exit-zero", tmp_path).exit_code == 0
    assert run("--no-cache", "--statistics", "-q", tmp_path).stderr == ""
    data = json.loads(run("--no-cache", "--statistics", "--output-format", "json", tmp_path).stdout)
    assert data == [{"rule": "TL101", "name": "clip-after-step", "count": 2, "fixable": 2, "autofix": True},
                    {"rule": "TL102", "name": "scheduler-before-step", "count": 1, "fixable": 1, "autofix": True}]
    assert run("--statistics", "--output-format", "sarif", tmp_path).exit_code == 2


def test_statistics_on_fixtures_agree_with_the_findings_and_with_what_fix_fixes(tmp_path):
    # Copies of fixture directories with rules of both kinds: with an autofix (TL101, partly
    # fixable there) and without (TL104, TL105).
    work = tmp_path / "work"
    for rule in ("TL101", "TL104"):
        shutil.copytree(ROOT / "fixtures" / rule, work / rule)
    result = run("--no-cache", "--statistics", work)
    rows = [STATISTICS_LINE.match(line) for line in result.stdout.splitlines()]
    assert all(rows), result.stdout
    _, before = run_json("--no-cache", work)
    counts = Counter(f["rule"] for f in before["findings"])
    assert [(row["rule"], int(row["count"])) for row in rows] == sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    catalog = load_catalog()
    assert all((row["mark"] == "   ") == (not catalog[row["rule"]].autofix) for row in rows)
    # What --fix then fixes is what the table said: the fixable count of each rule.
    run("--no-cache", "--fix", work)
    _, after = run_json("--no-cache", work)
    left = Counter(f["rule"] for f in after["findings"])
    for row in rows:
        fixable = 0 if row["mark"] != "[*]" else int(row["fixable"] or row["count"])
        assert counts[row["rule"]] - left[row["rule"]] == fixable, row.group(0)
    assert any(row["mark"] == "[*]" and row["fixable"] for row in rows)  # some rule is only partly fixable
    assert any(row["mark"] == "   " for row in rows)


# --------------------------------------------------------------------------- colour
@pytest.fixture
def no_colour_variables(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def test_no_colour_when_not_a_terminal(tmp_path, no_colour_variables):
    path = write(tmp_path, "train.py", BOTH)
    for args in ((), ("--output-format", "full"), ("--statistics",)):
        assert ANSI not in run("--no-cache", *args, path).output, args


def test_force_color_colours_and_no_color_wins(tmp_path, no_colour_variables):
    path = write(tmp_path, "train.py", BOTH)
    runner = CliRunner()  # leaves ANSI in the output only where trainlint asks click for colour
    for args in (("--output-format", "concise"), ("--output-format", "full"), ("--statistics",)):
        forced = runner.invoke(main, ["--no-cache", *args, str(path)], env={"FORCE_COLOR": "1"})
        assert ANSI in forced.stdout, args
        assert re.sub(r"\x1b\[[0-9;]*m", "", forced.stdout) == run("--no-cache", *args, path).stdout
        both = runner.invoke(main, ["--no-cache", *args, str(path)], env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
        assert ANSI not in both.stdout, args
    assert ANSI not in runner.invoke(main, ["--no-cache", str(path)], env={"FORCE_COLOR": ""}).stdout
    # Machine formats and files never get colour.
    assert ANSI not in runner.invoke(main, ["--no-cache", "--format", "json", str(path)], env={"FORCE_COLOR": "1"}).stdout
    out = tmp_path / "report.txt"
    runner.invoke(main, ["--no-cache", "--output-file", str(out), str(path)], env={"FORCE_COLOR": "1"})
    assert ANSI not in out.read_text(encoding="utf-8") and "TL102" in out.read_text(encoding="utf-8")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal: POSIX only")
def test_on_a_terminal_full_is_the_default_in_colour_unless_no_color(tmp_path, monkeypatch):
    import pty

    path = write(tmp_path, "train.py", BOTH)

    def on_a_terminal(**env) -> str:
        leader, follower = pty.openpty()
        environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        environment.pop("FORCE_COLOR", None)
        environment.pop("NO_COLOR", None) if "NO_COLOR" not in env else None
        done = subprocess.Popen([sys.executable, "-m", "trainlint", "--no-cache", str(path)], stdout=follower,
                                stderr=subprocess.DEVNULL, env=environment, cwd=tmp_path)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed: Linux says EIO
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert done.wait(timeout=120) == 1
        return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")

    coloured = on_a_terminal()
    assert ANSI in coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    monkeypatch.chdir(tmp_path)  # where the terminal's run was: the paths are shown alike
    assert plain == run("--no-cache", "--output-format", "full", path).stdout  # full, by default
    assert on_a_terminal(NO_COLOR="1") == plain
