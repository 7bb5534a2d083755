"""What reaches backward(): a loss as the product of its reduction and the factors applied to it.

A loss starts from a reduction (a known loss function or module, HF's ``outputs.loss``,
``.mean()``/``.sum()``, a loss a model's or helper's body returns) and is then multiplied and
divided on its way to backward(). What TL201 needs is whether that product may include the
window's 1/k, so each factor is judged by what it can be (:mod:`scales`):

- divided by a count of the current batch (``x.shape[0]``, ``mask.sum()``): a summed loss becomes a
  mean, a mean stays one; dividing by anything else that could be k is the division (``divided``);
- multiplied by a weight (a coefficient, an adaptive weight, 2): the kind is kept; multiplied by
  what may be 1/k (``1.0 / accum``, 0.25): divided;
- a sum of terms is a mean when one of its terms is an undivided mean (that term's gradient is k
  times too large, whatever the others are), a sum when all are sums, unknown if a term is;
- ``loss = loss / k`` and ``loss *= w`` apply to the variable's other values, in the order written;
  ``loss = loss + term`` from ``loss = 0`` or ``torch.zeros(...)`` is the sum of the terms.

The factor is followed into helpers and forwards (their returns, with the loss kinds and scalars
of the call's arguments in place of their parameters) and back out to callers: a helper that runs
backward() on a parameter gets the kind of what its caller passes (``Scope.given``). Anything not
read is ``unknown``, and never reported.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from ..events import LOSS_DIVIDED, LOSS_MEAN, LOSS_SUM, LOSS_UNKNOWN
from . import library, scales
from .calls import literal_number, parameters_given
from .held import Given, Instances, Scope, instances_passed, passed, stores
from .module import Function, ModuleModel
from .names import dotted
from .roles import LOSS_FN

_MEAN_FUNCTIONS = {
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
    "margin_ranking_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "triplet_margin_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss", "ctc_loss", "multi_margin_loss",
}
_ZEROS = frozenset({"torch.zeros", "torch.zeros_like", "torch.tensor", "torch.as_tensor", "new_zeros"})
_KEEPING = frozenset({"item", "detach", "float", "to", "clone", "squeeze", "contiguous", "cuda", "double", "half"})
_LOSSES = frozenset({LOSS_MEAN, LOSS_SUM, LOSS_DIVIDED})
# Nothing yet: an accumulator's start (``0``, ``torch.zeros(1)``) or ``None``, which a sum of terms
# starts from and which is never the value backpropagated.
_NOTHING = "nothing"
_MAX_DEPTH = 8


def classify_loss(expr: cst.BaseExpression, fn: Optional[Function], model: ModuleModel,
                  given: Given = (), instances: Instances = ()) -> str:
    """The kind of the loss ``expr`` holds (events.LOSS_*)."""
    kind = _kind(expr, Scope(fn, model, given, instances), 0)
    return LOSS_UNKNOWN if kind == _NOTHING else kind


def arguments_given(call: cst.Call, callee: Function, fn: Optional[Function], model: ModuleModel,
                    given: Given = (), instances: Instances = ()) -> Tuple[Given, Instances]:
    """What a call passes to ``callee``'s parameters (see held.Scope): the loss and scalar kind of
    each argument, and the instances of project classes, read where the call is."""
    scope = Scope(fn, model, given, instances)
    return _arguments(call, callee, scope, 0), instances_passed(call, callee, scope)


def _arguments(call: cst.Call, callee: Function, scope: Scope, depth: int) -> Given:
    """Every parameter the call sets, unknown ones too: what this call passes is all the callee's
    parameters hold when it runs from here."""
    method = callee.cls is not None and isinstance(call.func, cst.Attribute)
    found = []
    for param, argument in parameters_given(call, callee.params, method):
        loss = _kind(argument, scope, depth + 1)
        scalar = scales.scalar(argument, scope, depth + 1) if loss == LOSS_UNKNOWN else scales.UNKNOWN
        found.append((param, loss, scalar))
    return tuple(sorted(found))


# ----------------------------------------------------------------- expressions
def _kind(expr: cst.BaseExpression, scope: Scope, depth: int, own: Optional[Tuple[str, str]] = None) -> str:
    """``own``: (name, kind) while a self-referring update (``loss = loss / k``) is read: the
    name stands for the variable's value before it."""
    if depth > _MAX_DEPTH:
        return LOSS_UNKNOWN
    if own is not None and isinstance(expr, cst.Name) and expr.value == own[0]:
        return own[1]
    if literal_number(expr) == 0 or isinstance(expr, cst.Name) and expr.value == "None":
        return _NOTHING
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return _kind(expr.expression, scope, depth + 1, own)
    if isinstance(expr, cst.BinaryOperation):
        return _arithmetic(expr, scope, depth, own)
    if isinstance(expr, cst.Name):
        return _variable(expr.value, scope, depth)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "loss":
            return LOSS_MEAN  # outputs.loss
        path = dotted(expr)
        found = stores(path, scope) if path is not None else []
        return _alternatives(_kind(value, where, depth + 1) for where, value in found) if found else LOSS_UNKNOWN
    if isinstance(expr, cst.Subscript):
        key = expr.slice[0].slice if len(expr.slice) == 1 else None
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString) and key.value.evaluated_value == "loss":
            return LOSS_MEAN  # outputs["loss"]
        return _entry(expr, key.value if isinstance(key, cst.Index) else None, scope, depth)
    if isinstance(expr, cst.Call):
        return _call(expr, scope, depth, own)
    return LOSS_UNKNOWN


