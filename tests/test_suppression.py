"""Suppression comments on the reported line, and skip-file."""
from __future__ import annotations

import pytest

from cli_support import BOTH, CLIP_AFTER_STEP, run_json, write

CLIP_LINE = "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"


@pytest.mark.parametrize(
    "comment",
    ["# noqa", "# noqa: TL101", "# noqa:TL101", "# NOQA: TL102, TL101", "# noqa: clip-after-step",
     "# trainlint: ignore[TL101]", "# trainlint: ignore[TL102, clip-after-step]", "# trainlint: ignore"],
)
def test_comment_on_the_reported_line_suppresses(tmp_path, comment):
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.rstrip("\n") + "  " + comment + "\n")
    _, data = run_json(write(tmp_path, "train.py", source))
    assert data["findings"] == []


@pytest.mark.parametrize("comment", ["# noqa: TL102", "# trainlint: ignore[TL201]"])
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
    source = BOTH.replace("import torch\n", "import torch  # trainlint: skip-file is documented in README\n")
    _, data = run_json(write(tmp_path, "train.py", source))
    assert {f["rule"] for f in data["findings"]} == {"TL101", "TL102"}
