"""Events of the optimizer and its schedule: OPTIMIZER_STEP, ZERO_GRAD, SCHEDULER_STEP."""
from __future__ import annotations

import os
import sys
import warnings
import weakref
from typing import Any, Dict, Iterator, Optional, Tuple

from ..events import CADENCE_METRIC, EventKind
from .patches import nothing, takes_same_parameters
from .sites import user_frame, user_site
from .stream import Stream


def target(obj: Any) -> Optional[str]:
    return None if obj is None else f"id:{id(obj)}"


def subclasses(cls: type) -> Iterator[type]:
    """``cls`` and every subclass defined so far (LR schedulers, GradScalers, ...)."""
    seen, todo = set(), [cls]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            yield current
            todo.extend(current.__subclasses__())


_TRAINLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


ORDER_WARNING = "Detected call of `lr_scheduler.step()` before `optimizer.step()`"
SKIPPED_STEP_NOTE = (
    " [trainlint: false alarm here: optimizer.step() was called through GradScaler.step(), which "
    "skipped it for inf/NaN gradients while calibrating the loss scale (pytorch#44511); the order "
    "is right.]"
)


def call_warning_at_user_line(original, self, args, kwargs, skipped_step: bool = False):
    """Run a scheduler's step() so that PyTorch's own warnings from it (the first-step order check,
    the deprecated epoch argument) point at the user's line: they use stacklevel=2, which would
    otherwise name this wrapper. ``warnings.warn`` is swapped for the call, not caught with
    catch_warnings: entering that resets every once-per-location registry of the program, so all
    its warnings would print again. ``skipped_step``: the optimizer's only steps so far were ones
    GradScaler skipped, so PyTorch's order warning is a false alarm and says so."""
    warn = warnings.warn

    def warn_at_user_line(message, category=None, stacklevel=1, source=None, *more, **options):
        frame = sys._getframe(1)
        for _ in range(max(stacklevel, 1) - 1):
            frame = frame.f_back if frame is not None else None
        named = frame.f_code.co_filename if frame is not None else ""
        user = user_frame() if os.path.abspath(named).startswith(_TRAINLINT_DIR + os.sep) else None
        if user is None:  # not aimed at the guard's own frame: as asked
            return warn(message, category, stacklevel + 1, source, *more, **options)
        if isinstance(message, Warning):
            category = type(message)
        if skipped_step and ORDER_WARNING in str(message):
            message = f"{message}{SKIPPED_STEP_NOTE}"
        globals_ = user.f_globals
        warnings.warn_explicit(
            message, category or UserWarning, user.f_code.co_filename, user.f_lineno,
            module=globals_.get("__name__", "<string>"), registry=globals_.setdefault("__warningregistry__", {}),
            module_globals=globals_, source=source,
        )

    warnings.warn = warn_at_user_line
    try:
        return original(self, *args, **kwargs)
    finally:
        warnings.warn = warn


def begin_step(hub, stream: Stream, stepper: Any) -> Tuple[Optional[int], bool]:
    """What every step does to the stream, an optimizer's or an update written by hand
    (hooks_hand): the sampler pass under way becomes an epoch, the accumulation window ends, and
    ``stepper`` (the optimizer, or the parameter the update changed first) is the one TL105's
    confirmation samples. Returns (k when the window's backward passes saw several batches, whether
    the step is an accumulation boundary)."""
    if stream.pending_pass is not None:
        # The DistributedSampler pass under way trains: it is an epoch (hooks_data).
        pass_site, sampler, shuffle = stream.pending_pass
        stream.pending_pass = None
        hub.emit(stream, EventKind.LOADER_ITER, "for ... in loader", pass_site, sampler=sampler, shuffle=shuffle)
    # k, for messages: the backward passes this step accumulates when they saw several batches.
    accum = stream.backwards if stream.multi_batch else None
    boundary = stream.end_window()
    stream.steps += 1
    stream.stepping = stepper
    return accum, boundary


