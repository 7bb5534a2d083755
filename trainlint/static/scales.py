"""What a number that multiplies or divides a loss can be, as far as TL201 needs to know.

An accumulation window of k micro-batches needs the loss divided by k (or multiplied by 1/k). So
a scalar is judged by whether it could be k or 1/k, read through what the program assigns to it:

- ``COUNT``: a size of the current batch (``x.shape[0]``, ``x.size(0)``, ``mask.sum()``,
  ``labels.numel()``): dividing a summed loss by it averages it; it is never the window;
- ``RECIPROCAL``: may be 1/k (a quotient, a negative power, a literal 1/n such as 0.25):
  multiplying by it may be the division;
- ``INTEGER``: a literal integer of at least 2: dividing by it may be the division;
- ``CONSTANT``: any other literal: neither k nor 1/k;
- ``UNKNOWN``: nothing proves what it is (a parameter no caller here binds, a configuration
  field, a call nothing describes).

Dividing by anything but a count or a constant may be the division; multiplying by anything but a
reciprocal is a weight (a loss weight, an adaptive coefficient): it never divides by k. A name is
never evidence: ``scale`` and ``accum_steps`` are judged by what is assigned to them.
"""
from __future__ import annotations

from typing import Iterable, List

import libcst as cst

from .calls import literal_number
from .held import Scope, passed, stores
from .names import dotted

COUNT = "count"
RECIPROCAL = "reciprocal"
INTEGER = "integer"
CONSTANT = "constant"
UNKNOWN = "unknown"

_MAX_DEPTH = 6
# How deep into a chain of calls a parameter is followed back to what callers pass: each level
# multiplies the work by the number of call sites (torch's own modules: minutes at 6).
_CALLER_DEPTH = 2
# Methods that keep a scalar what it was (a conversion, a detached copy).
_SAME = frozenset({"item", "float", "int", "long", "detach", "to", "cpu", "cuda", "clone", "double", "half"})
_SAME_FUNCTIONS = frozenset({"int", "float", "abs", "torch.tensor", "torch.as_tensor", "math.floor", "math.ceil"})
# Counting methods of a tensor of the current batch: its size, its elements, its true entries.
_COUNTING = frozenset({"size", "numel", "sum", "count_nonzero", "nelement"})
# A bound that keeps a count from being 0 keeps it a count: max(n, 1), n.clamp(min=1).
_BOUNDS = frozenset({"max", "min", "clamp", "clamp_min", "clip", "torch.clamp", "torch.clamp_min"})


def divides(scalar: str) -> bool:
    """May dividing a loss by a scalar of this kind be the division by the window's k?"""
    return scalar not in (COUNT, CONSTANT)


def multiplies_down(scalar: str) -> bool:
    """May multiplying a loss by a scalar of this kind be the division by the window's k?"""
    return scalar == RECIPROCAL


def join(kinds: Iterable[str]) -> str:
    """What a value that may be any of these is: a possible reciprocal stays possible."""
    found = set(kinds)
    if RECIPROCAL in found:
        return RECIPROCAL
    return found.pop() if len(found) == 1 else UNKNOWN


