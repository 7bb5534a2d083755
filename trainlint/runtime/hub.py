"""The process-wide dispatcher between the hooks and the active guards.

Hooks are installed once, when the first guard starts, and removed when the last one ends; events
go through one checker state per thread and every finding goes to each active guard that selected
its rule. Nested guards therefore see one consistent stream and cannot break one another, and a
finding is printed once however many warn-mode guards are active.

The shared checker is a pure function of (state, event) over immutable, hashable states, and a
training loop repeats the same few transitions. Events from one call site with the same fields are
interned and equal states are kept as one object, so each (state, event) transition is computed
once and then looked up by identity: a full ``checker.feed`` costs tens of microseconds per event, a
lookup well under one. The hooks that run every step keep their own tables of interned events,
keyed by the few facts that vary, so their hot path builds no Event and no keyword dictionary.
"""
from __future__ import annotations

import os
import re
import threading
import warnings
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .. import checker
from ..events import EVERYTHING, FAMILY_GRADS, Event, EventKind
from .errors import TrainingInvariantError, TrainingInvariantWarning
from .rules import CHECK_MODULES, HOOK_MODULES, checkable, check_module, known_rules
from .patches import Unseen
from .sampling import CYCLE_KEPT, StepSampler
from .signals import SHIELD
from .sites import Site, display_path, user_site
from .stream import Stream
from .workers import Workers

_MEMO_SIZE = 4096  # bounded memory: tables are dropped and rebuilt when they grow past this
_ID = re.compile(r"id:\d+")
Observer = Callable[..., None]


class ThreadStreams(threading.local):
    """The event streams of one guard session, one per thread, each created at its thread's first
    hooked call. A new session starts from a new object, so no stream outlives its session; and
    ``hub.streams.stream`` is one attribute read, which matters on a hot path."""

    def __init__(self, hub: "Hub") -> None:
        self.stream = Stream(hub.first_state)


