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
_FREEZES_KEPT = 64


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

    patcher.wrap(torch.optim.Optimizer, "__init__", init_wrapper, traceable=True)

    # (module, the user line of its requires_grad_(False)), latest last, for TL306's message (a loop
    # setting p.requires_grad = False is not seen: a tensor attribute)
    frozen_at = []

    def requires_grad_wrapper(original):
        def requires_grad_(self, requires_grad=True):
            if hub.active and requires_grad is False and hub.wants("TL306"):
                if len(frozen_at) >= _FREEZES_KEPT:
                    del frozen_at[0]
                frozen_at.append((weakref.ref(self), user_site()))
            return original(self, requires_grad)

        return requires_grad_

    patcher.wrap(torch.nn.Module, "requires_grad_", requires_grad_wrapper, traceable=True)

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
                if frozen == len(params):
                    froze = _freeze_site(frozen_at, params)
                    by = f" (requires_grad_(False) at line {froze[1]})" if froze is not None else " (requires_grad=False)"
                    why = (f"all of them were frozen{by} after the optimizer was built, so "
                           "every step updates nothing, silently, and the parameters that do still train "
                           "are in no step of this optimizer; build the optimizer after freezing, over "
                           "the parameters that still train (those with p.requires_grad).")
                else:
                    why = ("they are not in the graph the loss is computed from (a module replaced, e.g. a "
                           "new head, after the optimizer was built over the old one), so every step "
                           "updates nothing and the module that replaced them never trains; build the "
                           "optimizer after replacing modules, over the parameters the model uses.")
                hub.found("TL306", built_at.get(optimizer, site), lambda: (
                    f"{name}(...) has stepped {entry[1]} times (its step() last at line {site[1]}) and "
                    f"none of its {len(params)} parameters ever received a gradient although backward() "
                    f"ran: {why}"
                ))
        if not updating_nothing:
            hub.rest(on_step)

    hub.observe("new_optimizer_step", RULES, on_new_step)
    hub.observe("optimizer_step", RULES, on_step, awake=False)


def _freeze_site(frozen_at, params):
    """The site of the latest requires_grad_(False) on a module holding one of ``params``."""
    held = {id(p) for p in params}
    for module, site in reversed(frozen_at):
        module = module()
        if module is not None and any(id(p) in held for p in module.parameters()):
            return site
    return None


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