def _arithmetic(expr: cst.BinaryOperation, scope: Scope, depth: int, own: Optional[Tuple[str, str]]) -> str:
    operator = expr.operator
    if isinstance(operator, (cst.Add, cst.Subtract)):
        return _sum([_kind(expr.left, scope, depth + 1, own), _kind(expr.right, scope, depth + 1, own)])
    if isinstance(operator, cst.Multiply):
        left, right = _kind(expr.left, scope, depth + 1, own), _kind(expr.right, scope, depth + 1, own)
        if _NOTHING in (left, right):
            return _NOTHING
        if left in _LOSSES and right == LOSS_UNKNOWN:
            return _scaled(left, scales.scalar(expr.right, scope, depth + 1))
        if right in _LOSSES and left == LOSS_UNKNOWN:
            return _scaled(right, scales.scalar(expr.left, scope, depth + 1))
        return LOSS_UNKNOWN  # a product of two losses, or of nothing known
    if isinstance(operator, (cst.Divide, cst.FloorDivide)):
        # what divides is judged as a number (a token count may be written ``mask.sum()``, too)
        left = _kind(expr.left, scope, depth + 1, own)
        if left not in _LOSSES:
            return left if left == _NOTHING else LOSS_UNKNOWN
        return _divided(left, scales.scalar(expr.right, scope, depth + 1))
    return LOSS_UNKNOWN


def _scaled(kind: str, multiplier: str) -> str:
    return LOSS_DIVIDED if scales.multiplies_down(multiplier) else kind


def _divided(kind: str, divisor: str) -> str:
    if scales.divides(divisor):
        return LOSS_DIVIDED
    if divisor == scales.COUNT and kind == LOSS_SUM:
        return LOSS_MEAN  # a sum over the batch divided by its size: the batch's mean
    return kind


def _sum(kinds: Iterable[str]) -> str:
    """The kind of a sum of terms of these kinds."""
    found = {k for k in kinds if k != _NOTHING}
    if not found:
        return _NOTHING
    if LOSS_UNKNOWN in found:
        return LOSS_UNKNOWN
    if LOSS_MEAN in found:
        return LOSS_MEAN  # that term is undivided whatever the others are
    return found.pop() if len(found) == 1 else LOSS_UNKNOWN


def _alternatives(kinds: Iterable[str]) -> str:
    """The kind of a value that may be any of these (assigned in several places): they must agree."""
    found = set(kinds)
    if len(found) > 1:
        found.discard(_NOTHING)  # a start value is not what reaches backward() when another is
    return found.pop() if len(found) == 1 else LOSS_UNKNOWN


def _reduction(call: cst.Call) -> Optional[str]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "reduction":
            value = arg.value
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                return value.evaluated_value
            return "?"
    return None


def _call(call: cst.Call, scope: Scope, depth: int, own: Optional[Tuple[str, str]]) -> str:
    model = scope.model
    func_path = dotted(call.func) or ""
    # ``((pred - y) ** 2).mean()``: the method name counts even when the receiver is no name.
    last = call.func.attr.value if isinstance(call.func, cst.Attribute) else func_path.rsplit(".", 1)[-1]
    if last in _MEAN_FUNCTIONS:
        reduction = _reduction(call)
        if reduction is None or reduction == "mean":
            return LOSS_MEAN
        return LOSS_SUM if reduction == "sum" else LOSS_UNKNOWN
    if last == "mean" and isinstance(call.func, cst.Attribute) or func_path == "torch.mean":
        return LOSS_MEAN
    if last == "sum" and isinstance(call.func, cst.Attribute):
        return LOSS_SUM
    if func_path in _ZEROS or last in _ZEROS and isinstance(call.func, cst.Attribute):
        return _NOTHING if func_path != "torch.tensor" or _zero_literal(call) else LOSS_UNKNOWN
    if last in _KEEPING and isinstance(call.func, cst.Attribute):
        return _kind(call.func.value, scope, depth + 1, own)
    described = _described_loss(call, func_path, scope)
    if described is not None:
        return described
    role = model.roles.get(func_path)
    if role is not None and role.kind == LOSS_FN:
        if role.reduction == "mean":
            return LOSS_MEAN
        return LOSS_SUM if role.reduction == "sum" else LOSS_UNKNOWN
    return _returned(call, None, 0, scope, depth)


