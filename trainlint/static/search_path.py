"""The directories a module puts on ``sys.path`` itself, read from its code (never run).

Research repositories often keep their packages in ``lib/`` and let each script add it:

    this_dir = osp.dirname(__file__)
    add_path(osp.join(this_dir, '..', 'lib'))      # add_path: ``sys.path.insert(0, path)``

so ``from dataset import make_dataloader`` resolves to ``lib/dataset``. The imports of such a module
(and of a module importing a sibling that does it, the ``import _init_paths`` idiom) are looked up
in those directories too. Only paths computed from ``__file__`` and string literals are taken;
anything else (``os.getcwd()``, an environment variable) is not a directory known here.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Tuple, Union

import libcst as cst

from .names import dotted
from .walk import walk

if TYPE_CHECKING:
    from .module import ModuleModel

# What a path expression evaluates to: an absolute path, or a literal relative to the directory the
# program runs from (kept relative until then).
_Value = Union[str, None]
_SAME = frozenset({"abspath", "realpath", "normpath", "expanduser", "resolve", "absolute", "str", "fspath"})
_DEPTH = 8


def mentions_search_path(source: str) -> bool:
    return "sys.path" in source or "addsitedir" in source


def declared_roots(model: "ModuleModel") -> List[Path]:
    """Existing directories the module's top-level code adds to ``sys.path`` (directly, or by
    calling a function of its own that adds its parameter). Read once per module: each module of
    its folder asks when it resolves its imports (see project._search_path_of)."""
    if model.path is None or not mentions_search_path(model.source):
        return []
    return model.memo("declared search path", lambda: _declared_roots(model))


def _declared_roots(model: "ModuleModel") -> List[Path]:
    module_dir = Path(model.path).resolve().parent
    bindings: Dict[str, cst.BaseExpression] = {}
    adders: Dict[str, Tuple[int, str]] = {}  # function name -> the parameter it puts on sys.path
    found: List[Path] = []

    def evaluate(expr: cst.BaseExpression, depth: int = 0) -> _Value:
        if depth > _DEPTH:
            return None
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return value if isinstance(value, str) else None
        if isinstance(expr, cst.Name):
            if expr.value == "__file__":
                return str(Path(model.path).resolve())
            bound = bindings.get(expr.value)
            return evaluate(bound, depth + 1) if bound is not None else None
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "parent":
                inner = evaluate(expr.value, depth + 1)
                return os.path.dirname(inner) if inner else None
            return None
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "parents":
            index = expr.slice[0].slice if len(expr.slice) == 1 else None
            inner = evaluate(expr.value.value, depth + 1)
            if inner is None or not isinstance(index, cst.Index) or not isinstance(index.value, cst.Integer):
                return None
            for _ in range(int(index.value.value) + 1):
                inner = os.path.dirname(inner)
            return inner
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):  # Path / "lib"
            left, right = evaluate(expr.left, depth + 1), evaluate(expr.right, depth + 1)
            return os.path.join(left, right) if left is not None and right is not None else None
        if isinstance(expr, cst.Call):
            return call(expr, depth)
        return None

    def call(expr: cst.Call, depth: int) -> _Value:
        name = dotted(expr.func) or ""
        qualified = model.imports.qualify(expr.func) or name
        last = expr.func.attr.value if isinstance(expr.func, cst.Attribute) else name
        args = [a.value for a in expr.args if a.keyword is None and not a.star]
        receiver = evaluate(expr.func.value, depth + 1) if isinstance(expr.func, cst.Attribute) and last in ("resolve", "absolute") else None
        if receiver is not None:
            return receiver
        if qualified in ("pathlib.Path", "Path", "pathlib.PurePath") or last in _SAME:
            return evaluate(args[0], depth + 1) if len(args) == 1 else None
        if qualified in ("os.path.dirname", "posixpath.dirname") or (last == "dirname" and name.startswith(("osp.", "path."))):
            inner = evaluate(args[0], depth + 1) if len(args) == 1 else None
            return os.path.dirname(inner) if inner else None
        if qualified in ("os.path.join", "posixpath.join") or (last == "join" and name.startswith(("osp.", "path."))):
            parts = [evaluate(a, depth + 1) for a in args]
            return os.path.join(*parts) if parts and all(p is not None for p in parts) else None
        return None

    def add(expr: cst.BaseExpression) -> None:
        value = evaluate(expr)
        if value is None:
            return
        candidates = [Path(value)] if os.path.isabs(value) else [module_dir / value]
        for candidate in candidates:
            directory = Path(os.path.normpath(candidate))
            if directory.is_dir() and directory not in found:
                found.append(directory)

    def added_by(statement: cst.CSTNode) -> None:
        """Put on the list what a top-level statement's calls add to sys.path."""
        for node in (n for n in model.subtree(statement) if type(n) is cst.Call):
            value = _path_added(node)
            if value is not None:
                add(value)
                continue
            adder = adders.get(dotted(node.func) or "")
            if adder is not None:
                position, param = adder
                args = [a.value for a in node.args if a.keyword is None and not a.star]
                given = args[position] if len(args) > position else next(
                    (a.value for a in node.args if a.keyword is not None and a.keyword.value == param), None)
                if given is not None:
                    add(given)

    for statement in model.module.body:
        if isinstance(statement, cst.FunctionDef):
            adder = _adding_parameter(statement, model.subtree(statement))
            if adder is not None:
                adders[statement.name.value] = adder
            continue
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    bindings[small.targets[0].target.value] = small.value
                elif isinstance(small, cst.ImportFrom) and not small.relative and isinstance(small.module, cst.Name) \
                        and not isinstance(small.names, cst.ImportStar):
                    # ``from helpers import add_path``: a function of a module beside this one
                    adders.update(_imported_adders(module_dir / f"{small.module.value}.py", small.names))
        if not isinstance(statement, cst.ClassDef):
            added_by(statement)
    return found


