"""The catalog loads, is well-formed, and every entry's own bad/good examples behave as documented."""
from __future__ import annotations

import pytest

from trainlint.catalog import SEVERITIES, get_rule, load_catalog, matches
from trainlint.static.analyzer import analyze

CATALOG = load_catalog()
ALL_RULES = frozenset(CATALOG)
# The static engine's rules; runtime-only entries (a loss value) are checked by tests/runtime.
STATIC = [r for r in CATALOG.values() if r.static]


def test_core_rules_keep_their_public_ids_and_names():
    expected = {
        "TL101": "clip-after-step",
        "TL102": "scheduler-before-step",
        "TL103": "clip-before-unscale",
        "TL201": "undivided-accumulation-loss",
        "TL301": "missing-set-epoch",
    }
    for rule_id, name in expected.items():
        assert CATALOG[rule_id].name == name
        assert get_rule(name) is CATALOG[rule_id]


@pytest.mark.parametrize("rule", CATALOG.values(), ids=lambda r: r.id)
def test_entry_is_complete(rule):
    assert rule.severity in SEVERITIES
    for text in (rule.summary, rule.rationale, rule.fix, rule.runtime, rule.bad, rule.good):
        assert text.strip()


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.id)
def test_bad_example_is_reported(rule):
    found = {r for r, _, _ in analyze(rule.bad, ALL_RULES)}
    assert rule.id in found, f"{rule.id} bad example produced {found}"


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.id)
def test_good_example_is_clean(rule):
    assert analyze(rule.good, ALL_RULES) == []


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.id)
def test_bad_example_has_no_other_finding(rule):
    """A bad example shows exactly its own bug."""
    assert {r for r, _, _ in analyze(rule.bad, ALL_RULES)} == {rule.id}


@pytest.mark.parametrize("rule", [r for r in CATALOG.values() if not r.static], ids=lambda r: r.id)
def test_runtime_only_rule_is_never_reported_statically(rule):
    """Selecting a runtime-only rule in the linter is harmless: it can find nothing there."""
    assert analyze(rule.bad, ALL_RULES) == []
    assert rule.runtime.startswith("Runtime only")


def test_selectors():
    rule = CATALOG["TL101"]
    assert matches(rule, "TL101") and matches(rule, "TL1") and matches(rule, "clip-after-step")
    assert matches(rule, "ALL") and not matches(rule, "TL2")


def test_rules_index_is_up_to_date():
    from pathlib import Path

    from trainlint.cli import render_index

    index = Path(__file__).resolve().parents[1] / "rules" / "README.md"
    assert index.read_text(encoding="utf-8") == render_index(list(CATALOG.values())), (
        "rules/README.md is stale: run `trainlint rules --format markdown > rules/README.md`"
    )


def test_the_rules_said_to_read_project_modules_are_those_whose_patterns_do():
    from trainlint.catalog import READS_PROJECT_MODULES
    from trainlint.static.patterns import through_project_registry

    assert READS_PROJECT_MODULES == frozenset(through_project_registry())
