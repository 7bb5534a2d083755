"""Mixed precision: a GradScaler that is created but bypassed (TL402)."""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from ..events import FAMILY_GRADS, Event, EventKind
from .base import Invariant, LineOf, Violation, where


class _ScalerState(NamedTuple):
    """TL402's slice of a path: scaled and plain backwards, and scaler steps awaiting update()."""

    scaled: Optional[Event] = None  # a scaled backward since the last step
    plain: Optional[Event] = None  # an unscaled backward since the last step
    # scaler.step() calls with no scaler.update() since, one per optimizer: one scaler may step
    # several optimizers (a GAN) before its single update(), as PyTorch documents.
    not_updated: Tuple[Event, ...] = ()


class ScalerUse(Invariant):
    """TL402: scaled gradients stepped directly, unscaled ones through the scaler, or no update()."""

    rules = ("TL402",)

    def initial(self, history_known: bool):
        return _ScalerState()

    def feed(self, state: _ScalerState, ev: Event):
        kind = ev.kind
        if kind is EventKind.BACKWARD:
            if ev.scaled:
                return state._replace(scaled=state.scaled or ev), []
            return state._replace(plain=state.plain or ev), []
        if kind is EventKind.SCALER_UPDATE:
            return state._replace(not_updated=()), []
        if kind is EventKind.OPTIMIZER_STEP:
            found = []
            if ev.via_scaler:
                if state.plain is not None and state.scaled is None:
                    found.append(Violation("TL402", state.plain, (("step", ev),)))
                again = None if ev.each else next((e for e in state.not_updated if e.target == ev.target), None)
                if again is not None:
                    found.append(Violation("TL402", again, (("again", ev),)))
                not_updated = tuple(e for e in state.not_updated if e.target != ev.target)[-3:] + (ev,)
            else:
                if state.scaled is not None:
                    found.append(Violation("TL402", ev, (("backward", state.scaled),)))
                not_updated = state.not_updated
            return _ScalerState(not_updated=not_updated), found
        if kind is EventKind.ZERO_GRAD:
            return state._replace(scaled=None, plain=None), []
        if kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families:
            return _ScalerState(), []
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        if v.get("again") is not None:
            again = where(v.get("again"), line_of, "the next scaler.step()")
            return (
                f"{v.at.label} is followed by {again} with no scaler.update() in between: the loss "
                f"scale never adapts, so after one overflow every step is skipped (or the scale stays "
                f"too small for fp16 gradients); call scaler.update() after every scaler.step()."
            )
        if v.get("step") is not None:
            step = where(v.get("step"), line_of, "scaler.step(optimizer)")
            return (
                f"{v.at.label} backpropagates an unscaled loss, but {step} unscales the gradients "
                f"anyway, dividing them by the loss scale (65536 by default): updates become tiny; "
                f"use scaler.scale(loss).backward()."
            )
        backward = where(v.get("backward"), line_of, "scaler.scale(loss).backward()")
        return (
            f"{v.at.label} steps the optimizer directly on gradients that {backward} multiplied by "
            f"the loss scale: the update is scale-times too large and inf/NaN steps are not skipped; "
            f"use scaler.step(optimizer) followed by scaler.update()."
        )
