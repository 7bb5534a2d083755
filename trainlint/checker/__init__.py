"""The ordering checker: one set of invariants over event sequences, for both engines.

The runtime guard feeds it the single event stream of a live run. The static engine explores every
path through the control flow and feeds each path's events; because the state is immutable and
hashable, equal states on different paths merge and loops reach a fixpoint.

Every invariant owns a slice of the state and the messages of its rules, so a rule's logic lives in
one place. A :class:`Violation` holds events, not text: the static engine computes source positions
only for the events that end up in findings, and renders the message then.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from ..events import Event
from .accumulation import AccumulationScaling, AccumulationSync
from .base import Invariant, LineOf, Violation
from .data import SamplerEpochs
from .gradients import ClipInMicroStep, GradientClipping, ZeroGradPlacement
from .modes import EvalModeRestored
from .precision import ScalerUse
from .schedules import SchedulerCadence, SchedulerOrder

INVARIANTS: Tuple[Invariant, ...] = (
    GradientClipping(),
    ZeroGradPlacement(),
    ClipInMicroStep(),
    SchedulerOrder(),
    SchedulerCadence(),
    AccumulationScaling(),
    AccumulationSync(),
    SamplerEpochs(),
    ScalerUse(),
    EvalModeRestored(),
)
_BY_RULE: Dict[str, Invariant] = {rule: inv for inv in INVARIANTS for rule in inv.rules}
CHECKED_RULES = frozenset(_BY_RULE)

State = Tuple[object, ...]

__all__ = [
    "CHECKED_RULES", "INVARIANTS", "State", "Violation", "feed", "initial_state", "render", "resumed_state", "run",
]


def initial_state(history_known: bool = True) -> State:
    """``history_known``: nothing happened before the first event (a fresh process, a whole script)."""
    return tuple(inv.initial(history_known) for inv in INVARIANTS)


def resumed_state(state: State) -> State:
    """The state to go on from after training steps whose events were not seen (the guard sampling
    a steady loop): the invariants over per-step events start afresh, with unknown history, so they
    judge only what is seen from here; the others keep their state."""
    return tuple(
        inv.initial(history_known=False) if inv.follows_steps else sub for inv, sub in zip(INVARIANTS, state)
    )


def feed(state: State, event: Event, evidence: bool = False) -> Tuple[State, List[Violation]]:
    """The next state and the violations this event reveals (with ``evidence``, also the
    counter-evidence of must violations: see :class:`Violation`)."""
    found: List[Violation] = []
    new_state = []
    for inv, sub in zip(INVARIANTS, state):
        sub, violations = inv.feed(sub, event)
        new_state.append(sub)
        found.extend(v for v in violations if evidence or v.holds)
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
