"""What kind of loss reaches backward(): mean-reduced, divided/normalised, sum-reduced, or unknown.

TL201 needs positive evidence of a mean reduction (a known loss function or module, HF's
``outputs.loss``, ``.mean()``, a loss unpacked from a model call) and the absence of any rescaling of
that variable in the function; anything else is "unknown" and never reported.
"""
from __future__ import annotations

from typing import Optional

import libcst as cst

from ..events import LOSS_DIVIDED, LOSS_MEAN, LOSS_SUM, LOSS_UNKNOWN
from .module import Function, ModuleModel
from .names import dotted
from . import library
from .roles import LOSS_FN

_MEAN_FUNCTIONS = {
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
    "margin_ranking_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "triplet_margin_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss", "ctc_loss", "multi_margin_loss",
}
_RESCALE_OPS = (cst.Divide, cst.Multiply, cst.FloorDivide)
_MAX_DEPTH = 3


def classify_loss(expr: cst.BaseExpression, fn: Optional[Function], model: ModuleModel, depth: int = 0,
                  term: bool = False) -> str:
    """``term``: ``expr`` is one term of a sum. A term's constant weight (``ce + 0.1 * aux``) keeps
    the kind of what it weighs: a weighted sum of mean losses is a mean-type loss, which the
    accumulation count still has to divide. The whole loss multiplied by a constant may be that
    division (``loss * 0.25``), so there it counts as rescaled."""
    if depth > _MAX_DEPTH:
        return LOSS_UNKNOWN
    if isinstance(expr, cst.BinaryOperation):
        if term and isinstance(expr.operator, cst.Multiply):
            weighed = _weighed(expr)
            if weighed is not None:
                return classify_loss(weighed, fn, model, depth + 1, term=True)
        if isinstance(expr.operator, _RESCALE_OPS):
            return LOSS_DIVIDED
        if isinstance(expr.operator, (cst.Add, cst.Subtract)):
            kinds = {classify_loss(expr.left, fn, model, depth + 1, term=True),
                     classify_loss(expr.right, fn, model, depth + 1, term=True)}
            if LOSS_DIVIDED in kinds:
                return LOSS_DIVIDED
            return kinds.pop() if len(kinds) == 1 else LOSS_UNKNOWN
        return LOSS_UNKNOWN
    if isinstance(expr, cst.Name):
        return _classify_variable(expr.value, fn, model, depth)
    if isinstance(expr, cst.Attribute):
        return LOSS_MEAN if expr.attr.value == "loss" else LOSS_UNKNOWN
    if isinstance(expr, cst.Subscript):
        key = expr.slice[0].slice if len(expr.slice) == 1 else None
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString) and key.value.evaluated_value == "loss":
            return LOSS_MEAN  # outputs["loss"]
        return LOSS_UNKNOWN
    if isinstance(expr, cst.Call):
        return _classify_call(expr, fn, model, depth)
    return LOSS_UNKNOWN


def _weighed(product: cst.BinaryOperation) -> Optional[cst.BaseExpression]:
    """The factor of ``0.1 * aux`` / ``aux * 2`` that is not a numeric literal (None if neither is)."""
    if isinstance(product.left, (cst.Integer, cst.Float)):
        return product.right
    if isinstance(product.right, (cst.Integer, cst.Float)):
        return product.left
    return None


def _reduction(call: cst.Call) -> Optional[str]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "reduction":
            value = arg.value
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                return value.evaluated_value
            return "?"
    return None


def _classify_call(call: cst.Call, fn: Optional[Function], model: ModuleModel, depth: int) -> str:
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
    if last in ("item", "detach", "float", "to", "clone", "squeeze") and isinstance(call.func, cst.Attribute):
        return classify_loss(call.func.value, fn, model, depth + 1)
    described = _described_loss(call, func_path, fn, model)
    if described is not None:
        return described
    role = model.roles.get(func_path)
    if role is not None and role.kind == LOSS_FN:
        if role.reduction == "mean":
            return LOSS_MEAN
        return LOSS_SUM if role.reduction == "sum" else LOSS_UNKNOWN
    helper = model.functions.get(func_path)
    if helper is not None:
        kinds = {classify_loss(ret, helper, model, depth + 1) for ret in helper.returns}
        return kinds.pop() if len(kinds) == 1 else LOSS_UNKNOWN
    return LOSS_UNKNOWN


