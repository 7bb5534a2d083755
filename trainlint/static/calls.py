"""Small readers for call arguments and literals."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Tuple, Union

import libcst as cst

if TYPE_CHECKING:
    from .module import Function


def kwarg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def arg(call: cst.Call, index: int, name: str) -> Optional[cst.BaseExpression]:
    """The argument passed for a parameter, by keyword or by position."""
    by_name = kwarg(call, name)
    if by_name is not None:
        return by_name.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index].value if index < len(positional) else None


def literal_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def literal_str(node: Optional[cst.BaseExpression]) -> Optional[str]:
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value
    return None


def literal_number(node: Optional[cst.BaseExpression]) -> Optional[Union[int, float]]:
    """An int/float literal (with an optional unary minus), else None."""
    negative = False
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node, negative = node.expression, True
    if isinstance(node, (cst.Integer, cst.Float)):
        value = node.evaluated_value
        return -value if negative else value
    return None


def is_none(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def parameters_given(call: cst.Call, params: List[str], method: bool) -> Iterable[Tuple[str, cst.BaseExpression]]:
    """(parameter, argument expression) of a call to a function with ``params``, positional and by
    keyword; ``method``: called on an instance, so ``self`` takes no argument."""
    names = list(params)
    if method and names and names[0] in ("self", "cls"):
        names = names[1:]
    for param, argument in zip(names, (a for a in call.args if a.keyword is None)):
        if argument.star:
            break
        yield param, argument.value
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value in params:
            yield argument.keyword.value, argument.value


# What ``literal_arguments`` gives a parameter that receives ``None``.
NONE_ARGUMENT = "None"


def literal_arguments(call: cst.Call, callee: "Function", method: bool) -> Dict[str, Union[bool, str]]:
    """Parameter -> True, False or NONE_ARGUMENT for the literals ``call`` passes, and for the
    True/False/None defaults of the parameters it leaves out (``run_epoch(..., train=False)``,
    ``def step(batch, opt=None)``). The one reading of literal arguments that the flow (which
    branch ``if train:`` takes) and the pattern rules (what a call of a runner does) share."""
    given: Dict[str, Union[bool, str]] = {}
    for param in callee.params:
        literal = _literal(callee.default(param))
        if literal is not None:
            given[param] = literal
    for param, value in parameters_given(call, callee.params, method):
        given.pop(param, None)
        literal = _literal(value)
        if literal is not None:
            given[param] = literal
    return given


def _literal(value: Optional[cst.BaseExpression]) -> Optional[Union[bool, str]]:
    if isinstance(value, cst.Name) and value.value == "None":
        return NONE_ARGUMENT
    return literal_bool(value)
