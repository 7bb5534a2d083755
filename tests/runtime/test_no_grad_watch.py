"""The guard's watch over no_grad blocks (hooks_hand): which blocks it watches, what it takes for a
step written by hand, and that its TorchFunctionMode never outlives the block or the guard.
(tests/runtime/programs/*manual_sgd* check the findings against the static engine's.)"""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

import trainlint
from trainlint.runtime.hub import HUB


def modes() -> int:
    """TorchFunctionModes on this thread's stack: the watch's, while a block is watched."""
    return torch._C._len_torch_function_stack()


def backward(model) -> None:
    F.mse_loss(model(torch.randn(8, 4)), torch.zeros(8, 2)).backward()


@torch.no_grad()
def modes_in_a_decorated_function() -> int:
    return modes()


def test_only_the_users_blocks_with_gradients_pending_are_watched():
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with trainlint.guard(mode="collect"):
        backward(model)
        with torch.no_grad():
            assert modes() == 1  # a backward since the last step: gradients an update could consume
        assert modes_in_a_decorated_function() == 1
        optimizer.step()
        with torch.no_grad():
            assert modes() == 0  # after the step: an evaluation, say
    assert modes() == 0


def test_an_exception_leaves_no_mode_behind():
    model = torch.nn.Linear(4, 2)
    with trainlint.guard(mode="collect"):
        backward(model)
        with pytest.raises(ValueError):
            with torch.no_grad():
                raise ValueError("inside a watched block")
        assert modes() == 0 and torch.is_grad_enabled()


def test_a_guard_ending_inside_a_watched_block_takes_its_mode_out():
    model = torch.nn.Linear(4, 2)
    enter = vars(torch.autograd.grad_mode.no_grad)["__enter__"]
    guard = trainlint.guard(mode="collect")
    guard.__enter__()
    backward(model)
    block = torch.no_grad()
    block.__enter__()
    assert modes() == 1
    guard.__exit__(None, None, None)
    assert modes() == 0
    block.__exit__(None, None, None)
    assert torch.is_grad_enabled() and vars(torch.autograd.grad_mode.no_grad)["__enter__"] is enter


def steps_seen(update) -> int:
    """Steps the guard counts over three passes of backward, ``update(model)`` under no_grad, zero_grad."""
    model = torch.nn.Linear(4, 2)
    with trainlint.guard(mode="collect"):
        for _ in range(3):
            backward(model)
            with torch.no_grad():
                update(model)
            model.zero_grad()
        return HUB.stream().steps


def test_a_step_is_an_update_of_a_parameter_from_its_own_gradient():
    def descend(model):
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.1)

    def clamp(model):  # a WGAN critic's weight clipping
        for p in model.parameters():
            p.clamp_(-0.01, 0.01)

    def from_another_gradient(model):
        weight, bias = model.parameters()
        bias.add_(weight.grad.sum(), alpha=-0.1)

    assert steps_seen(descend) == 3
    assert steps_seen(clamp) == 0
    assert steps_seen(from_another_gradient) == 0


def test_an_optimizer_stepped_in_a_no_grad_block_is_one_step():
    """SGD's single-tensor path updates ``param.add_(grad)`` itself: the optimizer's step, not a
    second one written by hand."""
    optimizer_of = {}

    def optimizer_step(model):
        optimizer = optimizer_of.setdefault(id(model), torch.optim.SGD(model.parameters(), lr=0.1, foreach=False))
        optimizer.step()

    assert steps_seen(optimizer_step) == 3


def optimizer_steps(steps: int, model, log_norms: bool = True) -> bool:
    """A clean optimizer loop (with, if asked, a gradient-norm log under no_grad between backward and
    step: a watched block); whether the guard coasted through some of it."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    coasted = False
    for _ in range(steps):
        optimizer.zero_grad()
        backward(model)
        if log_norms:
            with torch.no_grad():
                sum(p.grad.norm() for p in model.parameters()).item()
        optimizer.step()
        coasted = coasted or HUB.coasting
    return coasted


def test_a_watched_block_each_step_still_lets_the_guard_coast():
    with trainlint.guard(mode="collect") as guard:
        assert optimizer_steps(300, torch.nn.Linear(4, 2))
    assert guard.findings == [] and modes() == 0


def test_the_guard_does_not_coast_while_another_threads_block_is_watched():
    """Its exit hook must stay in to take the watch out: coasting would take it out with the others."""
    entered, release, left = threading.Event(), threading.Event(), []

    def hand_update_thread(model):
        backward(model)
        with torch.no_grad():
            entered.set()
            release.wait(timeout=60)
        left.append(modes())

    with trainlint.guard(mode="collect"):
        other = threading.Thread(target=hand_update_thread, args=(torch.nn.Linear(4, 2),))
        other.start()
        assert entered.wait(timeout=60)
        coasted = optimizer_steps(300, torch.nn.Linear(4, 2), log_norms=False)
        release.set()
        other.join(timeout=60)
    assert not coasted and left == [0]
