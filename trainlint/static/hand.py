"""Parameter updates written by hand: the optimizer step of a program with no optimizer object.

``for p in model.parameters(): p -= lr * p.grad`` run with gradients off (``p.add_(p.grad,
alpha=-lr)``, ``p.data.add_(p.grad.data, alpha=-lr)``, a momentum buffer fed from ``p.grad`` and
then added to ``p``) changes every parameter from its own gradient: it is what ``optimizer.step()``
does, and the engine reads the loop as one OPTIMIZER_STEP. What makes it one is what the code does
to objects: a loop over a module's ``.parameters()`` whose body changes the loop's parameter in
place with a value computed from that parameter's ``.grad``. No variable name is read.
"""
from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from ..events import HAND_UPDATE_METHODS
from .module import Function, ModuleModel
from .names import ImportMap
from .walk import code_nodes

# Module methods that yield its parameters, and where the parameter is in each element they yield
# (``named_parameters()`` yields (name, parameter) pairs).
_PARAMETER_METHODS = {"parameters": None, "named_parameters": 1}
# Calls that hand on the elements of what they are given: ``list(model.parameters())``.
_SAME_ELEMENTS = frozenset({"list", "tuple"})
# ``p -= lr * p.grad`` and its kin run the in-place methods of HAND_UPDATE_METHODS.
_AUGMENTED = (cst.SubtractAssign, cst.AddAssign, cst.MultiplyAssign, cst.DivideAssign)
# What turns gradients off for a block (a with item) or a function (a decorator), as the guard
# hooks it: torch.no_grad, whichever way it is imported.
NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})


def turns_grad_off(expr: cst.BaseExpression, imports: ImportMap) -> bool:
    """``torch.no_grad()`` as a with item, or ``@torch.no_grad()`` / ``@torch.no_grad`` as a decorator."""
    if type(expr) is cst.Call:  # exact types: see names.dotted
        expr = expr.func
    return imports.qualify(expr) in NO_GRAD


def runs_without_grad(fn: Optional[Function]) -> bool:
    """Is ``fn`` decorated with torch.no_grad?"""
    owner = fn.owner if fn is not None else None
    return owner is not None and any(turns_grad_off(d.decorator, owner.imports) for d in fn.node.decorators)


def update_in(loop: cst.For, fn: Optional[Function], model: ModuleModel) -> Optional[cst.CSTNode]:
    """The statement (an in-place call or an augmented assignment) by which ``loop``, a loop over a
    module's parameters, updates each one from its own gradient; None if it is not such a loop."""
    variable = _parameter_variable(loop, fn, model)
    if variable is None:
        return None
    derived: Set[str] = set()  # names holding the parameter's gradient or a value computed from it
    for node in model.preorder.code(loop.body):
        kind = type(node)
        if kind is cst.Assign:
            if _reads_grad(node.value, variable, derived):
                derived.update(t.target.value for t in node.targets
                               if type(t.target) is cst.Name and t.target.value != variable)
        elif kind is cst.AugAssign:
            if not _reads_grad(node.value, variable, derived):
                continue
            if _is_parameter(node.target, variable) and isinstance(node.operator, _AUGMENTED):
                return node
            if type(node.target) is cst.Name and node.target.value != variable:
                derived.add(node.target.value)
        elif kind is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in HAND_UPDATE_METHODS:
            if not any(_reads_grad(a.value, variable, derived) for a in node.args):
                continue
            if _is_parameter(node.func.value, variable):
                return node
            # ``buf.mul_(momentum).add_(d_p)``: the buffer now holds a value computed from the gradient
            changed = _changed_in_place(node.func.value)
            if type(changed) is cst.Name and changed.value != variable:
                derived.add(changed.value)
    return None


def _parameter_variable(loop: cst.For, fn: Optional[Function], model: ModuleModel) -> Optional[str]:
    """The loop variable bound to each parameter when ``loop`` iterates ``<module>.parameters()``
    or ``.named_parameters()`` (directly, through ``list(...)``, or through a name assigned that
    once in the same scope)."""
    iterable = _elements_of(loop.iter)
    if type(iterable) is cst.Name:
        values = _values_of(iterable.value, fn, model)
        iterable = _elements_of(values[0]) if len(values) == 1 else None
    if type(iterable) is not cst.Call or type(iterable.func) is not cst.Attribute:
        return None
    method = iterable.func.attr.value
    if method not in _PARAMETER_METHODS:
        return None
    target = loop.target
    position = _PARAMETER_METHODS[method]
    if position is not None:
        if type(target) is not cst.Tuple or len(target.elements) != 2:
            return None
        target = target.elements[position].value
    return target.value if type(target) is cst.Name else None


def _elements_of(expr: cst.BaseExpression) -> cst.BaseExpression:
    while type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value in _SAME_ELEMENTS \
            and len(expr.args) == 1:
        expr = expr.args[0].value
    return expr


def _values_of(name: str, fn: Optional[Function], model: ModuleModel) -> List[cst.BaseExpression]:
    assigns = fn.assigns if fn is not None else model.module_assigns
    return [value for target, value in assigns if type(target) is cst.Name and target.value == name]


def _is_parameter(expr: cst.BaseExpression, variable: str) -> bool:
    """``p`` or ``p.data``: the parameter's own storage."""
    expr = _without_data(expr)
    return type(expr) is cst.Name and expr.value == variable


def _without_data(expr: cst.BaseExpression) -> cst.BaseExpression:
    while type(expr) is cst.Attribute and expr.attr.value == "data":
        expr = expr.value
    return expr


def _changed_in_place(expr: cst.BaseExpression) -> cst.BaseExpression:
    """What an in-place call chain changes: ``buf`` of ``buf.mul_(m)`` (an in-place method returns
    its receiver)."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value.endswith("_"):
        expr = expr.func.value
    return _without_data(expr)


def _reads_grad(expr: cst.BaseExpression, variable: str, derived: Set[str]) -> bool:
    """Is ``expr`` computed from the parameter's gradient (``p.grad``, ``p.grad.data``, a derived name)?"""
    attributes: Set[int] = set()  # the ``buf`` of ``state.buf`` is an attribute, not the name ``buf``
    for node in code_nodes(expr):
        kind = type(node)
        if kind is cst.Name and node.value in derived and id(node) not in attributes:
            return True
        if kind is cst.Attribute:
            attributes.add(id(node.attr))
            owner = _without_data(node.value)
            if node.attr.value == "grad" and type(owner) is cst.Name and owner.value == variable:
                return True
    return False
