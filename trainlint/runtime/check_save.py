"""TL901 checkpoint-not-resumable: torch.save of a checkpoint dict holding a model's state dict but
no optimizer state, confirmed when training goes on after it (an optimizer step follows); a final
weights export after the last step is not a finding."""
from __future__ import annotations

from typing import Any, Dict

from .sites import Site, user_site

RULES = ("TL901",)
_PENDING_KEPT = 8


def _values(obj: Any, depth: int = 2):
    """Values of a (nested) checkpoint dict or list, a couple of levels deep."""
    if depth and isinstance(obj, dict):
        for value in obj.values():
            yield value
            yield from _values(value, depth - 1)
    elif depth and isinstance(obj, (list, tuple)):
        for value in obj:
            yield value
            yield from _values(value, depth - 1)


def _is_model_state(value: Any) -> bool:
    return isinstance(value, dict) and hasattr(value, "_metadata")  # what Module.state_dict() returns


def _is_optimizer_state(value: Any) -> bool:
    return isinstance(value, dict) and "state" in value and "param_groups" in value


def missing_optimizer_state(obj: Any) -> bool:
    """A checkpoint (a dict of weights plus epoch/step/...) without an optimizer state; a bare
    model.state_dict() is a weights export and not one."""
    if not isinstance(obj, dict) or len(obj) < 2 or _is_model_state(obj):
        return False
    values = list(_values(obj))
    return any(_is_model_state(v) for v in values) and not any(_is_optimizer_state(v) for v in values)


def install(patcher, hub) -> None:
    import torch

    pending: Dict[Site, None] = {}  # torch.save sites waiting for a later optimizer step

    def save_wrapper(original):
        def save(obj, *args, **kwargs):
            if hub.active and hub.wants("TL901") and missing_optimizer_state(obj):
                if len(pending) >= _PENDING_KEPT:
                    del pending[next(iter(pending))]
                pending[user_site()] = None
                hub.wake(on_step)
            return original(obj, *args, **kwargs)

        return save

    def on_step(stream, optimizer, site, backward_ran: bool) -> None:
        while pending:
            saved_at = next(iter(pending))
            del pending[saved_at]
            hub.found("TL901", saved_at, lambda: (
                "torch.save() checkpoints the model weights inside the training loop but not the "
                "optimizer state: resuming from it restarts Adam's moments and the schedule, which "
                "spikes the loss and changes the run; also save optimizer.state_dict() (and the "
                "scheduler, scaler and step)."
            ))
        hub.rest(on_step)

    patcher.wrap(torch, "save", save_wrapper)
    hub.observe("optimizer_step", RULES, on_step, awake=False)
