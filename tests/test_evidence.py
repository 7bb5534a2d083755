"""Proof before error: the checker's handling of what the static engine cannot see.

Event sequences are written by hand here (as a path the static engine would feed), so each test
pins one rule of evidence: an unknown call that may do an event is never read as its absence, a
clip is linked to a step only within one pass of a training loop (or with a backward after it), and
an accumulation window is judged only when a step ends it.
"""
from __future__ import annotations

from trainlint import checker
from trainlint.events import ALL_FAMILIES, EVERYTHING, FAMILY_DATA, FAMILY_GRADS, LOSS_MEAN, Event, EventKind
from trainlint.static.analyzer import analyze

K = EventKind


def ev(kind, **fields) -> Event:
    return Event(kind=kind, label=kind.value, **fields)


def rules(events, history_known=True):
    return {v.rule for v in checker.run(events, history_known)}


def opaque(*reach, families=frozenset({FAMILY_GRADS})):
    return ev(K.OPAQUE, families=families, reach=tuple(reach) or (EVERYTHING,))


def test_clip_after_step_in_the_same_pass_is_reported():
    assert rules([ev(K.BACKWARD), ev(K.OPTIMIZER_STEP), ev(K.CLIP)]) == {"TL101"}


def test_clip_at_the_top_of_the_next_pass_needs_a_backward_after_it():
    step = ev(K.OPTIMIZER_STEP)
    # backward hidden in a call the engine cannot read: nothing proves the clip is misplaced
    zero = ev(K.ZERO_GRAD)
    assert rules([ev(K.BACKWARD), step, zero, ev(K.ITERATION), ev(K.CLIP), step]) == set()
    # the pass's own backward comes after the clip: the step never used clipped gradients
    assert rules([ev(K.BACKWARD), step, zero, ev(K.ITERATION), ev(K.CLIP), ev(K.BACKWARD), step]) == {"TL101"}


def test_an_unknown_call_between_the_steps_may_zero_the_gradients():
    step = ev(K.OPTIMIZER_STEP, target="optimizer")
    assert rules([ev(K.BACKWARD), step, ev(K.BACKWARD), step]) == {"TL105"}
    assert rules([ev(K.BACKWARD), step, opaque("optimizer"), ev(K.BACKWARD), step]) == set()


def test_steps_on_a_path_that_never_backpropagates_are_not_missing_zero_grad():
    step = ev(K.OPTIMIZER_STEP, target="optimizer")
    assert rules([step, step, step]) == set()


def test_a_debug_backward_before_the_training_loop_belongs_to_no_step():
    events = [ev(K.BACKWARD), ev(K.TRAINING_START), ev(K.ZERO_GRAD, target="optimizer"),
              ev(K.OPTIMIZER_STEP, target="optimizer")]
    assert rules(events) == set()
    assert rules([e for e in events if e.kind is not K.TRAINING_START]) == {"TL104"}


def test_unknown_call_receiving_the_loader_may_set_the_epoch():
    loader = ev(K.LOADER_ITER, target="loader", sampler="sampler", shuffle=True)
    assert rules([loader, loader]) == {"TL301"}
    assert rules([loader, opaque("loader", "sampler", families=frozenset({FAMILY_DATA})), loader]) == set()
    # a call that only received the optimizer cannot touch the sampler
    assert rules([loader, opaque("optimizer"), loader]) == {"TL301"}


def test_scheduler_order_is_unknown_after_a_call_that_may_step_the_optimizer():
    sched = ev(K.SCHEDULER_STEP, target="scheduler", optimizer="optimizer")
    step = ev(K.OPTIMIZER_STEP, target="optimizer")
    assert rules([step, sched, sched, step]) == {"TL102"}
    assert rules([step, sched, opaque("optimizer"), sched, step]) == set()
    # a scheduler step before any optimizer step stays a finding whatever the call does
    assert rules([sched, opaque("optimizer"), step]) == {"TL102"}


def test_accumulation_is_judged_only_when_a_step_ends_the_window():
    backward = ev(K.BACKWARD, loss=LOSS_MEAN)
    clip = ev(K.CLIP)
    assert rules([backward, clip, backward]) == set()
    assert rules([backward, clip, backward, ev(K.OPTIMIZER_STEP)]) >= {"TL106"}
    # gradients normalised by hand before the step (``p.grad /= k``)
    assert "TL201" not in rules([backward, backward, opaque(), ev(K.OPTIMIZER_STEP, boundary=True)])


def test_callees_are_judged_by_their_bodies_never_by_their_names():
    source = '''
import torch
from helpers import forward_backward

def train(model, loader, optimizer):
    for batch in loader:
        forward_backward(model, batch)
        optimizer.zero_grad()
        optimizer.step()
'''
    # the helper's body is not visible: it is not taken as a backward that zero_grad() then wipes
    assert analyze(source, frozenset({"TL104"})) == []
    local = source.replace("from helpers import forward_backward", "") + '''
def forward_backward(model, batch):
    loss = model(batch).mean()
    loss.backward()
'''
    assert {r for r, _, _ in analyze(local, frozenset({"TL104"}))} == {"TL104"}


def test_everything_reach_matches_any_object():
    assert checker.run([
        ev(K.EVAL_MODE, target="model"), ev(K.OPAQUE, families=ALL_FAMILIES, reach=(EVERYTHING,)),
        ev(K.OPTIMIZER_STEP, module="model"),
    ]) == []


def test_the_catalogs_own_remedies_put_together_are_clean():
    """TL102's "use instead" (scheduler after the batch loop) around TL201's (a boundary step)."""
    source = '''
import torch
import torch.nn.functional as F

def train(model, loader, epochs, accum_steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
                optimizer.step()
                optimizer.zero_grad()
        scheduler.step()
'''
    assert analyze(source, frozenset(checker.CHECKED_RULES)) == []
