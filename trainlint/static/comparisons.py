"""Branch conditions that compare one expression with an integer (``accum_count > 1``): can a
path's assumptions about them hold together?

A path is a witness only if it can run. Two kinds of path cannot:
- one whose assumptions contradict each other over the integers (``k > 1`` true, ``k == 0`` true);
- one outside the cases the program itself distinguishes. A program that tests both
  ``k == 1`` and ``k > 1`` of the same expression, and never asks whether it is below 1, says
  what values it expects (an accumulation count: one, or more): the path on which neither holds
  (``k < 1``) is not one of its runs, and a finding that only that path shows is not proven.
"""
from __future__ import annotations

from typing import Dict, Iterable, NamedTuple, Optional, Set, Tuple

import libcst as cst

from .calls import literal_number

_OPERATORS = {cst.Equal: "==", cst.NotEqual: "!=", cst.GreaterThan: ">", cst.GreaterThanEqual: ">=",
              cst.LessThan: "<", cst.LessThanEqual: "<="}
_NEGATED = {"==": "!=", "!=": "==", ">": "<=", ">=": "<", "<": ">=", "<=": ">"}


class Comparison(NamedTuple):
    subject: str  # the compared expression's code
    operator: str
    bound: int


def comparison(test: cst.BaseExpression, code) -> Optional[Comparison]:
    """``test`` as a comparison of an expression with an integer literal, else None."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    operator = _OPERATORS.get(type(target.operator))
    bound = _integer(target.comparator)
    if operator is None or bound is None or _integer(test.left) is not None:
        return None
    return Comparison(" ".join(code(test.left).split()), operator, bound)


def _integer(node: cst.BaseExpression) -> Optional[int]:
    value = literal_number(node)
    return value if isinstance(value, int) else None


def floors(tested: Iterable[Comparison]) -> Dict[str, int]:
    """The least value the program expects of each expression it compares: ``c`` where it tests
    both ``== c`` and ``> c`` and never whether the expression is below anything."""
    by_subject: Dict[str, Set[Tuple[str, int]]] = {}
    for found in tested:
        by_subject.setdefault(found.subject, set()).add((found.operator, found.bound))
    expected = {}
    for subject, tests in by_subject.items():
        if any(operator in ("<", "<=") for operator, _ in tests):
            continue
        cases = [bound for operator, bound in tests if operator == "==" and (">", bound) in tests]
        if cases:
            expected[subject] = min(cases)
    return expected


def satisfiable(assumed: Iterable[Tuple[Comparison, bool]], floor: Optional[int]) -> bool:
    """Can one integer meet every (comparison, holds) of one subject, and be at least ``floor``?"""
    low = floor
    high: Optional[int] = None
    excluded: Set[int] = set()
    for found, holds in assumed:
        operator = found.operator if holds else _NEGATED[found.operator]
        bound = found.bound
        if operator in ("==", ">=", ">"):
            least = bound + 1 if operator == ">" else bound
            low = least if low is None else max(low, least)
        if operator in ("==", "<=", "<"):
            most = bound - 1 if operator == "<" else bound
            high = most if high is None else min(high, most)
        if operator == "!=":
            excluded.add(bound)
    if low is not None and high is not None:
        if low > high:
            return False
        return any(value not in excluded for value in range(low, min(high, low + len(excluded)) + 1))
    return True
