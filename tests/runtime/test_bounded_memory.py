"""The guard keeps no event log: over many steps its memory stays flat, a finding that repeats
every step is one finding with a count, and its lookup tables stay under their caps."""
from __future__ import annotations

import tracemalloc

import torch
import torch.nn.functional as F

import trainlint
from trainlint.runtime import hub as hub_module
from trainlint.runtime.hub import HUB


def make_loop(clip_after: bool):
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    x, y = torch.randn(2, 4), torch.randint(0, 2, (2,))

    def steps(n: int) -> None:
        for _ in range(n):
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            if not clip_after:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if clip_after:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scheduler.step()

    return steps


def test_memory_is_flat_over_many_steps():
    steps = make_loop(clip_after=True)
    with trainlint.guard(mode="collect") as g:
        steps(500)  # warm: every table that will ever be filled is filled
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            steps(1500)
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    trainlint_growth = sum(
        stat.size_diff for stat in after.compare_to(before, "filename")
        if "trainlint" in stat.traceback[0].filename and stat.size_diff > 0
    )
    assert trainlint_growth < 16 * 1024, trainlint_growth
    assert [f.rule for f in g.findings] == ["TL101"]  # one finding, counted 2000 times
    assert list(g.counts.values()) == [2000]


def test_tables_stay_under_their_caps_with_many_call_sites():
    """Thousands of distinct call sites (generated code) cycle the caches instead of growing them."""
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(2, 4), torch.randint(0, 2, (2,))
    lines = []
    for i in range(1500):  # each step on its own lines: 3 events per site, 4500 in all
        lines += ["optimizer.zero_grad()", "F.cross_entropy(model(x), y).backward()", "optimizer.step()"]
    code = compile("\n".join(lines), "<generated>", "exec")
    with trainlint.guard(mode="collect") as g:
        exec(code, {"optimizer": optimizer, "model": model, "x": x, "y": y, "F": F})
        cap = hub_module._MEMO_SIZE
        assert len(HUB._memo) <= cap and len(HUB._states) <= cap and len(HUB._events) <= cap
        assert all(len(cache) <= cap for cache in HUB._caches.values())
    assert g.findings == []
