"""Gradient accumulation (TL201)."""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from ..events import FAMILY_GRADS, LOSS_MEAN, Event, EventKind
from .base import Invariant, LineOf, Violation, where


# --------------------------------------------------------------------------- TL201
_WIPES_KEPT = 3  # zero_grads remembered per window (one per optimizer)


class _AccumState(NamedTuple):
    """TL201's slice of a path: the backward passes of the current accumulation window."""

    backwards: Tuple[Event, ...] = ()  # backward passes since the last zero_grad/step (at most 2)
    # Zero_grads inside an accumulation window (TL104's finding) that these backwards outlived, one
    # per optimizer: the window still counts, but only for a step known to be an accumulation
    # boundary, and the message names the zero_grad of the optimizer that steps.
    wiped_by: Tuple[Event, ...] = ()


class AccumulationScaling(Invariant):
    """TL201: several backward passes per optimizer step with a mean loss never divided by k."""

    rules = ("TL201",)

    def initial(self, history_known: bool):
        return _AccumState()

    def feed(self, state: _AccumState, ev: Event):
        if ev.kind is EventKind.BACKWARD:
            if len(state.backwards) >= 2:
                # Keep the first undivided pass if any: it is the one a finding names.
                kept = state.backwards if any(b.loss == LOSS_MEAN for b in state.backwards) else (state.backwards[0],)
                if ev.loss == LOSS_MEAN and not any(b.loss == LOSS_MEAN for b in kept):
                    kept = (kept[0], ev)
                return _AccumState(kept[:2], state.wiped_by), []
            return _AccumState(state.backwards + (ev,), state.wiped_by), []
        if ev.kind is EventKind.ZERO_GRAD and ev.boundary is False and state.backwards:
            # A zero_grad the code does not mean to end the window with (not at the boundary): the
            # step gated on ``(i + 1) % k`` still says k micro-batches are meant to be accumulated,
            # and moving this zero_grad (TL104's fix) leaves the loss undivided.
            if any(w.target == ev.target for w in state.wiped_by) or len(state.wiped_by) >= _WIPES_KEPT:
                return state, []
            return state._replace(wiped_by=state.wiped_by + (ev,)), []
        if ev.kind is EventKind.ZERO_GRAD or (ev.kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families):
            # An unknown call (or ``p.grad /= k``) may have normalised the accumulated gradients.
            return _AccumState(), []
        if ev.kind is EventKind.OPTIMIZER_STEP:
            found = []
            gated = ev.boundary is True if state.wiped_by else ev.boundary is not False
            if len(state.backwards) >= 2 and gated:
                undivided = next((b for b in state.backwards if b.loss == LOSS_MEAN), None)
                if undivided is not None:
                    zeroed = next((w for w in state.wiped_by if w.target == ev.target), state.wiped_by[0]) \
                        if state.wiped_by else None
                    related = (("step", ev),) + ((("zeroed", zeroed),) if zeroed is not None else ())
                    found.append(Violation("TL201", undivided, related))
            return _AccumState(), found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        step_event = v.get("step")
        step = where(step_event, line_of, "optimizer.step()")
        k = step_event.accum if step_event is not None and step_event.accum else "the number of accumulation steps"
        zeroed = v.get("zeroed")
        if zeroed is not None:
            return (
                f"{v.at.label} is meant to accumulate gradients of a mean-reduced loss over {k} "
                f"micro-batches ({step} runs only at the accumulation boundary), but the loss is never "
                f"divided by {k}: once {where(zeroed, line_of, 'zero_grad()')} stops wiping the earlier "
                f"micro-batches (TL104), the summed gradient is that many times too large; divide the "
                f"loss by {k} before backward()."
            )
        return (
            f"{v.at.label} accumulates gradients of a mean-reduced loss over several micro-batches "
            f"before {step}, but the loss is never divided by {k}: the summed gradient is that many "
            f"times too large (a larger learning rate, and clipping/weight decay at the wrong "
            f"strength); divide the loss by {k} before backward()."
        )


# --------------------------------------------------------------------------- TL203
class _SyncState(NamedTuple):
    """TL203's slice of a path: sync switches and the backward passes since the last step."""

    no_sync: int = 0  # depth of no_sync()-like contexts
    managed: bool = False  # the code sets require_backward_grad_sync itself
    forward_synced: Optional[bool] = None  # did the latest wrapped forward decide to all-reduce?
    synced_backward: Optional[Event] = None  # a synced backward in the current window...
    backwards: int = 0  # ...followed by this many backward passes (capped)


class AccumulationSync(Invariant):
    """TL203: micro-steps of a DDP/FSDP model that all-reduce although the step comes later.

    DDP decides at forward time whether the next backward all-reduces, so a forward outside
    ``no_sync()`` syncs even when its backward runs inside one.
    """

    rules = ("TL203",)

    def initial(self, history_known: bool):
        return _SyncState()

    def feed(self, state: _SyncState, ev: Event):
        kind = ev.kind
        if kind is EventKind.NO_SYNC_ENTER:
            return state._replace(no_sync=min(state.no_sync + 1, 3)), []
        if kind is EventKind.NO_SYNC_EXIT:
            return state._replace(no_sync=max(state.no_sync - 1, 0)), []
        if kind is EventKind.SYNC_MANAGED:
            return state._replace(managed=True), []
        if kind is EventKind.FORWARD:
            return state._replace(forward_synced=state.no_sync == 0 and not state.managed), []
        if kind is EventKind.BACKWARD:
            synced = state.forward_synced
            if state.backwards == 0 or state.synced_backward is None:
                return state._replace(synced_backward=ev if synced else None, backwards=1), []
            return state._replace(backwards=2), []
        if kind is EventKind.OPTIMIZER_STEP:
            found = []
            if state.synced_backward is not None and state.backwards >= 2 and ev.boundary is not False:
                found.append(Violation("TL203", state.synced_backward, (("step", ev),)))
            return state._replace(synced_backward=None, backwards=0, forward_synced=None), found
        if kind is EventKind.ZERO_GRAD or (kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families):
            return state._replace(synced_backward=None, backwards=0), []
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        step = where(v.get("step"), line_of, "optimizer.step()")
        return (
            f"{v.at.label} is a micro-step of gradient accumulation on a DDP/FSDP model, but its "
            f"forward ran with gradient sync on, so it all-reduces gradients although {step} only "
            f"comes after more micro-batches: k-1 wasted all-reduces per step; run the forward and "
            f"backward of non-final micro-steps inside model.no_sync() (FSDP2: "
            f"set_requires_gradient_sync(False))."
        )
