"""Suppression comments on the reported line, and skip-file."""
from __future__ import annotations

import pytest

from cli_support import BOTH, CLIP_AFTER_STEP, run_json, write

CLIP_LINE = "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"


@pytest.mark.parametrize(
    "comment",
    ["# noqa", "# noqa: TL101", "# noqa:TL101", "# NOQA: TL102, TL101", "# noqa: clip-after-step",
     "# trainlint: ignore[TL101]", "# trainlint: ignore[TL102, clip-after-step]", "# trainlint: ignore",
     "#noqa:TL101,TL102", "# trainlint: ignore [TL101]", "# type: ignore  # noqa: TL101", "# noqa: TL101 reason"],
)
def test_comment_on_the_reported_line_suppresses(tmp_path, comment):
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.rstrip("\n") + "  " + comment + "\n")
    _, data = run_json(write(tmp_path, "train.py", source))
    assert data["findings"] == []


@pytest.mark.parametrize(
    "comment", ["# noqa: TL102", "# trainlint: ignore[TL201]", "# noqa-ish", "# trainlint: ignore-me", "# noqa: clip"]
)
def test_other_rule_ids_do_not_suppress(tmp_path, comment):
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.rstrip("\n") + "  " + comment + "\n")
    _, data = run_json(write(tmp_path, "train.py", source))
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


def test_noqa_inside_a_string_does_not_suppress(tmp_path):
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.replace("1.0)", '1.0 if "# noqa" else 2.0)'))
    _, data = run_json(write(tmp_path, "train.py", source))
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


def test_comment_on_another_line_does_not_suppress(tmp_path):
    source = "# noqa: TL101\n" + CLIP_AFTER_STEP
    _, data = run_json(write(tmp_path, "train.py", source))
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


def test_skip_file(tmp_path):
    _, data = run_json(write(tmp_path, "train.py", "# trainlint: skip-file\n" + BOTH))
    assert data["findings"] == []


def test_skip_file_must_be_a_whole_line_comment(tmp_path):
    source = BOTH.replace("import torch\n", "import torch  # trainlint: skip-file\n")
    _, data = run_json(write(tmp_path, "train.py", source))
    assert {f["rule"] for f in data["findings"]} == {"TL101", "TL102"}


def test_noqa_inside_a_multiline_string_does_not_suppress(tmp_path):
    # The reported line (9) holds the marker only as the first line of a triple-quoted string.
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.replace("1.0)", '1.0 if """# noqa\n""" else 2.0)'))
    _, data = run_json(write(tmp_path, "train.py", source))
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


def test_skip_file_anywhere_as_a_whole_line_comment(tmp_path):
    _, data = run_json(write(tmp_path, "train.py", BOTH + "\n    # trainlint: skip-file\n"))
    assert data["findings"] == []


def test_skip_file_inside_a_string_does_not_skip(tmp_path):
    _, data = run_json(write(tmp_path, "train.py", '"""\n# trainlint: skip-file\n"""\n' + CLIP_AFTER_STEP))
    assert [f["rule"] for f in data["findings"]] == ["TL101"]


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_suppression_lines_agree_with_finding_lines_for_any_line_ending(tmp_path, newline):
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.rstrip("\n") + "  # noqa: TL101\n")
    path = tmp_path / "train.py"
    path.write_bytes(source.replace("\n", newline).encode())
    _, data = run_json(path)
    assert data["findings"] == []
    path.write_bytes(CLIP_AFTER_STEP.replace("\n", newline).encode())
    _, data = run_json(path)
    assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 9)]
