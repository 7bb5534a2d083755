"""Autofix safety (issue 16): the parser's line model, fixes that must be declined, convergence.

Each program here is a concrete case the fuzzer found (or its smallest form): before the fix the
fixer edited the wrong lines, repeated an edit 50 times, or carried a statement across code whose
meaning it changes.
"""
from __future__ import annotations

import ast
import textwrap

import pytest

from cli_support import CLEAN, CLIP_AFTER_STEP
from fixture_expectations import AUTOFIX, FIXTURES
from trainlint.catalog import load_catalog
from trainlint.fix import FIXERS, MAX_FIXES, Edit, fix_report, fix_source, split_lines
from trainlint.static.analyzer import analyze

ALL_RULES = frozenset(load_catalog())
# Characters str.splitlines() breaks lines at but the parser does not.
NOT_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def rules_found(source):
    return [rule for rule, _, _ in analyze(source, ALL_RULES)]


def program(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --------------------------------------------------------------------------- 1. the line model
def test_split_lines_breaks_only_where_the_parser_does():
    text = "a = 1  # x\x0cy\x0bz\x1c\x1d\x1e\x85\u2028\u2029\n\x0c\nb = 2\r\nc = 3\rd = 4"
    lines = split_lines(text)
    assert "".join(lines) == text
    assert lines == ["a = 1  # x\x0cy\x0bz\x1c\x1d\x1e\x85\u2028\u2029\n", "\x0c\n", "b = 2\r\n", "c = 3\r", "d = 4"]
    assert [node.lineno for node in ast.parse(text).body] == [1, 3, 4, 5]
    assert len(text.splitlines()) > len(lines)  # what the fixer used to count


def test_clip_fix_with_form_feeds_moves_the_clip_not_the_step():
    # A form feed on a blank line and in a comment, other splitlines() breaks in comments: the
    # TL101 fix used to move optimizer.step() above loss.backward() (and again, 50 times).
    def decorate(source):
        return ("# header\x0c comment\n\x0c\n" + source).replace(
            "    loss.backward()\n", "    loss.backward()  # \x0b\x1c\x85\u2028\u2029 \x0c\n"
        ).replace("import torch\n", "import torch\n\x0c\n")

    source, expected = decorate(CLIP_AFTER_STEP), decorate(CLEAN)
    assert rules_found(source) == ["TL101"]
    report = fix_report(source, ALL_RULES)
    assert report.text == expected
    assert report.applied == ["TL101"] and not report.exhausted
    assert "TL101" not in rules_found(report.text)
    assert fix_source(report.text, ALL_RULES) == (report.text, [])


def test_unscale_fix_with_a_form_feed_inserts_one_unscale():
    # A \x0c in the docstring: the TL103 fix used to insert 50 scaler.unscale_ lines.
    before = (AUTOFIX / "TL103_class.before.py").read_text(encoding="utf-8")
    after = (AUTOFIX / "TL103_class.after.py").read_text(encoding="utf-8")

    def decorate(source):
        return source.replace('"""Trainer', '"""\x0cTrainer').replace("\n\n\nclass", "\n\x0c\n\nclass")

    source = decorate(before)
    fixed, applied = fix_source(source, ALL_RULES)
    assert applied == ["TL103"]
    assert fixed == decorate(after)
    assert fixed.count("self.scaler.unscale_(self.optimizer)") == 1


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_other_line_endings_and_a_missing_final_newline(ending):
    source = CLIP_AFTER_STEP.replace("\n", ending).rstrip(ending)
    assert fix_source(source, ALL_RULES) == (CLEAN.replace("\n", ending).rstrip(ending), ["TL101"])


# --------------------------------------------------------------------------- 2. fixes that do not fix
LOADER_HEAD = program(
    """
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    dataset = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 2))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    """
)
PASS = (
    "optimizer.zero_grad()\n"
    "torch.nn.functional.mse_loss(model(x), y).backward()\n"
    "optimizer.step()\n"
)


def indented(text: str, level: int) -> str:
    return textwrap.indent(text, " " * level)


def test_loader_iterated_twice_after_set_epoch_is_left_alone():
    # The second pass reuses the epoch's order; the fix used to insert set_epoch 50 times (and 50
    # more on each run). Another set_epoch(epoch) at the top of the loop fixes nothing.
    source = LOADER_HEAD + (
        "for epoch in range(10):\n"
        "    sampler.set_epoch(epoch)\n"
        "    for x, y in loader:\n" + indented(PASS, 8) +
        "    for x, y in loader:\n" + indented(PASS, 8)
    )
    assert rules_found(source) == ["TL301"]
    assert fix_source(source, ALL_RULES) == (source, [])
    assert source.count("set_epoch") == 1


def test_set_epoch_that_would_not_remove_the_finding_is_reverted():
    # The loader's loop runs twice per epoch (inside `for _ in range(2)`): the fixer proposes
    # set_epoch(epoch) at the top of the epoch loop; analyzed again, the finding stays: declined.
    source = LOADER_HEAD + (
        "for epoch in range(10):\n"
        "    for _ in range(2):\n"
        "        for x, y in loader:\n" + indented(PASS, 12)
    )
    assert rules_found(source) == ["TL301"]
    report = fix_report(source, ALL_RULES)
    assert (report.text, report.applied) == (source, [])
    assert report.declined and {reason for _, _, reason in report.declined} == {"the finding stays after the edit"}


def test_set_epoch_is_not_added_for_a_restarted_iterator():
    # The pass starts at iter(loader), not at a loop over the loader: the nearest loop is the step
    # loop, and the sampler may be a RandomSampler (no set_epoch): the fix used to insert
    # labeled_loader.sampler.set_epoch(step) there.
    source = (FIXTURES / "TL301" / "bad_iterator_restarted_on_exhaustion.py").read_text(encoding="utf-8")
    assert "TL301" in rules_found(source)
    assert fix_source(source, ALL_RULES) == (source, [])


SCHEDULER_HEAD = program(
    """
    import torch
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
    def train_one_epoch():
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    """
)


def test_scheduler_already_before_the_last_return_is_not_moved_in_place():
    # The body ends in `return train_one_epoch()`: "before the return" is where the scheduler is;
    # the fix used to make this no-op move 50 times.
    source = SCHEDULER_HEAD + program(
        """
        def main():
            for epoch in range(10):
                scheduler.step()
                return train_one_epoch()
        main()
        """
    )
    assert rules_found(source) == ["TL102"]
    assert fix_source(source, ALL_RULES) == (source, [])


def no_op(result, lines, tree):
    stmt = tree.simple_at(lines, result.span[0])
    return Edit("move", result.span[0], tree.block_key(stmt), before=result.span[0] + 1)


def keeps_the_finding(result, lines, tree):
    stmt = tree.simple_at(lines, result.span[0])
    line = lines[result.span[0] - 1]
    return Edit("replace", result.span[0], tree.block_key(stmt), text=line.rstrip("\r\n") + "  # fixed?\n")


@pytest.mark.parametrize("fixer, reason", [
    (no_op, "the edit changes nothing"),
    (keeps_the_finding, "the finding stays after the edit"),
])
def test_the_driver_declines_what_a_fixer_gets_wrong(monkeypatch, fixer, reason):
    monkeypatch.setitem(FIXERS, "TL101", fixer)
    report = fix_report(CLIP_AFTER_STEP, ALL_RULES)
    assert (report.text, report.applied) == (CLIP_AFTER_STEP, [])
    assert report.declined == [("TL101", 9, reason)]


# --------------------------------------------------------------------------- 3. what a move must not cross
EPOCH_LOOP = SCHEDULER_HEAD + program(
    """
    def main():
        for epoch in range(10):
            scheduler.step()
            train_one_epoch()
    {rest}
    main()
    """
)


@pytest.mark.parametrize("rest", [
    "if epoch > 5:\n    break",  # early stopping
    'torch.save(model.state_dict(), "ckpt.pt")',
    "save_checkpoint(model, optimizer, epoch)",
    "if best:\n    trainer.checkpoint()",
    "if done:\n    return model",
    "if bad:\n    raise RuntimeError('diverged')",
    "yield epoch",
    "print(scheduler.get_last_lr())",
    "log(lr=optimizer.param_groups[0]['lr'])",
    "evaluate(model, scheduler)",
    "sys.exit(0)",
], ids=["break", "torch.save", "save_checkpoint", "checkpoint", "return", "raise", "yield",
        "get_last_lr", "param_groups", "uses-scheduler", "exit"])
def test_epoch_scheduler_is_not_moved_across(rest):
    # On a real trainer the fix moved scheduler.step() past checkpointing and an early-stopping
    # break (and the finding stayed).
    source = EPOCH_LOOP.format(rest=indented(rest, 8))
    assert "TL102" in rules_found(source)
    assert fix_source(source, ALL_RULES) == (source, [])


def test_epoch_scheduler_is_moved_across_ordinary_statements():
    # The control: evaluation and logging that do not read the learning rate are crossed.
    rest = "evaluate(model)\nfor i, batch in enumerate(val_loader):\n    if i > 10:\n        break\n    log(i)"
    source = EPOCH_LOOP.format(rest=indented(rest, 8))
    fixed, applied = fix_source(source, ALL_RULES)
    assert applied == ["TL102"]
    assert fixed.endswith("            log(i)\n        scheduler.step()\nmain()\n")
    assert "TL102" not in rules_found(fixed)


@pytest.mark.parametrize("between", [
    "if i > 100:\n    break",
    "torch.save(model.state_dict(), 'ckpt.pt')",
    "print(scheduler.get_last_lr())",
])
def test_batch_scheduler_is_not_moved_across(between):
    source = SCHEDULER_HEAD + (
        "for i, (x, y) in enumerate(loader):\n"
        "    optimizer.zero_grad()\n"
        "    scheduler.step()\n"
        "    torch.nn.functional.mse_loss(model(x), y).backward()\n"
        + indented(between, 4) + "\n"
        "    optimizer.step()\n"
    )
    assert "TL102" in rules_found(source)
    assert fix_source(source, ALL_RULES) == (source, [])


def test_scheduler_is_not_moved_into_a_multiline_string():
    # A string's continuation line at column 0 used to end the block early: scheduler.step()
    # was moved into the string (the statement vanished, so the finding "went away").
    source = SCHEDULER_HEAD + program(
        '''
        for epoch in range(10):
            scheduler.step()
            train_one_epoch()
            print("""epoch
        done""")
            evaluate(model)
        '''
    )
    fixed, applied = fix_source(source, ALL_RULES)
    assert applied == ["TL102"]
    assert fixed.endswith('    print("""epoch\ndone""")\n    evaluate(model)\n    scheduler.step()\n')


@pytest.mark.parametrize("between", [
    "if i > 100:\n    break",
    "torch.save(model.state_dict(), 'ckpt.pt')",
    "log(sum(p.grad.norm() for p in model.parameters()))",
])
def test_clip_is_not_moved_across(between):
    source = CLIP_AFTER_STEP.replace("for x, y in loader:", "for i, (x, y) in enumerate(loader):").replace(
        "    optimizer.step()\n", "    optimizer.step()\n" + indented(between, 4) + "\n")
    assert "TL101" in rules_found(source)
    assert fix_source(source, ALL_RULES) == (source, [])


# --------------------------------------------------------------------------- 4. the loop's limit
def test_a_pass_that_runs_out_changes_nothing():
    source = (FIXTURES / "TL101" / "bad_clip_after_scaler_step.py").read_text(encoding="utf-8")
    full = fix_report(source, ALL_RULES)
    assert full.applied == ["TL101", "TL103"] and not full.exhausted
    cut = fix_report(source, ALL_RULES, max_fixes=1)
    assert cut.exhausted and (cut.text, cut.applied) == (source, [])
    assert len(full.applied) < MAX_FIXES


def test_nothing_is_fixed_in_a_file_the_compiler_refuses():
    # The parsers accept a break outside a loop, the compiler does not: the result of a fix could
    # not be checked to compile.
    source = CLIP_AFTER_STEP + "break\n"
    assert "TL101" in rules_found(source)
    assert fix_source(source, ALL_RULES) == (source, [])
