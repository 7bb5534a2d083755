"""--add-noqa: a comment that suppresses each current finding, merged with the comments there,
never breaking a string or a continuation, and idempotent."""
from __future__ import annotations

import ast
import json

import pytest

from cli_support import BOTH, CLIP_AFTER_STEP, run, run_json, write
from test_notebooks import LOOP, SETUP, notebook
from trainlint.noqa import NoqaError, add_to_source
from trainlint.suppression import parse_suppressions

CLIP_LINE = "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"


def _adopt(path):
    """--add-noqa, then the checks every case must pass: no finding left, same syntax tree, and a
    second run that changes nothing."""
    before = path.read_bytes()
    first = run("--add-noqa", "--no-cache", path)
    assert first.exit_code == 0, first.output
    after = path.read_bytes()
    if path.suffix == ".py":
        assert ast.dump(ast.parse(before)) == ast.dump(ast.parse(after))
    _, data = run_json("--no-cache", path)
    assert data["findings"] == []
    second = run("--add-noqa", "--no-cache", path)
    assert second.exit_code == 0 and "Added 0 noqa comments to 0 files." in second.stderr
    assert path.read_bytes() == after
    return first, after.decode("utf-8")


def test_comments_on_the_reported_lines(tmp_path):
    result, text = _adopt(write(tmp_path, "train.py", BOTH))
    assert "Added 2 noqa comments to 1 file." in result.stderr
    assert "    scheduler.step()  # noqa: TL102\n" in text
    assert "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # noqa: TL101\n" in text


@pytest.mark.parametrize(("comment", "merged"), [
    ("# noqa: E501", "# noqa: E501, TL101"),
    ("# noqa:E501,W291", "# noqa:E501,W291, TL101"),
    ("# noqa: TL102", "# noqa: TL102, TL101"),
    ("# type: ignore", "# type: ignore  # noqa: TL101"),
    ("# trainlint: ignore[TL102]", "# trainlint: ignore[TL102, TL101]"),
    ("# noqa: E501  # the long line is fine", "# noqa: E501, TL101  # the long line is fine"),
])
def test_merges_with_the_comment_there(tmp_path, comment, merged):
    source = CLIP_AFTER_STEP.replace(CLIP_LINE, CLIP_LINE.rstrip("\n") + "  " + comment + "\n")
    _, text = _adopt(write(tmp_path, "train.py", source))
    assert CLIP_LINE.rstrip("\n") + "  " + merged + "\n" in text


def test_merges_the_rules_of_one_line():
    source = "x = 1  # noqa: TL101\ny = 2\n"
    new, count = add_to_source(source, {1: {"TL102", "TL101"}, 2: {"TL105", "TL101"}})
    assert count == 2
    assert new == "x = 1  # noqa: TL101, TL102\ny = 2  # noqa: TL101, TL105\n"


def test_a_noqa_of_other_tools_is_read_with_their_codes():
    assert parse_suppressions("x = 1  # noqa: E501, TL101\n").by_line == {1: {"E501", "TL101"}}


def test_backslash_continuation_gets_the_comment_on_its_last_line(tmp_path):
    clip = "    torch.nn.utils.clip_grad_norm_(model.parameters(), \\\n        1.0)\n"
    _, text = _adopt(write(tmp_path, "train.py", CLIP_AFTER_STEP.replace(CLIP_LINE, clip)))
    assert "    torch.nn.utils.clip_grad_norm_(model.parameters(), \\\n        1.0)  # noqa: TL101\n" in text


def test_statement_continued_by_backslash_before_the_call(tmp_path):
    clip = "    norm = \\\n        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP.replace(CLIP_LINE, clip))
    _, data = run_json("--no-cache", path)
    assert [f["rule"] for f in data["findings"]] == ["TL101"]
    _, text = _adopt(path)
    assert "1.0)  # noqa: TL101\n" in text


def test_a_line_ending_in_a_triple_quoted_string_gets_the_comment_after_the_string(tmp_path):
    clip = '    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0 if """a # not a comment\nb\n""" else 2.0)\n'
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP.replace(CLIP_LINE, clip))
    _, data = run_json("--no-cache", path)
    assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 9)]
    _, text = _adopt(path)
    assert 'a # not a comment\nb\n""" else 2.0)  # noqa: TL101\n' in text


