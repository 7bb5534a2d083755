"""Static analysis of one module's source: parse, model, explore, and report positioned findings."""
from __future__ import annotations

from typing import AbstractSet, Dict, List, Optional, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .. import checker
from ..catalog import load_catalog
from ..checker import Violation
from ..events import Event
from .extract import Extractor, Frame
from .flow import Interpreter
from .module import ModuleModel

# Rules the shared checker decides; the analyzer explores flow only when one of them is selected.
FLOW_RULES = checker.CHECKED_RULES


class AnalysisError(Exception):
    """The file could not be analyzed (e.g. a syntax error); the message says why, for humans."""


def could_fire(source: str, rules: AbstractSet[str]) -> bool:
    """Cheap pre-filter before parsing: a rule cannot fire without one of its trigger substrings."""
    catalog = load_catalog()
    for rule_id in rules:
        rule = catalog.get(rule_id)
        if rule is None:
            continue
        if not rule.triggers or any(trigger in source for trigger in rule.triggers):
            return True
    return False


def parse(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise AnalysisError(f"syntax error at line {exc.raw_line}, column {exc.raw_column + 1}: {exc.message}") from None
    except RecursionError:
        raise AnalysisError("nesting too deep to analyze") from None


def find_violations(module: cst.Module, source: str) -> List[Violation]:
    model = ModuleModel(module, source)
    interpreter = Interpreter(model, Extractor(model))
    interpreter.run(module.body, Frame(None), history_known=True)
    called = model.called_names()
    uncalled = [fn for fn in model.all_functions if fn.parent is None and not called.get(fn.name)]
    for fn in uncalled + model.all_functions:
        if id(fn.node) not in interpreter.reached:
            interpreter.run(fn.body, Frame(fn, cls=fn.cls), history_known=True)
    return interpreter.confirmed()


Span = Tuple[int, int, int, int]


def _spans(module: cst.Module, violations: List[Violation]) -> Dict[int, Span]:
    """Positions for the events findings name, computed once and only when there are findings."""
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    spans: Dict[int, Span] = {}
    for violation in violations:
        for event in (violation.at,) + tuple(ev for _, ev in violation.related):
            node = event.site
            if node is None or id(node) in spans or node not in positions:
                continue
            start = positions[node].start
            end = positions[node].end
            if isinstance(node, cst.For):
                end = positions[node.iter].end  # the loop header, not the whole loop
            spans[id(node)] = (start.line, start.column + 1, end.line, end.column + 1)
    return spans


def analyze(source: str, rules: AbstractSet[str]) -> List[Tuple[str, Span, str]]:
    """(rule id, span, message) for each finding of the selected rules, sorted by position."""
    if not (rules & FLOW_RULES) or not could_fire(source, rules & FLOW_RULES):
        return []
    module = parse(source)
    try:
        violations = [v for v in find_violations(module, source) if v.rule in rules]
    except RecursionError:
        raise AnalysisError("nesting too deep to analyze") from None
    if not violations:
        return []
    spans = _spans(module, violations)

    def line_of(event: Event) -> Optional[int]:
        span = spans.get(id(event.site))
        return span[0] if span else None

    results = []
    seen = set()
    for violation in violations:
        span = spans.get(id(violation.at.site))
        if span is None:
            continue
        key = (violation.rule, span)
        if key in seen:
            continue  # one statement reached through several callers is one finding
        seen.add(key)
        results.append((violation.rule, span, checker.render(violation, line_of)))
    results.sort(key=lambda r: (r[1], r[0]))
    return results
