"""Sampling a steady loop (trainlint/runtime/sampling.py): between samples torch's own functions
run; full checking comes back at a sample, at a rare event and before a loader's pass ends; a
second training thread or ``check_every_step=True`` turns sampling off. What sampling finds is
tested by the long runtime programs (tl101_bad_after_warmup.py, tl202_*_long_epoch.py, ...)."""
from __future__ import annotations

import threading

import torch
import torch.nn.functional as F
from torch.nn.utils import clip_grad

import trainlint
from trainlint import checker
from trainlint.events import Event, EventKind
from trainlint.runtime.hub import HUB
from trainlint.runtime.patches import Patcher, inner_cell
from trainlint.runtime.sampling import GAP, LEARNING_STEPS, STABLE_CYCLES

CLIP_CELL = inner_cell(clip_grad.clip_grad_norm_)  # found before any guard: it holds the original


def hooked_now() -> dict:
    return {
        "Optimizer.zero_grad": vars(torch.optim.Optimizer)["zero_grad"],
        "autograd.backward": torch.autograd.backward,
        "clip_grad_norm_ cell": CLIP_CELL.cell_contents,
        "F.cross_entropy": F.cross_entropy,
    }


ORIGINALS = hooked_now()


def make_loop():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))

    def steps(n: int, watch=None) -> None:
        for _ in range(n):
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            if watch is not None:
                watch()

    return model, steps


def test_a_steady_loop_runs_torch_own_functions_between_samples():
    model, steps = make_loop()
    seen = []
    with trainlint.guard(mode="collect") as g:
        steps(LEARNING_STEPS + STABLE_CYCLES + 3 * GAP, watch=lambda: seen.append((HUB.coasting, hooked_now())))
    assert g.findings == []
    coasting = [hooks for is_coasting, hooks in seen if is_coasting]
    checking = [hooks for is_coasting, hooks in seen if not is_coasting]
    assert len(coasting) > 2 * GAP  # it coasted for most of the run...
    assert all(hooks == ORIGINALS for hooks in coasting)  # ...on torch's own functions
    assert not checking[0]["autograd.backward"] is ORIGINALS["autograd.backward"]  # hooked while checking
    assert [is_coasting for is_coasting, _ in seen[:LEARNING_STEPS]] == [False] * LEARNING_STEPS
    # Samples: coasting stops and resumes several times.
    switches = sum(1 for a, b in zip(seen, seen[1:]) if a[0] != b[0])
    assert switches >= 4
    assert hooked_now() == ORIGINALS and not HUB.active


def test_check_every_step_keeps_every_hook_in():
    model, steps = make_loop()
    states = []
    with trainlint.guard(mode="collect", check_every_step=True) as g:
        steps(LEARNING_STEPS + STABLE_CYCLES + GAP, watch=lambda: states.append(HUB.coasting))
    assert g.findings == [] and not any(states)


def test_a_nested_check_every_step_guard_ends_coasting():
    model, steps = make_loop()
    with trainlint.guard(mode="collect"):
        steps(LEARNING_STEPS + STABLE_CYCLES + 2)
        assert HUB.coasting
        with trainlint.guard(mode="collect", check_every_step=True):
            assert not HUB.coasting
            states = []
            steps(GAP * 3, watch=lambda: states.append(HUB.coasting))
            assert not any(states)
        steps(STABLE_CYCLES + 2)
        assert HUB.coasting  # the outer guard samples again once the loop is steady


def test_eval_while_coasting_brings_full_checking_back_at_once():
    model, steps = make_loop()
    with trainlint.guard(mode="collect") as g:
        steps(LEARNING_STEPS + STABLE_CYCLES + 2)
        assert HUB.coasting
        model.eval()
        assert not HUB.coasting and torch.autograd.backward is not ORIGINALS["autograd.backward"]
        steps(1)  # trains in eval mode: the bug the eval() call woke the check for
    assert [f.rule for f in g.findings] == ["TL501"]


def test_eval_while_coasting_ends_it_also_when_the_check_is_already_awake():
    """A dropout layer kept in eval on purpose keeps TL501's step check awake (it holds no
    parameter, so it is no finding); a later eval() of the whole model must still end coasting."""
    model, steps = make_loop()
    with trainlint.guard(mode="collect") as g:
        model[1].eval()
        steps(LEARNING_STEPS + STABLE_CYCLES + 2)
        assert HUB.coasting
        model.eval()
        assert not HUB.coasting
        steps(1)
    assert [f.rule for f in g.findings] == ["TL501"]


def test_a_second_training_thread_turns_sampling_off():
    model, steps = make_loop()
    other_model, other_steps = make_loop()
    errors = []

    def worker():
        try:
            other_steps(LEARNING_STEPS + STABLE_CYCLES + 2)
        except BaseException as exc:  # surfaced to the main thread below
            errors.append(exc)

    with trainlint.guard(mode="collect") as g:
        steps(LEARNING_STEPS + STABLE_CYCLES + 2)
        assert HUB.coasting
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert not HUB.coasting
        steps(LEARNING_STEPS + STABLE_CYCLES + 2)
        assert not HUB.coasting  # two loops' steps interleave: not one cycle to sample
    assert not errors and g.findings == []


def test_per_step_patches_come_out_and_go_back_in():
    class Owner:
        def method(self):
            return "original"

    class Later:
        def method(self):
            return "original"

    patcher = Patcher()
    patcher.wrap(Owner, "method", lambda original: lambda self: "hooked", per_step=True)
    patcher.set_per_step(False)
    assert Owner().method() == "original"
    patcher.wrap(Later, "method", lambda original: lambda self: "hooked", per_step=True)
    assert Later().method() == "original"  # added while they are out: out with the rest
    patcher.set_per_step(True)
    assert Owner().method() == Later().method() == "hooked"
    patcher.set_per_step(False)
    patcher.restore()
    assert Owner().method() == Later().method() == "original" and patcher.per_step_in


def test_resumed_state_keeps_only_what_every_step_still_shows():
    sampler_pass = Event(EventKind.LOADER_ITER, sampler="id:1", shuffle=True, label="for ... in loader")
    backward = Event(EventKind.BACKWARD, label="loss.backward()")
    state = checker.initial_state()
    for event in (sampler_pass, backward):
        state, _ = checker.feed(state, event)
    resumed = checker.resumed_state(state)
    fresh = checker.initial_state(history_known=False)
    for invariant, kept, before, new in zip(checker.INVARIANTS, resumed, state, fresh):
        assert kept == (new if invariant.follows_steps else before), type(invariant).__name__
    # The sampler's pass is remembered: a second pass without set_epoch is still TL301.
    _, violations = checker.feed(resumed, sampler_pass)
    assert [v.rule for v in violations] == ["TL301"]
