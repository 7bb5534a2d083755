"""The command line: exit codes, rule selection, output formats, directory walking."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from cli_support import BOTH, CLEAN, CLIP_AFTER_STEP, run, run_json, write
from trainlint.catalog import load_catalog
from trainlint.reporters.text import color_enabled

# The documented JSON contract (README, "JSON output").
JSON_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "findings", "errors"],
    "properties": {
        "version": {"const": 1},
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["rule", "name", "severity", "tier", "path", "line", "column", "end_line", "end_column", "message"],
                "properties": {
                    "rule": {"type": "string", "pattern": "^TL[0-9]{3}$"},
                    "name": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
                    "severity": {"enum": ["error", "warning", "info"]},
                    "tier": {"enum": ["error", "warning", "advice"]},
                    "path": {"type": "string"},
                    "line": {"type": "integer", "minimum": 1},
                    "column": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                    "end_column": {"type": "integer", "minimum": 1},
                    "message": {"type": "string", "minLength": 1},
                    "cell": {"type": "integer", "minimum": 1},
                    "trace": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    # The runtime guard: the worker process that found it (tests/runtime/test_worker_processes.py).
                    "worker": {"type": "integer", "minimum": 0},
                },
            },
        },
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "message"],
                "properties": {
                    "path": {"type": "string"},
                    "message": {"type": "string"},
                    "worker": {"type": "integer", "minimum": 0},
                },
            },
        },
        # Optional: parts of files the analysis budget left out (README, "Limits").
        "incomplete": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "message"],
                "properties": {"path": {"type": "string"}, "message": {"type": "string", "minLength": 1}},
            },
        },
    },
}


def test_clean_file_exits_0(tmp_path):
    result = run(write(tmp_path, "train.py", CLEAN))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "All checks passed" in result.stderr


def test_finding_exits_1_with_position_and_message(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    result = run(path)
    assert result.exit_code == 1
    line = result.stdout.strip()
    assert line.startswith(f"{path.as_posix()}:9:5: TL101 [clip-after-step] ")
    assert "optimizer.step() (line 8)" in line and "loss.backward() (line 7)" in line


def test_check_subcommand_and_module_entry_agree(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    assert run("check", path).stdout == run(path).stdout


def test_exit_zero(tmp_path):
    result = run("--exit-zero", write(tmp_path, "train.py", CLIP_AFTER_STEP))
    assert result.exit_code == 0 and "TL101" in result.stdout


def test_select_and_ignore_by_id_name_and_prefix(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    _, everything = run_json(path)
    assert {f["rule"] for f in everything["findings"]} == {"TL101", "TL102"}
    for selector in ("TL101", "clip-after-step"):
        _, data = run_json("--select", selector, path)
        assert {f["rule"] for f in data["findings"]} == {"TL101"}
    _, data = run_json("--select", "TL1", path)
    assert {f["rule"] for f in data["findings"]} == {"TL101", "TL102"}
    _, data = run_json("--ignore", "TL101,scheduler-before-step", path)
    assert data["findings"] == []
    _, data = run_json("--select", "TL2", path)
    assert data["findings"] == []


def test_unknown_selector_is_a_usage_error(tmp_path):
    result = run("--select", "TL999", write(tmp_path, "train.py", CLEAN))
    assert result.exit_code == 2
    assert "unknown rule" in result.stderr


def test_missing_path_argument_is_a_usage_error():
    assert run("check").exit_code == 2


def test_json_output_matches_the_documented_schema(tmp_path):
    write(tmp_path, "a/train.py", BOTH)
    write(tmp_path, "b/broken.py", "def f(:\n")
    result, data = run_json(tmp_path)
    jsonschema.validate(data, JSON_SCHEMA)
    assert result.exit_code == 2
    first = data["findings"][0]
    assert (first["rule"], first["line"], first["column"]) == ("TL102", 9, 5)
    assert first["end_line"] == 9 and first["end_column"] == first["column"] + len("scheduler.step()")
    assert data["errors"][0]["path"].endswith("broken.py")


def test_directories_are_walked_and_tool_dirs_skipped(tmp_path):
    write(tmp_path, "src/train.py", CLIP_AFTER_STEP)
    for skipped in (".git/hooks/x.py", "node_modules/pkg/x.py", "build/lib/x.py", ".venv/lib/x.py", "env2/lib/x.py"):
        write(tmp_path, skipped, CLIP_AFTER_STEP)
    write(tmp_path, "env2/pyvenv.cfg", "home = /usr\n")
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 2)[-2:] for f in data["findings"]] == [["src", "train.py"]]


def test_rules_table_lists_the_catalog():
    result = run("rules")
    assert result.exit_code == 0
    assert "TL101" in result.stdout and "clip-after-step" in result.stdout


def test_explain_by_id_and_name():
    by_id = run("explain", "TL301")
    assert by_id.exit_code == 0
    assert "missing-set-epoch" in by_id.stdout and "Use instead" in by_id.stdout and "set_epoch" in by_id.stdout
    assert run("explain", "missing-set-epoch").stdout == by_id.stdout


def test_explain_unknown_rule():
    result = run("explain", "TL999")
    assert result.exit_code == 2 and "unknown rule" in result.stderr


def test_text_report_shape_on_stdout_and_stderr(tmp_path):
    write(tmp_path, "a.py", CLIP_AFTER_STEP)
    write(tmp_path, "b.py", "def f(:\n")
    result = run(tmp_path)
    assert result.exit_code == 2
    assert [line.split(": TL")[0] for line in result.stdout.splitlines()] == [f"{(tmp_path / 'a.py').as_posix()}:9:5"]
    errors, summary = result.stderr.splitlines()
    assert errors.startswith(f"{(tmp_path / 'b.py').as_posix()}: error: syntax error at line 1")
    assert summary == "Found 1 finding in 1 file (1 file could not be analyzed)."


def test_summary_lines_and_quiet(tmp_path):
    assert run(write(tmp_path, "clean.py", CLEAN)).stderr == "All checks passed.\n"
    assert run(write(tmp_path, "train.py", BOTH)).stderr == "Found 2 findings in 1 file.\n"
    assert run("--quiet", tmp_path / "train.py").stderr == ""


def test_paths_are_shown_as_given_or_relative_to_the_working_directory(tmp_path, monkeypatch):
    write(tmp_path, "pkg/train.py", CLIP_AFTER_STEP)
    monkeypatch.chdir(tmp_path)
    assert run("pkg/train.py").stdout.startswith("pkg/train.py:9:5: TL101 ")
    assert run(tmp_path / "pkg").stdout.startswith("pkg/train.py:9:5: TL101 ")


def test_options_may_come_first_and_repeat(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    _, data = run_json("--select", "TL101", "--select", "TL102", path)
    assert [f["rule"] for f in data["findings"]] == ["TL102", "TL101"]
    _, data = run_json("--select", "TL1", "--ignore", "TL101", "--ignore", "scheduler-before-step", path)
    assert data["findings"] == []


def test_ignore_by_prefix(tmp_path):
    result, data = run_json("--ignore", "TL1", write(tmp_path, "train.py", BOTH))
    assert result.exit_code == 0 and data["findings"] == []


def test_unknown_ignore_selector_is_a_usage_error(tmp_path):
    result = run("--ignore", "TL101,not-a-rule", write(tmp_path, "train.py", CLEAN))
    assert result.exit_code == 2
    assert "unknown rule(s): not-a-rule (see" in result.stderr


def test_exit_zero_does_not_hide_files_that_could_not_be_analyzed(tmp_path):
    write(tmp_path, "broken.py", "def f(:\n")
    assert run("--exit-zero", tmp_path).exit_code == 2


def test_bad_option_and_bad_format_are_usage_errors(tmp_path):
    path = write(tmp_path, "train.py", CLEAN)
    assert run("--no-such-option", path).exit_code == 2
    assert run("--format", "xml", path).exit_code == 2


def test_json_findings_are_sorted_by_path_line_column_rule(tmp_path):
    write(tmp_path, "b.py", BOTH)
    write(tmp_path, "a.py", CLIP_AFTER_STEP)
    _, data = run_json(tmp_path)
    keys = [(f["path"], f["line"], f["column"], f["rule"]) for f in data["findings"]]
    assert keys == sorted(keys) and len(keys) == 3
    assert list(data) == ["version", "findings", "errors"]
    assert list(data["findings"][0]) == ["rule", "name", "severity", "tier", "path", "line", "column", "end_line", "end_column", "message"]


def test_every_skipped_directory_kind(tmp_path):
    write(tmp_path, "train.py", CLIP_AFTER_STEP)
    for skipped in (".hg", "__pycache__", "venv", "env", ".tox", ".nox", "dist", "site-packages", ".trainlint_cache"):
        write(tmp_path, f"{skipped}/x.py", CLIP_AFTER_STEP)
    _, data = run_json("--no-cache", tmp_path)
    assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.py"]


def test_an_explicitly_named_file_in_a_skipped_directory_is_checked(tmp_path):
    path = write(tmp_path, "build/lib/train.py", CLIP_AFTER_STEP)
    _, data = run_json(path)
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


def test_a_directory_without_python_files_passes_with_a_warning(tmp_path):
    write(tmp_path, "notes.txt", "no code here\n")
    result = run(tmp_path)
    assert result.exit_code == 0
    assert result.stderr == "warning: no Python files found under the given paths\nAll checks passed.\n"


def test_module_entry_point(tmp_path):
    # PYTHONPATH: the tree under test, whatever an installed copy of trainlint points at.
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "trainlint", str(path)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("train.py:9:5: TL101 [clip-after-step] ")


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert color_enabled(Stream(True)) and not color_enabled(Stream(False))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_enabled(Stream(True))
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: only a non-empty value counts
    assert color_enabled(Stream(True))
    monkeypatch.setenv("FORCE_COLOR", "1")  # force-color.org: colour in a CI log that is no terminal
    assert color_enabled(Stream(False))
    monkeypatch.setenv("NO_COLOR", "1")  # but NO_COLOR wins, as in CPython
    assert not color_enabled(Stream(False))


def test_rules_table_columns_and_json():
    table = run("rules").stdout.splitlines()
    assert table[0].split() == ["id", "name", "tier", "autofix", "runtime", "summary"]
    tl101 = next(line for line in table if line.startswith("TL101"))
    assert tl101.split()[:5] == ["TL101", "clip-after-step", "error", "yes", "yes"]
    tl702 = next(line for line in table if line.startswith("TL702"))
    assert tl702.split()[2] == "advice"
    assert table[-1].startswith("Tiers: error = training silently computes")  # the policy, stated once
    entries = json.loads(run("rules", "--format", "json").stdout)
    assert [e["id"] for e in entries] == list(load_catalog())
    assert set(entries[0]) == {"id", "name", "severity", "tier", "summary", "autofix", "runtime_confirmed", "opt_in", "static"}


def test_explain_sections_in_order():
    text = run("explain", "TL101").stdout
    assert text.startswith("# TL101 clip-after-step (error)\n")
    sections = ["What it does", "Why this breaks training", "Example", "Use instead", "Fix", "Runtime"]
    positions = [text.index(f"## {title}\n") for title in sections]
    assert positions == sorted(positions)
    bad, good = text.split("## Use instead")
    assert bad.rindex("optimizer.step()") < bad.rindex("clip_grad_norm_")  # the bad example, then the good one
    assert good.index("clip_grad_norm_") < good.index("optimizer.step()")


def test_explain_suggests_near_misses():
    for typo, meant in (("TL1O1", "TL101"), ("clip-after-stpe", "TL101"), ("TL10", "TL101"), ("clip", "TL103")):
        result = run("explain", typo)
        assert result.exit_code == 2 and meant in result.stderr.split("Did you mean")[1], typo
    assert "See `trainlint rules`" in run("explain", "zzz").stderr


def test_trace_shows_the_witness_across_files_only_when_asked(tmp_path):
    project = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "engine_split_bad"
    plain = run("--no-cache", "--select", "TL102", project / "main.py")
    traced = run("--no-cache", "--select", "TL102", "--trace", project / "main.py")
    assert "through" not in plain.stdout
    lines = traced.stdout.splitlines()
    assert lines[0] == plain.stdout.splitlines()[0]
    assert lines[1:] == [
        "    through main() (line 8) -> train_one_epoch() (engine.py line 5)",
        "    step: loss_scaler.step(optimizer) (engine.py line 14)",
        "    reported: scheduler.step() (line 17)",
    ]
    _, data = run_json("--no-cache", "--select", "TL102", "--trace", project / "main.py")
    jsonschema.validate(data, JSON_SCHEMA)
    assert data["findings"][0]["trace"] == [line.strip() for line in lines[1:]]
    _, untraced = run_json("--no-cache", "--select", "TL102", project / "main.py")
    assert "trace" not in untraced["findings"][0]


def test_trace_names_the_conditions_the_witness_assumed(tmp_path):
    source = write(tmp_path, "train.py", BOTH.replace("    scheduler.step()\n", "    if use_warmup:\n        scheduler.step()\n"))
    result = run("--no-cache", "--select", "TL102", "--trace", source)
    assert "    on this path `use_warmup` is true" in result.stdout.splitlines()
