"""TL501 eval-mode-not-restored: an optimizer steps while the module holding most of its trainable
parameters is in eval mode (left there by an evaluation). Reported at the eval() call, as the
static analyzer does. A frozen submodule kept in eval on purpose holds no trainable parameters of
the optimizer, so it is not a finding.

TL504 eval-before-first-train-forward: a module with spectral_norm runs in eval mode before any
train-mode forward (or loaded state) has run its power iteration: its weight is divided by an
estimate of the largest singular value from random vectors, and the output is off by orders of
magnitude (pytorch#51800)."""
from __future__ import annotations

import weakref
from typing import Dict, Tuple

from .sites import Site, user_site

RULES = ("TL501", "TL504")
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

    # TL501 reads each module's live mode at the step: a train() compiled code ran unseen counts.
    patcher.wrap(torch.nn.Module, "train", train_wrapper, traceable=True)
    hub.observe("optimizer_step", RULES, on_step, awake=False)
    _install_spectral_norm(patcher, hub, evaluating)


def _install_spectral_norm(patcher, hub, evaluating) -> None:
    import importlib

    # torch.nn.utils.spectral_norm is also the name of the function the package exports
    spectral = importlib.import_module("torch.nn.utils.spectral_norm")
    reported = weakref.WeakSet()  # modules already reported: once each
    applied_at = weakref.WeakKeyDictionary()  # module -> the user line that applied spectral_norm to it

    def apply_wrapper(original):
        def apply(module, *args, **kwargs):
            if hub.active and hub.wants("TL504"):
                applied_at[module] = user_site()
            return original(module, *args, **kwargs)

        return staticmethod(apply)

    def eval_site(module):
        """The eval() (or train(False)) call that left the module, or a module holding it, in eval mode."""
        for holder, site in list(evaluating.items()):
            if not holder.training and (holder is module or any(sub is module for sub in holder.modules())):
                return site
        return None

    def hook_wrapper(original):
        def __call__(self, module, inputs):
            if hub.active and not module.training and hub.wants("TL504") and module not in reported:
                u = getattr(module, self.name + "_u", None)
                # Version 0: no power iteration has updated u in place, and no state was loaded.
                if u is not None and u._version == 0:
                    reported.add(module)
                    applied, evaluated = applied_at.get(module), eval_site(module)
                    hub.found("TL504", user_site(), lambda m=type(module).__name__: (
                        f"this forward runs a {m} with spectral_norm"
                        + (f" (applied at line {applied[1]})" if applied is not None else "")
                        + " in eval mode"
                        + (f" (set by the eval() at line {evaluated[1]})" if evaluated is not None else "")
                        + " before any train-mode forward: its power iteration has never run, so the "
                        "weight is divided by a singular value estimated from random vectors and the "
                        "output is off by orders of magnitude (pytorch#51800), and so is every number "
                        "computed from it; run one train-mode forward (or load a trained state) before "
                        "evaluating, or use torch.nn.utils.parametrizations.spectral_norm."
                    ))
            return original(self, module, inputs)

        return __call__

    patcher.wrap(spectral.SpectralNorm, "__call__", hook_wrapper, traceable=True)
    patcher.wrap(spectral.SpectralNorm, "apply", apply_wrapper, traceable=True)
