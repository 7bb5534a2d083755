"""Messages are assembled from facts of the code they are about: every statement a message names
with a line is on that line of the fixture, and every optimizer or scheduler class it names is one
the fixture constructs."""
from __future__ import annotations

import re

import pytest

from trainlint.catalog import load_catalog
from trainlint.optimizers import OPTIMIZER_STATE
from trainlint.static.analyzer import analyze_results

from fixture_expectations import FIXTURES, expected_findings, fixture_files

CATALOG = load_catalog()
ALL_RULES = frozenset(CATALOG)
# ``optimizer.step() (line 12)``, ``torch.nn.utils.clip_grad_norm_(...) (line 9)``: a statement's
# label, then where it is (a label quoted in backticks, as TL502 writes its keeping statement, too).
_NAMED_AT = re.compile(r"(`[^`]+`|[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\([^()]*(?:\([^()]*\)[^()]*)*\))?) \(line (\d+)\)")
_SCHEDULERS = ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "OneCycleLR", "CyclicLR",
               "LinearLR", "ConstantLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "CosineAnnealingWarmRestarts")
# A class named as the fix (``use torch.optim.AdamW``) is written qualified; one the code built is not.
_CLASS = re.compile(r"(?<!torch\.optim\.)\b(" + "|".join(sorted(list(OPTIMIZER_STATE) + list(_SCHEDULERS), key=len, reverse=True)) + r")\b")


def _bad_fixtures():
    """Bad fixtures with a finding the static engine reports (runtime-only rules' are the guard's)."""
    static = {rule.id for rule in CATALOG.values() if rule.static}
    return [p for p in fixture_files() if p.name.startswith("bad_")
            and {rule for _, rule in expected_findings(p.read_text(encoding="utf-8"))} & static]


@pytest.mark.parametrize("path", _bad_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_message_names_only_what_the_fixture_has(path):
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    results = analyze_results(source, ALL_RULES)
    assert results, "a bad fixture has findings"
    for result in results:
        message = result.message
        for label, number in _NAMED_AT.findall(message):
            label = label.strip("`")
            if not any(mark in label for mark in ".([") and label not in source:
                continue  # a word of the sentence (``which ... freezes (line 9)``), not a statement
            number = int(number)
            assert 1 <= number <= len(lines), f"{result.rule}: line {number} is not in the file: {message}"
            head = label.split("(")[0].split("[")[0]
            assert head.rsplit(".", 1)[-1] in lines[number - 1], (
                f"{result.rule}: `{label}` is not on line {number} ({lines[number - 1].strip()!r}): {message}")
        for name in _CLASS.findall(message):
            assert re.search(rf"\b{name}\b", source), f"{result.rule} names {name}, which the fixture never builds: {message}"


def test_the_message_names_each_optimizer_as_built():
    """Two optimizers, one message each: each names its own class (not the last one built)."""
    source = (
        "import torch\n"
        "encoder, decoder = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)\n"
        "first = torch.optim.AdamW(encoder.parameters(), lr=1e-3, weight_decay=0.1)\n"
        "second = torch.optim.SGD(decoder.parameters(), lr=1e-3, weight_decay=1e-4)\n"
    )
    messages = {r.span[0]: r.message for r in analyze_results(source, {"TL701"})}
    assert messages[3].startswith("AdamW(") and messages[4].startswith("SGD(")


TRAINS_IN_EVAL = """\
import torch
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(2, 4) for _ in range(3)]
{before}
for epoch in range(3):
    for x in batches:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    {after}
"""


def test_tl501_says_whether_the_model_trained_before_the_evaluation():
    from_start = analyze_results(TRAINS_IN_EVAL.format(before="model.eval()", after="pass"), {"TL501"})
    assert len(from_start) == 1 and "trains in inference mode from this point on" in from_start[0].message
    after = analyze_results(TRAINS_IN_EVAL.format(before="model.train()", after="model.eval()"), {"TL501"})
    assert len(after) == 1 and "after this evaluation trains in a different regime" in after[0].message


SCHEDULED = """\
import torch
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
batches = [torch.randn(2, 4) for _ in range(3)]
{prologue}
for x in batches:
    scheduler.step()
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
    {epilogue}
"""


def test_tl102_says_the_first_value_is_skipped_only_when_it_is():
    first = analyze_results(SCHEDULED.format(prologue="", epilogue="pass"), {"TL102"})
    assert len(first) == 1 and "first learning rate is never used" in first[0].message
    # one warm step first, then a second scheduler step at each iteration's end: the schedule runs
    # ahead from the second iteration, but its first value was used
    later = analyze_results(SCHEDULED.format(
        prologue="optimizer.zero_grad()\nmodel(batches[0]).sum().backward()\noptimizer.step()", epilogue="scheduler.step()"), {"TL102"})
    assert later and all("first learning rate" not in r.message for r in later)
