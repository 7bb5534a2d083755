"""[tool.trainlint] discovery and its keys."""
from __future__ import annotations

from cli_support import BOTH, CLIP_AFTER_STEP, run, run_json, write
from trainlint.catalog import load_catalog

# TL602 (warmup-from-zero) is opt-in: the first step runs at learning rate 0.
WARMUP_FROM_ZERO = """\
import torch
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.0, total_iters=100)
"""


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
        "severity of an unknown rule": '[tool.trainlint.severity]\nno-such-rule = "error"\n',
        "string for a list": '[tool.trainlint]\nexclude = "generated"\n',
        "empty selector": '[tool.trainlint]\nignore = [""]\n',
        "unknown rule in per-file-ignores": '[tool.trainlint.per-file-ignores]\n"*.py" = ["TL999"]\n',
        "per-file-ignores not a table": '[tool.trainlint]\nper-file-ignores = ["TL101"]\n',
        "tool not a table": 'tool = 1\n',
    }
    for case, text in bad.items():
        directory = tmp_path / case.replace(" ", "_")
        write(directory, "pyproject.toml", text)
        result = run(write(directory, "train.py", BOTH))
        assert result.exit_code == 2, case
        assert "pyproject.toml" in result.stderr, case


def test_missing_explicit_config_file_is_a_usage_error(tmp_path):
    result = run("--config", tmp_path / "nope.toml", write(tmp_path, "train.py", BOTH))
    assert result.exit_code == 2 and "nope.toml: config file not found" in result.stderr


def test_the_nearest_config_wins(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nignore = ["TL101"]\n')
    write(tmp_path, "pkg/pyproject.toml", '[tool.trainlint]\nignore = ["TL102"]\n')
    _, data = run_json(write(tmp_path, "pkg/deep/train.py", BOTH))
    assert {f["rule"] for f in data["findings"]} == {"TL101"}


def test_each_path_argument_uses_its_own_project_config(tmp_path):
    write(tmp_path, "a/pyproject.toml", '[tool.trainlint]\nignore = ["TL101"]\n')
    write(tmp_path, "b/pyproject.toml", '[tool.trainlint]\nignore = ["TL102"]\n')
    a, b = write(tmp_path, "a/train.py", BOTH), write(tmp_path, "b/train.py", BOTH)
    for order in ((a, b), (b, a)):
        _, data = run_json(*order)
        assert [(f["path"].rsplit("/", 2)[-2], f["rule"]) for f in data["findings"]] == [("a", "TL102"), ("b", "TL101")]


def test_command_line_select_starts_over_without_the_config_ignore(tmp_path):
    # As in ruff: the highest-priority select begins the resolution; the config's modifiers go.
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nignore = ["TL101"]\n')
    _, data = run_json("--select", "clip-after-step", write(tmp_path, "train.py", BOTH))
    assert {f["rule"] for f in data["findings"]} == {"TL101"}


def test_the_more_specific_of_select_and_ignore_wins(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    _, data = run_json("--select", "TL101", "--ignore", "TL1", path)
    assert {f["rule"] for f in data["findings"]} == {"TL101"}
    _, data = run_json("--select", "TL1", "--ignore", "TL101", path)
    assert {f["rule"] for f in data["findings"]} == {"TL102"}
    _, data = run_json("--select", "TL101", "--ignore", "clip-after-step", path)
    assert data["findings"] == [], "a tie goes to ignore"
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nselect = ["TL101"]\nignore = ["ALL"]\n')
    _, data = run_json(path)
    assert {f["rule"] for f in data["findings"]} == {"TL101"}


def test_opt_in_rules_run_only_when_selected(tmp_path):
    assert load_catalog()["TL602"].opt_in
    path = write(tmp_path, "warmup.py", WARMUP_FROM_ZERO)
    result, data = run_json(path)
    assert result.exit_code == 0 and data["findings"] == []
    for selector in ("TL602", "warmup-from-zero", "TL6"):
        _, data = run_json("--select", selector, path)
        assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TL602", 4)], selector
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nselect = ["ALL"]\n')
    _, data = run_json(path)
    assert [f["rule"] for f in data["findings"]] == ["TL602"]


def test_per_file_ignores_match_a_file_name_anywhere(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"legacy_*.py" = ["TL1"]\n')
    write(tmp_path, "deep/down/legacy_train.py", BOTH)
    write(tmp_path, "deep/down/train.py", CLIP_AFTER_STEP)
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.py"]


def test_per_file_ignores_keep_the_other_rules(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"train.py" = ["TL102"]\n')
    _, data = run_json(write(tmp_path, "train.py", BOTH))
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


def test_exclude_applies_to_explicitly_named_files_and_nested_directories(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nexclude = ["generated", "scratch_*.py"]\n')
    scratch = write(tmp_path, "scratch_2.py", CLIP_AFTER_STEP)
    write(tmp_path, "src/generated/deep/model.py", CLIP_AFTER_STEP)
    result, data = run_json(scratch, tmp_path / "src")
    assert result.exit_code == 0 and data["findings"] == []


def test_exclude_by_a_relative_path_glob(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nexclude = ["src/vendor/*"]\n')
    write(tmp_path, "src/vendor/lib.py", CLIP_AFTER_STEP)
    write(tmp_path, "vendor/train.py", CLIP_AFTER_STEP)
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 2)[-2] for f in data["findings"]] == ["vendor"]
