"""Autofix properties (issue 16): on every fixture program, and on fixture programs mutated the way
the fuzzer found problems (form feeds, vertical tabs, line separators; lines duplicated, deleted,
swapped), fixing never raises anything but the analyzer's own error, gives code that compiles,
converges in one pass (fixing the result again changes nothing), removes each finding it fixed,
changes no line but the fixed statements', and never runs into the loop's limit."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from fixture_expectations import AUTOFIX, FIXTURES
from trainlint.catalog import load_catalog
from trainlint.fix import FIXERS, MAX_FIXES, fix_report, split_lines
from trainlint.static.analyzer import AnalysisError, analyze

ALL_RULES = frozenset(load_catalog())
ALL_FIXTURES = sorted(p for p in FIXTURES.rglob("*.py") if "__pycache__" not in p.parts)
# The programs with something to fix: the reviewed pairs and the bad fixtures of the fixable rules.
FIXABLE = sorted(AUTOFIX.glob("*.before.py")) + sorted(p for rule in FIXERS for p in (FIXTURES / rule).glob("bad_*.py"))
INSERTED = ("TL103", "TL301")  # fixes that add a line; the others move one or rewrite it
# What the fixes write: an inserted unscale_/set_epoch, a divided loss, a gated dropout, a mask
# without is_causal (the lines they rewrite: a backward, a dropout_p, an is_causal).
WRITTEN = (".unscale_(", ".set_epoch(", ".backward(", "dropout_p=", "attn_mask")
REWRITTEN = (".backward(", "dropout_p", "is_causal")


def _profile_name() -> str:
    getter = getattr(settings, "get_current_profile_name", None)
    return getter() if getter else getattr(settings, "_current_profile", "default")


def _budget(default_examples: int) -> settings:
    """This test's own count under the default profile; another profile (long) sets its own."""
    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    if _profile_name() == "default":
        return settings(max_examples=default_examples, **common)
    return settings(**common)


def compiles(source: str) -> bool:
    try:
        compile(source, "<fixed>", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


def check_fix(source: str, log=lambda text: None) -> str:
    """Check the properties every fix of ``source`` must have (``log``: where to say what was
    fixed); what happened, in a word or two."""
    try:
        report = fix_report(source, ALL_RULES)
    except AnalysisError:
        # A file the analyzer cannot read (libcst's tokenizer rejects a form feed in the indentation
        # that opens a block, which CPython accepts) is the analyzer's per-file error, not the fixer's.
        with pytest.raises(AnalysisError):
            analyze(source, ALL_RULES)
        return "not analyzed"
    if not compiles(source):
        assert (report.text, report.applied) == (source, []), "nothing is fixed in what CPython cannot compile"
        return "not compiled"
    log(f"applied: {report.applied}, declined: {report.declined}")
    assert not report.exhausted and len(report.applied) < MAX_FIXES
    if not report.applied:
        assert report.text == source
        return "declined" if report.declined else "nothing fixed"
    fixed = report.text
    assert compiles(fixed)
    again = fix_report(fixed, ALL_RULES)
    assert (again.text, again.applied) == (fixed, []), "fixing twice must equal fixing once"
    remaining = {(rule, span[0]) for rule, span, _ in analyze(fixed, ALL_RULES)}
    assert not remaining & set(report.fixed), "a fixed finding must be gone"
    before = Counter(line.strip() for line in split_lines(source))
    after = Counter(line.strip() for line in split_lines(fixed))
    removed, added = before - after, after - before
    assert sum(added.values()) == sum(removed.values()) + sum(report.applied.count(r) for r in INSERTED)
    assert all(any(mark in line for mark in REWRITTEN) for line in removed), removed
    assert all(any(mark in line for mark in WRITTEN) for line in added), added
    return "fixed"


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixing_every_fixture_converges_in_one_pass(path):
    check_fix(path.read_text(encoding="utf-8"))


# Characters str.splitlines() breaks lines at but the parser does not (only \f and \v are
# whitespace to the parser; the rest may only stand in comments and strings).
IN_COMMENTS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@st.composite
def mutated(draw):
    path = draw(st.sampled_from(FIXABLE))
    lines = split_lines(path.read_text(encoding="utf-8"))
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        kind = draw(st.sampled_from(["blank", "indent", "end", "comment", "duplicate", "delete", "swap"]))
        at = draw(st.integers(0, len(lines) - 1))
        line = lines[at]
        body, end = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")):] or "\n"
        if kind == "blank":  # a line of its own at a line boundary
            lines.insert(at, draw(st.sampled_from(["\x0c", "\x0b", " \x0c ", "# \u2028"])) + end)
        elif kind == "indent":  # a form feed where a line starts (it resets the indentation column)
            lines[at] = "\x0c" + line
        elif kind == "end":  # whitespace at the end of a line
            lines[at] = body + draw(st.sampled_from(["\x0c", " \x0c"])) + end
        elif kind == "comment":
            lines[at] = body + "  # " + "".join(draw(st.lists(st.sampled_from(IN_COMMENTS), min_size=1, max_size=3))) + end
        elif kind == "duplicate":
            lines.insert(at, line)
        elif kind == "delete":
            del lines[at]
        elif at + 1 < len(lines):
            lines[at], lines[at + 1] = lines[at + 1], lines[at]
    return path.name, "".join(lines)


@_budget(80)
@given(mutated())
def test_fixing_mutated_fixtures_is_safe(case):
    name, source = case
    note(name)
    event(check_fix(source, note))
