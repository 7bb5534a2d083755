"""Scheduler order (TL102)."""
from __future__ import annotations

from typing import FrozenSet, List, NamedTuple, Optional, Tuple

from ..events import (CADENCE_BATCH, CADENCE_EPOCH, CADENCE_METRIC, EVERYTHING, FAMILY_GRADS, Event, EventKind, reached,
                      reaches, same_object)
from .base import Invariant, LineOf, Violation, where


# --------------------------------------------------------------------------- TL102
class _SchedEntry(NamedTuple):
    """One scheduler's position relative to its optimizer's steps."""

    scheduler: Optional[str]
    optimizer: Optional[str]
    stepped_since: Optional[bool]  # an optimizer step since this scheduler's last step? None: unknown
    pending: Optional[Event] = None  # a scheduler step waiting for the optimizer step it preceded
    first: bool = False  # the pending step is the scheduler's first, before any step of its optimizer


class _SchedState(NamedTuple):
    """TL102's slice of a path: the optimizers stepped and each scheduler's entry."""

    history_known: bool
    stepped: frozenset = frozenset()  # optimizers stepped since the start (None: an unknown one)
    entries: Tuple[_SchedEntry, ...] = ()
    # what calls we cannot read received since the start (EVERYTHING: anything): each may have
    # stepped an optimizer it reached, and only those
    opaque: FrozenSet[str] = frozenset()


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
                        found.append(Violation("TL102", entry.pending, (("step", ev),),
                                               detail="first value skipped" if entry.first else ""))
                    entry = entry._replace(stepped_since=True, pending=None, first=False)
                entries.append(entry)
            return state._replace(stepped=state.stepped | {ev.target}, entries=tuple(entries)), found
        if ev.kind is EventKind.ITERATION and any(e.pending is not None for e in state.entries):
            # A scheduler step at the end of a pass (a per-epoch schedule after the batch loop, a
            # periodic step on the last batch) is not "before" the next pass's optimizer step.
            return state._replace(entries=tuple(e._replace(pending=None) for e in state.entries)), []
        if ev.kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families:
            # It may have stepped the optimizers it received: whether a scheduler's next step
            # follows an optimizer step is unknown. A scheduler step already waiting for its
            # optimizer step stays: it ran before any step, whatever the call does.
            entries = tuple(
                e if e.pending is not None or not reaches(ev, e.optimizer) else e._replace(stepped_since=None)
                for e in state.entries
            )
            return state._replace(entries=entries, opaque=state.opaque | frozenset(ev.reach or (EVERYTHING,))), []
        return state, []

    def _scheduler_step(self, state: _SchedState, ev: Event) -> _SchedState:
        entries = list(state.entries)
        index = next((i for i, e in enumerate(entries) if e.scheduler == ev.target), None)
        # an unreadable call that may have stepped this scheduler's optimizer (one that received
        # only the model, ``writer.add_graph(model)``, cannot have)
        opaque = bool(state.opaque) and reached(state.opaque, ev.optimizer)
        if index is None:
            if state.history_known and not opaque:
                stepped = any(same_object(o, ev.optimizer) for o in state.stepped)
            elif state.history_known and any(same_object(o, ev.optimizer) for o in state.stepped):
                stepped = True
            else:
                stepped = None
            entry = _SchedEntry(ev.target, ev.optimizer, stepped)
        else:
            entry = entries[index]
        if entry.stepped_since is False and entry.pending is None:
            # Known to come before every step of its optimizer: the schedule's first value is lost.
            entry = entry._replace(pending=ev, first=index is None and state.history_known and not opaque)
        entry = entry._replace(stepped_since=False)
        if index is None:
            entries.append(entry)
        else:
            entries[index] = entry
        return state._replace(entries=tuple(entries))

    def message(self, v: Violation, line_of: LineOf) -> str:
        step = where(v.get("step"), line_of, "optimizer.step()")
        consequence = (
            "the schedule's first learning rate is never used (with a warmup, it starts one step late) and every update "
            "uses the rate meant for the next one" if v.detail == "first value skipped" else
            "the schedule advances without an update in between, so from here on each update uses a rate "
            "meant for a later step")
        return (
            f"{v.at.label} runs before {step}, so the scheduler is one step ahead of the optimizer: "
            f"{consequence}; step the scheduler after the optimizer step (per-epoch "
            f"schedulers after the epoch's training loop)."
        )




