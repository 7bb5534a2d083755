"""TL501 eval-mode-not-restored: an optimizer steps while the module holding most of its trainable
parameters is in eval mode (left there by an evaluation). Reported at the eval() call, as the
static analyzer does. A frozen submodule kept in eval on purpose holds no trainable parameters of
the optimizer, so it is not a finding."""
from __future__ import annotations

import weakref
from typing import Dict, Tuple

from .sites import Site, user_site

RULES = ("TL501",)
_VERDICTS_KEPT = 256


def install(patcher, hub) -> None:
    import torch

    evaluating: "weakref.WeakKeyDictionary[torch.nn.Module, Site]" = weakref.WeakKeyDictionary()
    # (id(module), id(optimizer)) -> (weak module, weak optimizer, holds most of its parameters)
    verdicts: Dict[Tuple[int, int], tuple] = {}

    def train_wrapper(original):
        def train(self, mode=True):
            stream = hub.streams.stream if hub.active else None
            if stream is not None and "train" not in stream.busy:  # not the recursion into children
                stream.busy.add("train")
                try:
                    if mode:
                        evaluating.pop(self, None)
                    else:
                        evaluating[self] = user_site()
                        hub.wake(on_step)
                    return original(self, mode)
                finally:
                    stream.busy.discard("train")
            return original(self, mode)

        return train

    def holds_most(module, optimizer) -> bool:
        key = (id(module), id(optimizer))
        known = verdicts.get(key)
        if known is not None and known[0]() is module and known[1]() is optimizer:
            return known[2]
        trainable = {id(p) for group in optimizer.param_groups for p in group["params"] if p.requires_grad}
        inside = sum(1 for p in module.parameters() if id(p) in trainable)
        verdict = bool(trainable) and 2 * inside > len(trainable)
        if len(verdicts) >= _VERDICTS_KEPT:
            verdicts.clear()
        verdicts[key] = (weakref.ref(module), weakref.ref(optimizer), verdict)
        return verdict

    def on_step(stream, optimizer, site, backward_ran: bool) -> None:
        # Awake only while some module is left in eval mode: steps in train mode pay nothing.
        for module, eval_site in list(evaluating.items()):
            if module.training:  # put back in train mode some other way (a parent's train())
                evaluating.pop(module, None)
            elif holds_most(module, optimizer):
                hub.found("TL501", eval_site, lambda m=type(module).__name__: (
                    f"this eval() call leaves the {m} in eval mode and optimizer.step() (line "
                    f"{site[1]}) trains it that way: dropout is off and batch norm uses and freezes "
                    f"its running statistics, so training silently changes regime after the first "
                    f"evaluation; call model.train() after evaluating."
                ))
        if not evaluating:
            hub.rest(on_step)

    patcher.wrap(torch.nn.Module, "train", train_wrapper)
    hub.observe("optimizer_step", RULES, on_step, awake=False)
