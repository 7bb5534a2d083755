"""Gradient lifecycle: clipping after the step (TL101) or before unscaling (TL103)."""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from ..events import FAMILY_GRADS, HAND_UPDATE, Event, EventKind, same_object
from .base import Invariant, LineOf, Violation, where


# --------------------------------------------------------------------------- TL101 / TL103
class _GradState(NamedTuple):
    """TL101/TL103's slice of a path: the latest backward and step, and pending clips."""

    last: Optional[Event] = None  # the latest BACKWARD or OPTIMIZER_STEP
    backward: Optional[Event] = None  # the latest BACKWARD
    scaled: Optional[Event] = None  # a scaled backward whose gradients are not unscaled yet
    crossed: bool = False  # a new pass of the training loop began since ``last`` (a step)
    pending: Optional[Event] = None  # a clip after the previous pass's step, waiting for this pass's backward


class GradientClipping(Invariant):
    """TL101 clip after the step; TL103 clip of gradients still multiplied by the loss scale."""

    rules = ("TL101", "TL103")

    def initial(self, history_known: bool):
        return _GradState()

    def feed(self, state: _GradState, ev: Event):
        kind = ev.kind
        if kind is EventKind.BACKWARD:
            found = []
            if state.pending is not None:
                # clip at the top of a pass, then this pass's backward: the step used gradients
                # the clip never saw, and the ones it clipped are overwritten or added to.
                found.append(Violation("TL101", state.pending, (("step", state.last), ("backward", ev))))
            return _GradState(last=ev, backward=ev, scaled=ev if ev.scaled else state.scaled), found
        if kind is EventKind.OPTIMIZER_STEP:
            return state._replace(last=ev, scaled=None, crossed=False, pending=None), []
        if kind in (EventKind.UNSCALE, EventKind.ZERO_GRAD):
            return state._replace(scaled=None), []
        if kind is EventKind.ITERATION:
            # A clip at the top of a pass with no backward before the next step had nothing to
            # prove it clipped the wrong gradients (the backward may be in a call we cannot read).
            stepped = state.last is not None and state.last.kind is EventKind.OPTIMIZER_STEP
            return state._replace(crossed=stepped, pending=None), []
        if kind is EventKind.TRAINING_START or (kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families):
            return _GradState(), []
        if kind is EventKind.CLIP:
            found = []
            if state.last is not None and state.last.kind is EventKind.OPTIMIZER_STEP:
                if state.crossed:
                    return (state if state.pending is not None else state._replace(pending=ev)), []
                related = [("step", state.last)]
                if state.backward is not None:
                    related.append(("backward", state.backward))
                found.append(Violation("TL101", ev, tuple(related)))
            elif state.scaled is not None and not ev.via_scaler:
                found.append(Violation("TL103", ev, (("backward", state.scaled),)))
            return state, found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        if v.rule == "TL101":
            step = where(v.get("step"), line_of, "optimizer.step()")
            backward = where(v.get("backward"), line_of, "backward()")
            return (
                f"{v.at.label} runs after {step} in the same iteration, so the update used "
                f"unclipped gradients and the clipped ones are thrown away; move it between "
                f"{backward} and the step."
            )
        backward = where(v.get("backward"), line_of, "scaler.scale(loss).backward()")
        return (
            f"{v.at.label} clips gradients that {backward} left multiplied by the GradScaler's loss "
            f"scale, so max_norm is effectively divided by the scale and nearly every step is "
            f"over-clipped; call scaler.unscale_(optimizer) right before it."
        )




# --------------------------------------------------------------------------- TL104 / TL105
class _ZeroState(NamedTuple):
    """TL104/TL105's slice of a path: backwards, zero_grads and steps of the current window."""

    backward: Optional[Event] = None  # a backward since the last step
    wiped: Optional[Event] = None  # a zero_grad that came after that backward
    stepped: Tuple[Event, ...] = ()  # steps with no zero_grad since (one per optimizer)
    trained: bool = False  # a backward ran on this path: steps without one (a benchmark) reuse gradients
    crossed: bool = False  # a training loop went round since the last step (static only)
    # Under accumulation: the first backward of the window and a zero_grad after it (later
    # backwards do not make it harmless: the window's earlier micro-batches are lost).
    window: Optional[Event] = None
    window_wiped: Tuple[Event, ...] = ()


