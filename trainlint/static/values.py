"""Values that matter to the rules (a weight decay, a ``shuffle`` flag, a dropout probability), read
through the names a module gives them:

- module constants: ``WEIGHT_DECAY = 0.05`` assigned once at the top level and nowhere else;
- command-line defaults: ``parser.add_argument("--weight-decay", default=0.05)`` read as
  ``args.weight_decay`` where ``args`` holds the module's ``parse_args()`` (the program as it runs
  unless told otherwise on the command line);
- dataclass fields: ``decay: float = 0.05`` read as ``cfg.decay`` where ``cfg = Config()`` does not
  pass that field;
- arithmetic on those (``BASE_LR * 0.1``).

Anything else is ``UNKNOWN`` (distinct from a known ``None``).
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, Iterable, List, Optional

import libcst as cst

from .names import dotted

UNKNOWN = object()
_MAX_DEPTH = 8
_OPERATORS: Dict[type, Callable[[Any, Any], Any]] = {
    cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul, cst.Divide: operator.truediv,
    cst.FloorDivide: operator.floordiv, cst.Modulo: operator.mod, cst.Power: operator.pow,
}
_CONSTANT_NAMES = {"True": True, "False": False, "None": None}


class Values:
    def __init__(self, module: cst.Module, function_assigns: List[cst.BaseExpression], nodes: Iterable[cst.CSTNode]) -> None:
        """``function_assigns``: every target assigned inside a function (a name assigned there
        is not a constant, whichever scope the reader is in); ``nodes``: the module's nodes."""
        self._constants: Dict[str, Optional[cst.BaseExpression]] = {}
        self._defaults: Dict[str, Optional[cst.BaseExpression]] = {}  # None: defined twice
        self._namespaces: set = set()
        self._fields: Dict[str, Dict[str, cst.BaseExpression]] = {}
        self._instances: Dict[str, Optional[cst.Call]] = {}
        local_names = {t.value for t in function_assigns if isinstance(t, cst.Name)}
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self._top_level(small)
            elif isinstance(stmt, cst.ClassDef) and any(
                (dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "").endswith("dataclass")
                for d in stmt.decorators
            ):
                self._fields[stmt.name.value] = _field_defaults(stmt)
        for name in local_names:
            self._constants.pop(name, None)
        self._scan(nodes)

    def _top_level(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            name = small.targets[0].target.value
            # assigned twice: not a constant
            self._constants[name] = None if name in self._constants else small.value
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
            name = small.target.value
            self._constants[name] = None if name in self._constants else small.value
        elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            self._constants[small.target.value] = None

    def _scan(self, nodes: Iterable[cst.CSTNode]) -> None:
        """``add_argument`` defaults, the names holding ``parse_args()``, dataclass instances."""
        for node in nodes:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
                self._argument(node)
            elif isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                name, value = node.targets[0].target.value, node.value
                if not isinstance(value, cst.Call):
                    continue
                if isinstance(value.func, cst.Attribute) and value.func.attr.value in ("parse_args", "parse_known_args"):
                    self._namespaces.add(name)
                elif (dotted(value.func) or "") in self._fields:
                    self._instances[name] = None if name in self._instances else value

    def _argument(self, call: cst.Call) -> None:
        flags = [a.value.evaluated_value for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)
                 and isinstance(a.value.evaluated_value, str)]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        long = next((f for f in flags if f.startswith("--")), None)
        dest = keywords.get("dest")
        name = dest.evaluated_value if isinstance(dest, cst.SimpleString) else long[2:].replace("-", "_") if long else None
        if not isinstance(name, str):
            return
        action = keywords.get("action")
        default = keywords.get("default")
        if default is None and isinstance(action, cst.SimpleString) and action.evaluated_value in ("store_true", "store_false"):
            default = cst.Name("False" if action.evaluated_value == "store_true" else "True")
        if default is not None:
            self._defaults[name] = default if name not in self._defaults else None  # defined twice: unknown

    # ----------------------------------------------------------------- queries
    def holds_arguments(self, name: str) -> bool:
        """Does ``name`` hold the module's parsed command line (``args = parser.parse_args()``)?"""
        return name in self._namespaces

    def value(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> Any:
        """The value of an expression, or UNKNOWN."""
        if expr is None or depth > _MAX_DEPTH:
            return UNKNOWN
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
            return expr.evaluated_value
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Not)):
            inner = self.value(expr.expression, depth + 1)
            if inner is UNKNOWN:
                return UNKNOWN
            return (not inner) if isinstance(expr.operator, cst.Not) else _apply(operator.neg, inner)
        if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _OPERATORS:
            return _apply(_OPERATORS[type(expr.operator)], self.value(expr.left, depth + 1), self.value(expr.right, depth + 1))
        if isinstance(expr, cst.Name):
            if expr.value in _CONSTANT_NAMES:
                return _CONSTANT_NAMES[expr.value]
            return self.value(self._constants.get(expr.value), depth + 1)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            holder, field = expr.value.value, expr.attr.value
            if holder in self._namespaces:
                return self.value(self._defaults.get(field), depth + 1)
            instance = self._instances.get(holder)
            if instance is not None and not any(a.keyword is None or a.keyword.value == field for a in instance.args):
                return self.value(self._fields[dotted(instance.func) or ""].get(field), depth + 1)
        return UNKNOWN

    def number(self, expr: Optional[cst.BaseExpression]) -> Optional[float]:
        found = self.value(expr)
        return found if isinstance(found, (int, float)) and not isinstance(found, bool) else None

    def boolean(self, expr: Optional[cst.BaseExpression]) -> Optional[bool]:
        found = self.value(expr)
        return found if isinstance(found, bool) else None


def _apply(op: Callable[..., Any], *operands: Any) -> Any:
    if any(o is UNKNOWN or isinstance(o, bool) or not isinstance(o, (int, float)) for o in operands):
        return UNKNOWN
    try:
        return op(*operands)
    except (ArithmeticError, ValueError, OverflowError):
        return UNKNOWN


def _field_defaults(cls: cst.ClassDef) -> Dict[str, cst.BaseExpression]:
    fields = {}
    for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                    fields[small.target.value] = small.value
    return fields


_MISSING = object()


def literal_of(call: cst.Call, keyword: str, default: Any = _MISSING) -> Any:
    """The literal a call passes for ``keyword`` (``default`` when absent), else UNKNOWN."""
    passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    if passed is None:
        return UNKNOWN if default is _MISSING else default
    if isinstance(passed, cst.Name) and passed.value in _CONSTANT_NAMES:
        return _CONSTANT_NAMES[passed.value]
    if isinstance(passed, (cst.Integer, cst.Float, cst.SimpleString)):
        return passed.evaluated_value
    return UNKNOWN
