"""The reference programs of runtime_checks/ under the guard on CPU: each clean run reports
nothing, each --bug run exactly its rules, on every rank (DDP and FSDP2 on 2 gloo processes)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from trainlint.runtime.rules import checkable

_PATH = Path(__file__).resolve().parents[2] / "runtime_checks" / "check.py"
_spec = importlib.util.spec_from_file_location("runtime_checks_driver", _PATH)
driver = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = driver  # its dataclasses look their module up there
_spec.loader.exec_module(driver)

VARIANTS = driver.variants()


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_reference_program_under_the_guard(variant, tmp_path):
    outcome = driver.run_variant(variant, "cpu", tmp_path)
    assert outcome.ok, driver.describe(outcome)
    assert {rule for _, rule, _ in outcome.found} == set(variant.expected)
    ranks = {rank for rank, _, _ in outcome.found}
    assert not variant.expected or ranks == set(range(variant.processes))


def test_every_program_has_a_clean_run_and_only_known_rules():
    programs = {v.program for v in VARIANTS}
    assert programs == set(driver.PROCESSES)
    assert all(any(v.program == p and v.bug is None for v in VARIANTS) for p in programs)
    assert {rule for v in VARIANTS for rule in v.expected} <= checkable()
