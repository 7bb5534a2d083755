"""Each runtime program yields, under the guard, exactly the findings its ``# expect:`` comments
name, on those lines; and the static analyzer says the same about the same program."""
from __future__ import annotations

from pathlib import Path

import pytest

from fixture_expectations import expected_findings
from trainlint.catalog import load_catalog
from trainlint.runtime.command import run_script
from trainlint.runtime.guard import Guard
from trainlint.runtime.rules import checkable
from trainlint.static.analyzer import analyze

PROGRAMS = Path(__file__).resolve().parent / "programs"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# Fixtures of runtime-only rules (TL810) are runtime programs too: the guard checks their expectations.
RUNTIME_ONLY_FIXTURES = sorted(
    p for rule in sorted(r.id for r in load_catalog().values() if not r.static) for p in (FIXTURES / rule).glob("*.py")
)
ALL_PROGRAMS = sorted(PROGRAMS.glob("*.py")) + RUNTIME_ONLY_FIXTURES


def runtime_findings(path: Path) -> set:
    guard = Guard(mode="collect", select="ALL")
    status = run_script(str(path), [], guard)
    assert status == 0
    for finding in guard.findings:
        assert Path(finding.path).resolve() == path, finding  # the user's own file, not torch's
    return {(f.line, f.rule) for f in guard.findings}


def _name(path: Path) -> str:
    return path.name if path.parent == PROGRAMS else f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", ALL_PROGRAMS, ids=_name)
def test_runtime_findings_match_expectations(path):
    expected = expected_findings(path.read_text(encoding="utf-8"))
    actual = runtime_findings(path)
    assert actual == expected, f"missed {sorted(expected - actual)}, unexpected {sorted(actual - expected)}"


@pytest.mark.parametrize("path", ALL_PROGRAMS, ids=_name)
def test_static_and_runtime_agree(path):
    """On the rules both sides check, one program gets one verdict (runtime-only rules aside)."""
    from trainlint.catalog import load_catalog

    both = checkable() - {r.id for r in load_catalog().values() if not r.static}
    static = {(span[0], rule) for rule, span, _ in analyze(path.read_text(encoding="utf-8"), both)}
    runtime = {(line, rule) for line, rule in runtime_findings(path) if rule in both}
    assert static == runtime


def test_every_runtime_rule_has_a_bad_and_a_good_program():
    """Here (programs/ and the fixtures of runtime-only rules), or among the two-process programs
    of test_distributed.py (TL203, TL305, TL307)."""
    distributed = sorted((PROGRAMS.parent / "distributed").glob("*.py"))
    covered = {rule for p in ALL_PROGRAMS + distributed for _, rule in expected_findings(p.read_text(encoding="utf-8"))}
    assert covered == set(checkable())
    names = [p.name for p in ALL_PROGRAMS if p.parent == PROGRAMS]
    for rule in sorted(checkable() - {"TL203", "TL305", "TL307"}):
        fixtures = [p.name for p in RUNTIME_ONLY_FIXTURES if p.parent.name == rule]
        clean = any(n.startswith(rule.lower() + "_good") for n in names) or any(n.startswith("good_") for n in fixtures)
        assert clean, f"{rule}: no clean twin"


def test_catalog_says_which_rules_the_guard_confirms():
    """`runtime_confirmed` in the catalog is exactly the set of rules the guard checks (and the
    programs above cover), so `trainlint explain` and the docs cannot drift from the guard."""
    from trainlint.catalog import load_catalog

    assert {r.id for r in load_catalog().values() if r.runtime_confirmed} == set(checkable())
