"""``fix_finding``: the fix of one finding (the language server's quick fix) is the edit
``trainlint --fix`` makes for it."""
from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import CLEAN, CLIP_AFTER_STEP
from trainlint.catalog import load_catalog
from trainlint.engine import Settings, check_file
from trainlint.fix import fix_finding, fix_source
from trainlint.static.analyzer import analyze_results

DEFAULT = frozenset(r.id for r in load_catalog().values() if not r.opt_in)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("fixture", [
    "TL101/bad_flat_script.py", "TL102/bad_epoch_scheduler_first.py", "TL103/bad_flat_amp.py",
    "TL201/bad_flat_mean_loss.py", "TL301/bad_flat_ddp.py", "TL803/bad_literal.py",
])
def test_one_findings_fix_is_what_fix_writes(fixture):
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    [result] = [r for r in analyze_results(text, DEFAULT) if r.path is None and r.rule == fixture[:5]]
    fixed, applied = fix_source(text, DEFAULT)
    assert applied == [fixture[:5]]  # --fix makes exactly this one fix here
    assert fix_finding(text, DEFAULT, result.rule, result.span[0], result.span[1]) == fixed


def test_no_fix_for_a_finding_that_is_not_there_or_suppressed():
    assert fix_finding(CLIP_AFTER_STEP, DEFAULT, "TL101", 3, 1) is None
    assert fix_finding(CLIP_AFTER_STEP, DEFAULT - {"TL101"}, "TL101", 9, 5) is None
    suppressed = CLIP_AFTER_STEP.replace("1.0)\n", "1.0)  # noqa: TL101\n")
    assert fix_finding(suppressed, DEFAULT, "TL101", 9, 5) is None
    assert fix_finding(CLIP_AFTER_STEP, DEFAULT, "TL101", 9, 5) == CLEAN


def test_check_file_checks_the_given_text_instead_of_the_files(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(CLEAN)
    settings = Settings(rules=DEFAULT, cache=False)
    findings, errors, _ = check_file(path, settings, CLIP_AFTER_STEP.encode())
    assert [f.rule for f in findings] == ["TL101"] and errors == []
    assert check_file(path, settings)[0] == []
    assert [f.rule for f in check_file(tmp_path / "unsaved.py", settings, CLIP_AFTER_STEP.encode())[0]] == ["TL101"]
