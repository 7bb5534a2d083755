"""CPython's own parse of a module, as the engine uses it: a syntax guard before libcst (whose
messages users know, and which rejects at once what could make libcst's parser hang) and the
lines statements start on (static/positions.py). Its SyntaxWarnings (an invalid escape in a
string) are not trainlint's to print."""
from __future__ import annotations

import ast
import warnings


def cpython_tree(source: str) -> ast.Module:
    """``ast`` of ``source``; raises what ``compile`` raises (SyntaxError, ValueError, ...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile(source, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