# --------------------------------------------------------------------------- TL601
class _CadenceEntry(NamedTuple):
    """One scheduler's count of its optimizer's steps since its own last step."""

    scheduler: Optional[str]
    steps: int  # optimizer steps since this scheduler's last step, capped at 2; UNKNOWN_COUNT: unknown
    optimizer: Optional[str] = None  # the optimizer it schedules (None: unknown, every step counts)


UNKNOWN_COUNT = -1  # a call we cannot read may have stepped the optimizer


def _counted(steps: int) -> int:
    return steps if steps == UNKNOWN_COUNT else min(steps + 1, 2)


class _CadenceState(NamedTuple):
    """TL601's slice of a path: each scheduler's count of optimizer steps."""

    entries: Tuple[_CadenceEntry, ...] = ()
    steps_since_start: int = 0
    # each optimizer's steps since the start (capped like ``steps``), for a scheduler's first step
    stepped: Tuple[Tuple[Optional[str], int], ...] = ()


class SchedulerCadence(Invariant):
    """TL601: a per-batch scheduler stepped once per epoch, or an epoch scheduler stepped per batch.

    The observed cadence is the number of optimizer steps between two scheduler steps: one means
    per batch, several mean per epoch. Per batch is only established when it holds on every path.
    """

    rules = ("TL601",)

    def initial(self, history_known: bool):
        return _CadenceState()

    def feed(self, state: _CadenceState, ev: Event):
        if ev.kind is EventKind.OPTIMIZER_STEP:
            # Only its own optimizer's steps count: a GAN's discriminator stepping between two
            # generator steps does not make the generator's schedule per-epoch.
            entries = tuple(e._replace(steps=_counted(e.steps)) if same_object(e.optimizer, ev.target) else e
                            for e in state.entries)
            before = dict(state.stepped).get(ev.target, 0)
            stepped = tuple(p for p in state.stepped if p[0] != ev.target) + ((ev.target, _counted(before)),)
            return _CadenceState(entries, _counted(state.steps_since_start), stepped), []
        if ev.kind is EventKind.OPAQUE and FAMILY_GRADS in ev.families:
            entries = tuple(e._replace(steps=UNKNOWN_COUNT) for e in state.entries)
            return _CadenceState(entries, UNKNOWN_COUNT, ((None, UNKNOWN_COUNT),)), []
        if ev.kind is EventKind.SCHEDULER_STEP and ev.cadence in (CADENCE_BATCH, CADENCE_EPOCH):
            entry = next((e for e in state.entries if e.scheduler == ev.target), None)
            steps = entry.steps if entry is not None else self._since_start(state, ev.optimizer)
            found = []
            if ev.cadence == CADENCE_BATCH and steps >= 2:
                found.append(Violation("TL601", ev))
            elif ev.cadence == CADENCE_EPOCH:
                # An unknown count is counter-evidence: the cadence is not proven on this path.
                found.append(Violation("TL601", ev, must=True, holds=steps == 1))
            entries = tuple(e for e in state.entries if e.scheduler != ev.target) + (_CadenceEntry(ev.target, 0, ev.optimizer),)
            return state._replace(entries=entries), found
        return state, []

    @staticmethod
    def _since_start(state: _CadenceState, optimizer: Optional[str]) -> int:
        """Steps of ``optimizer`` since the start (all steps when which one it is is unknown)."""
        if optimizer is None or any(target is None for target, _ in state.stepped):
            return state.steps_since_start
        return dict(state.stepped).get(optimizer, 0)

    def message(self, v: Violation, line_of: LineOf) -> str:
        if v.at.cadence == CADENCE_BATCH:
            return (
                f"{v.at.label} steps a per-batch schedule (its horizon counts optimizer steps) only "
                f"after many optimizer steps: warmup and decay run epochs-times too slowly, so most of "
                f"training happens at the wrong learning rate; step it right after each optimizer step."
            )
        return (
            f"{v.at.label} steps an epoch-horizon schedule after every optimizer step: it runs through "
            f"its whole schedule within the first epoch(s) and then stays at its final learning rate; "
            f"step it once per epoch, after the epoch's training loop, or give it a horizon in steps."
        )
