"""TL901 checkpoint-not-resumable: torch.save of a checkpoint dict holding a model's state dict but
no optimizer state, confirmed when training goes on after it (an optimizer step follows); a final
weights export after the last step is not a finding. A bare model state dict saved again by the
same line after more training (a periodic checkpoint, not one named "best") counts too when the
optimizer keeps state and a schedule runs, as the static rule reads ``if step % N == 0:``."""
from __future__ import annotations

from typing import Any, Dict

from ..optimizers import OPTIMIZER_STATE
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

    # torch.save sites waiting for a later optimizer step -> whether they saved bare weights
    # periodically (then only a stateful optimizer *and* a schedule make them a finding)
    pending: Dict[Site, bool] = {}
    bare: Dict[Site, int] = {}  # sites that saved a bare model state dict -> optimizer steps then

    def wait(site: Site, periodic: bool) -> None:
        if len(pending) >= _PENDING_KEPT:
            del pending[next(iter(pending))]
        pending[site] = periodic
        hub.wake(on_step)

    def save_wrapper(original):
        def save(obj, *args, **kwargs):
            if hub.active and hub.wants("TL901"):
                if missing_optimizer_state(obj):
                    wait(user_site(), False)
                elif _is_model_state(obj) and not _named_best(args, kwargs):
                    site, steps = user_site(), hub.streams.stream.steps
                    before = bare.get(site)
                    if len(bare) < _PENDING_KEPT or site in bare:
                        bare[site] = steps
                    if before is not None and steps > before:
                        wait(site, True)
            return original(obj, *args, **kwargs)

        return save

    scheduled = set()  # ids of optimizers a learning-rate scheduler has stepped the rate of

    def on_scheduler(stream, scheduler, site) -> None:
        scheduled.add(id(getattr(scheduler, "optimizer", None)))

    def on_step(stream, optimizer, site, backward_ran: bool) -> None:
        is_scheduled = id(optimizer) in scheduled
        lost = lost_on_resume(optimizer, is_scheduled)
        while pending:
            saved_at = next(iter(pending))
            periodic = pending.pop(saved_at)
            if lost and (not periodic or (is_scheduled and any(optimizer.state.values()))):
                hub.found("TL901", saved_at, lambda: (
                    f"torch.save() checkpoints the model weights inside the training loop but not the "
                    f"optimizer state: resuming from it restarts {lost} from scratch, so the resumed "
                    f"run is not the one that was saved (a loss spike where the moments restart); also "
                    f"save optimizer.state_dict() (and the scheduler's, the scaler's and the step)."
                ))
        hub.rest(on_step)

    patcher.wrap(torch, "save", save_wrapper)
    hub.observe("optimizer_step", RULES, on_step, awake=False)
    hub.observe("new_scheduler_step", RULES, on_scheduler)


def _named_best(args: tuple, kwargs: dict) -> bool:
    """Saved to a file named for the best model so far: an export, not a resume point."""
    target = args[0] if args else kwargs.get("f")
    return "best" in str(target).lower()


def lost_on_resume(optimizer: Any, scheduled: bool) -> str:
    """What a weights-only checkpoint cannot restore (empty: nothing, e.g. SGD without momentum
    and no schedule), named as the static rule names it."""
    lost = []
    if any(optimizer.state.values()):  # per-parameter state: SGD without momentum keeps none
        name = type(optimizer).__name__
        lost.append(f"{name}'s {OPTIMIZER_STATE.get(name, 'state')}")
    if scheduled:
        lost.append("the learning-rate schedule's position")
    return " and ".join(lost)
