"""Ctrl-C while the guard puts its patches in or takes them out.

A KeyboardInterrupt is raised where the main thread happens to be when Python runs its SIGINT
handler: at a function's start, after a call into C, at a loop's back edge. Landing in the middle of
the guard's install, restore or per-step swap, it would leave torch half patched, or the guard
active after its ``with`` block (a second Ctrl-C while a first one unwinds through the guard's exit
is the usual way). So those stretches *hold* SIGINT. :data:`SHIELD` becomes the SIGINT handler when
a guard session starts on the main thread and stays until it ends; it passes every signal straight
on to the handler it replaced (Python's, or the program's own), except while a hold is on, when it
records the signal instead. The last release calls the replaced handler (once that handler is back
in place if the session is over): the KeyboardInterrupt comes out once every patch is in or out,
into the code that entered or left the guard.

A hold begins with a call, and a signal can land between a ``with`` statement calling the guard's
``__exit__`` and that call. So the frames of a few functions hold too, by themselves
(:meth:`Shield.protect`): the guard's ``__enter__`` and ``__exit__``, each of whose lines either
comes before the guard changes anything or is followed by a release.

Nothing here costs a training step anything: a step never holds, and the handler runs only when a
signal comes. Off the main thread no handler can be installed (and no SIGINT is raised there);
there, and against exceptions no handler sees, restoring still goes on past a failing step (see
``Patcher.restore``). A SIGINT that kills the process (``SIG_DFL``) or is ignored is left alone, and
so is a handler the program installs during the session (see :meth:`Shield.hold`).
"""
from __future__ import annotations

import signal
import threading
from types import CodeType, FrameType
from typing import Callable, FrozenSet, Optional, Tuple

try:  # signal.getsignal wraps this one, turning ints into enums at ~5 us a call
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover - not CPython
    _getsignal = signal.getsignal


class _Held(threading.local):
    depth = 0  # holds under way in this thread
    pending: Optional[Tuple[int, Optional[FrameType]]] = None  # a signal held (main thread only)


class Shield:
    def __init__(self) -> None:
        self._held = _Held()  # the handler runs on the main thread, so it sees the main thread's
        self._previous: Optional[Callable] = None  # the handler this one replaced
        self._protected: FrozenSet[CodeType] = frozenset({Shield.hold.__code__})
        self._holders: FrozenSet[CodeType] = self._protected
        # A guard session runs: the handler stays installed between holds.
        self.session = False

    def protect(self, function: Callable) -> Callable:
        """A signal landing in ``function``'s own frame (not its callees') is held, hold or not:
        ``function`` releases a hold on every path after it can have landed."""
        self._protected = self._protected | {function.__code__}
        return self.holder(function)

    def holder(self, function: Callable) -> Callable:
        """``function`` holds (and releases) in its frame or its callees'. A hold with no such
        frame on the stack when a signal comes was left by an exception no handler saw (one raised
        by a trace function, or another thread's PyThreadState_SetAsyncExc): it is dropped, so
        Ctrl-C cannot stay held for good."""
        self._holders = self._holders | {function.__code__}
        return function

    # ------------------------------------------------------------------ holds
    def hold(self) -> None:
        """SIGINT waits until the matching :meth:`release`. Call it before the ``try`` whose
        ``finally`` releases: a signal before the hold raises here, where nothing has changed.

        The handler is installed by the hold that starts a session and stays for the session. Code
        that installs its own SIGINT handler during the session keeps it (the guard's holds then
        hold nothing): taking SIGINT back would make this handler pass signals on to one that
        code meant to be temporary, after it put this one back."""
        if not self.session and _getsignal(signal.SIGINT) is not self:
            self._install()
        self._held.depth += 1

    def release(self, level: Optional[int] = None) -> None:
        """Ends a hold (``level``: ends holds down to that many); the last one delivers a signal
        held meanwhile, by calling the replaced handler (KeyboardInterrupt for Python's own), once
        that handler is back if no session runs."""
        held = self._held
        held.depth = held.depth - 1 if level is None else level
        if held.depth > 0:
            return
        held.depth = 0
        pending, held.pending = held.pending, None
        if not self.session:
            self._uninstall()
        if pending is not None:
            self._call_previous(*pending)

    # ------------------------------------------------------------------ the handler
    def __call__(self, signum: int, frame: Optional[FrameType]) -> None:
        held = self._held
        if (frame is not None and frame.f_code in self._protected) or (held.depth and self._holding(frame)):
            held.pending = (signum, frame)
            return
        held.depth = 0
        held.pending = None
        if not self.session:  # left installed by a hold another thread ended, or restored by user code
            self._uninstall()
        self._call_previous(signum, frame)

    def _holding(self, frame: Optional[FrameType]) -> bool:
        holders = self._holders
        while frame is not None:
            if frame.f_code in holders:
                return True
            frame = frame.f_back
        return False

    def _call_previous(self, signum: int, frame: Optional[FrameType]) -> None:
        previous = self._previous
        if previous is not None and previous is not self:
            previous(signum, frame)

    def _install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # no SIGINT handler can be set here, and no KeyboardInterrupt lands here
        current = _getsignal(signal.SIGINT)
        if not callable(current):  # SIG_DFL kills, SIG_IGN ignores, None: not Python's to change
            return
        self._previous = current
        try:
            signal.signal(signal.SIGINT, self)
        except ValueError:  # not the main interpreter
            pass

    def _uninstall(self) -> None:
        if (self._previous is not None and _getsignal(signal.SIGINT) is self
                and threading.current_thread() is threading.main_thread()):
            signal.signal(signal.SIGINT, self._previous)

    def _reset_for_tests(self) -> None:
        self._held.depth = 0
        self._held.pending = None
        self.session = False
        self._uninstall()


SHIELD = Shield()
