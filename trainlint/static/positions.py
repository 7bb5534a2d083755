"""Where nodes are in the source, computed only for the statements that hold them.

libcst's position metadata renders the whole module to place any node: on a big file that pass
cost about a third of the check, and its position objects a few hundred MiB at 50k lines. Findings
name a handful of statements, so the innermost statement of a class or function body that holds
one is rendered alone, inside its enclosing definitions reduced to their headers (so it keeps its
indentation and columns), and CPython's parse of the file (in C, several times cheaper than a
libcst rendering) says on which line that statement starts. A finding in a 5,000-line class
renders a few lines, not the class. Whenever the two parses do not line up statement for
statement (a grammar only libcst reads), the whole module is rendered as before.
"""
from __future__ import annotations

import ast
from bisect import bisect_right
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from .cpython import cpython_tree
from .module import ModuleModel

T = TypeVar("T")
Resolver = Callable[[Callable[[], T]], T]
_DEFINITIONS = (cst.FunctionDef, cst.ClassDef)
_AST_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class _Parsed(NamedTuple):
    """What is kept of CPython's parse of a statement: the line it starts on and, for a
    definition, the same for its body (the whole ``ast`` tree would keep ~2 KB per source line)."""

    lineno: int
    body: Optional[List["_Parsed"]]


# A statement's rendering: the positions of its nodes, and the lines to add to them.
_Rendering = Tuple[Mapping[cst.CSTNode, CodeRange], int]
_Pairs = List[Tuple[cst.BaseStatement, _Parsed]]


class Positions:
    """``node in positions`` and ``positions[node]`` (a libcst ``CodeRange``) for the nodes of one
    module. ``guarded`` runs a libcst rendering (it recurses over nested statements) so that a
    tree too deep for the interpreter's stack still gets its positions."""

    def __init__(self, model: ModuleModel, guarded: Resolver) -> None:
        self._model = model
        self._guarded = guarded
        self._outline: Optional[List[_Parsed]] = None  # CPython's parse: the lines statements start on
        # a body's owner's id -> its statements paired with CPython's (None: they do not pair up),
        # and the pre-order index of each
        self._bodies: Dict[int, Tuple[Optional[_Pairs], List[int]]] = {}
        self._rendered: Dict[int, _Rendering] = {}  # statement's id -> its positions, lines to add
        self._whole: Optional[Mapping[cst.CSTNode, CodeRange]] = None
        self._ready = False

    def __contains__(self, node: cst.CSTNode) -> bool:
        return self._range(node) is not None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._range(node)
        if found is None:
            raise KeyError(node)
        return found

    # ----------------------------------------------------------------- lookup
    def _range(self, node: cst.CSTNode) -> Optional[CodeRange]:
        if not self._ready:
            self._prepare()
        if self._whole is not None:
            return self._whole.get(node)
        at = self._model.preorder.index(node)
        if at is None:
            return None  # not a node of this module (a statement of another file, a synthetic loop)
        path = self._path(at)
        if path is None:
            return None  # the module node itself, or whitespace outside every statement
        # A statement already rendered that holds the node (a function named in a finding's
        # trace holds the finding's statements) places it too.
        depth = next((i + 1 for i, (statement, _) in enumerate(path) if id(statement) in self._rendered), len(path))
        positions, offset = self._render(path[:depth])
        found = positions.get(node)
        if found is None or not offset:
            return found
        return CodeRange(CodePosition(found.start.line + offset, found.start.column),
                         CodePosition(found.end.line + offset, found.end.column))

    def _path(self, at: int) -> Optional[_Pairs]:
        """The statements holding the node at pre-order index ``at``, outermost first, each with
        CPython's statement for it: down through the bodies of definitions, to the innermost."""
        path: _Pairs = []
        owner: cst.CSTNode = self._model.module
        body: Sequence[cst.BaseStatement] = self._model.module.body
        parsed: List[_Parsed] = self._outline  # type: ignore[assignment]
        while True:
            pairs, starts = self._body(owner, body, parsed)
            index = bisect_right(starts, at) - 1
            if pairs is None or index < 0 or at >= self._model.preorder.ends[starts[index]]:
                return path or None  # outside the body's statements, or the parses differ here
            statement, parsed_statement = pairs[index]
            path.append((statement, parsed_statement))
            inner = statement.body if isinstance(statement, _DEFINITIONS) else None
            if starts[index] == at or not isinstance(inner, cst.IndentedBlock) or parsed_statement.body is None:
                return path  # the statement itself, or one whose body is not followed
            owner, body, parsed = inner, inner.body, parsed_statement.body

    def _body(self, owner: cst.CSTNode, body: Sequence[cst.BaseStatement], parsed: List[_Parsed]) -> Tuple[Optional[_Pairs], List[int]]:
        known = self._bodies.get(id(owner))
        if known is None:
            known = self._bodies[id(owner)] = (_paired(body, parsed), [self._model.preorder.index(s) for s in body])  # type: ignore[misc]
        return known

    def _render(self, path: _Pairs) -> _Rendering:
        statement, parsed = path[-1]
        rendering = self._rendered.get(id(statement))
        if rendering is None:
            # The statement inside its enclosing definitions, each reduced to the one statement
            # on the way down: the same indentation, so the same columns.
            reduced: cst.BaseStatement = statement
            for outer, _ in reversed(path[:-1]):
                reduced = outer.with_changes(body=outer.body.with_changes(body=[reduced]))
            module = self._model.module.with_changes(body=[reduced], header=(), footer=())
            positions = self._guarded(lambda: MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
            rendering = self._rendered[id(statement)] = (positions, parsed.lineno - positions[_anchor(statement)].start.line)
        return rendering

    # ----------------------------------------------------------------- set-up
    def _prepare(self) -> None:
        self._ready = True
        module = self._model.module
        self._outline = _parse(self._model.source)
        if self._outline is None or _paired(module.body, self._outline) is None:
            self._whole = self._guarded(lambda: MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


def _anchor(statement: cst.BaseStatement) -> cst.CSTNode:
    """The node whose line CPython's parse reports for the statement: a definition's name (after
    its decorators, on the line of ``def``/``class``), a statement line's first statement."""
    if isinstance(statement, _DEFINITIONS):
        return statement.name
    if isinstance(statement, cst.SimpleStatementLine):
        return statement.body[0]
    return statement


def _paired(body: Sequence[cst.BaseStatement], parsed: List[_Parsed]) -> Optional[_Pairs]:
    """Each libcst statement of a body with CPython's (first) statement for it; None when the two
    do not pair up (``a; b`` is one libcst statement line and two CPython statements)."""
    pairs = []
    taken = 0
    for statement in body:
        if taken >= len(parsed):
            return None
        pairs.append((statement, parsed[taken]))
        taken += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return pairs if taken == len(parsed) else None


def _parse(source: str) -> Optional[List[_Parsed]]:
    try:
        tree = cpython_tree(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _outline(tree.body)


def _outline(body: List[ast.stmt]) -> List[_Parsed]:
    return [_Parsed(s.lineno, _outline(s.body) if isinstance(s, _AST_DEFINITIONS) else None) for s in body]
