"""Per call site, a fact that stops being recomputed once it has settled.

Reading an autograd node from Python costs microseconds, because every step builds a fresh graph
whose nodes need fresh Python wrappers. What the guard reads there (how the loss at a line is
reduced, whether a loss input comes from softmax) is the same at that line on every step, so each
fact is recomputed until it has come out the same several times in a row, then reused.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Tuple

SETTLE_AFTER = 8  # identical results in a row before a fact is trusted
_KEPT = 4096  # bounded memory: the table is dropped when it grows past this


class Settled:
    def __init__(self) -> None:
        self._facts: Dict[Hashable, Tuple[Any, int]] = {}

    def get(self, key: Hashable, compute: Callable[[Any], Any], argument: Any) -> Any:
        """``compute(argument)``, or the value it settled on at ``key``."""
        entry = self._facts.get(key)
        if entry is not None and entry[1] >= SETTLE_AFTER:
            return entry[0]
        value = compute(argument)
        if len(self._facts) >= _KEPT:
            self._facts.clear()
        same = entry is not None and entry[0] == value
        self._facts[key] = (value, entry[1] + 1 if same else 1)
        return value
