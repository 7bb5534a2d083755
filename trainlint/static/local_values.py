"""What a function's local name holds at a statement, as the program is written: read through the
function's assignments before that statement, the branches their guards decide, the argument every
call of the function in the module passes for a parameter, and the module's own values (constants,
command-line defaults: :mod:`values`).

It answers questions such as "is the accumulation count ever anything but 1?" for

    def training_function(config):
        batch_size = int(config["batch_size"])
        k = 1
        if batch_size > MAX_GPU_BATCH_SIZE and ...:
            k = batch_size // MAX_GPU_BATCH_SIZE
    training_function({"lr": 2e-5, "batch_size": 16})        # MAX_GPU_BATCH_SIZE = 16

Anything it cannot follow is ``UNKNOWN``; it never guesses.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from .calls import parameters_given
from .module import Function, ModuleModel
from .values import UNKNOWN
from .walk import children

_MAX_DEPTH = 16
_COMPARE: Dict[type, Callable[[Any, Any], bool]] = {
    cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.Equal: operator.eq, cst.NotEqual: operator.ne,
}
_CONVERSIONS: Dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "bool": bool}


class LocalValues:
    def __init__(self, model: ModuleModel, fn: Function, command_line: bool = True) -> None:
        """``command_line=False``: a command-line default is not taken for the value (a launcher
        passes ``--local_rank`` to every process, whatever its default is)."""
        self._model = model
        self._fn = fn
        self._command_line = command_line
        # (position in the function, target name, the assignment, the if-tests guarding it (test, taken branch))
        self._assignments: List[Tuple[int, str, cst.Assign, Tuple[Tuple[cst.BaseExpression, bool], ...]]] = []
        self._position: Dict[int, int] = {}
        self._index(fn.node.body, ())

    def _index(self, node: cst.CSTNode, guards: Tuple[Tuple[cst.BaseExpression, bool], ...]) -> None:
        """Every node's position in reading order, and each plain assignment with its guards; an
        assignment in a loop, a try or a nested def is guarded by something unknown."""
        self._position[id(node)] = len(self._position)
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._assignments.append((len(self._position), node.targets[0].target.value, node, guards))
        if isinstance(node, cst.If):
            self._position[id(node.test)] = len(self._position)
            self._index(node.body, guards + ((node.test, True),))
            if node.orelse is not None:
                self._index(node.orelse, guards + ((node.test, False),))
            return
        unknown = (cst.Name("__unknown__"), True)
        for child in children(node):
            inner = guards + (unknown,) if isinstance(node, (cst.For, cst.While, cst.Try, cst.FunctionDef, cst.With)) and \
                child is getattr(node, "body", None) else guards
            self._index(child, inner)

    def value(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> Any:
        """The value ``expr`` has when the statement ``at`` runs, or UNKNOWN."""
        if depth > _MAX_DEPTH:
            return UNKNOWN
        if isinstance(expr, cst.Name):
            return self._name(expr.value, at, depth)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return self._attribute(expr, depth)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            inner = self.value(expr.expression, at, depth + 1)
            return UNKNOWN if inner is UNKNOWN else not inner
        if isinstance(expr, cst.BooleanOperation):
            left = self.value(expr.left, at, depth + 1)
            if left is UNKNOWN:
                return UNKNOWN
            if isinstance(expr.operator, cst.And) and not left or isinstance(expr.operator, cst.Or) and left:
                return left
            return self.value(expr.right, at, depth + 1)
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 and type(expr.comparisons[0].operator) in _COMPARE:
            left, right = self.value(expr.left, at, depth + 1), self.value(expr.comparisons[0].comparator, at, depth + 1)
            if left is UNKNOWN or right is UNKNOWN:
                return UNKNOWN
            try:
                return _COMPARE[type(expr.comparisons[0].operator)](left, right)
            except TypeError:
                return UNKNOWN
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.value(expr.left, at, depth + 1), self.value(expr.right, at, depth + 1)
            if left is UNKNOWN or right is UNKNOWN:
                return UNKNOWN
            return self._model.values.value(cst.BinaryOperation(_literal(left), expr.operator, _literal(right)))
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            holder = self.value(expr.value, at, depth + 1)
            key = self.value(expr.slice[0].slice.value, at, depth + 1)
            return holder.get(key, UNKNOWN) if isinstance(holder, dict) and not isinstance(key, (dict, list)) else UNKNOWN
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _CONVERSIONS and len(expr.args) == 1:
            inner = self.value(expr.args[0].value, at, depth + 1)
            try:
                return UNKNOWN if inner is UNKNOWN else _CONVERSIONS[expr.func.value](inner)
            except (TypeError, ValueError):
                return UNKNOWN
        if isinstance(expr, cst.Dict):
            return _dict(expr, lambda v: self.value(v, at, depth + 1))
        return self._module_value(expr)

    def _module_value(self, expr: cst.BaseExpression) -> Any:
        if not self._command_line and isinstance(expr, cst.Attribute):
            return UNKNOWN  # ``args.x``: a default, or a dataclass field, the caller may set
        return self._model.values.value(expr)

    def _name(self, name: str, at: cst.CSTNode, depth: int) -> Any:
        before = self._position.get(id(at), len(self._position) + 1)
        current: Any = UNKNOWN
        assigned = False
        for position, target, assignment, guards in self._assignments:
            if target != name:
                continue
            if position >= before:
                if any(isinstance(test, cst.Name) and test.value == "__unknown__" for test, _ in guards):
                    return UNKNOWN  # in a loop: a later iteration may see it
                continue
            taken = self._taken(guards, at, depth)
            if taken is False:
                continue
            new = self.value(assignment.value, assignment, depth + 1)  # what it held there
            if taken is True:
                current, assigned = new, True
            elif not assigned or new != current:
                return UNKNOWN  # it may or may not have been reassigned here
        if assigned:
            return current
        if name in self._fn.params:
            return self._argument(name, depth)
        return self._module_value(cst.Name(name))

    def _attribute(self, expr: cst.Attribute, depth: int) -> Any:
        """``self.config`` in a method: what the class's one assignment to it stores (``self.config
        = config`` in ``__init__``, read there), if the class assigns it exactly once."""
        if self._fn.cls is None:
            return UNKNOWN
        stores = self._model.assignments_in_class(self._fn.cls, f"self.{expr.attr.value}")
        if len(stores) != 1:
            return UNKNOWN
        method, value = stores[0]
        statement = next((node for node in self._model.subtree(method.node)
                          if isinstance(node, cst.Assign) and node.value is value), None)
        return LocalValues(self._model, method, self._command_line).value(value, statement, depth + 1) \
            if statement is not None else UNKNOWN

    def _taken(self, guards, at: cst.CSTNode, depth: int) -> Optional[bool]:
        """Whether every guard of an assignment holds (True), one fails (False), or unknown (None)."""
        result: Optional[bool] = True
        for test, branch in guards:
            if isinstance(test, cst.Name) and test.value == "__unknown__":
                result = None
                continue
            truth = self.value(test, test, depth + 1)
            if truth is UNKNOWN:
                result = None
            elif bool(truth) is not branch:
                return False
        return result

    def _argument(self, param: str, depth: int) -> Any:
        """The value every call of the function in this module passes (or leaves at the default)."""
        callers = self._model.sites().calls_of(self._fn)
        if self._fn.name == "__init__" and self._fn.cls is not None:
            callers = [site for site in self._model.sites().named(self._fn.cls) if isinstance(site.call.func, cst.Name)]
        if not callers:
            return UNKNOWN
        default = next((p.default for p in self._fn.node.params.params + self._fn.node.params.kwonly_params
                        if p.name.value == param and p.default is not None), None)
        values = []
        for caller in callers:
            given = dict(parameters_given(caller.call, self._fn.params, self._fn.cls is not None)).get(param, default)
            if given is None:
                return UNKNOWN
            scope = caller.function
            found = LocalValues(self._model, scope, self._command_line).value(given, caller.statement, depth + 1) \
                if scope is not None else _dict(given, self._module_value) if isinstance(given, cst.Dict) \
                else self._module_value(given)
            if found is UNKNOWN:
                return UNKNOWN
            values.append(found)
        return values[0] if all(v == values[0] for v in values) else UNKNOWN


def _dict(node: cst.Dict, evaluate: Callable[[cst.BaseExpression], Any]) -> Any:
    """A dict literal with string keys, its values evaluated (an unknown value stays UNKNOWN)."""
    result = {}
    for element in node.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return UNKNOWN
        result[element.key.evaluated_value] = evaluate(element.value)
    return result


def _literal(value: Any) -> cst.BaseExpression:
    if isinstance(value, bool) or value is None:
        return cst.Name(str(value))
    if isinstance(value, (int, float)) and value >= 0:
        return cst.Integer(str(value)) if isinstance(value, int) else cst.Float(repr(value))
    return cst.Name("__unknown__")
