"""The guard leaves torch as it found it (on exit, exception and KeyboardInterrupt), nests, works as
a decorator, and its modes warn, raise and collect as documented."""
from __future__ import annotations

import threading
import warnings

import pytest
import torch
import torch.distributed.fsdp  # noqa: F401  (loaded first, so every snapshot sees the FSDP patches)
import torch.nn.functional as F
from torch.nn.utils import clip_grad, clip_grad_norm_  # imported by name before any guard

import trainlint
from trainlint.runtime.hub import HUB
from trainlint.runtime.patches import inner_cell


def snapshot():
    """Everything the guard may change: each replaced attribute, the clip functions' inner cells,
    torch's global optimizer hooks and the import hooks."""
    from torch.optim import optimizer as optimizer_module

    with trainlint.guard(mode="collect"):
        replaced = [(owner, name) for owner, name, _ in HUB.patcher.replaced]
    attributes = {(owner, name): vars(owner).get(name) for owner, name in replaced}
    cells = {f: inner_cell(f).cell_contents for f in (clip_grad.clip_grad_norm_, clip_grad.clip_grad_value_)}
    hooks = (dict(optimizer_module._global_optimizer_pre_hooks), dict(optimizer_module._global_optimizer_post_hooks))
    import sys

    return attributes, cells, hooks, list(sys.meta_path)


BEFORE = None


def assert_restored():
    global BEFORE
    if BEFORE is None:
        BEFORE = snapshot()
    attributes, cells, hooks, meta_path = snapshot()
    assert len(attributes) > 20  # optimizer, schedulers, scaler, sampler, DDP, SDPA, losses, save, ...
    assert attributes == BEFORE[0]
    for (owner, name), value in attributes.items():
        assert vars(owner).get(name) is value, f"{owner.__name__}.{name}"
    assert cells == BEFORE[1] and hooks == BEFORE[2] and meta_path == BEFORE[3]
    assert not HUB.active and not HUB.guards


def tiny_step(clip_after: bool = False):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    F.mse_loss(model(torch.randn(8, 4)), torch.zeros(8, 2)).backward()
    if not clip_after:
        clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if clip_after:
        clip_grad_norm_(model.parameters(), 1.0)  # the bug: clip after step


def test_every_patch_is_the_original_object_after_exit():
    assert_restored()
    with trainlint.guard(mode="collect") as g:
        tiny_step()
    assert g.findings == []
    assert_restored()


def test_patches_restored_after_an_exception_and_a_keyboard_interrupt():
    for error in (ValueError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            with trainlint.guard(mode="collect"):
                tiny_step()
                raise error
        assert_restored()


def test_raise_mode_raises_at_the_offending_call_and_restores():
    with pytest.raises(trainlint.TrainingInvariantError) as info:
        with trainlint.guard(mode="raise"):
            tiny_step(clip_after=True)
    assert info.value.finding.rule == "TL101"
    assert "clip_grad_norm_" in str(info.value) and "test_guard_safety.py" in str(info.value)
    # The traceback runs through the user's clip call: it raised there, not at exit.
    assert any(frame.name == "tiny_step" for frame in __import__("traceback").extract_tb(info.value.__traceback__))
    assert_restored()


def test_warn_mode_warns_once_per_line_and_summarises(capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with trainlint.guard(mode="warn") as g:
            for _ in range(3):
                tiny_step(clip_after=True)
    ours = [w for w in caught if issubclass(w.category, trainlint.runtime.TrainingInvariantWarning)]
    assert len(ours) == 1 and "TL101" in str(ours[0].message)
    assert ours[0].filename == __file__
    assert [f.rule for f in g.findings] == ["TL101"]
    assert "TL101 clip-after-step (3 times)" in capsys.readouterr().err


def test_nested_and_repeated_guards_share_one_stream():
    with trainlint.guard(mode="collect", select="TL101") as outer:
        with trainlint.guard(mode="collect", select="TL2") as inner:
            tiny_step(clip_after=True)
        assert HUB.active  # the inner exit does not uninstall the outer guard's hooks
        tiny_step(clip_after=True)
    assert [f.rule for f in outer.findings] == ["TL101"]
    assert inner.findings == []
    again = trainlint.guard(mode="collect")
    for _ in range(2):
        with again:
            tiny_step()
    assert_restored()


def test_decorator():
    g = trainlint.guard(mode="collect")

    @g
    def train():
        assert HUB.active
        tiny_step(clip_after=True)
        return "done"

    assert train() == "done"
    assert [f.rule for f in g.findings] == ["TL101"]
    assert_restored()


def test_threads_are_checked_separately():
    """Two training loops in two threads: each is correct, so their interleaving is no finding."""
    errors = []

    def worker():
        try:
            for _ in range(20):
                tiny_step()
        except BaseException as exc:  # surfaced to the main thread below
            errors.append(exc)

    with trainlint.guard(mode="collect") as g:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and g.findings == []


def test_unknown_selector_and_mode_are_rejected():
    with pytest.raises(ValueError, match="unknown rule"):
        trainlint.guard(select="TL999")
    with pytest.raises(ValueError, match="mode"):
        trainlint.guard(mode="loud")


def test_report_is_the_cli_json_format(tmp_path):
    import json

    report = tmp_path / "findings.json"
    with trainlint.guard(mode="collect", report=str(report)):
        tiny_step(clip_after=True)
    data = json.loads(report.read_text())
    assert [f["rule"] for f in data["findings"]] == ["TL101"]
    assert set(data["findings"][0]) >= {"rule", "name", "severity", "path", "line", "column", "message"}


def test_a_zero_grad_with_other_parameters_gets_the_generic_wrapper(monkeypatch):
    """A wrapper declared with torch's parameter list stands in only where the lists agree; a
    zero_grad with other parameters (another torch version) gets the generic wrapper, which passes
    every argument through, and is still seen."""
    from trainlint.runtime.patches import takes_same_parameters

    def torch_213(self, set_to_none: bool = True):
        pass

    def wrapper(self, set_to_none=True):
        pass

    def other_default(self, set_to_none: bool = False):
        pass

    def extra(self, set_to_none=True, *, foreach=None):
        pass

    assert takes_same_parameters(torch_213, wrapper)
    assert not takes_same_parameters(other_default, wrapper)
    assert not takes_same_parameters(extra, wrapper)

    calls = []

    def zero_grad(self, set_to_none=True, *, foreach=None):  # as a later torch might declare it
        calls.append((set_to_none, foreach))

    monkeypatch.setattr(torch.nn.Module, "zero_grad", zero_grad)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with trainlint.guard(mode="collect", select="TL105") as g:
        for _ in range(3):
            model(torch.randn(3, 2)).sum().backward()
            optimizer.step()
            model.zero_grad(False, foreach=True)  # clears nothing: only the guard's view changes
    assert calls == [(False, True)] * 3
    # The guard saw each call: had it not, gradients accumulating across steps would be TL105.
    assert not g.findings
