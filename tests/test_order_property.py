"""Property test: on generated training iterations, the analyzer agrees with a concrete oracle.

Hypothesis builds the statements of one training iteration (zero_grad, forward/loss, optional
division, backward, optional unscale, optional clip, step, optional scheduler step) in random orders
and structures (plain, accumulation by modulo, accumulation by a nested micro-step loop; with or
without AMP). The oracle *executes* the generated loop for a few iterations, writes down the events
it performs, and applies each rule's plain-language definition to that trace. The analyzer only
sees the source.
"""
from __future__ import annotations

from typing import List

from hypothesis import given, settings
from hypothesis import strategies as st

from trainlint.static.analyzer import analyze

ITERATIONS = 4
ACCUM = 2
RULES = frozenset({"TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL201"})
OPTIONAL = ("zero_grad", "unscale", "clip", "sched")


def statement(item: str, amp: bool) -> List[str]:
    return {
        "zero_grad": ["optimizer.zero_grad()"],
        "backward": ["scaler.scale(loss).backward()" if amp else "loss.backward()"],
        "unscale": ["scaler.unscale_(optimizer)"],
        "clip": ["torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"],
        "step": ["scaler.step(optimizer)", "scaler.update()"] if amp else ["optimizer.step()"],
        "sched": ["scheduler.step()"],
    }[item]


@st.composite
def programs(draw):
    structure = draw(st.sampled_from(["plain", "modulo", "nested"]))
    amp = draw(st.booleans())
    divided = draw(st.booleans())
    items = ["backward", "step"] + [i for i in OPTIONAL if draw(st.booleans()) and (i != "unscale" or amp)]
    if structure == "plain":
        micro, boundary = draw(st.permutations(items)), []
    else:
        rest = [i for i in items if i not in ("backward", "step")]
        in_boundary = [i for i in rest if draw(st.booleans())]
        micro = draw(st.permutations(["backward"] + [i for i in rest if i not in in_boundary]))
        boundary = draw(st.permutations(["step"] + in_boundary))
    return structure, amp, divided, list(micro), list(boundary)


def render(structure, amp, divided, micro, boundary) -> str:
    lines = [
        "import torch",
        "import torch.nn.functional as F",
        "model = torch.nn.Linear(4, 2)",
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
        "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)",
        'scaler = torch.amp.GradScaler("cuda")' if amp else "",
        f"accum = {ACCUM}",
        "for i, (x, y) in enumerate(loader):",
    ]
    indent = "    "
    if structure == "nested":
        lines.append(indent + "for micro in range(accum):")
        indent += "    "
    lines.append(indent + "loss = F.cross_entropy(model(x), y)")
    if divided:
        lines.append(indent + "loss = loss / accum")
    for item in micro:
        lines += [indent + s for s in statement(item, amp)]
    if structure == "modulo":
        lines.append("    if (i + 1) % accum == 0:")
    for item in boundary:
        lines += ["        " + s if structure == "modulo" else "    " + s for s in statement(item, amp)]
    return "\n".join(lines) + "\n"


def execute(structure, micro, boundary) -> List[str]:
    """The events the generated loop performs, in order, over a few iterations. A zero_grad at
    the accumulation boundary (the modulo branch, after the micro-step loop) is written
    ``zero_grad@boundary``: it ends the window on purpose, where one on every micro-batch wipes
    what the step was meant to sum."""
    trace: List[str] = []
    for i in range(ITERATIONS):
        if structure == "plain":
            trace += micro
        elif structure == "modulo":
            trace += micro
            if (i + 1) % ACCUM == 0:
                trace += ["zero_grad@boundary" if e == "zero_grad" else e for e in boundary]
        else:
            for _ in range(ACCUM):
                trace += micro
            trace += ["zero_grad@boundary" if e == "zero_grad" else e for e in boundary]
    return trace


def oracle(structure, amp, divided, tagged: List[str]) -> set:
    found = set()
    trace = [e.split("@")[0] for e in tagged]
    for pos, event in enumerate(trace):
        before = trace[:pos]
        if event == "clip":
            last = next((e for e in reversed(before) if e in ("backward", "step")), None)
            if last == "step":
                found.add("TL101")
            elif amp:
                last_reset = next((e for e in reversed(before) if e in ("backward", "unscale", "step", "zero_grad")), None)
                if last_reset == "backward":
                    found.add("TL103")
        if event == "sched":
            since_previous = before[max((i for i, e in enumerate(before) if e == "sched"), default=-1) + 1 :]
            if "step" not in since_previous and "step" in trace[pos:]:
                found.add("TL102")
        if event == "step" and structure != "plain" and not divided:
            # TL201: several backwards summed into this step. A step at an accumulation boundary
            # says k micro-batches are meant to be summed, also while a zero_grad on every
            # micro-batch (TL104) wipes them: fixing that leaves the loss undivided.
            last_reset = max((i for i, e in enumerate(tagged[:pos]) if e in ("zero_grad@boundary", "step")), default=-1)
            if before[last_reset + 1 :].count("backward") >= 2:
                found.add("TL201")
        if event == "step":
            previous_step = max((i for i, e in enumerate(before) if e == "step"), default=None)
            window = before[previous_step + 1 :] if previous_step is not None else before
            # TL104: a zero_grad after a backward of this step's window, with no backward after it;
            # under accumulation, any zero_grad after the window's first backward (it wipes the
            # earlier micro-batches the step was meant to sum).
            if any(
                e == "zero_grad" and "backward" in window[:i] and ("backward" not in window[i + 1 :] or structure != "plain")
                for i, e in enumerate(window)
            ):
                found.add("TL104")
            # TL105: two steps with no zero_grad between them.
            if previous_step is not None and "zero_grad" not in window:
                found.add("TL105")
        if event == "backward":
            # TL106: a clip between two backward passes with no step or zero_grad between them.
            last_reset = max((i for i, e in enumerate(before) if e in ("zero_grad", "step")), default=-1)
            window = before[last_reset + 1 :]
            if "backward" in window and "clip" in window[window.index("backward") + 1 :]:
                found.add("TL106")
    return found


@settings(max_examples=300, deadline=None)
@given(programs())
def test_static_verdicts_match_the_executed_order(program):
    structure, amp, divided, micro, boundary = program
    source = render(*program)
    expected = oracle(structure, amp, divided, execute(structure, micro, boundary))
    actual = {rule for rule, _, _ in analyze(source, RULES)}
    assert actual == expected, source
