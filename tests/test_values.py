"""Values that matter to the rules, read through the names a module gives them (values.py)."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from hypothesis import given, strategies as st

from trainlint.static.module import ModuleModel
from trainlint.static.values import UNKNOWN


def _values(source: str):
    source = textwrap.dedent(source)
    return ModuleModel(cst.parse_module(source), source).values


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def test_module_constants_and_arithmetic_on_them():
    values = _values("""
        BASE = 0.01
        SCALE = 5
        FLAG = True
    """)
    assert values.number(_expr("BASE * SCALE")) == pytest.approx(0.05)
    assert values.boolean(_expr("FLAG")) is True
    assert values.boolean(_expr("not FLAG")) is False


def test_a_name_assigned_twice_or_inside_a_function_is_not_a_constant():
    values = _values("""
        DECAY = 0.1
        DECAY = 0.0
        LR = 1e-3
        LR_SCALE = 2
        LR_SCALE += 1

        def tune():
            WARMUP = 3
        WARMUP = 10
    """)
    for name in ("DECAY", "LR_SCALE", "WARMUP"):
        assert values.value(_expr(name)) is UNKNOWN
    assert values.number(_expr("LR")) == pytest.approx(1e-3)


def test_command_line_defaults_through_the_parsed_namespace():
    values = _values("""
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--weight-decay", type=float, default=0.05)
        parser.add_argument("--no-shuffle", dest="shuffle", action="store_false")
        parser.add_argument("--amp", action="store_true")
        parser.add_argument("--lr", type=float)
        args = parser.parse_args()
    """)
    assert values.number(_expr("args.weight_decay")) == pytest.approx(0.05)
    assert values.boolean(_expr("args.shuffle")) is True
    assert values.boolean(_expr("args.amp")) is False
    assert values.value(_expr("args.lr")) is UNKNOWN  # no default
    assert values.value(_expr("other.weight_decay")) is UNKNOWN  # not the parsed namespace


def test_dataclass_fields_unless_the_instance_sets_them():
    values = _values("""
        from dataclasses import dataclass

        @dataclass
        class TrainConfig:
            weight_decay: float = 0.1
            shuffle: bool = True

        cfg = TrainConfig(shuffle=False)
    """)
    assert values.number(_expr("cfg.weight_decay")) == pytest.approx(0.1)
    assert values.value(_expr("cfg.shuffle")) is UNKNOWN  # given at construction: read it there, not the default


def test_unknowns_stay_unknown():
    values = _values("X = compute()\n")
    for text in ("X", "X + 1", "1 / 0", "Y", "self.decay", "True + 1"):
        assert values.value(_expr(text)) is UNKNOWN


@given(st.integers(-1000, 1000), st.integers(1, 1000))
def test_arithmetic_matches_python(a, b):
    values = _values(f"A = {a}\nB = {b}\n")
    for op in ("+", "-", "*", "//", "%"):
        assert values.number(_expr(f"A {op} B")) == eval(f"{a} {op} {b}")  # noqa: S307 - integers only
