"""Collection paced by the analyzed source: off while files are checked, restored afterwards."""
import gc

import pytest

from trainlint import pacing
from trainlint.config import Config, resolve_rules
from trainlint.engine import Settings, check_paths


def test_collection_is_off_inside_and_restored_after_also_on_errors():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with pacing.paced_collection():
            assert not gc.isenabled()
            raise RuntimeError("a file's internal error")
    assert gc.isenabled()


def test_a_host_that_turned_collection_off_keeps_it_off_and_is_never_collected(monkeypatch):
    collected = []
    monkeypatch.setattr(pacing.gc, "collect", lambda *a: collected.append(a))
    gc.disable()
    try:
        with pacing.paced_collection() as pacer:
            pacer.analyzed(10 * pacing.SOURCE_BYTES_PER_COLLECTION)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert collected == []


def test_one_full_collection_per_budget_of_source(monkeypatch):
    collected = []
    monkeypatch.setattr(pacing.gc, "collect", lambda *a: collected.append(a))
    with pacing.paced_collection() as pacer:
        for _ in range(3):
            pacer.analyzed(pacing.SOURCE_BYTES_PER_COLLECTION // 2)
        assert len(collected) == 1
        for _ in range(pacing.FILES_PER_COLLECTION):
            pacer.analyzed(1)
        assert len(collected) == 2


def test_checking_files_leaves_collection_as_it_found_it(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nloss.backward()\noptimizer.step()\n", encoding="utf-8")
    settings = Settings(rules=resolve_rules(Config(), None, []), config=Config(), cache=False, jobs=1,
                        respect_gitignore=False)
    report = check_paths([str(tmp_path)], settings)
    assert report.files == 1 and gc.isenabled()
