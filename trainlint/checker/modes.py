"""Module modes: a model left in eval mode while it trains (TL501)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from ..events import FAMILY_MODES, Event, EventKind, reaches
from .base import Invariant, LineOf, Violation, where


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor + ".")


@dataclass(frozen=True)
class _ModeState:
    evaluating: Tuple[Event, ...] = ()  # eval() calls not undone by train() (per module)


class EvalModeRestored(Invariant):
    """TL501: the optimizer steps a model that an eval() call left in eval mode.

    Only the model the optimizer trains counts: ``model.backbone.eval()`` on a frozen submodule is
    deliberate, and eval() on a module whose relation to the optimizer is unknown is not judged.
    """

    rules = ("TL501",)

    def initial(self, history_known: bool):
        return _ModeState()

    def feed(self, state: _ModeState, ev: Event):
        if ev.kind is EventKind.EVAL_MODE and ev.target:
            kept = tuple(e for e in state.evaluating if e.target != ev.target)
            return _ModeState((kept + (ev,))[-4:]), []
        if ev.kind is EventKind.OPAQUE and FAMILY_MODES in ev.families:
            # A call we cannot read received the module: it may have switched it back to train().
            return _ModeState(tuple(e for e in state.evaluating if not reaches(ev, e.target))), []
        if ev.kind is EventKind.TRAIN_MODE and ev.target:
            return _ModeState(tuple(e for e in state.evaluating if not _within(e.target, ev.target))), []
        if ev.kind is EventKind.OPTIMIZER_STEP and ev.module and state.evaluating:
            found = [
                Violation("TL501", e, (("step", ev),)) for e in state.evaluating if _within(ev.module, e.target)
            ]
            return state, found
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        step = where(v.get("step"), line_of, "optimizer.step()")
        return (
            f"{v.at.label} leaves the model in eval mode and {step} trains it that way: dropout is "
            f"off and batch norm uses and freezes its running statistics, so training silently "
            f"changes regime after the first evaluation; call model.train() after evaluating."
        )