def _path_added(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The directory expression ``sys.path.insert(i, d)`` / ``sys.path.append(d)`` /
    ``site.addsitedir(d)`` adds."""
    name = dotted(call.func) or ""
    args = [a.value for a in call.args if a.keyword is None and not a.star]
    if name == "sys.path.insert" and len(args) == 2:
        return args[1]
    if name in ("sys.path.append", "site.addsitedir") and len(args) == 1:
        return args[0]
    return None


def _adding_parameter(function: cst.FunctionDef, nodes: Iterable[cst.CSTNode]) -> Optional[Tuple[int, str]]:
    """(position, name) of the parameter a function puts on sys.path (``def add_path(path):
    sys.path.insert(0, path)``), or None. ``nodes``: the function's subtree."""
    params = [p.name.value for p in function.params.params]
    for node in (n for n in nodes if type(n) is cst.Call):
        value = _path_added(node)
        if isinstance(value, cst.Name) and value.value in params:
            return params.index(value.value), value.value
    return None


def _imported_adders(path: Path, names, depth: int = 0) -> Dict[str, Tuple[int, str]]:
    """The functions among ``names`` imported from the module at ``path`` (or the package there,
    through its ``__init__``'s re-exports) that put a parameter on sys.path, by the name they are
    imported as."""
    package = path.with_suffix("") / "__init__.py"
    if not path.is_file() and package.is_file():
        path = package
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    if not mentions_search_path(text) and path.name != "__init__.py":
        return {}
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return {}
    defined = {s.name.value: _adding_parameter(s, walk(s)) for s in module.body if isinstance(s, cst.FunctionDef)}
    if path.name == "__init__.py" and depth < 2:  # ``from .impl import add_path``
        for statement in module.body:
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.ImportFrom) and len(small.relative) == 1 and isinstance(small.module, cst.Name) \
                        and not isinstance(small.names, cst.ImportStar):
                    defined.update(_imported_adders(path.parent / f"{small.module.value}.py", small.names, depth + 1))
    found = {}
    for alias in names:
        name = dotted(alias.name)
        local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
        if name and defined.get(name) is not None:
            found[local] = defined[name]
    return found
