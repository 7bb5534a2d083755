"""Module modes: a model left in eval mode while it trains (TL501)."""
from __future__ import annotations

from typing import FrozenSet, NamedTuple, Tuple

from ..events import FAMILY_MODES, Event, EventKind, reaches
from .base import Invariant, LineOf, Violation, where


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor + ".")


class _ModeState(NamedTuple):
    """TL501's slice of a path: the modules left in eval mode and those put back in train mode."""

    evaluating: Tuple[Event, ...] = ()  # eval() calls not undone by train() (per module)
    # (module, file) this path put in train() mode itself; the file tells a callee's local of the
    # same name apart (``classifier`` in a helper module is not the caller's object)
    trained: FrozenSet[Tuple[str, object]] = frozenset()
    stepped: bool = False  # an optimizer step ran on this path
    evaluated_after_step: FrozenSet[Event] = frozenset()  # eval() calls that came after a step
    forwarded: FrozenSet[str] = frozenset()  # objects whose calls computed the losses since the last step


class EvalModeRestored(Invariant):
    """TL501: the optimizer steps a model that an eval() call left in eval mode.

    Only the model the optimizer trains counts: ``model.backbone.eval()`` on a frozen submodule is
    deliberate. When which module the optimizer trains is not known (it was built elsewhere), the
    one module this path itself put in train() mode is the one meant to train: ``model.train()`` at
    the start of the epoch, then a mid-epoch ``model.eval()`` never undone before the next step.
    With no train() on the path at all (the default mode trained the first steps), a module that
    an evaluation routine (a function other than the one stepping) put in eval after a step, and
    whose forward then computes the loss the step follows, is trained: an evaluation between
    steps that never switches back. (A teacher put in eval before training starts is not, nor a
    mode the training function itself chooses, as a linear probe's frozen backbone.) Otherwise
    eval() on a module whose relation to the optimizer is unknown is not judged.
    """

    rules = ("TL501",)

    def initial(self, history_known: bool):
        return _ModeState()

    def feed(self, state: _ModeState, ev: Event):
        if ev.kind is EventKind.EVAL_MODE and ev.target:
            kept = tuple(e for e in state.evaluating if e.target != ev.target)
            return state._replace(evaluating=(kept + (ev,))[-4:], evaluated_after_step=state.evaluated_after_step
                                  | ({ev} if state.stepped else frozenset())), []
        if ev.kind is EventKind.OPAQUE and FAMILY_MODES in ev.families:
            # A call we cannot read received the module: it may have switched it back to train().
            return state._replace(evaluating=tuple(e for e in state.evaluating if not reaches(ev, e.target))), []
        if ev.kind is EventKind.TRAIN_MODE and ev.target:
            # train() on the module, or on a part of it: the program chose which parts train again
            # (``model.eval()`` then ``model.head.train()`` over a frozen encoder)
            evaluating = tuple(e for e in state.evaluating if not (_within(e.target, ev.target) or _within(ev.target, e.target)))
            return state._replace(evaluating=evaluating, trained=state.trained | {(ev.target, ev.origin)}), []
        if ev.kind is EventKind.BACKWARD and ev.modules:
            return state._replace(forwarded=state.forwarded | frozenset(ev.modules)), []
        if ev.kind is EventKind.OPTIMIZER_STEP and state.evaluating:
            trained = (ev.module,) if ev.module else ev.modules
            if trained:
                left = [e for e in state.evaluating if any(_within(module, e.target) for module in trained)]
            elif not state.trained:
                left = [e for e in state.evaluating if e in state.evaluated_after_step and e.scope != ev.scope
                        and e.scope is not None and any(_within(forwarded, e.target) for forwarded in state.forwarded)]
            else:
                # Only one model trained on this path: with several (a GAN's two), which one this
                # optimizer updates is not known, and the other may be held in eval on purpose.
                left = [e for e in state.evaluating if e.origin is ev.origin
                        and state.trained == frozenset({(e.target, ev.origin)})]
            return state._replace(stepped=True, forwarded=frozenset()), [
                Violation("TL501", e, (("step", ev),), detail="after training" if e in state.evaluated_after_step else "")
                for e in left]
        if ev.kind is EventKind.OPTIMIZER_STEP:
            return state._replace(stepped=True, forwarded=frozenset()), []
        return state, []

    def message(self, v: Violation, line_of: LineOf) -> str:
        step = where(v.get("step"), line_of, "optimizer.step()")
        # the object put in eval, as the statement names it (a runtime target is an id, not code)
        written = v.at.label.rsplit(".eval(", 1)[0] if ".eval(" in v.at.label else "the model"
        when = ("so every step after this evaluation trains in a different regime than the steps before it"
                if v.detail == "after training" else "so the model trains in inference mode from this point on")
        return (
            f"{v.at.label} leaves {written} in eval mode and {step} trains it that way: dropout is "
            f"off and batch norm uses and freezes its running statistics, {when}; call "
            f"{written if written != 'the model' else 'model'}.train() after evaluating."
        )
