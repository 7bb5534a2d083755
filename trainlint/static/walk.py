"""Fast tree walking. ``CSTNode.children`` runs a visitor per call; reading the dataclass fields that
can hold nodes (and skipping whitespace/token fields) is an order of magnitude cheaper.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, Tuple, Type

import libcst as cst

_SKIP = ("whitespace", "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators",
         "header", "footer", "colon", "equal", "dot", "star", "operator", "lbracket", "rbracket",
         "lbrace", "rbrace", "newline", "indent", "asynchronous")
_FIELDS: Dict[Type[cst.CSTNode], Tuple[str, ...]] = {}


def _fields(kind: Type[cst.CSTNode]) -> Tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind) if not any(f.name.startswith(s) or f.name == s for s in _SKIP)
        )
        _FIELDS[kind] = names
    return names


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for name in _fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk over the nodes that carry code (operators and whitespace excluded)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))