def _zero_literal(call: cst.Call) -> bool:
    return bool(call.args) and literal_number(call.args[0].value) == 0


def _described_loss(call: cst.Call, name: str, scope: Scope) -> Optional[str]:
    """The loss a library object returns when called so (library descriptions' ``losses``:
    transformer_lens' ``model(tokens, return_type="loss")``), judged from the classes the object
    is built from or annotated with; None when no description applies."""
    if not name:
        return None
    fn, model = scope.fn, scope.model
    flow = model.objects
    assigned = [value for target, value in _assignments(fn, model) if dotted(target) == name]
    objects = flow.eval(call.func, fn) if all(isinstance(value, cst.Name) for value in assigned) else ()
    if objects and all(isinstance(o.node, cst.Call) and flow.allocated_here(o) for o in objects):
        # a name that only aliases other variables (or a parameter): the objects it can be, each
        # built by a call of this module
        classes = [model.imports.qualify(o.node.func) for o in objects]
        kinds = {library.current().loss_of(qualified, call) for qualified in classes}
        if len(kinds) == 1 and None not in kinds:
            return kinds.pop()
    classes = [model.imports.qualify(value.func) for target, value in _assignments(fn, model)
               if dotted(target) == name and isinstance(value, cst.Call)]
    if fn is not None:
        classes += [model.imports.qualify(p.annotation.annotation) for p in _params(fn.node.params)
                    if p.name.value == name and p.annotation is not None]
    kinds = {library.current().loss_of(qualified, call) for qualified in classes}
    return kinds.pop() if len(kinds) == 1 else None


def _params(params: cst.Parameters):
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params


def _entry(expr: cst.Subscript, key: Optional[cst.BaseExpression], scope: Scope, depth: int) -> str:
    """``losses[name]`` of a dict or list the function fills (``losses[f"{prefix}/kl"] = kl_div(...)``):
    what the stores that may have put the entry there hold, which must agree. A store under
    another literal key is another entry; one under a key computed at run time may be this one."""
    container = dotted(expr.value)
    if container is None or key is None:
        return LOSS_UNKNOWN
    wanted = _literal(key)
    kinds = []
    for target, value in _assignments(scope.fn, scope.model):
        if not (isinstance(target, cst.Subscript) and dotted(target.value) == container and len(target.slice) == 1
                and isinstance(target.slice[0].slice, cst.Index)):
            continue
        stored = target.slice[0].slice.value
        literal = _literal(stored)
        if wanted is not None and literal is not None and literal != wanted:
            continue  # another entry
        kinds.append(_kind(value, scope, depth + 1))
    return _alternatives(kinds) if kinds else LOSS_UNKNOWN


def _assignments(fn: Optional[Function], model: ModuleModel):
    return fn.assigns if fn is not None else model.module_assigns


# ----------------------------------------------------------------- helpers' returns
def _returned(call: cst.Call, index: Optional[int], count: int, scope: Scope, depth: int) -> str:
    """The loss a call returns (``index``: the element of a returned tuple of ``count``), judged
    from the bodies it can run: a project function, a method of ``self``, the ``forward`` of a
    model built from a project class, a function held by a name or attribute. Only the returns a
    call's literal arguments can reach count (``optimizer_idx=0`` does not reach the branch for
    ``optimizer_idx == 1``). Unknown when no body is read or they disagree."""
    kinds = []
    for callee, method in _callees(call, scope):
        owner = callee.owner or scope.model
        inner = Scope(callee, owner, _arguments(call, callee, scope, depth), instances_passed(call, callee, scope))
        literals = _literal_arguments(call, callee, method)
        for returned in _reachable_returns(callee, literals):
            if index is None:
                kinds.append(_kind(returned, inner, depth + 1))
            elif isinstance(returned, cst.Tuple) and len(returned.elements) == count:
                kinds.append(_kind(returned.elements[index].value, inner, depth + 1))
            else:
                kinds.append(LOSS_UNKNOWN)
        if kinds:
            break  # the first body that can be read is the one called
    return _alternatives(kinds) if kinds else LOSS_UNKNOWN


