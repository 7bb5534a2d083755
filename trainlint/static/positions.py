"""Where nodes are in the source, computed only for the top-level statements that hold them.

libcst's position metadata renders the whole module to place any node: on a big file that pass
cost about a third of the check, and its position objects a few hundred MiB at 50k lines. Findings
name a handful of statements, so each top-level statement that holds one is rendered alone, and
CPython's parse of the file (in C, several times cheaper than a libcst rendering) says on which
line that statement starts. Whenever the two parses do not line up statement for statement (a
grammar only libcst reads), the whole module is rendered as before.
"""
from __future__ import annotations

import ast
import warnings
from bisect import bisect_right
from typing import Callable, Dict, List, Mapping, Optional, TypeVar

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from .module import ModuleModel

T = TypeVar("T")
Resolver = Callable[[Callable[[], T]], T]


class Positions:
    """``node in positions`` and ``positions[node]`` (a libcst ``CodeRange``) for the nodes of one
    module. ``guarded`` runs a libcst rendering (it recurses over nested statements) so that a
    tree too deep for the interpreter's stack still gets its positions."""

    def __init__(self, model: ModuleModel, guarded: Resolver) -> None:
        self._model = model
        self._guarded = guarded
        self._first_lines: Optional[List[int]] = None  # line of each top-level statement's anchor
        self._starts: List[int] = []  # pre-order index of each top-level statement
        self._rendered: Dict[int, Mapping[cst.CSTNode, CodeRange]] = {}  # statement index -> positions
        self._offsets: Dict[int, int] = {}  # statement index -> lines to add
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
        preorder = self._model.preorder
        at = preorder.index(node)
        if at is None:
            return None  # not a node of this module (a statement of another file, a synthetic loop)
        index = bisect_right(self._starts, at) - 1
        if index < 0 or at >= preorder.ends[self._starts[index]]:
            return None  # the module node itself, or whitespace outside every statement
        found = self._statement(index).get(node)
        if found is None:
            return None
        offset = self._offsets[index]
        if not offset:
            return found
        return CodeRange(CodePosition(found.start.line + offset, found.start.column),
                         CodePosition(found.end.line + offset, found.end.column))

    def _statement(self, index: int) -> Mapping[cst.CSTNode, CodeRange]:
        rendered = self._rendered.get(index)
        if rendered is None:
            module = self._model.module
            statement = module.body[index]
            alone = module.with_changes(body=[statement], header=(), footer=())
            rendered = self._rendered[index] = self._guarded(
                lambda: MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider))
            self._offsets[index] = self._first_lines[index] - rendered[_anchor(statement)].start.line  # type: ignore[index]
        return rendered

    # ----------------------------------------------------------------- set-up
    def _prepare(self) -> None:
        self._ready = True
        module = self._model.module
        self._first_lines = _first_lines(self._model.source, module.body)
        if self._first_lines is None:
            self._whole = self._guarded(lambda: MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
            return
        preorder = self._model.preorder
        self._starts = [preorder.index(statement) for statement in module.body]


def _anchor(statement: cst.BaseStatement) -> cst.CSTNode:
    """The node whose line CPython's parse reports for the statement: a definition's name (after
    its decorators, on the line of ``def``/``class``), a statement line's first statement."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return statement.name
    if isinstance(statement, cst.SimpleStatementLine):
        return statement.body[0]
    return statement


def _first_lines(source: str, body) -> Optional[List[int]]:
    """Line of each top-level libcst statement's anchor, from CPython's parse; None when the two
    parses do not pair up (``a; b`` is one libcst statement line and two CPython statements)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    statements = tree.body
    lines: List[int] = []
    taken = 0
    for statement in body:
        if taken >= len(statements):
            return None
        lines.append(statements[taken].lineno)
        taken += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return lines if taken == len(statements) else None
