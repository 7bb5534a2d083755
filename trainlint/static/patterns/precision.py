"""Mixed precision: TL401 float16 autocast with no GradScaler."""
from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from ..calls import arg, kwarg, literal_str
from ..names import dotted
from ..roles import SCALER
from . import Context, Match
from .loops import is_no_grad, no_grad_function


def _may_be_scaler(ctx: Context, site) -> bool:
    """``x.scale(loss)`` where ``x`` is no object the program built as something else: a loss
    scaler handed in or built elsewhere, whatever it is called."""
    if site.receiver is None:
        return False
    role = ctx.model.roles.get(site.receiver)
    return role is None or role.kind == SCALER


def _autocast_dtype(ctx: Context, call: cst.Call) -> Optional[str]:
    """"float16" / "bfloat16" / None (unknown) for an autocast call."""
    path = dotted(call.func) or ""
    qualified = ctx.qualify(call.func) or path
    if not qualified.endswith("autocast"):
        return None
    enabled = kwarg(call, "enabled")
    if enabled is not None and ctx.model.values.boolean(enabled.value) is False:
        return None  # ``autocast(enabled=False)``: a float32 island inside mixed precision
    dtype = arg(call, 1, "dtype") if "cuda.amp" not in qualified and "cpu.amp" not in qualified else arg(call, 0, "dtype")
    if dtype is not None:
        name = (dotted(dtype) or "").rsplit(".", 1)[-1]
        return {"float16": "float16", "half": "float16", "bfloat16": "bfloat16"}.get(name)
    if "cuda.amp" in qualified:
        return "float16"  # torch.cuda.amp.autocast() defaults to float16
    device = literal_str(arg(call, 0, "device_type"))
    return "float16" if device == "cuda" else None


def fp16_without_scaler(ctx: Context) -> Iterable[Match]:
    if any(role.kind == SCALER for role in ctx.model.roles.roles.values()):
        return
    if any(site.name in ("GradScaler", "ShardedGradScaler") or (site.name == "scale" and _may_be_scaler(ctx, site))
           for site in ctx.sites.sites):
        return  # a scaler is made or used (scaler.scale(loss)), perhaps built elsewhere
    if not ctx.sites.named("backward", "manual_backward"):
        return
    if _accelerate_scales(ctx):
        return  # accelerator.backward() scales the loss itself under mixed_precision="fp16"
    for site in ctx.sites.sites:
        if not _is_with_item(site):
            continue
        if _autocast_dtype(ctx, site.call) != "float16":
            continue
        # Inside a loop, the loop must train (not a validation/generation loop); outside any loop,
        # the function must (a train_step).
        training = ctx.sites.in_training_loop(site) if site.loops else (
            site.function is not None and ctx.sites.trains(site.function))
        if not training or _gradient_free(ctx, site) or not _backpropagated_here(ctx, site):
            continue  # autocast for inference only
        yield Match("TL401", site.call, lambda line_of, c=site.call: (
            f"{ctx.label(c)} runs the forward in float16 and gradients are computed with no "
            f"GradScaler: small gradients underflow to zero in fp16, so layers silently stop "
            f"learning (and overflow gives inf); use torch.amp.GradScaler, or bfloat16."
        ))


def _backpropagated_here(ctx: Context, site) -> bool:
    """Is anything computed under this autocast backpropagated without a scaler? The function that
    enters it must run a plain ``loss.backward()`` itself: autocast in a validation or sampling
    helper trains nothing, and ``optim.backward(loss)`` / ``engine.backward(loss)`` hands the loss
    to an object that may scale it (fairseq's AMPOptimizer, DeepSpeed's fp16 engine)."""
    backwards = [other for other in ctx.sites.in_function(site.function) if other.name in ("backward", "manual_backward")]
    owned = any(other.name == "manual_backward" or any(a.keyword is None for a in other.call.args) for other in backwards)
    return bool(backwards) and not owned


def _accelerate_scales(ctx: Context) -> bool:
    """An Accelerator whose mixed precision is fp16, or not a literal (the launch config decides)."""
    for site in ctx.sites.sites:
        if site.name != "Accelerator":
            continue
        mode = kwarg(site.call, "mixed_precision")
        if mode is None:
            continue  # default "no": Accelerate does not scale
        value = literal_str(mode.value)
        if value is None or value == "fp16":
            return True
    return False


def _gradient_free(ctx: Context, site) -> bool:
    """Under no_grad()/inference_mode(): in the same with statement, an enclosing one, or a
    function that only runs that way (an evaluation pass inside a training loop)."""
    items = [item.item for item in site.statement.items] + list(site.withs)
    if any(is_no_grad(ctx, item) for item in items):
        return True
    return site.function is not None and no_grad_function(ctx, site.function)


def _is_with_item(site) -> bool:
    stmt = site.statement
    return isinstance(stmt, cst.With) and any(item.item is site.call for item in stmt.items)


RULES = {"TL401": fp16_without_scaler}
