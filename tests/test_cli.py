"""The command line: exit codes, rule selection, output formats, directory walking."""
from __future__ import annotations

import jsonschema

from cli_support import BOTH, CLEAN, CLIP_AFTER_STEP, run, run_json, write

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
                "required": ["rule", "name", "severity", "path", "line", "column", "end_line", "end_column", "message"],
                "properties": {
                    "rule": {"type": "string", "pattern": "^TL[0-9]{3}$"},
                    "name": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
                    "severity": {"enum": ["error", "warning", "info"]},
                    "path": {"type": "string"},
                    "line": {"type": "integer", "minimum": 1},
                    "column": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                    "end_column": {"type": "integer", "minimum": 1},
                    "message": {"type": "string", "minLength": 1},
                },
            },
        },
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "message"],
                "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
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
