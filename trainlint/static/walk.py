"""Fast tree walking. ``CSTNode.children`` runs a visitor per call; reading the dataclass fields that
can hold nodes (and skipping whitespace/token fields) is an order of magnitude cheaper.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Type

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


_IS_NODE: Dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    # ``isinstance(x, cst.CSTNode)`` goes through ABC machinery; a per-type answer is much cheaper
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    found: List[cst.CSTNode] = []
    for name in _fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found.extend(item for item in value if _is_node(type(item)))
        elif _is_node(kind):
            found.append(value)
    return found


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk over the nodes that carry code (operators and whitespace excluded)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


class Preorder:
    """Every code node of a tree once, in pre-order, with where each subtree ends: a subtree is a
    contiguous slice. The engine asks for many nested subtrees of one module (each function, each
    statement, each ``if``); slicing this list replaces walking them again and again."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.nodes: List[cst.CSTNode] = []
        self.ends: List[int] = []
        self._start: Dict[int, int] = {}
        stack: List[Tuple[cst.CSTNode, int]] = [(root, -1)]
        while stack:
            node, opened = stack.pop()
            if opened >= 0:  # every descendant is listed: the subtree ends here
                self.ends[opened] = len(self.nodes)
                continue
            at = len(self.nodes)
            self._start[id(node)] = at
            self.nodes.append(node)
            self.ends.append(at + 1)
            stack.append((node, at))
            stack.extend((child, -1) for child in reversed(children(node)))

    def index(self, node: cst.CSTNode) -> Optional[int]:
        """Where ``node`` is in ``nodes``; None for a node of another tree."""
        at = self._start.get(id(node))
        return at if at is not None and self.nodes[at] is node else None

    def subtree(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """``node`` and its descendants in pre-order (a node of another tree is walked)."""
        at = self.index(node)
        if at is None:
            return list(walk(node))
        return self.nodes[at:self.ends[at]]
