"""The ordering checker: one set of invariants over event sequences, for both engines.

The runtime guard feeds it the single event stream of a live run. The static engine explores every
path through the control flow and feeds each path's events; because the state is immutable and
hashable, equal states on different paths merge and loops reach a fixpoint.

Every invariant owns a slice of the state and the messages of its rules, so a rule's logic lives in
one place. A :class:`Violation` holds events, not text: the static engine computes source positions
only for the events that end up in findings, and renders the message then.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .events import (
    CADENCE_METRIC,
    LOSS_MEAN,
    Event,
    EventKind,
    same_object,
)

LineOf = Callable[[Event], Optional[int]]


@dataclass(frozen=True)
class Violation:
    rule: str
    at: Event  # the statement the finding is reported on
    related: Tuple[Tuple[str, Event], ...] = ()  # other statements the message names, by role

    def get(self, role: str) -> Optional[Event]:
        return next((ev for name, ev in self.related if name == role), None)


def _where(event: Optional[Event], line_of: LineOf, fallback: str) -> str:
    if event is None:
        return fallback
    line = line_of(event)
    return f"{event.label} (line {line})" if line else event.label


class Invariant:
    """Base of one invariant: a state slice, a transition, and the messages of its rules."""

    rules: Tuple[str, ...] = ()

    def initial(self, history_known: bool):
        raise NotImplementedError

    def feed(self, state, event: Event) -> Tuple[object, List[Violation]]:
        raise NotImplementedError

    def message(self, violation: Violation, line_of: LineOf) -> str:
        raise NotImplementedError


# --------------------------------------------------------------------------- TL101 / TL103
@dataclass(frozen=True)
class _GradState:
    last: Optional[Event] = None  # the latest BACKWARD or OPTIMIZER_STEP
    backward: Optional[Event] = None  # the latest BACKWARD
    scaled: Optional[Event] = None  # a scaled backward whose gradients are not unscaled yet


class GradientClipping(Invariant):
    """TL101 clip after the step; TL103 clip of gradients still multiplied by the loss scale."""

    rules = ("TL101", "TL103")

    def initial(self, history_known: bool):
        return _GradState()

    def feed(self, state: _GradState, ev: Event):
        kind = ev.kind
        if kind is EventKind.BACKWARD:
            return replace(state, last=ev, backward=ev, scaled=ev if ev.scaled else state.scaled), []
        if kind is EventKind.OPTIMIZER_STEP:
            return replace(state, last=ev, scaled=None), []
        if kind in (EventKind.UNSCALE, EventKind.ZERO_GRAD):
            return replace(state, scaled=None), []
        if kind is EventKind.CLIP:
            found = []
            if state.last is not None and state.last.kind is EventKind.OPTIMIZER_STEP:
                related = [("step", state.last)]
                if state.backward is not None:
                    related.append(("backward", state.backward))
                found.append(Violation("TL101", ev, tuple(related)))
            elif state.scaled is not None:
                found.append(Violation("TL103", ev, (("backward", state.scaled),)))
            return state, found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        if v.rule == "TL101":
            step = _where(v.get("step"), line_of, "optimizer.step()")
            backward = _where(v.get("backward"), line_of, "backward()")
            return (
                f"{v.at.label} runs after {step} in the same iteration, so the update used "
                f"unclipped gradients and the clipped ones are thrown away; move it between "
                f"{backward} and the step."
            )
        backward = _where(v.get("backward"), line_of, "scaler.scale(loss).backward()")
        return (
            f"{v.at.label} clips gradients that {backward} left multiplied by the GradScaler's loss "
            f"scale, so max_norm is effectively divided by the scale and nearly every step is "
            f"over-clipped; call scaler.unscale_(optimizer) right before it."
        )


# --------------------------------------------------------------------------- TL102
@dataclass(frozen=True)
class _SchedEntry:
    scheduler: Optional[str]
    optimizer: Optional[str]
    stepped_since: Optional[bool]  # an optimizer step since this scheduler's last step? None: unknown
    pending: Optional[Event] = None  # a scheduler step waiting for the optimizer step it preceded


@dataclass(frozen=True)
class _SchedState:
    history_known: bool
    stepped: frozenset = frozenset()  # optimizers stepped since the start (None: an unknown one)
    entries: Tuple[_SchedEntry, ...] = ()


class SchedulerOrder(Invariant):
    """TL102: a scheduler step with no optimizer step since its previous step (or the start).

    The finding is emitted at the optimizer step that follows, so the message can name both
    statements; it is reported on the scheduler step.
    """

    rules = ("TL102",)

    def initial(self, history_known: bool):
        return _SchedState(history_known=history_known)

    def feed(self, state: _SchedState, ev: Event):
        if ev.kind is EventKind.SCHEDULER_STEP and ev.cadence != CADENCE_METRIC:
            return self._scheduler_step(state, ev), []
        if ev.kind is EventKind.OPTIMIZER_STEP:
            found: List[Violation] = []
            entries = []
            for entry in state.entries:
                if same_object(entry.optimizer, ev.target):
                    if entry.pending is not None:
                        found.append(Violation("TL102", entry.pending, (("step", ev),)))
                    entry = replace(entry, stepped_since=True, pending=None)
                entries.append(entry)
            return replace(state, stepped=state.stepped | {ev.target}, entries=tuple(entries)), found
        return state, []

    def _scheduler_step(self, state: _SchedState, ev: Event) -> _SchedState:
        entries = list(state.entries)
        index = next((i for i, e in enumerate(entries) if e.scheduler == ev.target), None)
        if index is None:
            if state.history_known:
                stepped = any(same_object(o, ev.optimizer) for o in state.stepped)
            else:
                stepped = None
            entry = _SchedEntry(ev.target, ev.optimizer, stepped)
        else:
            entry = entries[index]
        if entry.stepped_since is False and entry.pending is None:
            entry = replace(entry, pending=ev)
        entry = replace(entry, stepped_since=False)
        if index is None:
            entries.append(entry)
        else:
            entries[index] = entry
        return replace(state, entries=tuple(entries))

    def message(self, v: Violation, line_of: LineOf) -> str:
        step = _where(v.get("step"), line_of, "optimizer.step()")
        return (
            f"{v.at.label} runs before {step}, so the scheduler is one step ahead of the optimizer: "
            f"the first learning rate of the schedule is skipped and every update uses the rate "
            f"meant for the next one; step the scheduler after the optimizer step (per-epoch "
            f"schedulers after the epoch's training loop)."
        )


# --------------------------------------------------------------------------- TL201
@dataclass(frozen=True)
class _AccumState:
    backwards: Tuple[Event, ...] = ()  # backward passes since the last zero_grad/step (at most 2)


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
                return _AccumState(kept[:2]), []
            return _AccumState(state.backwards + (ev,)), []
        if ev.kind is EventKind.ZERO_GRAD:
            return _AccumState(), []
        if ev.kind is EventKind.OPTIMIZER_STEP:
            found = []
            if len(state.backwards) >= 2 and ev.boundary is not False:
                undivided = next((b for b in state.backwards if b.loss == LOSS_MEAN), None)
                if undivided is not None:
                    found.append(Violation("TL201", undivided, (("step", ev),)))
            return _AccumState(), found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        step_event = v.get("step")
        step = _where(step_event, line_of, "optimizer.step()")
        k = step_event.accum if step_event is not None and step_event.accum else "the number of accumulation steps"
        return (
            f"{v.at.label} accumulates gradients of a mean-reduced loss over several micro-batches "
            f"before {step}, but the loss is never divided by {k}: the summed gradient is that many "
            f"times too large (a larger learning rate, and clipping/weight decay at the wrong "
            f"strength); divide the loss by {k} before backward()."
        )


# --------------------------------------------------------------------------- TL301
@dataclass(frozen=True)
class _SamplerEntry:
    sampler: Optional[str]
    epoch_set: bool  # set_epoch since the last pass began


@dataclass(frozen=True)
class _SamplerState:
    entries: Tuple[_SamplerEntry, ...] = ()


class SamplerEpochs(Invariant):
    """TL301: a shuffling DistributedSampler starts another pass without set_epoch()."""

    rules = ("TL301",)

    def initial(self, history_known: bool):
        return _SamplerState()

    def feed(self, state: _SamplerState, ev: Event):
        if ev.kind is EventKind.SET_EPOCH:
            entries = tuple(
                replace(e, epoch_set=True) if same_object(e.sampler, ev.target) else e for e in state.entries
            )
            return _SamplerState(entries), []
        if ev.kind is EventKind.LOADER_ITER and ev.sampler is not None and ev.shuffle:
            found = []
            entries = list(state.entries)
            index = next((i for i, e in enumerate(entries) if e.sampler == ev.sampler), None)
            if index is None:
                entries.append(_SamplerEntry(ev.sampler, False))
            else:
                if not entries[index].epoch_set:
                    found.append(Violation("TL301", ev))
                entries[index] = _SamplerEntry(ev.sampler, False)
            return _SamplerState(tuple(entries)), found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        sampler = v.at.sampler or "the DistributedSampler"
        return (
            f"{v.at.label} starts another epoch over a loader whose DistributedSampler {sampler} "
            f"shuffles, but {sampler}.set_epoch(epoch) is never called in the epoch loop: every "
            f"epoch sees the same order on every rank; call {sampler}.set_epoch(epoch) at the top "
            f"of the epoch loop."
        )


INVARIANTS: Tuple[Invariant, ...] = (GradientClipping(), SchedulerOrder(), AccumulationScaling(), SamplerEpochs())
_BY_RULE: Dict[str, Invariant] = {rule: inv for inv in INVARIANTS for rule in inv.rules}
CHECKED_RULES = frozenset(_BY_RULE)

State = Tuple[object, ...]


def initial_state(history_known: bool = True) -> State:
    """``history_known``: nothing happened before the first event (a fresh process, a whole script)."""
    return tuple(inv.initial(history_known) for inv in INVARIANTS)


def feed(state: State, event: Event) -> Tuple[State, List[Violation]]:
    found: List[Violation] = []
    new_state = []
    for inv, sub in zip(INVARIANTS, state):
        sub, violations = inv.feed(sub, event)
        new_state.append(sub)
        found.extend(violations)
    return tuple(new_state), found


def run(events: Iterable[Event], history_known: bool = True) -> List[Violation]:
    """Check one linear event sequence (a runtime trace, or a test's hand-written path)."""
    state = initial_state(history_known)
    found: List[Violation] = []
    for event in events:
        state, violations = feed(state, event)
        found.extend(violations)
    return found


def render(violation: Violation, line_of: LineOf) -> str:
    return _BY_RULE[violation.rule].message(violation, line_of)
