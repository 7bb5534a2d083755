"""What an optimizer holds, inspected at its first step: TL305 parameters that received no gradient
although backward ran (the optimizer was built before FSDP replaced them), TL306 the same without
FSDP, confirmed over a few steps (parameters frozen or replaced after the optimizer was built over
them), TL701 one-dimensional parameters (biases, norm weights) under weight decay. All are reported
at the line that built the optimizer, as the static analyzer does."""
from __future__ import annotations

import inspect
import weakref

from .sites import user_site

RULES = ("TL305", "TL306", "TL701")
# Steps with backward passes and no gradient on any of an optimizer's parameters before TL306:
# one such step can be a warm-up that trains another part of the model first.
_STEPS_UPDATING_NOTHING = 3


def install(patcher, hub) -> None:
    import torch

    built_at = weakref.WeakKeyDictionary()  # optimizer -> the user line that constructed it
    # Optimizers whose weight decay the user's code chose, over plain tensors (not param groups):
    # what the static rule judges. A library default (AdamW's 0.01) is not the program's choice,
    # and param groups are the program's own split.
    chosen_decay = weakref.WeakSet()
    checked = {}  # id(optimizer) -> weak reference: inspected already
    # id(optimizer) -> [weak reference, steps after a backward with no gradient on its parameters,
    # the stream's backward count at its last step]: several optimizers may step after one backward
    updating_nothing = {}

    def init_wrapper(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if hub.active:
                built_at[self] = user_site()
                if _decay_given(type(self), args, kwargs):
                    chosen_decay.add(self)

        return __init__

    patcher.wrap(torch.optim.Optimizer, "__init__", init_wrapper)

    def on_new_step(stream, optimizer, site, backward_ran: bool) -> None:
        seen = checked.get(id(optimizer))
        if seen is not None and seen() is optimizer:
            return
        checked[id(optimizer)] = weakref.ref(optimizer)
        where = built_at.get(optimizer, site)
        name = type(optimizer).__name__
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if hub.wants("TL305") and hub.sharded and backward_ran and params and all(p.grad is None for p in params):
            hub.found("TL305", where, lambda: (
                f"{name}(...) holds {len(params)} parameters and none of them received a gradient "
                f"although backward() ran: they are not the tensors the model trains (FSDP replaced "
                f"them when it sharded the model), so every step updates nothing; build the optimizer "
                f"after fully_shard()/FSDP(...) wrapped the model."
            ))
        if (hub.wants("TL306") and not hub.sharded and stream.backward_total and not _wiped(stream)
                and params and all(p.grad is None for p in params)):
            updating_nothing[id(optimizer)] = [weakref.ref(optimizer), 0, -1]
            hub.wake(on_step)
        if hub.wants("TL701") and isinstance(optimizer, (torch.optim.AdamW, torch.optim.SGD)) and optimizer in chosen_decay:
            for group in optimizer.param_groups:
                decay = group.get("weight_decay") or 0
                flat = [p for p in group["params"] if p.ndim < 2 and p.requires_grad]
                if decay > 0 and flat:
                    hub.found("TL701", where, lambda d=decay, n=len(flat): (
                        f"{name}(weight_decay={d}) decays {n} one-dimensional tensors, biases and "
                        f"normalisation weights included: LayerNorm/BatchNorm gains are pulled towards 0 "
                        f"and biases shrink, which hurts accuracy for no regularisation benefit; pass two "
                        f"param groups, with weight_decay=0.0 for biases and norm weights (e.g. p.ndim < 2)."
                    ))
                    break

    def on_step(stream, optimizer, site, backward_ran: bool) -> None:
        entry = updating_nothing.get(id(optimizer))
        if entry is None or entry[0]() is not optimizer:
            return
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if any(p.grad is not None for p in params):
            del updating_nothing[id(optimizer)]  # it does update something
        elif stream.backward_total > entry[2] and not _wiped(stream):  # a backward ran since its last step
            entry[1], entry[2] = entry[1] + 1, stream.backward_total
            if entry[1] >= _STEPS_UPDATING_NOTHING:
                del updating_nothing[id(optimizer)]
                name, frozen = type(optimizer).__name__, sum(not p.requires_grad for p in params)
                why = ("all of them were frozen (requires_grad=False) after the optimizer was built"
                       if frozen == len(params) else
                       "they are not in the graph the loss is computed from (a module replaced, e.g. a "
                       "new head, after the optimizer was built over the old one)")
                hub.found("TL306", built_at.get(optimizer, site), lambda: (
                    f"{name}(...) has stepped {entry[1]} times and none of its {len(params)} parameters "
                    f"ever received a gradient although backward() ran: {why}, so every step updates "
                    f"nothing and the model does not learn; build the optimizer over the parameters "
                    f"that train, after freezing or replacing modules."
                ))
        if not updating_nothing:
            hub.rest(on_step)

    hub.observe("new_optimizer_step", RULES, on_new_step)
    hub.observe("optimizer_step", RULES, on_step, awake=False)


def _wiped(stream) -> bool:
    """A zero_grad ran after the latest backward: gradients missing at a step are TL104's."""
    return stream.zeroed_after == stream.backward_total


def _decay_given(cls: type, args: tuple, kwargs: dict) -> bool:
    """Optimizer.__init__(params, defaults), as a subclass's constructor calls it: a weight decay
    other than the class's own default (so the program asked for it), over parameters that are
    not param-group dicts."""
    params = args[0] if args else kwargs.get("params")
    defaults = args[1] if len(args) > 1 else kwargs.get("defaults")
    if isinstance(params, (list, tuple)) and params and isinstance(params[0], dict) or not isinstance(defaults, dict):
        return False
    try:
        default = inspect.signature(cls.__init__).parameters["weight_decay"].default
    except (KeyError, TypeError, ValueError):
        return False
    return defaults.get("weight_decay", default) != default