def _clears(zero: Event, step: Event) -> bool:
    """Does this zero_grad clear the gradients this step uses? ``model.zero_grad()`` carries the
    model as ``module``; it clears an optimizer's gradients if that optimizer trains the model (or
    a part of it), or if which model the optimizer trains is unknown. Which parameters an update
    written by hand changed is not known to the guard: any zero_grad clears them."""
    if step.target == HAND_UPDATE:
        return True
    if zero.module is None:
        # A wrapper (``NoamOpt``) and the optimizer inside it (``opt.optimizer``) are one object here.
        return same_object(zero.target, step.target) or _nested(zero.target, step.target)
    trained = (step.module,) if step.module is not None else step.modules
    if not trained:
        return True
    return any(m == zero.module or m.startswith(zero.module + ".") or zero.module.startswith(m + ".") for m in trained)


def _nested(a: Optional[str], b: Optional[str]) -> bool:
    return a is not None and b is not None and (a.startswith(b + ".") or b.startswith(a + "."))


class ZeroGradPlacement(Invariant):
    """TL104 zero_grad between backward and step; TL105 steps with no zero_grad between them."""

    rules = ("TL104", "TL105")

    def initial(self, history_known: bool):
        return _ZeroState()

    def feed(self, state: _ZeroState, ev: Event):
        kind = ev.kind
        if kind is EventKind.BACKWARD:
            return state._replace(backward=ev, wiped=None, trained=True, window=state.window or ev), []
        if kind is EventKind.TRAINING_START:
            # A backward before the training loop (a debug pass) belongs to no training step, and
            # steps of an earlier loop (a warm-up, an OOM scan) are not this loop's iterations.
            return state._replace(backward=None, wiped=None, stepped=(), window=None, window_wiped=()), []
        if kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families:
            return _ZeroState(), []
        if kind is EventKind.ITERATION:
            return state._replace(crossed=True), []
        if kind is EventKind.ZERO_GRAD:
            stepped = tuple(s for s in state.stepped if not _clears(ev, s))
            wiped = ev if state.backward is not None and state.wiped is None else state.wiped
            window_wiped = state.window_wiped
            if state.window is not None and ev not in window_wiped and not ev.boundary:
                window_wiped = (window_wiped + (ev,))[-4:]
            return state._replace(wiped=wiped, stepped=stepped, window_wiped=window_wiped), []
        if kind is EventKind.OPTIMIZER_STEP:
            found = []
            if state.wiped is not None and _clears(state.wiped, ev):
                related = (("backward", state.backward), ("step", ev)) if state.backward else (("step", ev),)
                found.append(Violation("TL104", state.wiped, related))
            elif ev.boundary and any(_clears(zero, ev) for zero in state.window_wiped):
                # the step ends an accumulation window whose earlier micro-batches were zeroed away
                zero = next(zero for zero in state.window_wiped if _clears(zero, ev))
                found.append(Violation("TL104", zero, (("accumulated", state.window), ("step", ev))))
            previous = next((s for s in state.stepped if same_object(s.target, ev.target)), None)
            # Only on a path that trains: steps that never follow a backward (an optimizer
            # benchmark) just reuse gradients; ``p.grad = ...`` between steps is an OPAQUE reset.
            # A step in a later pass with no backward since (a batch whose backward was skipped)
            # adds nothing to the gradients: only a step twice in one pass reuses them.
            repeats = state.backward is not None or (state.trained and not state.crossed)
            if previous is not None and repeats and not ev.manages_grads and not ev.each:
                found.append(Violation("TL105", ev, (("previous", previous),)))
            stepped = tuple(s for s in state.stepped if s.target != ev.target) + (ev,)
            # zero_grads of other optimizers' accumulation windows stay pending for their steps
            pending = tuple(zero for zero in state.window_wiped if not _clears(zero, ev))
            # (with the window they wiped: the next optimizer's step reports that backward too)
            return _ZeroState(stepped=stepped[-4:], trained=state.trained, window_wiped=pending,
                              window=state.window if pending else None), found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        if v.rule == "TL104" and v.get("accumulated") is not None:
            step = where(v.get("step"), line_of, "optimizer.step()")
            return (
                f"{v.at.label} runs on every micro-batch, but {step} only at the accumulation "
                f"boundary: each zero_grad() wipes the gradients that {where(v.get('accumulated'), line_of, 'backward()')} "
                f"accumulated on the earlier micro-batches, so every update uses the last micro-batch "
                f"alone; zero the gradients right after the step, inside the boundary branch."
            )
        if v.rule == "TL104":
            step = where(v.get("step"), line_of, "optimizer.step()")
            backward = where(v.get("backward"), line_of, "backward()")
            return (
                f"{v.at.label} runs after {backward} and before {step}, so it wipes the gradients "
                f"the step was meant to use and the optimizer updates with zeros (only weight decay "
                f"and momentum move the weights); zero the gradients before backward() or after the step."
            )
        previous = v.get("previous")
        same_line = previous is not None and line_of(previous) == line_of(v.at)
        since = "its previous run" if same_line else where(previous, line_of, "the previous step")
        if v.at.target == HAND_UPDATE:
            return (
                f"{v.at.label} updates the parameters by hand again with no zero_grad() since {since}, "
                f"so gradients keep accumulating across iterations and every update uses the sum of "
                f"all past gradients; clear them once per update (model.zero_grad(), or p.grad = None "
                f"after updating p)."
            )
        return (
            f"{v.at.label} runs again with no zero_grad() since {since}, so gradients keep "
            f"accumulating across iterations and every update uses the sum of all past gradients; "
            f"call optimizer.zero_grad() once per step (before backward() or after step())."
        )


