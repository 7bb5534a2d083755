"""The work one file's path exploration may do, and what it had to leave out.

Limits, per checked file (README, "Limits"):

- ``PATHS``: distinct path states kept at one program point. Paths are merged when their states
  are equal; beyond this many, the rest are not followed, and a finding only they would show is
  missed (merging paths that assumed different conditions would make paths the program cannot
  take: proof before error forbids it).
- ``LOOP_ROUNDS``: passes over a loop's body to reach the states it settles in; a loop still
  producing new states after that many is left with what it reached.
- ``SECONDS``: wall time of path exploration; past it, the exploration stops where it is and the
  findings that need every path (the "must" ones) are dropped, the others kept (each has its
  witness path).
- ``CALL_DEPTH``: nested calls followed; a deeper or recursive call is an unknown call, which the
  rules abstain on. A recursive call is the analysis being explicit; a chain of helpers deeper
  than this is noted, since a finding across it is missed.

Whatever was left out is reported with the file (text output: a note; JSON: ``incomplete``),
never silently.
"""
from __future__ import annotations

import time
from typing import Dict, Iterable, List, Optional, TypeVar

import libcst as cst

PATHS = 192
LOOP_ROUNDS = 12
# Nested calls followed (flow.py's MAX_CALL_DEPTH). 6 reaches a library-style trainer's batch step
# (fit -> _fit_main -> _train -> _train_epoch -> _process_batches -> _train_single_batch). Deeper
# costs library code: the whole torch package took 129.6 s at 4, 134.9 s at 6 and 147.5 s at 8
# (measured back to back, 1 job).
CALL_DEPTH = 6
SECONDS = 20.0

T = TypeVar("T")


class OutOfTime(Exception):
    """The file's exploration time is spent."""


class Budget:
    def __init__(self, seconds: Optional[float] = None) -> None:
        self.seconds = SECONDS if seconds is None else seconds
        self.deadline = time.monotonic() + self.seconds
        self.at: Optional[cst.CSTNode] = None  # the statement being explored
        # reason -> the statement where it first happened
        self.left_out: Dict[str, Optional[cst.CSTNode]] = {}

    def paths(self, states: Iterable[T]) -> List[T]:
        """The distinct states, at most ``PATHS`` of them. The rest are dropped, not merged:
        merging paths that assumed different branch conditions makes paths the program cannot
        take, and a finding on one of those is a false alarm (tried on the real-world corpus:
        it brought back two TL203 false alarms in an HF Trainer)."""
        unique = list(dict.fromkeys(states))
        if len(unique) > PATHS:
            self._note("paths")
            del unique[PATHS:]
        return unique

    def calls_too_deep(self) -> None:
        self._note("calls")

    def loop_unsettled(self, loop: cst.CSTNode) -> None:
        self.left_out.setdefault("loop", loop)

    def tick(self, stmt: cst.CSTNode) -> None:
        self.at = stmt
        if time.monotonic() > self.deadline:
            self._note("time")
            raise OutOfTime

    def _note(self, reason: str) -> None:
        self.left_out.setdefault(reason, self.at)

    def notes(self, line_of) -> List[str]:
        """What was left out, for humans; ``line_of(node)`` gives a statement's line (or None)."""
        found = []
        for reason, node in self.left_out.items():
            line = line_of(node) if node is not None else None
            where = f" at {line}" if line is not None else ""
            found.append(_TEXTS[reason].format(where=where, paths=PATHS, rounds=LOOP_ROUNDS, seconds=self.seconds,
                                               depth=CALL_DEPTH))
        return found


_TEXTS = {
    "calls": "a chain of calls deeper than {depth}{where} was not followed: findings across it are missed",
    "paths": "more than {paths} distinct paths{where}: the others were not followed, and findings only they show are missed",
    "loop": "the loop{where} had not settled after {rounds} passes: later passes were not followed",
    "time": "path exploration stopped after {seconds:g} s{where}: code after it was not explored, and findings that need every path were dropped",
}