def _callees(call: cst.Call, scope: Scope) -> List[Tuple[Function, bool]]:
    """(function, called as a method) for the bodies ``call`` can run, best known first."""
    fn, model = scope.fn, scope.model
    func = call.func
    path = dotted(func)
    found: List[Tuple[Function, bool]] = []
    if isinstance(func, cst.Name):
        local = model.functions.get(func.value)
        if local is None and model.project is not None:
            local = model.project.function(model, func.value)
        if local is not None:
            found.append((local, False))
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
            and fn is not None and fn.cls is not None:
        method = model.method_of_class(fn.cls, func.attr.value)
        if method is not None:
            found.append((method, True))
    # an instance of a project class called (its forward), or one of its methods called
    for obj in model.objects.eval(func, fn):
        if obj.cls is not None:
            forward = (obj.class_module() or model).method_of_class(obj.cls, "forward")
            if forward is not None:
                found.append((forward, True))
    if isinstance(func, cst.Attribute):
        for obj in model.objects.eval(func.value, fn):
            if obj.cls is not None:
                method = (obj.class_module() or model).method_of_class(obj.cls, func.attr.value)
                if method is not None:
                    found.append((method, True))
    if path is not None:
        # ``model = GPT(config)`` with GPT imported from the project; ``self.criterion = hinge_loss``
        for where, value in stores(path, scope):
            owner = where.model
            for held in (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,):
                if isinstance(held, cst.Call) and dotted(held.func):
                    forward = owner.method_of_class(dotted(held.func) or "", "forward")
                    if forward is not None:
                        found.append((forward, True))
                elif isinstance(held, cst.Name) and held.value in owner.functions:
                    found.append((owner.functions[held.value], False))
    return list(dict.fromkeys(found))


def _literal_arguments(call: cst.Call, callee: Function, method: bool) -> Dict[str, object]:
    """The parameters of ``callee`` a call sets to a literal (or leaves at a literal default)."""
    found: Dict[str, object] = {}
    for param in callee.params:
        default = callee.default(param)
        if default is not None and _literal(default) is not None:
            found[param] = _literal(default)
    for param, argument in parameters_given(call, callee.params, method):
        value = _literal(argument)
        if value is None:
            found.pop(param, None)
        else:
            found[param] = value
    return found


def _literal(node: cst.BaseExpression) -> Optional[object]:
    number = literal_number(node)
    if number is not None:
        return number
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _reachable_returns(callee: Function, literals: Dict[str, object]) -> List[cst.BaseExpression]:
    owner = callee.owner
    guarded = owner.memo(f"losses.returns {id(callee.node)}", lambda: list(_guarded_returns(callee.body, ()))) \
        if owner is not None else list(_guarded_returns(callee.body, ()))
    return [value for value, guards in guarded if all(_holds(test, branch, literals) is not False for test, branch in guards)]


def _guarded_returns(body: Sequence[cst.CSTNode], guards: Tuple[Tuple[cst.BaseExpression, bool], ...]):
    """Every ``return value`` of a body with the if-tests it runs under (test, branch taken)."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Return) and small.value is not None:
                    yield small.value, guards
        elif isinstance(stmt, cst.If):
            yield from _guarded_returns(_block(stmt.body), guards + ((stmt.test, True),))
            if stmt.orelse is None and _returns_at_end(_block(stmt.body)):
                # ``if mode == "train": return a`` then ``return b``: b runs only when the test fails
                guards = guards + ((stmt.test, False),)
                continue
            orelse = stmt.orelse
            if isinstance(orelse, cst.If):
                yield from _guarded_returns([orelse], guards + ((stmt.test, False),))
            elif orelse is not None:
                yield from _guarded_returns(_block(orelse.body), guards + ((stmt.test, False),))
        elif isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
            yield from _guarded_returns(_block(stmt.body), guards)
            for handler in getattr(stmt, "handlers", ()):
                yield from _guarded_returns(_block(handler.body), guards)
            for extra in ("orelse", "finalbody"):
                part = getattr(stmt, extra, None)
                if part is not None:
                    yield from _guarded_returns(_block(part.body), guards)


def _returns_at_end(body: Sequence[cst.CSTNode]) -> bool:
    last = body[-1] if body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(small, cst.Return) for small in last.body)


def _block(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else [suite]


def _holds(test: cst.BaseExpression, branch: bool, literals: Dict[str, object]) -> Optional[bool]:
    """Whether the branch of ``param == literal`` (or ``!=``) is taken with the call's literals;
    None when the test is anything else or the parameter is not set to a literal."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    if not isinstance(comparison.operator, (cst.Equal, cst.NotEqual)):
        return None
    left, right = test.left, comparison.comparator
    if isinstance(right, cst.Name) and right.value in literals:
        left, right = right, left
    if not isinstance(left, cst.Name) or left.value not in literals:
        return None
    value = _literal(right)
    if value is None:
        return None
    equal = literals[left.value] == value
    truth = equal if isinstance(comparison.operator, cst.Equal) else not equal
    return truth is branch


