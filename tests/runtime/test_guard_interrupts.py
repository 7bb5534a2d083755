"""A Ctrl-C that lands while the guard starts or ends (issue 16, item 10).

Each test counts the events (function calls and lines) that run in trainlint's own frames while the
guard enters, exits or swaps its per-step hooks, then reruns the same guarded program once per event
and delivers a SIGINT at that event, the way CPython does: by calling the SIGINT handler installed at
that moment (``signal.getsignal``), which raises KeyboardInterrupt at that bytecode boundary unless
it is the guard's deferring handler. After each run: torch is as it was (every patched attribute
the original object, test_guard_safety's check), the guard is inactive, the user's SIGINT handler is
back, the KeyboardInterrupt reached the caller (not swallowed), and a fresh guard works and finds
TL101. The other tests send real signals (os.kill) from inside the guard's exit and start.

``python tests/runtime/test_guard_interrupts.py`` prints the counts, also for a raw raise at each
event (an exception that bypasses signal handlers, such as PyThreadState_SetAsyncExc), which no
Python code can survive everywhere and is reported, not asserted.
"""
from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import clip_grad, clip_grad_norm_

import trainlint
from trainlint.runtime.hub import HUB
from trainlint.runtime.patches import inner_cell

import test_guard_safety  # tests/runtime is on sys.path (pytest's rootdir-less import, or a script's)
from test_guard_safety import assert_restored
from trainlint.runtime.patches import Patcher
from trainlint.runtime.signals import SHIELD

TRAINLINT = os.path.dirname(trainlint.__file__) + os.sep
# Found before any guard runs: what _force_clean puts the originals back into.
CELLS = {f: inner_cell(f) for f in (clip_grad.clip_grad_norm_, clip_grad.clip_grad_value_)}


@pytest.fixture(autouse=True)
def pythons_own_sigint_handler():
    """Each test starts from Python's own SIGINT handler, the one that raises KeyboardInterrupt.
    A process can inherit SIGINT ignored (a command run in the background by a shell without job
    control, nohup, some CI runners); Python then installs no handler, the guard rightly leaves
    the signal alone (test_an_ignored_or_default_sigint_is_left_alone) and no KeyboardInterrupt
    can come: the sweeps would report the first injection as swallowed."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


def train_step(model, optimizer):
    optimizer.zero_grad()
    F.mse_loss(model(torch.randn(8, 4)), torch.zeros(8, 2)).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


class Interrupter:
    """A trace function: counts the call and line events in trainlint's frames; at event ``at``
    delivers SIGINT through the handler installed then (``raw``: raises KeyboardInterrupt there)."""

    def __init__(self, at=None, raw=False):
        self.at = at
        self.raw = raw
        self.count = 0
        self.fired = False
        self.where = None  # the frame the signal was delivered in, for the report

    def __call__(self, frame, event, arg):
        if not frame.f_code.co_filename.startswith(TRAINLINT):
            return None
        self._event(frame)
        return self._local

    def _local(self, frame, event, arg):
        if event == "line":
            self._event(frame)
        return self._local

    def _event(self, frame):
        i = self.count
        self.count += 1
        if i != self.at:
            return
        self.fired = True
        self.where = f"{frame.f_code.co_name} ({os.path.relpath(frame.f_code.co_filename, TRAINLINT)}:{frame.f_lineno})"
        if self.raw:
            raise KeyboardInterrupt(f"injected at event {i}")
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)


def exit_program(tracer):
    """A training step in a guard; the trace runs from the end of the body through __exit__."""
    model, optimizer = make_model()
    with trainlint.guard(mode="collect"):
        train_step(model, optimizer)
        sys.settrace(tracer)
    sys.settrace(None)


def exit_program_after_an_interrupt(tracer):
    """The same, as the guard ends because of a first Ctrl-C: the one injected is the second (the
    first reaches the caller anyway; what is checked is that torch and the guard are restored)."""
    model, optimizer = make_model()
    try:
        with trainlint.guard(mode="collect"):
            train_step(model, optimizer)
            sys.settrace(tracer)
            raise KeyboardInterrupt("the first Ctrl-C")
    finally:
        sys.settrace(None)


def enter_program(tracer):
    """The trace runs through __enter__ (the whole install) up to the body's first line."""
    model, optimizer = make_model()
    try:
        sys.settrace(tracer)
        with trainlint.guard(mode="collect"):
            sys.settrace(None)
            train_step(model, optimizer)
    finally:
        sys.settrace(None)


