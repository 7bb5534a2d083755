"""What a function's local holds at a statement, as the program is written (local_values.py)."""
from __future__ import annotations

import textwrap

import libcst as cst

from trainlint.static.local_values import LocalValues
from trainlint.static.module import ModuleModel
from trainlint.static.values import UNKNOWN
from trainlint.static.walk import walk

ACCUMULATION = """
MAX_GPU_BATCH_SIZE = 16


def training_function(config, loader):
    batch_size = int(config["batch_size"])
    steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE and loader.unknown_attribute:
        steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE
    print(steps)


def main(loader):
    config = {"lr": 2e-5, "batch_size": BATCH}
    training_function(config, loader)
"""


def _steps_at_print(source: str):
    source = textwrap.dedent(source)
    model = ModuleModel(cst.parse_module(source), source)
    fn = model.functions["training_function"]
    statement = next(n for n in walk(fn.node) if isinstance(n, cst.Call) and getattr(n.func, "value", None) == "print")
    return LocalValues(model, fn).value(cst.Name("steps"), statement)


def test_a_branch_the_constant_arguments_never_take_leaves_the_value():
    assert _steps_at_print("BATCH = 16\n" + ACCUMULATION) == 1


def test_a_branch_they_take_gives_its_value():
    source = ACCUMULATION.replace(" and loader.unknown_attribute", "")
    assert _steps_at_print("BATCH = 64\n" + source) == 4
    # taken, but with a condition it cannot read as well: which value it holds is unknown
    assert _steps_at_print("BATCH = 64\n" + ACCUMULATION) is UNKNOWN


def test_an_argument_that_varies_between_calls_is_unknown():
    source = "BATCH = 64\n" + ACCUMULATION + "\n\ndef other(loader):\n    training_function({'batch_size': 8}, loader)\n"
    assert _steps_at_print(source) is UNKNOWN


def test_a_guard_it_cannot_read_is_unknown_unless_both_branches_agree():
    source = ACCUMULATION.replace("batch_size > MAX_GPU_BATCH_SIZE and loader.unknown_attribute",
                                  "loader.unknown_attribute")
    assert _steps_at_print("BATCH = 64\n" + source) is UNKNOWN
    agreeing = source.replace("steps = batch_size // MAX_GPU_BATCH_SIZE", "steps = 1")
    assert _steps_at_print("BATCH = 64\n" + agreeing) == 1


def test_a_function_nothing_here_calls_has_unknown_parameters():
    source = ACCUMULATION.split("def main")[0]
    assert _steps_at_print("BATCH = 16\n" + source) is UNKNOWN


def test_an_assignment_later_in_a_loop_may_be_seen_on_the_next_iteration():
    source = textwrap.dedent("""
        def training_function(loader):
            steps = 1
            for batch in loader:
                print(steps)
                steps = 2
    """)
    model = ModuleModel(cst.parse_module(source), source)
    fn = model.functions["training_function"]
    statement = next(n for n in walk(fn.node) if isinstance(n, cst.Call) and getattr(n.func, "value", None) == "print")
    assert LocalValues(model, fn).value(cst.Name("steps"), statement) is UNKNOWN
