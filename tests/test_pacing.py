"""Collection paced by the analyzed source: off while files are checked, restored afterwards."""
import gc
import weakref

import pytest

from trainlint import pacing
from trainlint.config import Config, resolve_rules
from trainlint.engine import Settings, check_paths
from trainlint.static import project


def test_collection_is_off_inside_and_restored_after_also_on_errors():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with pacing.paced_collection():
            assert not gc.isenabled()
            raise RuntimeError("a file's internal error")
    assert gc.isenabled()


def _heap_grown_by(monkeypatch, objects):
    monkeypatch.setattr(pacing.gc, "get_count", lambda: (objects, 0, 0))


def test_a_host_that_turned_collection_off_keeps_it_off_and_is_never_collected(monkeypatch):
    collected = []
    monkeypatch.setattr(pacing.gc, "collect", lambda *a: collected.append(a))
    _heap_grown_by(monkeypatch, 10 * pacing.NET_OBJECTS_PER_COLLECTION)
    gc.disable()
    try:
        with pacing.paced_collection() as pacer:
            pacer.analyzed()
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert collected == []


def test_a_collection_once_the_heap_grew_by_the_budget_young_but_one_in_full_every(monkeypatch):
    collected = []
    monkeypatch.setattr(pacing.gc, "collect", lambda *a: collected.append(a))
    with pacing.paced_collection() as pacer:
        _heap_grown_by(monkeypatch, pacing.NET_OBJECTS_PER_COLLECTION - 1)
        pacer.analyzed()
        assert collected == []
        _heap_grown_by(monkeypatch, pacing.NET_OBJECTS_PER_COLLECTION)
        for _ in range(2 * pacing.FULL_EVERY):
            pacer.analyzed()
    young = [(1,)] * (pacing.FULL_EVERY - 1)
    assert collected == 2 * (young + [()])


def test_a_checked_projects_models_are_freed_without_the_cyclic_collector(tmp_path):
    """No reference cycles hold a model: once no longer kept, its tree goes at once (the pacing's
    premise; with cycles, every tree would wait for a full collection)."""
    (tmp_path / "engine.py").write_text(
        "def train_one_epoch(model, loader, optimizer):\n"
        "    for x in loader:\n"
        "        def closure():\n"
        "            return model(x)\n"
        "        loss = closure()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom engine import train_one_epoch\n"
        "for epoch in range(3):\n    train_one_epoch(model, loader, optimizer)\n", encoding="utf-8")
    settings = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=False, jobs=1,
                        respect_gitignore=False)
    project.forget_parsed()  # modules kept from earlier checks are not this test's
    gc.collect()
    gc.disable()
    try:
        report = check_paths([str(tmp_path)], settings)
        kept = [weakref.ref(model) for _, model in project._PARSED.values() if model is not None]
        project.forget_parsed()
        alive = [ref() for ref in kept if ref() is not None]
    finally:
        gc.enable()
    assert {f.rule for f in report.findings} == {"TL101", "TL105"} and len(kept) == 2
    assert alive == []


def test_checking_files_leaves_collection_as_it_found_it(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nloss.backward()\noptimizer.step()\n", encoding="utf-8")
    settings = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=False, jobs=1,
                        respect_gitignore=False)
    report = check_paths([str(tmp_path)], settings)
    assert report.files == 1 and gc.isenabled()