# --------------------------------------------------------------------------- TL106
class _MicroClipState(NamedTuple):
    """TL106's slice of a path: backwards and clips since the last step."""

    backwards: int = 0  # backward passes since the last step/zero_grad (capped)
    clip: Optional[Event] = None  # a clip after one of them
    found: Optional[Violation] = None  # a clip followed by another backward: reported if a step ends the window


class ClipInMicroStep(Invariant):
    """TL106: under accumulation, a clip between two backward passes of the same optimizer step."""

    rules = ("TL106",)

    def initial(self, history_known: bool):
        return _MicroClipState()

    def feed(self, state: _MicroClipState, ev: Event):
        if ev.kind is EventKind.TRAINING_START or (ev.kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families):
            return _MicroClipState(), []
        if ev.kind is EventKind.CLIP and state.backwards:
            return state._replace(clip=ev), []
        if ev.kind is EventKind.BACKWARD:
            found = state.found
            if found is None and state.clip is not None:
                found = Violation("TL106", state.clip, (("backward", ev),))
            return _MicroClipState(min(state.backwards + 1, 2), found=found), []
        if ev.kind is EventKind.OPTIMIZER_STEP:
            # The witness is a whole accumulation window: micro-steps, then the step they feed.
            return _MicroClipState(), [state.found] if state.found is not None else []
        if ev.kind is EventKind.ZERO_GRAD:
            return _MicroClipState(found=state.found), []  # the window still ends at the next step
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        backward = where(v.get("backward"), line_of, "the next backward()")
        return (
            f"{v.at.label} clips a partial sum of the accumulated gradients, and {backward} keeps "
            f"accumulating before the optimizer steps: the micro-batches are clipped unevenly and "
            f"the final norm is not bounded; clip once, at the accumulation boundary, right before "
            f"the step."
        )
