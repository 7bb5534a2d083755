"""Losses on probabilities and attention arguments: TL801, TL802, TL803, TL804."""
from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from ..calls import arg, is_none, literal_bool, literal_number
from ..module import Function
from ..names import dotted
from ..roles import LOSS_FN
from ..walk import walk
from . import Context, Match

_CE_FUNCTIONS = {"cross_entropy"}
_CE_MODULES = {"CrossEntropyLoss"}
_NLL_FUNCTIONS = {"nll_loss"}
_NLL_MODULES = {"NLLLoss"}
_BCE_FUNCTIONS = {"binary_cross_entropy"}
_BCE_MODULES = {"BCELoss"}


def _last(node: cst.BaseExpression) -> str:
    return (dotted(node) or "").rsplit(".", 1)[-1]


def _loss_kind(ctx: Context, call: cst.Call) -> Optional[str]:
    """"ce", "nll" or "bce" for a call of such a loss function or loss module."""
    name = _last(call.func)
    role = ctx.model.roles.get(dotted(call.func))
    module_class = None
    if role is not None and role.kind == LOSS_FN:
        module_class = _loss_class(ctx, dotted(call.func))
    if name in _CE_FUNCTIONS or module_class in _CE_MODULES:
        return "ce"
    if name in _NLL_FUNCTIONS or module_class in _NLL_MODULES:
        return "nll"
    if name in _BCE_FUNCTIONS or module_class in _BCE_MODULES:
        return "bce"
    return None


def _loss_class(ctx: Context, path: Optional[str]) -> Optional[str]:
    """The loss module class assigned to ``path``; None when it is assigned anything else too
    (``self.loss_fn`` chosen by a branch: which one a call uses is not known)."""
    values = ctx.model.values_assigned(path) if path else []
    classes = {_last(v.func) if isinstance(v, cst.Call) else None for v in values}
    return classes.pop() if len(classes) == 1 else None


def _producer(ctx: Context, expr: cst.BaseExpression, fn: Optional[Function]) -> Optional[cst.Call]:
    """The call that produced a value: the expression itself, or the name's assignment in ``fn``."""
    if isinstance(expr, cst.Call):
        return expr
    if isinstance(expr, cst.Name):
        assigns = fn.assigns if fn is not None else ctx.model.module_assigns
        producers = [v for t, v in assigns if isinstance(t, cst.Name) and t.value == expr.value]
        if len(producers) == 1 and isinstance(producers[0], cst.Call):
            return producers[0]
    return None


def _is_call_named(call: Optional[cst.Call], names) -> bool:
    return call is not None and _last(call.func) in names


def softmax_before_cross_entropy(ctx: Context) -> Iterable[Match]:
    for site in ctx.sites.sites:
        kind = _loss_kind(ctx, site.call)
        if kind not in ("ce", "nll") or not site.call.args:
            continue
        produced = _producer(ctx, site.call.args[0].value, site.function)
        if kind == "ce" and _is_call_named(produced, ("softmax", "log_softmax", "Softmax", "LogSoftmax")):
            what = _last(produced.func)
        elif kind == "nll" and _is_log_of_softmax(ctx, produced, site.function):
            what = "log(softmax(...))"
        else:
            continue
        yield Match("TL801", site.call, lambda line_of, c=site.call, w=what: (
            f"{ctx.label(c)} receives the output of {w}, but cross-entropy applies log_softmax "
            f"itself: the logits are squashed twice, gradients shrink as predictions sharpen and "
            f"training stalls at a worse loss; pass the raw logits (or log_softmax + NLLLoss)."
        ))


def _is_log_of_softmax(ctx: Context, call: Optional[cst.Call], fn) -> bool:
    if call is None:
        return False
    if _last(call.func) == "log" and isinstance(call.func, cst.Attribute):
        inner = call.args[0].value if call.args else call.func.value
        return _is_call_named(_producer(ctx, inner, fn), ("softmax",))
    return False


def sigmoid_before_bce(ctx: Context) -> Iterable[Match]:
    for site in ctx.sites.sites:
        if _loss_kind(ctx, site.call) != "bce" or not site.call.args:
            continue
        produced = _producer(ctx, site.call.args[0].value, site.function)
        if _is_call_named(produced, ("sigmoid", "Sigmoid")):
            yield Match("TL802", site.call, lambda line_of, c=site.call: (
                f"{ctx.label(c)} takes probabilities from a separate sigmoid: saturated logits "
                f"round to 0 or 1 in float32 (and fp16), so the loss clamps and gradients vanish or "
                f"blow up; use BCEWithLogitsLoss / binary_cross_entropy_with_logits on the logits."
            ))


def _sdpa_calls(ctx: Context):
    for site in ctx.sites.sites:
        if _last(site.call.func) == "scaled_dot_product_attention":
            yield site


def _gated_on_training(expr: cst.BaseExpression) -> bool:
    return any(isinstance(n, (cst.Name, cst.Attribute)) and _last(n) == "training" for n in walk(expr))


def _assigned_under_training_test(fn: Optional[Function], name: str) -> bool:
    if fn is None:
        return False
    for node in walk(fn.node):
        if isinstance(node, cst.If) and _gated_on_training(node.test):
            for inner in walk(node):
                if isinstance(inner, cst.AssignTarget) and isinstance(inner.target, cst.Name) and inner.target.value == name:
                    return True
    return False


def sdpa_dropout_in_eval(ctx: Context) -> Iterable[Match]:
    for site in _sdpa_calls(ctx):
        dropout = arg(site.call, 4, "dropout_p")
        if dropout is None or literal_number(dropout) == 0 or _gated_on_training(dropout):
            continue
        if isinstance(dropout, cst.Name):
            assigns = site.function.assigns if site.function is not None else []
            sources = [v for t, v in assigns if isinstance(t, cst.Name) and t.value == dropout.value]
            if not sources or any(_gated_on_training(v) for v in sources):
                continue  # a parameter or a gated local: the caller decides
            if _assigned_under_training_test(site.function, dropout.value):
                continue  # ``if self.training: p = self.drop`` / ``else: p = 0.0``
        elif not (isinstance(dropout, cst.Attribute) or literal_number(dropout)):
            continue
        yield Match("TL803", site.call, lambda line_of, c=site.call, d=ctx.code(dropout): (
            f"{ctx.label(c)} applies dropout_p={d} in eval mode too: unlike nn.Dropout, the "
            f"functional call does not know model.eval(), so validation scores and generations are "
            f"randomly perturbed; pass dropout_p={d} if self.training else 0.0."
        ))


def sdpa_mask_and_causal(ctx: Context) -> Iterable[Match]:
    for site in _sdpa_calls(ctx):
        mask = arg(site.call, 3, "attn_mask")
        causal = arg(site.call, 5, "is_causal")
        if mask is not None and not is_none(mask) and literal_bool(causal) is True:
            yield Match("TL804", site.call, lambda line_of, c=site.call: (
                f"{ctx.label(c)} passes attn_mask together with is_causal=True, which PyTorch "
                f"documents as mutually exclusive: backends disagree (some raise, the CPU math path "
                f"combines the two masks), so the attention the model trains with depends on device "
                f"and version; fold the causal mask into attn_mask, or pass only is_causal=True."
            ))


RULES = {
    "TL801": softmax_before_cross_entropy,
    "TL802": sigmoid_before_bce,
    "TL803": sdpa_dropout_in_eval,
    "TL804": sdpa_mask_and_causal,
}
