"""Base of the shared checker: violations and the invariant interface."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from ..events import Event

# Where a statement is, as messages say it: "line 17" (in notebooks "cell 3, line 5").
LineOf = Callable[[Event], Optional[str]]


@dataclass(frozen=True)
class Violation:
    rule: str
    at: Event  # the statement the finding is reported on
    related: Tuple[Tuple[str, Event], ...] = ()  # other statements the message names, by role
    # A "must" violation is reported statically only if it happens on every path that reaches
    # ``at`` (e.g. a cadence judged from counts, which a single short path cannot establish).
    must: bool = False
    # ``holds=False`` is counter-evidence for a must violation: this path reached ``at`` without
    # the violation. Only the static engine asks for it (``feed(..., evidence=True)``).
    holds: bool = True
    # A fact of the witness path its message depends on (TL102: the schedule's first value is
    # skipped; TL501: the model trains in eval mode from its first step), so it says only what holds.
    detail: str = ""

    def get(self, role: str) -> Optional[Event]:
        return next((ev for name, ev in self.related if name == role), None)


def where(event: Optional[Event], line_of: LineOf, fallback: str) -> str:
    """How a message names a statement: its label and line."""
    if event is None:
        return fallback
    position = line_of(event)
    return f"{event.label} ({position})" if position else event.label


class Invariant:
    """One invariant: a slice of the checker state, its transition, and its rules' messages."""

    rules: Tuple[str, ...] = ()
    # Whether its events happen at every training step. The guard, sampling a steady loop, restarts
    # such an invariant (with unknown history) after steps it did not watch; the others see their
    # events all along and keep their state.
    follows_steps: bool = True

    def initial(self, history_known: bool):
        raise NotImplementedError

    def feed(self, state, event: Event) -> Tuple[object, List[Violation]]:
        raise NotImplementedError

    def message(self, violation: Violation, line_of: LineOf) -> str:
        raise NotImplementedError
