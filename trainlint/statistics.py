"""``--statistics``: how many findings each rule has, and how many of them ``--fix`` would fix.

A rule's autofix does not fix every finding of the rule: ``--fix`` edits a statement only when
the edit is proven (it parses, keeps the statement in its block, and analyzed again, removes the
finding and adds none; see trainlint/fix.py), and only in the Python files it was given (not
notebooks, not a finding a checked file's call placed in a module that was not named). So the
count is found the way ``--diff`` finds it: by running the fixer, writing nothing, on each file
that has findings of a rule with an autofix, and counting the findings of each rule the fixed
text no longer has. Files without such findings cost nothing more.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, List, Sequence, Tuple

import click

from .catalog import load_catalog

if TYPE_CHECKING:
    from .engine import Report, Settings

FIXABLE_MARK, UNFIXED_MARK, NO_FIX_MARK = "[*]", "[ ]", "   "
LEGEND = (f"{FIXABLE_MARK} fixable with `trainlint --fix` (`--diff` shows the edits); {UNFIXED_MARK} the rule has "
          "an autofix, but it cannot prove a fix for these findings.")


@dataclass(frozen=True)
class Row:
    rule: str
    name: str
    count: int
    fixable: int  # of ``count``, the findings --fix would fix
    autofix: bool  # the rule has an autofix at all

    def to_json(self) -> dict:
        return {"rule": self.rule, "name": self.name, "count": self.count, "fixable": self.fixable,
                "autofix": self.autofix}


def rows(report: Report, plan: Sequence[Tuple[List[str], Settings]]) -> List[Row]:
    """One row per rule with findings: by count, most first, then by id."""
    catalog = load_catalog()
    counts = Counter(f.rule for f in report.findings)
    names = {f.rule: f.name for f in report.findings}
    fixed = fixable_counts(report, plan)
    return [
        Row(rule, names[rule], count, fixed.get(rule, 0), catalog[rule].autofix if rule in catalog else False)
        for rule, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def fixable_counts(report: Report, plan: Sequence[Tuple[List[str], Settings]]) -> Dict[str, int]:
    """Per rule, how many of the report's findings ``--fix`` on the same paths would fix."""
    catalog = load_catalog()
    autofix = {rule for rule, entry in catalog.items() if entry.autofix}
    wanted = Counter((f.path, f.rule) for f in report.findings if f.rule in autofix and f.cell is None)
    if not wanted:
        return {}  # nothing to try: the fixer (and libcst) is not even loaded
    from .engine import display_path, rules_for
    from .files import SourceError, decode_source, discover, read_bytes
    from .fix import fix_source
    from .static.analyzer import AnalysisError, analyze_results

    paths = {path for path, _ in wanted}
    total: Counter = Counter()
    for group, settings in plan:
        files = discover(group, settings.config.root, settings.config.exclude, settings.respect_gitignore).files
        for path in files:
            shown = display_path(path)
            if path.suffix != ".py" or shown not in paths:
                continue
            rules = rules_for(path, settings)
            try:
                text = decode_source(read_bytes(path))
                fixed, applied = fix_source(text, rules)  # what --fix and --diff run
                if not applied:
                    continue
                checked = rules & autofix
                before = _shown_counts(analyze_results(text, checked), settings)
                after = _shown_counts(analyze_results(fixed, checked), settings)
            except (SourceError, AnalysisError, RecursionError):
                continue  # --fix leaves such a file as it is
            for rule in checked:
                total[rule] += min(wanted[(shown, rule)], max(0, before[rule] - after[rule]))
    return dict(total)


def _shown_counts(results: Iterable, settings: Settings) -> Counter:
    """The fixer's view of a file's findings, counted per rule as the report shows them (advice
    only where asked for: trainlint.engine._module_findings)."""
    catalog = load_catalog()
    return Counter(
        r.rule for r in results
        if r.path is None and (not r.advice or catalog[r.rule].opt_in or r.rule in settings.advice)
    )


def render_table(table: Sequence[Row], color: bool = False) -> str:
    """Like ``ruff check --statistics``: count, rule id, fix marker and name, one rule a line;
    ``(2 of 3 fixable)`` where --fix would fix only some of a rule's findings."""
    width = max((len(str(row.count)) for row in table), default=1)
    lines = []
    for row in table:
        mark = FIXABLE_MARK if row.fixable else UNFIXED_MARK if row.autofix else NO_FIX_MARK
        if color and row.fixable:
            mark = click.style(mark, fg="green", bold=True)
        rule = click.style(row.rule, bold=True) if color else row.rule
        partial = f" ({row.fixable} of {row.count} fixable)" if 0 < row.fixable < row.count else ""
        lines.append(f"{row.count:>{width}}  {rule:<5}  {mark} {row.name}{partial}")
    return "".join(line + "\n" for line in lines)


def render_json(table: Sequence[Row]) -> str:
    return json.dumps([row.to_json() for row in table], indent=2) + "\n"


def legend(table: Sequence[Row]) -> str:
    """What the markers mean, for stderr beside the summary; empty when the table has none."""
    return LEGEND if any(row.autofix for row in table) else ""