def test_a_string_then_a_continuation_then_the_end():
    source = 'x = f("""a\nb""", \\\n  2)\n'
    new, count = add_to_source(source, {1: {"TL101"}})
    assert count == 1 and new == 'x = f("""a\nb""", \\\n  2)  # noqa: TL101\n'
    assert parse_suppressions(new).suppresses(1, "TL101", "clip-after-step")


def test_a_comment_on_a_later_line_of_a_bracketed_call_still_does_not_suppress_its_first_line():
    # Only lines that cannot hold a comment take another line's: inside brackets, each line can.
    suppressions = parse_suppressions("x = f(\n    1,\n)  # noqa: TL101\n")
    assert not suppressions.suppresses(1, "TL101", "clip-after-step")


def test_multiline_call_gets_the_comment_on_its_first_line(tmp_path):
    clip = "    torch.nn.utils.clip_grad_norm_(\n        model.parameters(),\n        1.0,\n    )\n"
    _, text = _adopt(write(tmp_path, "train.py", CLIP_AFTER_STEP.replace(CLIP_LINE, clip)))
    assert "    torch.nn.utils.clip_grad_norm_(  # noqa: TL101\n        model.parameters(),\n" in text


def test_crlf_and_a_missing_final_newline_are_kept(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(CLIP_AFTER_STEP.rstrip("\n").replace("\n", "\r\n").encode())
    _, text = _adopt(path)
    assert path.read_bytes().endswith(b"1.0)  # noqa: TL101")
    assert b"\n" not in path.read_bytes().replace(b"\r\n", b"")


def test_other_files_and_findings_in_other_modules(tmp_path):
    write(tmp_path, "engine.py", "def train_one_epoch(model, loader, optimizer, scheduler):\n"
          "    for x, y in loader:\n        optimizer.zero_grad()\n        loss = model(x).sum()\n"
          "        loss.backward()\n        scheduler.step()\n        optimizer.step()\n")
    main = write(tmp_path, "train.py", "import torch\nfrom engine import train_one_epoch\n"
                 "model = torch.nn.Linear(4, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                 "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)\n"
                 "train_one_epoch(model, loader, optimizer, scheduler)\n")
    _, data = run_json("--no-cache", main)
    assert [(f["path"].rsplit("/", 1)[-1], f["rule"]) for f in data["findings"]] == [("engine.py", "TL102")]
    _adopt(main)
    assert "        scheduler.step()  # noqa: TL102\n" in (tmp_path / "engine.py").read_text()


def test_a_rewrite_that_would_not_suppress_is_refused():
    with pytest.raises(NoqaError):
        add_to_source("x = 1\n", {7: {"TL101"}})


def test_notebook_cells_get_the_comment(tmp_path):
    path = tmp_path / "train.ipynb"
    document = json.loads(notebook(SETUP, LOOP))
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    result, text = _adopt(path)
    assert "Added 1 noqa comment to 1 file." in result.stderr
    cells = json.loads(text)["cells"]
    assert cells[2]["source"][5] == "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # noqa: TL101\n"
    assert cells[1]["source"] == document["cells"][1]["source"]  # magics untouched
    assert text == json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n"  # the layout kept


def test_notebook_source_as_one_string_and_compact_json(tmp_path):
    document = json.loads(notebook(SETUP, LOOP))
    document["cells"][2]["source"] = "".join(document["cells"][2]["source"])
    path = write(tmp_path, "train.ipynb", json.dumps(document))
    _, text = _adopt(path)
    assert "1.0)  # noqa: TL101\\n" in text
    assert text == json.dumps(json.loads(text))


def test_notebook_whose_layout_cannot_be_kept_is_left_alone(tmp_path):
    text = notebook(SETUP, LOOP).replace('"cells": [', '"cells":   [')
    path = write(tmp_path, "odd.ipynb", text)
    result = run("--add-noqa", "--no-cache", path)
    assert result.exit_code == 2
    assert "cannot add noqa comments: its JSON cannot be written back with the layout it has" in result.stderr
    assert path.read_text(encoding="utf-8") == text


def test_the_check_command_takes_it_too_and_respects_the_selection(tmp_path):
    path = write(tmp_path, "train.py", BOTH)
    result = run("check", "--add-noqa", "--no-cache", "--select", "TL102", path)
    assert result.exit_code == 0 and "Added 1 noqa comment to 1 file." in result.stderr
    assert "# noqa: TL102" in path.read_text() and "TL101" not in path.read_text()
    assert run("--add-noqa", "--write-baseline", tmp_path / "b.json", path).exit_code == 2
