"""The catalog's pre-filter: a file that cannot hold a rule's finding is never parsed for it."""
from __future__ import annotations

import pytest

from trainlint.catalog import CatalogError, _load_entry, load_catalog, may_fire
from trainlint.static.analyzer import FLOW_RULES, PATTERN_RULES, could_fire

STATIC_RULES = frozenset(r.id for r in load_catalog().values() if not r.opt_in) & (FLOW_RULES | PATTERN_RULES.keys())

AUTOGRAD_FUNCTION = '''
import torch


class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(0, 1)

    @staticmethod
    def backward(ctx, grad):
        return grad
'''

TRAINING = '''
for x, y in loader:
    loss = model(x).mean()
    loss.backward()
    optimizer.step()
'''


def test_an_autograd_function_definition_is_not_a_backward_call():
    rule = load_catalog()["TL201"]
    assert not may_fire(rule, AUTOGRAD_FUNCTION)
    assert may_fire(rule, TRAINING)


HAND_UPDATE = '''
for x, y in loader:
    loss = model(x).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
'''


def test_every_required_group_must_be_present():
    rule = load_catalog()["TL201"]
    assert rule.requires == (("step(", "no_grad"), ("step(", ".grad"), ("step(", "parameters("))
    assert not may_fire(rule, TRAINING.replace("optimizer.step()", "pass"))


def test_a_step_written_by_hand_passes_the_step_rules_pre_filters():
    """No ``step(`` in the file: an update of the parameters from their .grad under no_grad is the step."""
    for rule_id in ("TL105", "TL201"):
        rule = load_catalog()[rule_id]
        assert may_fire(rule, HAND_UPDATE), rule_id
        assert not may_fire(rule, HAND_UPDATE.replace("torch.no_grad()", "nullcontext()")), rule_id


def test_library_code_with_neither_backward_calls_nor_steps_is_not_parsed():
    assert not could_fire(AUTOGRAD_FUNCTION, STATIC_RULES)
    assert could_fire(TRAINING, STATIC_RULES)


def test_every_rules_bad_example_passes_its_own_pre_filter():
    for rule in load_catalog().values():
        if rule.static:
            assert may_fire(rule, rule.bad), rule.id


def test_a_broken_trigger_pattern_is_a_catalog_error():
    entry = load_catalog()["TL201"]
    text = (
        f'id = "TL201"\nname = "{entry.name}"\ntier = "error"\ntrigger_patterns = ["(unclosed"]\n'
        'summary = "s"\nrationale = "r"\nfix = "f"\nruntime = "r"\nbad = "b"\ngood = "g"\n'
    )
    with pytest.raises(CatalogError, match="trigger pattern"):
        _load_entry(f"TL201-{entry.name}.toml", text)
