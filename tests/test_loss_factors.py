"""The loss that reaches backward() as a factor (losses.py, scales.py): what TL201 reports in an
accumulation window of several micro-batches, for each way a loss is weighted, normalised and
divided, whatever the names are."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.events import LOSS_DIVIDED, LOSS_MEAN, LOSS_SUM, LOSS_UNKNOWN
from trainlint.static.analyzer import analyze_results
from trainlint.static.losses import classify_loss
from trainlint.static.module import ModuleModel

WINDOW = """
import torch
import torch.nn.functional as F

SCALE = 0.25


def train(net, loader, opt, {params}):
    for i, (x, y) in enumerate(loader):
        {body}
        loss.backward()
        if (i + 1) % {count} == 0 or i + 1 == len(loader):
            opt.step()
            opt.zero_grad()
"""


def _reported(body: str, count: str = "accum_steps", params: str = "accum_steps=4, weight=2.0") -> bool:
    source = textwrap.dedent(WINDOW).format(body=body, count=count, params=params)
    return any(r.rule == "TL201" for r in analyze_results(source, {"TL201"}))


@pytest.mark.parametrize("body", [
    "loss = F.mse_loss(net(x), y) * weight",
    "loss = weight * F.mse_loss(net(x), y)",
    "loss = F.mse_loss(net(x), y) * 3",
    "loss = -F.mse_loss(net(x), y)",
    "loss = F.cross_entropy(net(x), y) + weight * F.mse_loss(net(x), y) / 7.5",
    "loss = ((net(x) - y) ** 2).sum() / x.shape[0]",
    "loss = ((net(x) - y) ** 2).sum() / max(x.size(0), 1)",
    "loss = F.mse_loss(net(x), y, reduction='sum') / (x.shape[0] * x.shape[1])",
    "loss = F.mse_loss(net(x), y)\n        loss *= weight",
    "loss = 0\n        loss = loss + F.l1_loss(net(x), y)",
    "loss = F.mse_loss(net(x), y) / accum_steps\n        loss = loss + F.l1_loss(net(x), y)",
], ids=lambda body: body.split("\n")[-1].strip())
def test_a_mean_times_weights_is_undivided(body):
    assert _reported(body)


@pytest.mark.parametrize("body", [
    "loss = F.mse_loss(net(x), y) / accum_steps",
    "loss = F.mse_loss(net(x), y) * (1.0 / accum_steps)",
    "loss = F.mse_loss(net(x), y) * SCALE",
    "loss = F.mse_loss(net(x), y) * weight / accum_steps",
    "loss = F.mse_loss(net(x), y) / weight",
    "loss = F.mse_loss(net(x), y) * accum_steps ** -1",
    "loss = ((net(x) - y) ** 2).sum() / (x.shape[0] * accum_steps)",
    "loss = F.mse_loss(net(x), y)\n        loss /= accum_steps",
    "loss = F.mse_loss(net(x), y)\n        loss = loss / accum_steps",
    "loss = ((net(x) - y) ** 2).sum()",
    "loss = 0\n        loss = loss + F.l1_loss(net(x), y) / accum_steps",
], ids=lambda body: body.split("\n")[-1].strip())
def test_what_may_be_the_window_divides(body):
    assert not _reported(body)


@pytest.mark.parametrize("name", ["accum_steps", "k", "grad_accum", "n"])
def test_the_accumulation_count_is_judged_by_what_it_holds_not_its_name(name):
    params = f"{name}=4, weight=2.0"
    assert _reported("loss = F.mse_loss(net(x), y) * weight", count=name, params=params)
    assert not _reported(f"loss = F.mse_loss(net(x), y) * weight / {name}", count=name, params=params)
    scale = f"scale_{name} = 1 / {name}\n        loss = F.mse_loss(net(x), y) * scale_{name}"
    assert not _reported(scale, count=name, params=params)


def _kind(source: str, function: str, expression: str) -> str:
    source = textwrap.dedent(source)
    model = ModuleModel(cst.parse_module(source), source)
    return classify_loss(cst.parse_expression(expression), model.functions[function], model)


def test_a_running_total_of_tokens_may_count_the_window():
    source = """
    def step(model, batches):
        tokens = 0
        for b in batches:
            tokens += b.mask.sum()
        summed = model(b).sum()
        return summed
    """
    assert _kind(source, "step", "summed / tokens") == LOSS_DIVIDED
    assert _kind(source, "step", "summed / b.mask.sum()") == LOSS_MEAN
    assert _kind(source, "step", "summed") == LOSS_SUM


def test_a_helper_return_is_read_with_the_call_s_literal_arguments():
    source = """
    import torch

    def objective(pred, target, mode):
        if mode == "train":
            return torch.mean((pred - target) ** 2)
        return 0.5 * torch.mean((pred - target) ** 2)

    def train(pred, target, mode):
        a = objective(pred, target, "train")
        b = objective(pred, target, "eval")
        c = objective(pred, target, mode)
    """
    assert _kind(source, "train", "a") == LOSS_MEAN
    assert _kind(source, "train", "b") == LOSS_DIVIDED  # 0.5 may be 1/2
    assert _kind(source, "train", "c") == LOSS_UNKNOWN
