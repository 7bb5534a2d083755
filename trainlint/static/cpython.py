"""CPython's own parse of a module, as the engine uses it: a syntax guard before libcst (whose
messages users know, and which rejects at once what could make libcst's parser hang) and the
lines statements start on (static/positions.py). Its SyntaxWarnings (an invalid escape in a
string) are not trainlint's to print."""
from __future__ import annotations

import ast
import warnings


_last: list = [None, None]  # (source, tree) of the latest call: the guard and positions ask in turn


def cpython_tree(source: str) -> ast.Module:
    """``ast`` of ``source``; raises what ``compile`` raises (SyntaxError, ValueError, ...)."""
    if _last[0] is source:
        return _last[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    _last[0], _last[1] = source, tree
    return tree
