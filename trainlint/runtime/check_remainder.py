"""TL202 accumulation-remainder-dropped: a pass over a DataLoader ends with micro-batch gradients
that no optimizer step consumed, in a loop that accumulates. They leak into the next epoch's first
step (or are zeroed away, or lost at the end of the run). A step right after the loop (flushing
the remainder) is not a finding. Reported at the accumulation condition (the ``if`` around the
step), as the static analyzer does."""
from __future__ import annotations

import ast
import functools

from .sites import Site

RULES = ("TL202",)


@functools.lru_cache(maxsize=64)
def _modulo_conditions(filename: str) -> tuple:
    """(first line, last line, line of the if) of every ``if`` whose test uses ``%``."""
    try:
        with open(filename, encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(
        (node.lineno, node.end_lineno or node.lineno, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and any(isinstance(n, ast.Mod) for n in ast.walk(node.test))
    )


def condition_site(step: Site) -> Site:
    """The innermost modulo condition around the step, else the step itself."""
    filename, line = step
    around = [c for c in _modulo_conditions(filename) if c[0] < line <= c[1]]
    return (filename, max(around)[2]) if around else step


def install(patcher, hub) -> None:
    pending: dict = {}  # id(stream) -> (step site, backward passes the pass left unstepped)

    def on_loader_end(stream) -> None:
        if stream.accumulating and stream.backwards and stream.last_step_site is not None:
            pending[id(stream)] = (stream.last_step_site, stream.backwards)
            hub.wake(on_step)
            hub.wake(on_backward)

    def on_step(stream, optimizer, site, backward_ran: bool) -> None:
        pending.pop(id(stream), None)  # the remainder was stepped after the loop
        settle()

    def on_backward(stream, site, label, loss, scaled) -> None:
        report(stream)
        settle()

    def settle() -> None:
        # Only a pass that ended with a remainder gives the step and backward observers work.
        if not pending:
            hub.rest(on_step)
            hub.rest(on_backward)

    def report(stream) -> None:
        entry = pending.pop(id(stream), None)
        if entry is None:
            return
        step, left = entry
        hub.found("TL202", condition_site(step), lambda: (
            f"a pass over the data loader ended with {left} micro-batch backward "
            f"pass(es) that no optimizer step (line {step[1]}) consumed: their gradients leak into "
            f"the next epoch's first step (or are zeroed, or lost at the end of the run); also step "
            f"on the last batch, e.g. `if (i + 1) % k == 0 or i + 1 == len(loader):`."
        ))

    def on_unseen(stream) -> None:
        pending.pop(id(stream), None)  # compiled code may have stepped the remainder

    hub.observe("loader_end", RULES, on_loader_end)
    hub.observe("unseen", RULES, on_unseen)
    hub.observe("optimizer_step", RULES, on_step, awake=False)
    hub.observe("backward", RULES, on_backward, awake=False)
    hub.observe("end", RULES, report)