def nested_exit_program(tracer):
    """The inner guard's exit (the outer one stays) and then the outer's."""
    model, optimizer = make_model()
    with trainlint.guard(mode="collect"):
        with trainlint.guard(mode="collect", select="TL1"):
            train_step(model, optimizer)
            sys.settrace(tracer)
        assert HUB.active and len(HUB.guards) == 1
        sys.settrace(None)
        train_step(model, optimizer)
        sys.settrace(tracer)
    sys.settrace(None)


def _force_clean():
    """After a failed point: put everything back by hand, so the next point starts clean."""
    sys.settrace(None)
    for guard in list(HUB.guards):
        guard._depth = 0
        try:
            HUB.detach(guard, finished=False)
        except BaseException:
            pass
    if HUB.patcher is not None:
        HUB._uninstall()
    shield = getattr(sys.modules.get("trainlint.runtime.signals"), "SHIELD", None)
    if shield is not None:
        shield._reset_for_tests()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Patches the hub lost track of: back to the snapshot taken before any injection.
    from torch.optim import optimizer as optimizer_module

    attributes, cells, hooks, meta_path = test_guard_safety.BEFORE
    for (owner, name), value in attributes.items():
        if value is None:
            if name in vars(owner):
                delattr(owner, name)
        else:
            setattr(owner, name, value)
    for function, contents in cells.items():
        CELLS[function].cell_contents = contents
    for live, saved in zip((optimizer_module._global_optimizer_pre_hooks, optimizer_module._global_optimizer_post_hooks), hooks):
        live.clear()
        live.update(saved)
    sys.meta_path[:] = meta_path


def check_point(program, at, raw=False, first_interrupt=False):
    """Run ``program`` with SIGINT at event ``at``; None if all is well, else what is wrong."""
    handler = signal.getsignal(signal.SIGINT)
    tracer = Interrupter(at, raw=raw)
    problems = []
    try:
        program(tracer)
        problems.append(f"the KeyboardInterrupt delivered in {tracer.where} was swallowed" if tracer.fired
                        else "no event at this index")
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # pragma: no cover - reported
        problems.append(f"raised {exc!r}")
    finally:
        sys.settrace(None)
    if signal.getsignal(signal.SIGINT) is not handler:
        problems.append(f"SIGINT handler is {signal.getsignal(signal.SIGINT)!r}")
    try:
        assert_restored()
    except Exception as exc:
        problems.append(f"not restored: {exc!r}"[:300])
    if not problems:
        try:  # a fresh guard works, and sees the bug it should
            model, optimizer = make_model()
            with trainlint.guard(mode="collect") as g:
                train_step(model, optimizer)
                optimizer.step()
                clip_grad_norm_(model.parameters(), 1.0)
            if [f.rule for f in g.findings] != ["TL101"]:
                problems.append(f"a fresh guard found {[f.rule for f in g.findings]}")
            if HUB.active or signal.getsignal(signal.SIGINT) is not handler:  # the next point checks the rest
                problems.append("a fresh guard stayed active")
        except BaseException as exc:
            problems.append(f"a fresh guard failed: {exc!r}")
    if problems:
        _force_clean()
    return problems or None


@contextmanager
def _no_collection():
    """The cyclic collector off for a sweep: a collection while a program is traced runs the
    finalizers of earlier garbage (a generator closed in one of trainlint's frames), where a
    KeyboardInterrupt is CPython's to swallow ("Exception ignored in"), and it would move the event
    indices of the guard's own frames from one run to the next."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def count_events(program):
    tracer = Interrupter()
    try:
        program(tracer)
    except KeyboardInterrupt:  # the first Ctrl-C of exit_program_after_an_interrupt
        pass
    assert not HUB.active
    return tracer.count


def sweep(program, raw=False):
    """{event index: problems} over every event of ``program``'s traced part."""
    assert_restored()
    with _no_collection():
        n = count_events(program)
        failures = {}
        for at in range(n):
            problem = check_point(program, at, raw=raw)
            if problem:
                failures[at] = problem
    assert_restored()
    return n, failures


def _report(name, n, failures):
    lines = [f"{name}: {n - len(failures)} of {n} injection points pass"]
    for at, problems in list(failures.items())[:5]:
        lines.append(f"  event {at}: {'; '.join(problems)}")
    return "\n".join(lines)