class Hub:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.active = False
        # Sampling a steady loop (see .sampling): ``coasting`` while the per-step hooks are out;
        # ``novel`` when the cycle under way had a finding or woke a check.
        self.sampler = StepSampler(self)
        self.coasting = False
        self.novel = False
        self.guards: List = []  # active guards, outermost first
        self.wanted: frozenset = frozenset()  # rules selected by any active guard
        self.rank_prefix = ""
        self._initial = checker.initial_state(history_known=True)
        # A thread's stream starts here: nothing happened before, unless the guard has coasted
        # (see .sampling), when a thread may have run steps that no hook saw.
        self.first_state = self._initial
        self.streams: Optional[ThreadStreams] = None  # set while hooks are installed
        self._patcher = None
        self._observers: Dict[str, List[Tuple[frozenset, Observer]]] = {}
        self._notified: Dict[str, Tuple[Observer, ...]] = {}  # the awake observers of wanted rules
        self._resting: Set[Observer] = set()  # observers with nothing to do until woken
        self._caches: Dict[str, Dict[tuple, Event]] = {}
        self._events: Dict[tuple, Event] = {}
        self._memo: Dict[Tuple[int, Optional[int]], tuple] = {}  # (state, event or None: a resume) -> next
        self._states: Dict[tuple, tuple] = {}  # canonical checker states: equal states, one object
        self._messages: Dict[Tuple[str, Site], str] = {}
        self.rules: Dict[str, object] = {}  # id -> RuleInfo, read from the catalog once per session
        self.names: Dict[str, str] = {}  # "id:123" -> how messages call that object ("train_sampler")
        self.scaled: Dict[int, tuple] = {}  # id(tensor from GradScaler.scale) -> (weakref, weakref to loss)
        # rule -> check of a live value that must also hold before the checker's verdict is a finding
        # (what events cannot show, e.g. gradients cleared by `p.grad = None` rather than zero_grad()).
        self.confirm: Dict[str, Callable[[Stream], bool]] = {}
        self.grad_samples = None  # TL105's gradient samples (hooks_optim.GradSamples) while installed
        # The no_grad blocks watched for parameters updated by hand (hooks_hand), while installed:
        # the per-step hooks never go out while one is open (its exit must take its watch out).
        self.watches: Optional[dict] = None
        self.sharded = False  # an FSDP model ran a forward in this session (TL305 is about FSDP only)
        self.workers = Workers()  # the worker processes the program started during the session
        # Optimizers whose step GradScaler skipped (inf/NaN gradients): PyTorch then warns, falsely,
        # that the scheduler stepped first (pytorch#44511).
        self.skipped_by_scaler = weakref.WeakSet()
        # Set by compiled code that ran optimizer steps, clips or model.zero_grad() the guard did
        # not see (patches.py). A new one each session: compiled code of an earlier one keeps its own.
        self.unseen = Unseen()
        self._unseen_event = Event(EventKind.OPAQUE, label="compiled code", families=frozenset({FAMILY_GRADS}),
                                   reach=(EVERYTHING,))

    # ------------------------------------------------------------------ guards
    # The guard calls attach and detach while SIGINT is held (see .signals).
    def attach(self, guard) -> None:
        with self.lock:
            if not self.guards:
                self._install(guard)
            try:
                self.sampler.resume()  # a nested guard sees every step from its start
                self.guards.append(guard)
                self._update_wanted()
            except BaseException:
                self.detach(guard, finished=False)
                raise

    def detach(self, guard, finished: bool = True) -> None:
        """``finished``: the guarded code ran to its end (no exception), so checks that can only
        conclude at the end of a run (a last accumulation window, a schedule's coverage) do.
        Whatever is raised, the guard is gone when this returns, and the last one takes every
        hook out."""
        with self.lock:
            verdict = None
            try:
                if finished and self.guards == [guard]:
                    stream = self.stream()
                    self.catch_up(stream)
                    self.notify("end", stream)
            except TrainingInvariantError as exc:  # raise mode: raised once the hooks are gone
                verdict = exc
            finally:
                try:
                    if guard in self.guards:
                        self.guards.remove(guard)
                    self._update_wanted()
                finally:
                    if not self.guards:
                        self._uninstall()
            if verdict is not None:
                raise verdict

    def _update_wanted(self) -> None:
        self.wanted = frozenset().union(*(g.rules for g in self.guards))
        self.sampler.enabled = not any(g.check_every_step for g in self.guards)
        if not self.sampler.enabled:
            self.sampler.resume()
        self._update_notified()

    def _update_notified(self) -> None:
        self._notified = {
            point: tuple(
                observer for rules, observer in observers
                if not self.wanted.isdisjoint(rules) and observer not in self._resting
            )
            for point, observers in self._observers.items()
        }

    def _install(self, guard) -> None:
        from .patches import Patcher

        if self._patcher is not None:  # what an interrupted uninstall left in (see _uninstall)
            self._patcher.restore()
            self._patcher = None
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        if guard.worker is not None:  # a worker process of a guarded parent (see .workers)
            self.rank_prefix = f"[worker {guard.worker}] "
        else:
            self.rank_prefix = f"[rank {os.environ.get('RANK', '0')}] " if world > 1 else ""
        self.rules = known_rules()
        self.unseen = Unseen()
        patcher = Patcher()
        available = checkable()
        try:
            for name in HOOK_MODULES:
                check_module(name).install(patcher, self)
            for name in CHECK_MODULES:
                module = check_module(name)
                # A check whose rules are all missing from the catalog is not even hooked.
                if available.intersection(module.RULES):
                    module.install(patcher, self)
            self._patcher = patcher
            self.first_state = self._initial
            self.streams = ThreadStreams(self)
            self.sampler.reset()
            self.coasting = self.novel = self.sharded = False
            self.workers = Workers()
            self.skipped_by_scaler = weakref.WeakSet()
            self.active = True
            SHIELD.session = True  # keep the SIGINT handler in between holds
        except BaseException:
            self.active = SHIELD.session = False
            self._patcher = None
            try:
                patcher.restore()
            finally:
                self._clear()
            raise

    def _uninstall(self) -> None:
        # The streams stay until the next session replaces them: a hook still running on another
        # thread may read them after ``active`` turned False.
        self.active = self.coasting = False
        SHIELD.session = False
        patcher = self._patcher
        try:
            if patcher is not None:
                patcher.restore()  # every undo runs, whatever one of them raises
        finally:
            if patcher is not None and not patcher.pending:
                self._patcher = None  # else the next _install restores what is left
            self._clear()

    def _clear(self) -> None:
        """Drop the session's tables (what hooks registered, interned events, memos) and the
        reports of its worker processes (the guards that wanted them have read them)."""
        self.sampler.reset()
        self.workers.close()
        self.grad_samples = None
        self.watches = None
        for cache in self._caches.values():
            cache.clear()
        for table in (self._observers, self._notified, self._resting, self._caches, self._events, self._memo,
                      self._states, self._messages, self.names, self.scaled, self.confirm):
            table.clear()

    @property
    def patcher(self):
        return self._patcher

    # ------------------------------------------------------------------ streams and events
    def stream(self) -> Stream:
        """This thread's stream; hooks on a hot path read ``hub.streams.stream`` themselves."""
        return self.streams.stream

    def wants(self, rule: str) -> bool:
        return rule in self.wanted

    def cache(self, name: str) -> Dict[tuple, Event]:
        """A hook's own table of interned events, for this session."""
        return self._caches.setdefault(name, {})

    def event(self, cache: Dict[tuple, Event], key: tuple, kind: EventKind, label: str, site: Site,
              **fields) -> Event:
        """The event for ``key`` in ``cache``, created on first use. Hooks look their key up first
        (``cache.get(key) or hub.event(...)``), so the hot path builds no keyword dictionary."""
        event = cache.get(key)
        if event is None:
            if len(cache) >= _MEMO_SIZE:
                cache.clear()
            event = cache[key] = Event(kind, label=label, site=site, **fields)
        return event

    def emit(self, stream: Stream, kind: EventKind, label: str, site: Optional[Site] = None, **fields) -> None:
        """Feed an event of a rarely called hook (the frequent ones intern their own)."""
        if self.coasting:  # a new epoch of a sampler while the per-step hooks are out: watch again
            self.sampler.resume()
        site = site or user_site()
        key = (kind, site, label, tuple(fields.items()))
        self.feed(stream, self.event(self._events, key, kind, label, site, **fields))

    def feed(self, stream: Stream, event: Event) -> None:
        """Advance this thread's checker state and dispatch what the event reveals."""
        if self.unseen.seen:  # catch_up, inline: this runs at every event
            self._forget_unseen(stream)
        transition = self._memo.get((id(stream.state), id(event))) or self._transition(stream.state, event)
        stream.state = transition[2]
        cycle = stream.cycle
        cycle.append(event)
        if len(cycle) >= CYCLE_KEPT:  # no optimizer step for a long while: not a cycle to sample
            cycle.clear()
            self.novel = True
        if transition[3]:
            self._dispatch(stream, transition[3])

    def catch_up(self, stream: Stream) -> None:
        """Before an event, or a check that reads the stream: if compiled code ran optimizer steps,
        clips or zero_grads the guard did not see since the last event, each invariant forgets what
        they could have changed, as the static engine does around a call it cannot read (an OPAQUE
        event), and so do the checks of live values (``unseen``)."""
        if self.unseen.seen:
            self._forget_unseen(stream)

    def _forget_unseen(self, stream: Stream) -> None:
        self.unseen.seen = False
        stream.end_window()  # an unseen step or zero_grad may have ended it...
        stream.zeroed_after = stream.backward_total  # ...and cleared the gradients
        stream.steps_unseen = True
        self.feed(stream, self._unseen_event)
        self.notify("unseen", stream)

    def _transition(self, state: tuple, event: Event) -> tuple:
        new_state, violations = checker.feed(state, event)
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
            self._states.clear()
        new_state = self._states.setdefault(new_state, new_state)
        # The entry holds the state and the event, so their ids cannot be reused while it exists.
        self._memo[(id(state), id(event))] = transition = (state, event, new_state, tuple(violations))
        return transition

    def _dispatch(self, stream: Stream, violations: Tuple[checker.Violation, ...]) -> None:
        self.novel = True
        for violation in violations:
            if violation.rule in self.wanted:
                confirm = self.confirm.get(violation.rule)
                if confirm is not None and not confirm(stream):
                    continue
                self.found(violation.rule, violation.at.site, lambda v=violation: self._render(v))

    def _render(self, violation: checker.Violation) -> str:
        here = violation.at.site[0]

        def line_of(event: Event) -> Optional[str]:
            if not event.site:
                return None
            filename, line = event.site
            return f"line {line}" if filename == here else f"{os.path.basename(filename)}:{line}"

        return checker.render(violation, line_of)

    def resumed(self, state: tuple) -> tuple:
        """``checker.resumed_state``, canonical (see ``_transition``), computed once per state: each
        sample resumes from the state the last one left, and hashing a state is not free."""
        entry = self._memo.get((id(state), None))
        if entry is None:
            resumed = checker.resumed_state(state)
            resumed = self._states.setdefault(resumed, resumed)
            entry = self._memo[(id(state), None)] = (state, None, resumed, ())
        return entry[2]

    # ------------------------------------------------------------------ observers (runtime checks)
    def observe(self, point: str, rules: Sequence[str], observer: Observer, awake: bool = True) -> None:
        """Call ``observer(*args)`` at each ``notify(point, *args)`` while one of ``rules`` is wanted
        and the observer is awake. A check with work only after some rare event (an eval() call, a
        torch.save) registers resting observers and wakes them then: a training step pays for the
        checks that have something to check."""
        self._observers.setdefault(point, []).append((frozenset(rules), observer))
        if not awake:
            self._resting.add(observer)

    def wake(self, observer: Observer) -> None:
        """Also ends coasting, awake or not: what wakes a check (an eval(), a torch.save) is worth
        watching."""
        if self.coasting:
            with self.lock:
                self.sampler.resume()
        if observer in self._resting:
            with self.lock:
                self.novel = True
                self._resting.discard(observer)
                self._update_notified()

    def rest(self, observer: Observer) -> None:
        if observer not in self._resting:
            with self.lock:
                self._resting.add(observer)
                self._update_notified()

    def notify(self, point: str, *args) -> None:
        for observer in self._notified.get(point, ()):
            observer(*args)

    # ------------------------------------------------------------------ findings
    def found(self, rule: str, site: Site, message: Callable[[], str]) -> None:
        """Record one occurrence of a finding in every active guard that selected the rule; warn
        (once per rule and line) or raise as those guards ask."""
        to_raise = None
        self.novel = True
        with self.lock:
            guards = [g for g in self.guards if rule in g.rules]
            if not guards:
                return
            text = self._messages.get((rule, site))
            if text is None:
                text = self._messages[(rule, site)] = self.rank_prefix + _ID.sub(
                    lambda m: self.names.get(m.group(0), "the object"), message()
                )
            info = self.rules[rule]
            key = (rule, display_path(site[0]), site[1])
            findings = [g.record(key, info, text) for g in guards]
            finding = findings[0]
            warners = [g for g in guards if g.mode == "warn"]
            if warners and not any(key in g.printed for g in warners):
                for g in warners:
                    g.printed.add(key)
                # No module= argument: passing module=None makes CPython drop the warning (measured).
                warnings.warn_explicit(f"{rule} {info.name}: {text}", TrainingInvariantWarning, site[0], site[1] or 1)
            if any(g.mode == "raise" for g in guards):
                to_raise = TrainingInvariantError(f"{finding.location}: {rule} {info.name}: {text}", finding)
        if to_raise is not None:
            raise to_raise


HUB = Hub()
