"""Events of the gradients: BACKWARD (with how the loss was reduced) and CLIP; also the observation
points ``backward`` and ``clip_norm`` for value checks."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Tuple

from ..events import LOSS_DIVIDED, LOSS_MEAN, LOSS_SUM, LOSS_UNKNOWN, EventKind
from .hooks_optim import edits_grads
from .hooks_parallel import flush_pending_forward
from .patches import inner_cell
from .settle import Settled
from .sites import user_site

# Autograd nodes a loss passes through unchanged in value (casts, copies, views).
_PASS_THROUGH = frozenset({
    "ToCopyBackward0", "CloneBackward0", "AliasBackward0", "ViewBackward0",
    "SqueezeBackward0", "SqueezeBackward1", "UnsqueezeBackward0",
})
_MEAN = frozenset({"MeanBackward0", "MeanBackward1"})
_SUM = frozenset({"SumBackward0", "SumBackward1"})
_DIVIDED = frozenset({"DivBackward0", "DivBackward1", "MulBackward0", "MulBackward1"})
# Loss functions save their reduction (at::Reduction): what reached backward is that reduction.
_REDUCTIONS = {1: LOSS_MEAN, 2: LOSS_SUM}


def loss_kind(grad_fn: Any) -> str:
    """How the loss that reached backward() was reduced, from its autograd root."""
    for _ in range(len(_PASS_THROUGH)):
        if grad_fn is None:
            return LOSS_UNKNOWN
        name = type(grad_fn).__name__
        if name not in _PASS_THROUGH:
            break
        grad_fn = grad_fn.next_functions[0][0]
    else:
        return LOSS_UNKNOWN
    if name in _DIVIDED:
        return LOSS_DIVIDED
    if name in _MEAN:
        return LOSS_MEAN
    if name in _SUM:
        return LOSS_SUM
    return _REDUCTIONS.get(getattr(grad_fn, "_saved_reduction", None), LOSS_UNKNOWN)


def _loss_kind_of(tensor: Any) -> str:
    return loss_kind(tensor.grad_fn)


def _scaled_loss_kind(tensor: Any) -> str:
    """Looking through the multiplication by the scale that GradScaler.scale added."""
    grad_fn = tensor.grad_fn
    return loss_kind(grad_fn.next_functions[0][0] if grad_fn is not None else None)


def classify(hub, tensors: Any, site, kinds: Settled) -> Tuple[bool, str, Optional[Any]]:
    """(went through GradScaler.scale, loss kind, the unscaled loss tensor if still alive)."""
    import torch

    if not isinstance(tensors, torch.Tensor):
        if isinstance(tensors, (list, tuple)) and len(tensors) == 1 and isinstance(tensors[0], torch.Tensor):
            tensors = tensors[0]
        else:
            return False, LOSS_UNKNOWN, None  # several roots, or a GradientEdge
    entry = hub.scaled.get(id(tensors))
    if entry is not None and entry[0]() is tensors:
        return True, kinds.get((site, True), _scaled_loss_kind, tensors), entry[1]()
    return False, kinds.get((site, False), _loss_kind_of, tensors), tensors


def _returned_norm(result, args, kwargs):
    return result


def _given_norm(result, args, kwargs):
    return args[2] if len(args) > 2 else kwargs.get("total_norm")


def clip_wrapper(hub, label: str, norm_of: Optional[Callable]):
    """A CLIP event before the clip; after it, the total norm for the ``clip_norm`` observers."""
    cache = hub.cache(label)

    def make(original):
        def clip(*args, **kwargs):
            if not hub.active:
                return original(*args, **kwargs)
            stream = hub.streams.stream
            if "clip" in stream.busy:  # clip_grad_norm_ calling clip_grads_with_norm_, and the like
                return original(*args, **kwargs)
            site = user_site()
            hub.feed(stream, cache.get(site) or hub.event(cache, site, EventKind.CLIP, label, site))
            stream.busy.add("clip")
            try:
                result = edits_grads(hub, lambda: original(*args, **kwargs))
            finally:
                stream.busy.discard("clip")
            if norm_of is not None:
                hub.notify("clip_norm", stream, site, label, norm_of(result, args, kwargs))
            return result

        return clip

    return make


def install(patcher, hub) -> None:
    import torch
    import torch.autograd
    import torch.nn.utils
    from torch.nn.utils import clip_grad

    backwards = hub.cache("backward")
    kinds = Settled()  # how the loss at each backward() line is reduced

    def backward_wrapper(original):
        def backward(tensors, *args, **kwargs):
            # A backward() run by the autograd engine itself (reentrant checkpointing) is part of
            # the user's backward pass, not another one.
            if not hub.active or torch._C._current_autograd_node() is not None:
                return original(tensors, *args, **kwargs)
            stream = hub.streams.stream
            site = user_site()
            scaled, loss, unscaled = classify(hub, tensors, site, kinds)
            label = "scaler.scale(loss).backward()" if scaled else "loss.backward()"
            stream.backward(scaled, site, shared_graph=bool(kwargs.get("retain_graph") or (len(args) > 1 and args[1])))
            if stream.pending_sync is not None:  # an FSDP forward waiting for its sync decision
                flush_pending_forward(hub, stream, site)
            key = (site, scaled, loss)
            hub.feed(stream, backwards.get(key) or hub.event(
                backwards, key, EventKind.BACKWARD, label, site, scaled=scaled, loss=loss
            ))
            hub.notify("backward", stream, site, label, unscaled, scaled)
            return original(tensors, *args, **kwargs)

        return backward

    # Tensor.backward() calls torch.autograd.backward through the module attribute.
    patcher.wrap(torch.autograd, "backward", backward_wrapper, per_step=True)

    clips = (
        (clip_grad.clip_grad_norm_, "clip_grad_norm_()", _returned_norm),
        (clip_grad.clip_grad_value_, "clip_grad_value_()", None),
        (clip_grad._clip_grads_with_norm_, "clip_grads_with_norm_()", _given_norm),
    )
    for function, label, norm_of in clips:
        # Patch the undecorated function inside torch's no-grad wrapper, not the module attribute:
        # then a name imported before the guard started (from torch.nn.utils import
        # clip_grad_norm_) is seen too, and clip_grad_norm_'s own call of clip_grads_with_norm_ is
        # nested, not a second clip.
        cell = inner_cell(function)
        if cell is None:
            warnings.warn(f"trainlint: cannot hook {label} in this torch version; clipping is not checked",
                          RuntimeWarning, stacklevel=2)
            continue
        patcher.wrap_cell(cell, clip_wrapper(hub, label, norm_of), per_step=True, traceable=True,
                          hides=hub.unseen)

    def fsdp1_clip(module) -> None:
        # FSDP1's own clip method (it may call clip_grad_norm_ inside: then that call is nested).
        patcher.wrap(module.FullyShardedDataParallel, "clip_grad_norm_",
                     clip_wrapper(hub, "clip_grad_norm_()", _returned_norm), per_step=True, traceable=True,
                     hides=hub.unseen)

    patcher.after_import("torch.distributed.fsdp", fsdp1_clip)


