"""Autofix: reviewed before/after pairs, idempotence, and the --fix / --diff command line."""
from __future__ import annotations

import pytest

from cli_support import CLEAN, CLIP_AFTER_STEP, run, write
from fixture_expectations import AUTOFIX
from trainlint.catalog import load_catalog
from trainlint.fix import FIXERS, fix_source
from trainlint.static.analyzer import analyze, parse

ALL_RULES = frozenset(load_catalog())
PAIRS = sorted(AUTOFIX.glob("*.before.py"))


@pytest.mark.parametrize("before", PAIRS, ids=lambda p: p.name.replace(".before.py", ""))
def test_fix_turns_before_into_after(before):
    rule = before.name.split("_", 1)[0]
    source = before.read_text(encoding="utf-8")
    expected = before.with_name(before.name.replace(".before.py", ".after.py")).read_text(encoding="utf-8")
    assert rule in {r for r, _, _ in analyze(source, ALL_RULES)}
    fixed, applied = fix_source(source, ALL_RULES)
    assert fixed == expected
    assert applied and set(applied) <= {rule, "TL103"}
    parse(fixed)
    assert rule not in {r for r, _, _ in analyze(fixed, ALL_RULES)}
    again, applied_again = fix_source(fixed, ALL_RULES)
    assert again == fixed and applied_again == [], "fixing twice must equal fixing once"


def test_every_autofix_rule_has_a_pair_and_is_marked_in_the_catalog():
    paired = {p.name.split("_", 1)[0] for p in PAIRS}
    assert paired == set(FIXERS)
    assert {r.id for r in load_catalog().values() if r.autofix} == set(FIXERS)


def test_comments_and_other_lines_are_kept(tmp_path):
    source = "# header comment\n" + CLIP_AFTER_STEP.replace("    loss.backward()\n", "    loss.backward()  # keep me\n")
    fixed, _ = fix_source(source, ALL_RULES)
    assert "# header comment" in fixed and "loss.backward()  # keep me" in fixed
    assert sorted(fixed.splitlines()) == sorted(source.splitlines()), "a move changes no line"


def test_suppressed_findings_are_not_fixed():
    source = CLIP_AFTER_STEP.replace("1.0)\n", "1.0)  # noqa: TL101\n")
    assert fix_source(source, ALL_RULES) == (source, [])


def test_unsafe_shapes_are_left_alone():
    # The clip runs after a step made in another function: no mechanical move is right.
    source = (
        "import torch\n"
        "def step(optimizer):\n"
        "    optimizer.step()\n"
        "optimizer = torch.optim.SGD(params, lr=0.1)\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward()\n"
        "    step(optimizer)\n"
        "    torch.nn.utils.clip_grad_norm_(params, 1.0)\n"
    )
    assert "TL101" in {r for r, _, _ in analyze(source, ALL_RULES)}
    assert fix_source(source, ALL_RULES) == (source, [])


def test_diff_prints_and_writes_nothing(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    result = run("--diff", path)
    assert result.exit_code == 1
    assert f"--- a/{path.as_posix()}" in result.stdout or "--- a/" in result.stdout
    assert "+    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)" in result.stdout
    assert path.read_text(encoding="utf-8") == CLIP_AFTER_STEP


def test_diff_reports_the_files_it_could_not_analyze_and_the_paths_it_could_not_find(tmp_path):
    """--diff prints the diffs of the files it can fix, and still says which it could not look at:
    exit 2, as a check would, not "0 files would be fixed" and a clean exit."""
    fixable = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    broken = write(tmp_path, "broken.py", "def f(:\n")
    result = run("--diff", fixable, broken, tmp_path / "missing.py")
    assert result.exit_code == 2
    assert "+    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)" in result.stdout
    assert "broken.py: error: syntax error at line 1" in result.stderr
    assert "missing.py: error: " in result.stderr
    assert "1 file would be fixed." in result.stderr
    assert run("--diff", broken).exit_code == 2 and run("--diff", fixable).exit_code == 1


def test_fix_writes_and_then_reports_clean(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    result = run("--fix", path)
    assert result.exit_code == 0, result.output
    assert "Fixed TL101" in result.stderr
    assert path.read_text(encoding="utf-8") != CLIP_AFTER_STEP
    assert run(path).exit_code == 0
    assert run("--diff", path).exit_code == 0


def test_fix_keeps_the_file_encoding(tmp_path):
    source = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + CLIP_AFTER_STEP
    path = tmp_path / "latin.py"
    path.write_bytes(source.encode("latin-1"))
    run("--fix", path)
    assert "caf\xe9" in path.read_bytes().decode("latin-1")


def test_fix_twice_on_the_command_line_is_fixing_once(tmp_path):
    # A form feed in a comment and on a blank line, CRLF endings: the first --fix moves the clip,
    # the second finds nothing to do.
    source = ("# \x0c header\r\n\x0c\r\n" + CLIP_AFTER_STEP.replace("\n", "\r\n")).encode("utf-8")
    path = tmp_path / "train.py"
    path.write_bytes(source)
    first = run("--fix", path)
    assert "Fixed TL101" in first.stderr and first.exit_code == 0, first.output
    fixed = path.read_bytes()
    assert fixed == ("# \x0c header\r\n\x0c\r\n" + CLEAN.replace("\n", "\r\n")).encode("utf-8")
    second = run("--fix", path)
    assert "Fixed" not in second.stderr and path.read_bytes() == fixed