# ----------------------------------------------------------------- variables
def _variable(name: str, scope: Scope, depth: int) -> str:
    """Flow-insensitive (every assignment of ``name`` in the function counts), so the same for
    every use: computed once per function, name, depth and what the caller passes (a flat script
    assigns ``loss`` in each of its loops; asking anew at each backward would be quadratic)."""
    known = scope.model.memo("losses.variables", dict)
    key = (id(scope.fn.node) if scope.fn is not None else None, name, depth, scope.given, scope.instances)
    if key not in known:
        known[key] = _assigned(name, scope, depth)
    return known[key]


def _assigned(name: str, scope: Scope, depth: int) -> str:
    fn, model = scope.fn, scope.model
    fresh: List[str] = []
    updates: List[Tuple[int, cst.CSTNode]] = []  # (position, the assignment's value or the AugAssign)
    for target, value in _assignments(fn, model):
        if isinstance(target, cst.Name) and target.value == name:
            if _refers_to(value, name):
                updates.append((_position(model, value), value))
            else:
                fresh.append(_kind(value, scope, depth + 1))
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call):
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
            if name in names:
                # logits, loss = model(x, y): as the model's forward computes it, if it can be read.
                fresh.append(_returned(value, names.index(name), len(names), scope, depth))
    augmented = fn.aug_assigns if fn is not None else model.module_aug_assigns
    updates += [(_position(model, aug), aug) for aug in augmented
                if isinstance(aug.target, cst.Name) and aug.target.value == name]
    if fn is not None and name in fn.params:
        fresh.append(_parameter(name, scope, depth))
    if not fresh:
        return LOSS_UNKNOWN  # a global, or a name bound by a loop or a with: not read here
    kind = _alternatives(fresh)
    for _, update in sorted(updates, key=lambda item: item[0]):
        kind = _update(update, name, kind, scope, depth)
    return kind


def _parameter(name: str, scope: Scope, depth: int) -> str:
    """What the call that runs the function passes, else what every call in its module passes."""
    given = scope.loss_given(name)
    if given is not None:
        return given
    calls = passed(name, scope)
    return _alternatives(_kind(value, where, depth + 1) for where, value in calls) if calls else LOSS_UNKNOWN


def _update(update: cst.CSTNode, name: str, kind: str, scope: Scope, depth: int) -> str:
    own = (name, kind)
    if not isinstance(update, cst.AugAssign):
        return _kind(update, scope, depth + 1, own)  # loss = loss / k, loss = loss + aux
    operator, value = update.operator, update.value
    if isinstance(operator, (cst.AddAssign, cst.SubtractAssign)):
        return _sum([kind, _kind(value, scope, depth + 1)])
    if isinstance(operator, cst.MultiplyAssign):
        return _scaled(kind, scales.scalar(value, scope, depth + 1)) if kind in _LOSSES else kind
    if isinstance(operator, (cst.DivideAssign, cst.FloorDivideAssign)):
        return _divided(kind, scales.scalar(value, scope, depth + 1)) if kind in _LOSSES else (
            kind if kind == _NOTHING else LOSS_UNKNOWN)
    return LOSS_UNKNOWN


def _refers_to(value: cst.BaseExpression, name: str) -> bool:
    stack: List[cst.CSTNode] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and node.value == name:
            return True
        if isinstance(node, (cst.Lambda, cst.ListComp, cst.GeneratorExp, cst.DictComp, cst.SetComp)):
            continue  # a name bound there is another variable
        if isinstance(node, cst.Attribute):
            stack.append(node.value)  # ``self.loss``: an attribute, not the variable
        elif isinstance(node, cst.Arg):
            stack.append(node.value)  # ``f(loss=x)``: a keyword, not the variable
        else:
            stack.extend(node.children)
    return False


def _position(model: ModuleModel, node: cst.CSTNode) -> int:
    found = model.preorder.index(node)
    return found if found is not None else -1
