"""TL801 softmax-before-cross-entropy: the input of cross_entropy was produced by softmax or
log_softmax, or the input of nll_loss by log(softmax(x)), as its autograd node shows."""
from __future__ import annotations

from ..wording import normalised_twice
from .sites import user_site

RULES = ("TL801",)
_SQUASHED_BY = {"SoftmaxBackward0": "softmax", "LogSoftmaxBackward0": "log_softmax"}


def _producer(grad_fn) -> str:
    return type(grad_fn).__name__ if grad_fn is not None else ""


def _cross_entropy_input(tensor) -> str:
    """What squashed a cross_entropy input, or ""."""
    return _SQUASHED_BY.get(_producer(getattr(tensor, "grad_fn", None)), "")


def _nll_input(tensor) -> str:
    """log(softmax(x)) fed to nll_loss, or "" (log_softmax + nll_loss is the correct pairing)."""
    grad_fn = getattr(tensor, "grad_fn", None)
    if _producer(grad_fn) != "LogBackward0":
        return ""
    return "log(softmax(x))" if _producer(grad_fn.next_functions[0][0]) == "SoftmaxBackward0" else ""


def install(patcher, hub) -> None:
    import torch.nn.functional as F

    def wrapper(label: str, squashed_by):
        def make(original):
            def loss(input, *args, **kwargs):
                # Compiled code calls the original (see patches.py). The input's producer is read at every call (a fresh autograd node each step, a
                # fraction of a microsecond); the call site is looked up only for a finding.
                if hub.active and hub.wants("TL801"):
                    what = squashed_by(input)
                    if what:
                        hub.found("TL801", user_site(), lambda: (
                            f"{label} receives the output of {what}, but cross-entropy applies "
                            f"log_softmax itself: {normalised_twice(what)}; pass the raw "
                            f"logits (or log_softmax + NLLLoss)."
                        ))
                return original(input, *args, **kwargs)

            return loss

        return make

    # nn.CrossEntropyLoss and nn.NLLLoss call these through the module attributes.
    patcher.wrap(F, "cross_entropy", wrapper("cross_entropy()", _cross_entropy_input), per_step=True, traceable=True)
    patcher.wrap(F, "nll_loss", wrapper("nll_loss()", _nll_input), per_step=True, traceable=True)