def emit_step(hub, stream: Stream, optimizer: Any, via_scaler: bool, manages_grads: bool = False) -> None:
    """One optimizer step: also the one GradScaler skipped for inf/NaN gradients, which is still a
    step of the schedule (so scheduler.step() after it is not TL102; pytorch#44511)."""
    site = user_site()
    backward_ran = stream.backwards > 0
    if stream.watch is not None:
        stream.watch.stop()  # a no_grad block running an optimizer: its updates are the optimizer's
    accum, boundary = begin_step(hub, stream, optimizer)
    stream.accumulating = stream.accumulating or boundary
    stream.last_step_site = site
    cache = hub.cache("optimizer_step")
    key = (site, id(optimizer), boundary, via_scaler, manages_grads, accum)
    event = cache.get(key)
    seen = event is not None
    if not seen:
        event = hub.event(
            cache, key, EventKind.OPTIMIZER_STEP, "scaler.step(optimizer)" if via_scaler else "optimizer.step()",
            site, target=target(optimizer), boundary=boundary, via_scaler=via_scaler, manages_grads=manages_grads,
            accum=None if accum is None else str(accum),
        )
    hub.feed(stream, event)
    if not seen:
        # A step not seen before: a new optimizer (the first step of each one is one of these), or
        # a known one stepped at a new line or in a new way. Checks of what an optimizer holds run
        # here rather than at every step.
        hub.notify("new_optimizer_step", stream, optimizer, site, backward_ran)
    hub.notify("optimizer_step", stream, optimizer, site, backward_ran)
    hub.sampler.after_step(stream, optimizer)


def emit_zero_grad(hub, stream: Stream, event) -> None:
    """A zero_grad, whoever clears the gradients: it ends the accumulation window."""
    stream.end_window()
    stream.zeroed_after = stream.backward_total
    hub.feed(stream, event)


class GradSamples:
    """One sample gradient per stepper (an optimizer's first parameter's, or that of the parameter
    an update written by hand changed first), taken at a step, for TL105's confirmation: no
    zero_grad() ran between two steps, but gradients may still have been cleared another way
    (``p.grad = None``, ``p.grad.zero_()``). They were not if the sample is the same tensor as at
    the last step and changed in place only by the backward passes since (one version bump each)
    and by the in-place edits the guard watched (clipping, GradScaler.unscale_)."""

    def __init__(self) -> None:
        # id(stepper) -> [weakref to it, weakref to the gradient, its version, backward passes so
        # far, watched edits]. Keyed by id: a tensor's == compares elements, so no dict may key on it.
        self._taken: Dict[int, list] = {}

    def clear(self) -> None:
        self._taken.clear()

    def before_edit(self) -> list:
        """Before a watched call that edits gradients in place without clearing them."""
        return [(entry, grad._version) for entry in self._taken.values() for grad in (entry[1](),) if grad is not None]

    def after_edit(self, marks: list) -> None:
        for entry, version in marks:
            grad = entry[1]()
            if grad is not None:
                entry[4] += grad._version - version

    def confirm(self, stream) -> bool:
        stepper = stream.stepping
        previous = self._taken.pop(id(stepper), None)
        current = _sample_grad(stepper, stream)
        if current is None:
            return False
        if len(self._taken) >= _SAMPLES_KEPT:  # steppers of hand updates come and go with the parameters
            self._taken.clear()
        self._taken[id(stepper)] = current
        if previous is None or previous[0]() is not stepper:
            return False
        _, grad_ref, version, backwards, edits = previous
        grad = grad_ref()
        return (grad is not None and grad is current[1]()
                and grad._version - version == stream.backward_total - backwards + edits)


_SAMPLES_KEPT = 64


def edits_grads(hub, call):
    """Run ``call`` (a clip or an unscale: it edits gradients in place, never clears them) so that
    TL105's gradient samples account for its version bumps."""
    samples = hub.grad_samples
    marks = samples.before_edit() if samples is not None else None
    try:
        return call()
    finally:
        if marks:
            samples.after_edit(marks)


def _sample_grad(stepper, stream):
    param = _sampled_parameter(stepper)
    grad = param.grad if param is not None else None
    if grad is None:
        return None
    return [weakref.ref(stepper), weakref.ref(grad), grad._version, stream.backward_total, 0]


def _sampled_parameter(stepper):
    """An optimizer's first parameter; an update written by hand steps with its parameter."""
    groups = getattr(stepper, "param_groups", None)
    if groups is None:
        return stepper
    return next((param for group in groups for param in group["params"]), None)


