"""Accelerate's prepared loaders read one batch ahead, so the DataLoader inside runs out while the
last batch is still to be used, and ``accelerator.accumulate()`` closes the accumulation window on
that last batch (``gradient_state.end_of_dataloader``). The guard ends the pass where Accelerate
ends it (``[[loader_passes]]`` in trainlint/libraries/accelerate.toml): a clean accumulation loop
gets no TL202, a loop that really drops the last micro-batches still does."""
import inspect

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import trainlint

accelerate = pytest.importorskip("accelerate")


def prepared(batches: int):
    torch.manual_seed(0)
    accelerator = accelerate.Accelerator(gradient_accumulation_steps=4, cpu=True)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(4 * batches, 8), torch.randint(0, 4, (4 * batches,)))
    return (accelerator, *accelerator.prepare(model, optimizer, DataLoader(data, batch_size=4)))


def accumulate_loop(batches: int):
    """(the guard's findings, the optimizer steps Accelerate took) over two epochs."""
    accelerator, model, optimizer, loader = prepared(batches)
    steps = 0
    with trainlint.guard(mode="collect") as guard:
        for epoch in range(2):
            for x, y in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(F.cross_entropy(model(x), y))
                    steps += accelerator.sync_gradients
                    optimizer.step()
                    optimizer.zero_grad()
    return guard.findings, steps


def test_a_clean_accumulate_loop_uses_every_batch_and_gets_no_finding():
    findings, steps = accumulate_loop(32)
    assert steps == 2 * 8  # every batch in a step: 32 / 4 per epoch
    assert findings == []


def test_accumulate_steps_on_the_last_batch_of_a_pass_that_is_not_a_multiple_of_k():
    findings, steps = accumulate_loop(30)
    assert steps == 2 * 8  # 7 full windows, and the last 2 batches stepped at the loader's end
    assert findings == []


def test_a_loop_that_drops_the_remainder_of_a_prepared_loader_is_still_tl202():
    accelerator, model, optimizer, loader = prepared(30)
    with trainlint.guard(mode="collect") as guard:
        for epoch in range(2):
            for i, (x, y) in enumerate(loader):
                accelerator.backward(F.cross_entropy(model(x), y))
                condition = inspect.currentframe().f_lineno + 1
                if (i + 1) % 4 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    assert [(f.rule, f.line) for f in guard.findings] == [("TL202", condition)]
    # The pass ends after its last batch, not when the DataLoader inside ran out one batch earlier.
    assert "ended with 2 micro-batch backward pass(es)" in guard.findings[0].message
