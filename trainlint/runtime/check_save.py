"""TL901 checkpoint-not-resumable: torch.save of a checkpoint dict holding a model's state dict but
no optimizer state, confirmed when training goes on after it (an optimizer step follows); a final
weights export after the last step is not a finding. A bare model state dict saved again by the
same line after more training (a periodic checkpoint, not one named "best") counts too when the
optimizer keeps state and a schedule runs, as the static rule reads ``if step % N == 0:``.

The message claims the schedule's position lost only where nothing shows it restored on resume: a
LambdaLR/MultiplicativeLR whose function reads an offset (``epoch + self.offset``, a start epoch)
rebuilds its position from the epoch the run resumes at, as the static rule reads
``LambdaLR(opt, Decay(epochs, start_epoch, ...))``."""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from ..checker.checkpoints import not_resumable_message
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


def _is_scheduler_state(value: Any) -> bool:
    return isinstance(value, dict) and "last_epoch" in value and "base_lrs" in value


def missing_optimizer_state(obj: Any) -> bool:
    """A checkpoint (a dict of weights plus epoch/step/...) without an optimizer state; a bare
    model.state_dict() is a weights export and not one."""
    if not isinstance(obj, dict) or len(obj) < 2 or _is_model_state(obj):
        return False
    values = list(_values(obj))
    return any(_is_model_state(v) for v in values) and not any(_is_optimizer_state(v) for v in values)


def install(patcher, hub) -> None:
    import torch

    # torch.save sites waiting for a later optimizer step -> (whether they saved bare weights
    # periodically: then only a stateful optimizer *and* a schedule make them a finding; whether
    # the checkpoint holds a scheduler's state)
    pending: Dict[Site, Tuple[bool, bool]] = {}
    bare: Dict[Site, int] = {}  # sites that saved a bare model state dict -> optimizer steps then

    def wait(site: Site, periodic: bool, saves_schedule: bool = False) -> None:
        if len(pending) >= _PENDING_KEPT:
            del pending[next(iter(pending))]
        pending[site] = (periodic, saves_schedule)
        hub.wake(on_step)

    def save_wrapper(original):
        def save(obj, *args, **kwargs):
            if hub.active and hub.wants("TL901"):
                if missing_optimizer_state(obj):
                    wait(user_site(), False, any(_is_scheduler_state(v) for v in _values(obj)))
                elif _is_model_state(obj) and not _named_best(args, kwargs):
                    site, steps = user_site(), hub.streams.stream.steps
                    before = bare.get(site)
                    if len(bare) < _PENDING_KEPT or site in bare:
                        bare[site] = steps
                    if before is not None and steps > before:
                        wait(site, True)
            return original(obj, *args, **kwargs)

        return save

    # id(optimizer) -> None where a learning-rate scheduler stepping its rate starts over on
    # resume, else the offset each of them reads (see resume_offset)
    scheduled: Dict[int, Optional[str]] = {}

    def on_scheduler(stream, scheduler, site) -> None:
        key = id(getattr(scheduler, "optimizer", None))
        offset = resume_offset(scheduler)
        scheduled[key] = None if key in scheduled and scheduled[key] is None else offset

    def on_step(stream, optimizer, site, backward_ran: bool) -> None:
        is_scheduled = id(optimizer) in scheduled
        state = optimizer_state(optimizer)
        offset = scheduled.get(id(optimizer))
        while pending:
            saved_at = next(iter(pending))
            periodic, saves_schedule = pending.pop(saved_at)
            schedule_lost = is_scheduled and offset is None and not saves_schedule
            if (state or schedule_lost) and (not periodic or (is_scheduled and state)):
                restored = None if offset is None else (
                    f"the lr_lambda of its scheduler reads {offset}, the epoch the run resumes at")
                hub.found("TL901", saved_at, lambda lost=schedule_lost, kept=restored: not_resumable_message(
                    "torch.save()", [f"{state} (the optimizer stepped at line {site[1]})"] if state else [], lost, kept))
        hub.rest(on_step)

    patcher.wrap(torch, "save", save_wrapper)
    hub.observe("optimizer_step", RULES, on_step, awake=False)
    hub.observe("new_scheduler_step", RULES, on_scheduler)


def _named_best(args: tuple, kwargs: dict) -> bool:
    """Saved to a file named for the best model so far: an export, not a resume point."""
    target = args[0] if args else kwargs.get("f")
    return "best" in str(target).lower()


def optimizer_state(optimizer: Any) -> str:
    """What a weights-only checkpoint cannot restore of the optimizer (empty: nothing, e.g. SGD
    without momentum), named as the static rule names it."""
    if any(optimizer.state.values()):  # per-parameter state: SGD without momentum keeps none
        name = type(optimizer).__name__
        return f"{name}'s {OPTIMIZER_STATE.get(name, 'state')}"
    return ""


# Names of the epoch or step a run resumes at, as the static rule reads them: an offset, a start.
_RESUME_TOKENS = {"start", "offset", "shift", "resume", "resumed", "begin"}
_FIRST = re.compile(r"(?:^|_)(?:first|initial|init)_(?:epoch|step|iter|iteration)s?$", re.IGNORECASE)


def resume_offset(scheduler: Any) -> Any:
    """The name a LambdaLR/MultiplicativeLR function reads that holds the epoch the run resumes at
    (``epoch + self.offset``, ``step + start_step``), or None: the schedule then starts over when a
    run resumes from weights alone."""
    for function in getattr(scheduler, "lr_lambdas", None) or ():
        code = getattr(getattr(function, "__func__", function), "__code__", None)
        if code is None:  # a callable object: its __call__
            code = getattr(getattr(type(function), "__call__", None), "__code__", None)
        names = (code.co_names + code.co_freevars) if code is not None else ()
        for name in names:
            if _RESUME_TOKENS & set(name.lower().split("_")) or _FIRST.search(name):
                return name
    return None
