"""Parameters updated by hand are an optimizer step: a loop over a module's parameters that changes
each one in place from its own gradient, where gradients are off. What the code does decides it,
not what anything is called (the fixtures under fixtures/TL201 and fixtures/TL105 hold the
realistic programs; these pin down the edges of the recognition)."""
from __future__ import annotations

import textwrap

import pytest

from trainlint.static.analyzer import analyze

# Never zeroed: a step at ``{update}`` each pass is TL105 there, when it is a step.
NEVER_ZEROED = """\
import torch
{imports}
model = torch.nn.Linear(4, 2)
other = torch.nn.Linear(4, 2)
batches = [(torch.randn(8, 4), torch.randn(8, 2)) for _ in range(10)]
{setup}
for x, y in batches:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    {context}
        for {target} in {iterable}:
            {update}
"""


def findings(update: str, context: str = "with torch.no_grad():", iterable: str = "model.parameters()",
             target: str = "p", imports: str = "", setup: str = "") -> set:
    source = NEVER_ZEROED.format(update=update, context=context, iterable=iterable, target=target,
                                 imports=imports, setup=setup)
    return {(span[0], rule) for rule, span, _ in analyze(source, {"TL105", "TL201"})}


UPDATE_LINE = 12


@pytest.mark.parametrize("update", [
    "p -= 0.1 * p.grad",
    "p.add_(p.grad, alpha=-0.1)",
    "p.data.add_(p.grad.data, alpha=-0.1)",
    "p.data -= 0.1 * p.grad.data",
    "p.copy_(p - 0.1 * p.grad)",
])
def test_each_form_of_the_update_is_a_step(update):
    assert findings(update) == {(UPDATE_LINE, "TL105")}


def test_the_gradient_may_pass_through_names_and_buffers():
    update = "g = p.grad; buf = torch.zeros_like(p); buf.mul_(0.9).add_(g); p.sub_(0.1 * buf)"
    assert findings(update) == {(UPDATE_LINE, "TL105")}


@pytest.mark.parametrize("iterable,target,setup", [
    ("model.named_parameters()", "name, p", ""),
    ("params", "p", "params = list(model.parameters())"),
])
def test_the_parameters_may_come_with_names_or_through_a_list(iterable, target, setup):
    assert findings("p -= 0.1 * p.grad", iterable=iterable, target=target, setup=setup) == {(UPDATE_LINE, "TL105")}


def test_no_grad_is_known_by_what_it_is_imported_as():
    context = "with ng():"
    assert findings("p -= 0.1 * p.grad", context=context, imports="from torch import no_grad as ng") == {
        (UPDATE_LINE, "TL105")}


@pytest.mark.parametrize("update", [
    "p.clamp_(-0.01, 0.01)",  # a WGAN critic's weight clipping: no gradient in it
    "p.add_(other.weight.grad, alpha=-0.1)",  # another tensor's gradient, not this parameter's
    "p.grad.mul_(0.5)",  # the gradient changed, not the parameter
])
def test_a_change_not_made_from_the_parameters_own_gradient_is_no_step(update):
    assert findings(update) == set()


def test_an_update_where_gradients_are_on_is_no_step():
    """``p.data`` updated outside no_grad changes the parameter too, but the guard can see an update
    only where gradients are off: both sides read the update there, and only there."""
    assert findings("p.data.add_(p.grad.data, alpha=-0.1)", context="if True:") == set()


def test_a_decorated_helper_updates_where_its_callers_do_not_turn_gradients_off():
    source = textwrap.dedent("""\
        import torch

        @torch.no_grad()
        def descend(module, rate):
            for w in module.parameters():
                w -= rate * w.grad

        def fit(module, batches, rate, k):
            for i, (x, y) in enumerate(batches):
                torch.nn.functional.mse_loss(module(x), y).backward()
                if (i + 1) % k == 0:
                    descend(module, rate)
                    module.zero_grad()
        """)
    assert {(span[0], rule) for rule, span, _ in analyze(source, {"TL105", "TL201"})} == {(10, "TL201")}
