"""[tool.trainlint] discovery and its keys."""
from __future__ import annotations

from cli_support import BOTH, CLIP_AFTER_STEP, run, run_json, write


def test_config_is_found_from_a_nested_directory_upward(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nignore = ["TL101"]\n')
    path = write(tmp_path, "pkg/sub/train.py", BOTH)
    _, data = run_json(path)
    assert {f["rule"] for f in data["findings"]} == {"TL102"}


def test_pyproject_without_a_trainlint_table_is_skipped_on_the_way_up(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nselect = ["TL102"]\n')
    write(tmp_path, "pkg/pyproject.toml", '[project]\nname = "pkg"\n')
    _, data = run_json(write(tmp_path, "pkg/train.py", BOTH))
    assert {f["rule"] for f in data["findings"]} == {"TL102"}


def test_command_line_select_replaces_config_select_and_ignore_adds(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nselect = ["TL102"]\n')
    path = write(tmp_path, "train.py", BOTH)
    _, data = run_json("--select", "TL101", path)
    assert {f["rule"] for f in data["findings"]} == {"TL101"}
    _, data = run_json("--ignore", "TL102", path)
    assert data["findings"] == []


def test_per_file_ignores(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"legacy/*.py" = ["clip-after-step"]\n')
    write(tmp_path, "legacy/old.py", CLIP_AFTER_STEP)
    write(tmp_path, "new/train.py", CLIP_AFTER_STEP)
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 2)[-2] for f in data["findings"]] == ["new"]


def test_exclude(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nexclude = ["generated", "scratch_*.py"]\n')
    write(tmp_path, "generated/train.py", CLIP_AFTER_STEP)
    write(tmp_path, "scratch_1.py", CLIP_AFTER_STEP)
    write(tmp_path, "train.py", CLIP_AFTER_STEP)
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.py"]


def test_severity_override(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint.severity]\nclip-after-step = "warning"\n')
    _, data = run_json(write(tmp_path, "train.py", CLIP_AFTER_STEP))
    assert data["findings"][0]["severity"] == "warning"


def test_explicit_config_file(tmp_path):
    config = write(tmp_path, "conf/trainlint.toml", 'ignore = ["TL1"]\n')
    _, data = run_json("--config", config, write(tmp_path, "train.py", BOTH))
    assert data["findings"] == []


def test_invalid_configs_are_usage_errors_naming_the_file(tmp_path):
    bad = {
        "unknown key": '[tool.trainlint]\nselekt = ["TL101"]\n',
        "unknown rule": '[tool.trainlint]\nignore = ["TL999"]\n',
        "wrong type": '[tool.trainlint]\nselect = 3\n',
        "bad toml": '[tool.trainlint\n',
        "bad severity": '[tool.trainlint.severity]\nTL101 = "fatal"\n',
    }
    for case, text in bad.items():
        directory = tmp_path / case.replace(" ", "_")
        write(directory, "pyproject.toml", text)
        result = run(write(directory, "train.py", BOTH))
        assert result.exit_code == 2, case
        assert "pyproject.toml" in result.stderr, case