def _described_loss(call: cst.Call, name: str, fn: Optional[Function], model: ModuleModel) -> Optional[str]:
    """The loss a library object returns when called so (library descriptions' ``losses``:
    transformer_lens' ``model(tokens, return_type="loss")``), judged from the classes the object
    is built from or annotated with; None when no description applies."""
    if not name:
        return None
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


def _returned_by_model(call: cst.Call, index: int, count: int, fn: Optional[Function], model: ModuleModel,
                       depth: int) -> str:
    """The loss a model call returns in position ``index`` of a tuple, judged from the forward of
    the model's class when this module or the project defines it (``model = GPT(config)``);
    otherwise unknown."""
    callee = dotted(call.func)
    # the instances the called object can be (a parameter holds what the callers pass), and, for
    # a class defined in another module, what the name was assigned from
    instances = [(o.class_module() or model, o.cls) for o in model.objects.eval(call.func, fn) if o.cls is not None]
    assigned = [(model, dotted(v.func)) for t, v in _assignments(fn, model) + model.module_assigns
                if dotted(t) == callee and isinstance(v, cst.Call)]
    for owner_module, cls in dict.fromkeys(instances + assigned):
        forward = owner_module.method_of_class(cls or "", "forward")
        if forward is None:
            continue
        owner = forward.owner or model
        kinds = set()
        for ret in forward.returns:
            if isinstance(ret, cst.Tuple) and len(ret.elements) == count:
                kinds.add(classify_loss(ret.elements[index].value, forward, owner, depth + 1))
        if len(kinds) == 1:
            return kinds.pop()
    return LOSS_UNKNOWN


def _assignments(fn: Optional[Function], model: ModuleModel):
    return fn.assigns if fn is not None else model.module_assigns


def _classify_variable(name: str, fn: Optional[Function], model: ModuleModel, depth: int) -> str:
    """Flow-insensitive (every assignment of ``name`` in the function counts), so the same for
    every use: computed once per function, name and depth (a flat script assigns ``loss`` in each
    of its loops; asking anew at each backward would be quadratic)."""
    known = model.memo("losses.variables", dict)
    key = (id(fn.node) if fn is not None else None, name, depth)
    if key not in known:
        known[key] = _classify_assigned(name, fn, model, depth)
    return known[key]


def _classify_assigned(name: str, fn: Optional[Function], model: ModuleModel, depth: int) -> str:
    augmented = fn.aug_assigns if fn is not None else model.module_aug_assigns
    for aug in augmented:
        if isinstance(aug.target, cst.Name) and aug.target.value == name and isinstance(
            aug.operator, (cst.DivideAssign, cst.MultiplyAssign, cst.FloorDivideAssign)
        ):
            return LOSS_DIVIDED
    kinds = set()
    for target, value in _assignments(fn, model):
        if isinstance(target, cst.Name) and target.value == name:
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, _RESCALE_OPS):
                return LOSS_DIVIDED  # loss = loss / k anywhere in the function
            if isinstance(value, cst.Name) and value.value in (name, "None"):
                # ``loss = loss``, or ``loss = None`` (a forward's inference branch, an accumulator
                # before its first term): None cannot be backpropagated, so it is never the value
                # that reaches backward().
                continue
            kinds.add(classify_loss(value, fn, model, depth + 1))
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call):
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
            if name in names:
                # logits, loss = model(x, y): as the model's forward computes it, if it can be read.
                kinds.add(_returned_by_model(value, names.index(name), len(names), fn, model, depth))
    if LOSS_DIVIDED in kinds:
        return LOSS_DIVIDED
    return kinds.pop() if len(kinds) == 1 else LOSS_UNKNOWN
