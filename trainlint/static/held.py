"""What a name, a parameter or an instance's attribute holds where a function reads it, for the
loss factor (losses.py) and the scalars that scale it (scales.py).

A ``Scope`` is where an expression is read: its function, its module, and what the call that runs
the function passes for its parameters: loss and scalar kinds, and for a parameter given an
instance of a project class (``loop_body(self, batch)`` from a method), that class, so that
``self.scale`` in the helper is what the class's methods store there. Flow-insensitive: every
value assigned to a path counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import libcst as cst

from .calls import parameters_given
from .module import Function, ModuleModel
from .names import dotted

# (parameter, loss kind, scalar kind) the caller passes
Given = Tuple[Tuple[str, str, str], ...]
# (parameter, class, the module defining it): parameters given an instance of a project class
Instances = Tuple[Tuple[str, str, ModuleModel], ...]


@dataclass(frozen=True)
class Scope:
    fn: Optional[Function]
    model: ModuleModel
    given: Given = ()
    instances: Instances = ()

    def loss_given(self, param: str) -> Optional[str]:
        return next((loss for name, loss, _ in self.given if name == param), None)

    def scalar_given(self, param: str) -> Optional[str]:
        return next((kind for name, _, kind in self.given if name == param), None)

    def instance_of(self, head: str) -> Optional[Tuple[str, ModuleModel]]:
        """The class (and its module) of the object a name of this function stands for: the
        receiver of a method, or a parameter the caller gave an instance."""
        fn = self.fn
        if fn is not None and fn.cls is not None and fn.params and head == fn.params[0]:
            return fn.cls, fn.owner or self.model
        return next(((cls, module) for name, cls, module in self.instances if name == head), None)


def stores(path: str, scope: Scope) -> List[Tuple[Scope, cst.BaseExpression]]:
    """Every value assigned to ``path`` where ``scope`` reads it, each with the scope it is read
    in: ``self.x`` (or ``runner.x`` for a parameter given an instance) as its class's methods
    set it; a local as its function assigns it; a free name as the module does."""
    head, dot, rest = path.partition(".")
    instance = scope.instance_of(head) if dot else None
    if instance is not None:
        cls, module = instance
        return [(Scope(method, module), value) for method, value in module.assignments_in_class(cls, "self." + rest)]
    return [(scope, value) for value in scope.model.values_in_scope(path, scope.fn)]


def passed(param: str, scope: Scope) -> Optional[List[Tuple[Scope, cst.BaseExpression]]]:
    """What each call of the function in its module passes for ``param`` (its default where the
    call passes nothing), each with the caller's scope; None when nothing here calls it or a call
    leaves it without a value."""
    fn, model = scope.fn, scope.model
    if fn is None:
        return None
    sites = model.sites()
    callers = sites.calls_of(fn)
    if fn.name == "__init__" and fn.cls is not None:
        callers = [site for site in sites.named(fn.cls) if isinstance(site.call.func, cst.Name)]
    if not callers:
        return None
    default = fn.default(param)
    found = []
    for site in callers:
        given = dict(parameters_given(site.call, fn.params, fn.cls is not None)).get(param, default)
        if given is None:
            return None
        found.append((Scope(site.function, model), given))
    return found


def instances_passed(call: cst.Call, callee: Function, scope: Scope) -> Instances:
    """The parameters of ``callee`` that ``call`` gives an instance of a project class: the
    caller's own receiver (``loop_body(self, batch)``), a parameter given one, an object built
    from a project class."""
    method = callee.cls is not None and isinstance(call.func, cst.Attribute)
    found = []
    for param, argument in parameters_given(call, callee.params, method):
        path = dotted(argument)
        instance = scope.instance_of(path) if path is not None and "." not in path else None
        if instance is None:
            classes = {(obj.cls, obj.class_module() or scope.model) for obj in scope.model.objects.eval(argument, scope.fn)
                       if obj.cls is not None}
            instance = classes.pop() if len(classes) == 1 else None
        if instance is not None:
            found.append((param, instance[0], instance[1]))
    return tuple(found)
