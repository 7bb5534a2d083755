"""Every fixture program yields exactly the findings its ``# expect:`` comments name."""
from __future__ import annotations

import pytest

from trainlint.catalog import load_catalog
from trainlint.static.analyzer import analyze_results

from fixture_expectations import FIXTURES, expected_entries, expected_findings, fixture_files

CATALOG = load_catalog()
DEFAULT_RULES = frozenset(r.id for r in CATALOG.values() if not r.opt_in)
# Runtime-only rules (TL810): their fixtures' expectations are checked under the guard
# (tests/runtime/test_programs.py); statically those programs must be clean.
RUNTIME_ONLY = frozenset(r.id for r in CATALOG.values() if not r.static)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture(path):
    source = path.read_text(encoding="utf-8")
    expected = {entry for entry in expected_entries(source) if entry[1] not in RUNTIME_ONLY}
    # The default rule set, plus the fixture directory's own rule (which may be opt-in); each
    # finding with its tier: ``:advice`` in the expectation where it is a recipe of its rule.
    rules = DEFAULT_RULES | ({path.parent.name} & CATALOG.keys())
    actual = {(r.span[0], r.rule, r.advice) for r in analyze_results(source, rules)}
    missed = sorted(expected - actual)
    extra = sorted(actual - expected)
    assert not missed and not extra, f"missed {missed}, unexpected {extra}"


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_rule_selected_alone_finds_what_it_finds_among_all(path):
    """``--select TL105``: a rule's findings do not depend on which other rules run (the rules
    the fixture expects, and its directory's rule, which a good fixture must not find)."""
    source = path.read_text(encoding="utf-8")
    expected = {entry for entry in expected_entries(source) if entry[1] not in RUNTIME_ONLY}
    for rule in sorted({rule for _, rule, _ in expected} | ({path.parent.name} & CATALOG.keys() - RUNTIME_ONLY)):
        actual = {(r.span[0], r.rule, r.advice) for r in analyze_results(source, frozenset({rule}))}
        assert actual == {entry for entry in expected if entry[1] == rule}, rule


def test_every_rule_has_bad_and_good_fixtures():
    for rule_id in CATALOG:
        files = [p for p in fixture_files() if p.parent.name == rule_id]
        bad = [p for p in files if p.name.startswith("bad_")]
        good = [p for p in files if p.name.startswith("good_")]
        # The five headline rules carry at least four of each, the rest at least three.
        least = 4 if rule_id in ("TL101", "TL102", "TL103", "TL201", "TL301") else 3
        assert len(bad) >= least and len(good) >= least, f"{rule_id}: {len(bad)} bad, {len(good)} good fixtures"
        for p in bad:
            assert any(rule == rule_id for _, rule in expected_findings(p.read_text(encoding="utf-8"))), p
