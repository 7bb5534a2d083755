"""Fast tree walking. ``CSTNode.children`` runs a visitor per call; reading the dataclass fields that
can hold nodes (and skipping whitespace/token fields) is an order of magnitude cheaper.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type

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


class _NodeTypes(dict):
    """type -> is it a CSTNode? ``isinstance(x, cst.CSTNode)`` goes through ABC machinery; a
    per-type answer, subscripted, is much cheaper."""

    def __missing__(self, kind: type) -> bool:
        known = self[kind] = issubclass(kind, cst.CSTNode)
        return known


_IS_NODE = _NodeTypes()


class _ChildReaders(dict):
    """type -> a function listing a node's children, generated for the type's fields: reading
    each field by name in straight-line code is several times cheaper than looping over the
    names with ``getattr`` (the engine lists the children of every node of a module more than
    once)."""

    def __missing__(self, kind: type) -> Callable[[cst.CSTNode], List[cst.CSTNode]]:
        lines = ["def children(node):", "    found = []"]
        for name in _fields(kind):
            lines += [
                f"    value = node.{name}",
                "    kind = type(value)",
                "    if kind is tuple or kind is list:",
                "        found.extend([item for item in value if is_node[type(item)]])",
                "    elif is_node[kind]:",
                "        found.append(value)",
            ]
        lines.append("    return found")
        namespace: Dict[str, object] = {"is_node": _IS_NODE}
        exec("\n".join(lines), namespace)  # noqa: S102 - the code is built from the dataclass's field names
        reader = self[kind] = namespace["children"]
        return reader


_CHILDREN = _ChildReaders()


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The node's children that carry code, in field order."""
    return _CHILDREN[type(node)](node)


def code_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes of ``node`` in source order, except inside the functions, classes and lambdas it
    defines (their code does not run there)."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if current is not node and (kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda):
            continue
        yield current
        stack.extend(reversed(children(current)))


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
        nodes, ends, start = self.nodes, self.ends, self._start
        # A node still to list, or (an int) the index of a node whose descendants are all listed.
        stack: List[object] = [root]
        while stack:
            node = stack.pop()
            if type(node) is int:  # every descendant is listed: the subtree ends here
                ends[node] = len(nodes)
                continue
            at = len(nodes)
            start[id(node)] = at
            nodes.append(node)
            ends.append(at + 1)
            below = children(node)  # type: ignore[arg-type]
            if below:  # a leaf (most nodes) ends where it starts
                stack.append(at)
                below.reverse()
                stack.extend(below)

    def index(self, node: cst.CSTNode) -> Optional[int]:
        """Where ``node`` is in ``nodes``; None for a node of another tree."""
        at = self._start.get(id(node))
        return at if at is not None and self.nodes[at] is node else None

    def code(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """``code_nodes(node)``, read off the list: a nested definition's subtree is skipped whole."""
        at = self.index(node)
        if at is None:
            yield from code_nodes(node)
            return
        nodes, ends = self.nodes, self.ends
        yield node
        index, end = at + 1, ends[at]
        while index < end:
            current = nodes[index]
            kind = type(current)
            if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
                index = ends[index]
                continue
            yield current
            index += 1

    def subtree(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """``node`` and its descendants in pre-order (a node of another tree is walked)."""
        at = self.index(node)
        if at is None:
            return list(walk(node))
        return self.nodes[at:self.ends[at]]