def per_step_state():
    patcher = HUB.patcher
    return ({(owner, name): vars(owner).get(name) for owner, name, _ in patcher.replaced},
            {f: cell.cell_contents for f, cell in CELLS.items()}, patcher.per_step_in)


def swap_program(put_in):
    """A per-step swap (the guard's sampling takes the per-step hooks out and puts them back): a
    Ctrl-C the training loop catches must find them all in or all out."""

    def program(tracer):
        with trainlint.guard(mode="collect"):
            patcher = HUB.patcher
            hooks_in = per_step_state()
            patcher.set_per_step(False)
            hooks_out = per_step_state()
            assert hooks_out != hooks_in and hooks_out[2] is False
            if not put_in:
                patcher.set_per_step(True)
            try:
                sys.settrace(tracer)
                patcher.set_per_step(put_in)
            finally:
                sys.settrace(None)
                if per_step_state() not in (hooks_in, hooks_out):  # before the hold: not swapped at all
                    raise AssertionError("per-step hooks half swapped")

    return program


PROGRAMS = {
    "exit": exit_program,
    "exit after a first Ctrl-C": exit_program_after_an_interrupt,
    "nested exits": nested_exit_program,
    "enter": enter_program,
    "per-step hooks out": swap_program(False),
    "per-step hooks in": swap_program(True),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sigint_at_every_point_of_the_guard_s_enter_exit_and_swaps(name):
    n, failures = sweep(PROGRAMS[name])
    assert n > 20
    assert not failures, _report(name, n, failures)


# ---------------------------------------------------------------------- real signals


def send_sigint():
    os.kill(os.getpid(), signal.SIGINT)  # the C handler runs at once; Python's at the next boundary


def add_undo_in_the_middle(undo):
    """Make ``undo`` one of the steps the current session's restore runs, halfway through."""
    steps = HUB.patcher._undo
    steps.insert(len(steps) // 2, undo)


def test_a_real_sigint_while_patches_come_out_is_delivered_after_they_are_all_out():
    seen = []

    def undo():
        send_sigint()
        seen.append("sent")  # the signal did not interrupt the restore here

    model, optimizer = make_model()
    with pytest.raises(KeyboardInterrupt):
        with trainlint.guard(mode="collect"):
            train_step(model, optimizer)
            add_undo_in_the_middle(undo)
    assert seen == ["sent"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert_restored()


def test_a_second_ctrl_c_while_the_first_unwinds_through_the_exit():
    model, optimizer = make_model()
    with pytest.raises(KeyboardInterrupt) as info:
        with trainlint.guard(mode="collect"):
            train_step(model, optimizer)
            add_undo_in_the_middle(send_sigint)
            raise KeyboardInterrupt("first")
    # The second comes out once the patches are out, chained to the first.
    assert str(info.value) != "first" and str(info.value.__context__) == "first"
    assert_restored()


def test_a_user_sigint_handler_is_called_once_after_restoration_and_kept():
    calls = []

    def handler(signum, frame):
        calls.append((signum, HUB.active, HUB.patcher is None, SHIELD.session))

    previous = signal.signal(signal.SIGINT, handler)
    try:
        model, optimizer = make_model()
        with trainlint.guard(mode="collect"):
            assert signal.getsignal(signal.SIGINT) is SHIELD  # passes signals on outside holds
            send_sigint()  # in the training code: at once, not held
            assert len(calls) == 1
            train_step(model, optimizer)
            add_undo_in_the_middle(send_sigint)
        assert calls == [(signal.SIGINT, True, False, True), (signal.SIGINT, False, True, False)]
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert_restored()


def test_a_handler_the_training_code_installs_for_a_while_is_not_taken_over():
    """The usual "delay Ctrl-C while saving a checkpoint" handler, with a per-step swap inside it
    (a torch.save ends the guard's coasting): once the code puts the previous handler back, a
    Ctrl-C raises again."""
    model, optimizer = make_model()
    delayed = []
    with pytest.raises(KeyboardInterrupt):
        with trainlint.guard(mode="collect"):
            train_step(model, optimizer)
            previous = signal.signal(signal.SIGINT, lambda signum, frame: delayed.append(signum))
            HUB.patcher.set_per_step(False)
            send_sigint()
            HUB.patcher.set_per_step(True)
            assert signal.signal(signal.SIGINT, previous) is not SHIELD
            assert delayed == [signal.SIGINT]
            send_sigint()
            delayed.append("not interrupted")
    assert delayed == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert_restored()


def test_a_ctrl_c_in_the_training_code_is_not_held():
    model, optimizer = make_model()
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with trainlint.guard(mode="collect"):
            train_step(model, optimizer)
            send_sigint()
            reached.append(True)
    assert reached == []
    assert_restored()


def test_a_real_sigint_while_patches_go_in_starts_nothing(monkeypatch):
    from trainlint.runtime import hooks_data

    install = hooks_data.install

    def interrupted_install(patcher, hub):
        install(patcher, hub)
        send_sigint()

    monkeypatch.setattr(hooks_data, "install", interrupted_install)
    ran = []
    with pytest.raises(KeyboardInterrupt):
        with trainlint.guard(mode="collect"):
            ran.append(True)
    monkeypatch.undo()
    assert ran == [] and not HUB.active
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert_restored()


def test_a_real_sigint_during_a_per_step_swap_leaves_all_hooks_in_or_all_out():
    model, optimizer = make_model()
    with trainlint.guard(mode="collect"):
        patcher = HUB.patcher
        hooks_in = per_step_state()
        patcher.set_per_step(False)
        hooks_out = per_step_state()
        patcher.set_per_step(True)
        patcher._per_step.insert(len(patcher._per_step) // 2, (send_sigint, send_sigint, send_sigint))
        with pytest.raises(KeyboardInterrupt):
            patcher.set_per_step(False)
        assert per_step_state() == hooks_out
        with pytest.raises(KeyboardInterrupt):
            patcher.set_per_step(True)
        assert per_step_state() == hooks_in
        train_step(model, optimizer)
    assert_restored()


def test_an_ignored_or_default_sigint_is_left_alone():
    for disposition in (signal.SIG_IGN, signal.SIG_DFL):
        previous = signal.signal(signal.SIGINT, disposition)
        try:
            with trainlint.guard(mode="collect"):
                assert signal.getsignal(signal.SIGINT) == disposition
            assert signal.getsignal(signal.SIGINT) == disposition
        finally:
            signal.signal(signal.SIGINT, previous)
    assert_restored()


def test_a_guard_in_another_thread_leaves_the_handler_alone():
    seen, errors = [], []

    def worker():
        try:
            model, optimizer = make_model()
            with trainlint.guard(mode="collect") as g:
                seen.append(signal.getsignal(signal.SIGINT))
                train_step(model, optimizer)
                optimizer.step()
                clip_grad_norm_(model.parameters(), 1.0)
            seen.append([f.rule for f in g.findings])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors and seen == [signal.default_int_handler, ["TL101"]]
    assert_restored()


def test_a_hold_left_behind_does_not_hold_ctrl_c_for_good():
    """An exception no handler sees (one raised by a trace function, another thread's
    PyThreadState_SetAsyncExc) can leave a hold unreleased; the next signal finds no function
    that holds on the stack, drops it and goes through."""
    SHIELD.hold()  # never released
    try:
        assert signal.getsignal(signal.SIGINT) is SHIELD
        with pytest.raises(KeyboardInterrupt):
            send_sigint()
            [None for _ in range(10)]  # a boundary
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        SHIELD._reset_for_tests()
    # A guard's start and end release every hold of their thread, so one left behind ends there too.
    SHIELD.hold()
    with trainlint.guard(mode="collect"):
        pass
    assert SHIELD._held.depth == 0 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert_restored()


def test_restore_runs_every_undo_whatever_one_raises():
    class Owner:
        a = b = c = "original"

    patcher = Patcher()
    for name in "abc":
        patcher.replace(Owner, name, "patched")
    done = []

    def failing():
        done.append("failing")
        raise KeyboardInterrupt

    patcher._undo.insert(2, failing)
    with pytest.raises(KeyboardInterrupt):
        patcher.restore()
    assert (Owner.a, Owner.b, Owner.c) == ("original",) * 3
    assert done == ["failing", "failing"]  # tried once more
    assert patcher.pending == 0
    patcher.restore()  # nothing left to do


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # see pythons_own_sigint_handler
    for raw in (False, True):
        for name, program in PROGRAMS.items():
            n, failures = sweep(program, raw=raw)
            print(("raw raise, " if raw else "SIGINT, ") + _report(name, n, failures), flush=True)