def install(patcher, hub) -> None:
    import torch
    from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    samples = hub.grad_samples = GradSamples()
    hub.confirm["TL105"] = samples.confirm
    # After steps the guard did not watch, a sample gradient's version no longer counts the
    # backward passes since it was taken.
    hub.observe("resume", ("TL105",), lambda stream: samples.clear())

    def pre_hook(optimizer, args, kwargs):
        # Every Optimizer subclass's step() runs the global pre-hooks, however it is called; it
        # stays in while the guard coasts through a steady loop, and counts those steps.
        if hub.active:
            stream = hub.streams.stream
            if hub.coasting:
                hub.sampler.coast_step(stream, optimizer)
                return
            via_scaler = stream.scaler_step is optimizer
            if via_scaler:
                stream.scaler_stepped = True
            closure = kwargs.get("closure") if len(args) < 2 else args[1]
            emit_step(hub, stream, optimizer, via_scaler, manages_grads=closure is not None)

    # Optimizer.step runs the pre-hooks in code that dynamo traces when a compiled function steps.
    patcher.handle(register_optimizer_step_pre_hook(
        patcher.hook(nothing, lambda _: pre_hook, traceable=True, hides=hub.unseen)))

    def zero_grad_wrapper(label: str, field: str):
        cache = hub.cache(label)

        def record(owner) -> None:
            site = user_site()
            key = (site, id(owner))
            emit_zero_grad(hub, hub.streams.stream, cache.get(key) or hub.event(
                cache, key, EventKind.ZERO_GRAD, label, site, **{field: target(owner)}
            ))

        def make(original):
            def zero_grad(self, set_to_none=True):
                if hub.active and not hub.coasting:
                    record(self)
                return original(self, set_to_none)

            def zero_grad_any(self, *args, **kwargs):  # a torch whose zero_grad takes other parameters
                if hub.active and not hub.coasting:
                    record(self)
                return original(self, *args, **kwargs)

            return zero_grad if takes_same_parameters(original, zero_grad) else zero_grad_any

        return make

    patcher.wrap(torch.optim.Optimizer, "zero_grad", zero_grad_wrapper("optimizer.zero_grad()", "target"), per_step=True)
    # Not taken out while the guard coasts (it checks ``coasting`` instead): changing an attribute of
    # nn.Module invalidates the attribute caches of every module class, which costs more than the
    # call it would save in the loops that use model.zero_grad().
    patcher.wrap(torch.nn.Module, "zero_grad", zero_grad_wrapper("model.zero_grad()", "module"), traceable=True,
                 hides=hub.unseen)

    steps = hub.cache("scheduler_step")

    def scheduler_step(original):
        def step(self, *args, **kwargs):
            # _is_initial: the step LRScheduler.__init__ takes itself is not the user's.
            if not hub.active or getattr(self, "_is_initial", False):
                return original(self, *args, **kwargs)
            stream = hub.streams.stream
            if "scheduler" in stream.busy:  # SequentialLR/ChainedScheduler stepping their children
                return original(self, *args, **kwargs)
            site = user_site()
            # Driven by a value (a validation metric, a fractional epoch): not a per-step schedule.
            metric = bool(args or kwargs) or isinstance(self, ReduceLROnPlateau)
            key = (site, id(self), metric)
            event = steps.get(key)
            seen = event is not None
            if not seen:
                event = hub.event(
                    steps, key, EventKind.SCHEDULER_STEP, "scheduler.step()", site, target=target(self),
                    optimizer=target(getattr(self, "optimizer", None)), cadence=CADENCE_METRIC if metric else None,
                )
            hub.feed(stream, event)
            if not metric:
                if not seen:  # a scheduler seen for the first time (or at a new line)
                    hub.notify("new_scheduler_step", stream, self, site)
                hub.notify("scheduler_step", stream, self, site)
            stream.busy.add("scheduler")
            try:
                # The only calls PyTorch warns on: the first step, and an explicit epoch (for
                # ReduceLROnPlateau the argument is the metric, its normal use).
                if (args or kwargs or getattr(self, "_step_count", None) == 1) and not isinstance(self, ReduceLROnPlateau):
                    skipped = getattr(self, "optimizer", None) in hub.skipped_by_scaler
                    return call_warning_at_user_line(original, self, args, kwargs, skipped)
                return original(self, *args, **kwargs)
            finally:
                stream.busy.discard("scheduler")

        return step

    for cls in subclasses(LRScheduler):
        if "step" in vars(cls):
            patcher.wrap(cls, "step", scheduler_step, per_step=True)
