"""The guard observes and never changes numerics: the same seeded run gives bitwise-identical
weights with and without it."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import trainlint

STEPS = 200


def _data(seed: int):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(STEPS * 8, 16, generator=generator)
    y = torch.randint(0, 4, (STEPS * 8,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=generator)


def _model():
    return nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.GELU(), nn.Dropout(0.2), nn.Linear(64, 4))


def adamw_run():
    """AdamW with decay groups, warmup + cosine schedule, clipping and dropout."""
    torch.manual_seed(0)
    model = _model()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=3e-3)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=20)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS - 20)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[20])
    for x, y in _data(1):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
    return model.state_dict(), optimizer.state_dict()


def amp_run():
    """fp16 autocast on CPU with GradScaler("cpu"), unscale before clipping."""
    torch.manual_seed(0)
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**14, growth_interval=25)
    for x, y in _data(2):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    return model.state_dict(), optimizer.state_dict()


def hand_run():
    """SGD with momentum and weight decay written by hand under no_grad (a watched block), over two
    micro-batches whose mean losses are not divided (TL201), gradients cleared by p.grad = None; a
    gradient-norm log under no_grad between backward passes (another watched block)."""
    torch.manual_seed(0)
    model = _model()
    velocity = [torch.zeros_like(p) for p in model.parameters()]
    norms = []
    for i, (x, y) in enumerate(_data(3)):
        F.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            norms.append(sum(p.grad.norm() for p in model.parameters()).item())
        if i % 2 == 1:
            with torch.no_grad():
                for p, buf in zip(model.parameters(), velocity):
                    buf.mul_(0.9).add_(p.grad + 1e-4 * p)
                    p.data -= 0.05 * buf
                    p.grad = None
    return model.state_dict(), velocity, norms


def _assert_identical(a, b):
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b) and a.view(-1).view(torch.uint8).equal(b.view(-1).view(torch.uint8))
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_identical(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_identical(x, y)
    else:
        assert a == b


# Sampled (the default: after ~110 steps the per-step hooks come out and go back in at each sample)
# and checking every step.
EVERY_STEP = pytest.mark.parametrize("every_step", [False, True], ids=["sampled", "every-step"])


@EVERY_STEP
def test_adamw_schedule_clip_dropout_bitwise_identical(every_step):
    plain = adamw_run()
    with trainlint.guard(mode="collect", select="ALL", check_every_step=every_step) as g:
        guarded = adamw_run()
    assert g.findings == []
    _assert_identical(plain, guarded)


@EVERY_STEP
def test_fp16_autocast_grad_scaler_bitwise_identical(every_step):
    plain = amp_run()
    with trainlint.guard(mode="collect", select="ALL", check_every_step=every_step) as g:
        guarded = amp_run()
    assert g.findings == []
    _assert_identical(plain, guarded)


@EVERY_STEP
def test_sgd_written_by_hand_bitwise_identical(every_step):
    """The watch over no_grad blocks only observes: the same weights, and the bug it is there for found."""
    plain = hand_run()
    with trainlint.guard(mode="collect", select="ALL", check_every_step=every_step) as g:
        guarded = hand_run()
    assert {f.rule for f in g.findings} == {"TL201"}
    _assert_identical(plain, guarded)