def scalar(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> str:
    """The kind of the scalar ``expr`` where ``scope`` reads it."""
    if depth > _MAX_DEPTH:
        return UNKNOWN
    number = literal_number(expr)
    if number is not None:
        return _number(number)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return scalar(expr.expression, scope, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        return _arithmetic(expr, scope, depth)
    if isinstance(expr, cst.Subscript):
        # ``x.shape[0]``, ``x.size()[0]``: a dimension of a tensor of this batch
        held = expr.value
        if isinstance(held, cst.Attribute) and held.attr.value == "shape" or _counting_call(held):
            return COUNT
        return UNKNOWN
    if isinstance(expr, cst.Call):
        return _call(expr, scope, depth)
    if isinstance(expr, cst.IfExp):
        return join([scalar(expr.body, scope, depth + 1), scalar(expr.orelse, scope, depth + 1)])
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return _held(expr, scope, depth)
    return UNKNOWN


def _number(value: float) -> str:
    magnitude = abs(value)
    if float(magnitude).is_integer() and magnitude >= 2:
        return INTEGER
    if 0 < magnitude <= 0.5 and abs(1 / magnitude - round(1 / magnitude)) < 1e-6:
        return RECIPROCAL  # 0.25 is 1/4: the division by a window of 4, written as a product
    return CONSTANT


def _arithmetic(expr: cst.BinaryOperation, scope: Scope, depth: int) -> str:
    if isinstance(expr.operator, (cst.Divide, cst.FloorDivide)):
        return RECIPROCAL  # a quotient may be 1/k (``1.0 / accum``), whatever divides it
    if isinstance(expr.operator, cst.Power):
        exponent = literal_number(expr.right)
        return RECIPROCAL if exponent is None or exponent < 0 else UNKNOWN
    left, right = scalar(expr.left, scope, depth + 1), scalar(expr.right, scope, depth + 1)
    if RECIPROCAL in (left, right):
        return RECIPROCAL
    if isinstance(expr.operator, cst.Multiply) and {left, right} <= {COUNT, CONSTANT} and COUNT in (left, right):
        return COUNT  # batch times sequence length, a count times a constant
    # a count times an integer that may be k (``n_tokens * accum_steps``) may count the window
    return UNKNOWN


def _counting_call(expr: cst.BaseExpression) -> bool:
    """``x.size(0)``, ``mask.sum()``, ``torch.sum(mask)``, ``labels.numel()`` on a tensor of the
    current batch: a tensor gathered over several batches (built in a comprehension, concatenated)
    could hold the whole window, so it is not a count of this batch."""
    if not isinstance(expr, cst.Call):
        return False
    path = dotted(expr.func) or ""
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _COUNTING:
        counted = expr.func.value if path not in ("torch.sum", "torch.numel", "torch.count_nonzero") else (
            expr.args[0].value if expr.args else None)
        return counted is not None and not _gathers(counted)
    return False


def _gathers(expr: cst.BaseExpression) -> bool:
    for node in _nodes(expr):
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.List, cst.Tuple)):
            return True
        if isinstance(node, cst.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in ("cat", "stack", "concat", "concatenate"):
            return True
    return False


def _nodes(expr: cst.CSTNode) -> Iterable[cst.CSTNode]:
    stack: List[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def _call(call: cst.Call, scope: Scope, depth: int) -> str:
    if _counting_call(call):
        return COUNT
    path = dotted(call.func) or ""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SAME:
        return scalar(call.func.value, scope, depth + 1)
    if path in _SAME_FUNCTIONS and call.args:
        return scalar(call.args[0].value, scope, depth + 1)
    if path in _BOUNDS or isinstance(call.func, cst.Attribute) and call.func.attr.value in _BOUNDS:
        # the bounded value, not the bound: max(n_tokens, 1) is n_tokens
        bounded = [call.func.value] if isinstance(call.func, cst.Attribute) and path not in _BOUNDS else []
        bounded += [a.value for a in call.args if a.keyword is None and literal_number(a.value) is None]
        return join(scalar(b, scope, depth + 1) for b in bounded) if bounded else UNKNOWN
    helper = scope.model.functions.get(path) if isinstance(call.func, cst.Name) else None
    if helper is not None and helper.returns:
        inner = Scope(helper, scope.model)
        return join(scalar(r, inner, depth + 1) for r in helper.returns)
    return UNKNOWN


def _held(expr: cst.BaseExpression, scope: Scope, depth: int) -> str:
    """What a name or an instance's attribute holds: every value assigned to it where it is read,
    and for a parameter, what the caller that runs this code passes (else every call here)."""
    path = dotted(expr)
    if path is None:
        return UNKNOWN
    fn = scope.fn
    if fn is not None and path in fn.params:
        given = scope.scalar_given(path)
        if given is not None:
            return given
        if depth >= _CALLER_DEPTH:
            return UNKNOWN  # every caller's argument, through every caller's callers, multiplies
        calls = passed(path, scope)
        return join(scalar(value, where, depth + 1) for where, value in calls) if calls else UNKNOWN
    found = stores(path, scope)
    if not found:
        return UNKNOWN
    kinds = [scalar(value, where, depth + 1) for where, value in found]
    augmented = fn.aug_assigns if fn is not None else scope.model.module_aug_assigns
    if any(dotted(aug.target) == path for aug in augmented):
        kinds.append(UNKNOWN)  # ``n += ...``: a running total may count the whole window
    return join(kinds)
