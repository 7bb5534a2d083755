"""``trainlint.guard()``: checks a live training run against the rule catalog.

Use it as a context manager or a decorator (of the training function, not of one step: hooks are
installed when the outermost guard starts and removed when it ends)::

    with trainlint.guard(mode="warn") as g:
        train()
    print(g.findings)

Modes: ``warn`` issues a :class:`TrainingInvariantWarning` through :mod:`warnings` (so stderr by
default, and the usual filters apply) the first time a rule fires on a source line, and prints a
summary with occurrence counts to stderr when the guard exits; ``raise`` raises
:class:`TrainingInvariantError` at the offending call; ``collect`` only records. ``report=PATH``
writes the findings in the CLI's JSON format on exit (``PATH.rankN`` in a multi-process job).

Worker processes the guarded code starts with the spawn or forkserver method
(``torch.multiprocessing.spawn``) run under a guard of their own; their findings come back to this
one, tagged with the worker's index, when it ends. A worker that died or could not be checked is
in ``errors`` (see :mod:`trainlint.runtime.workers`).

Cost: every step is checked until the loop has run 100 steps and repeats one clean cycle; from
then on the per-step hooks are taken out and one cycle in about 50 is checked (an eval(), a
checkpoint, a new epoch or the end of a loader's pass bring full checking back; see
:mod:`trainlint.runtime.sampling`). ``check_every_step=True`` checks every step of the run.

Importing this module does not import torch; starting a guard does, with torch._dynamo (which the
first optimizer step of a run imports anyway): every hook keeps out of compiled code.
"""
from __future__ import annotations

import functools
import sys
from typing import Dict, List, Optional, Set, Tuple, Union

from ..config import Config
from ..findings import FileError, Finding
from .hub import HUB
from .report import report_path, write_report
from .rules import RuleInfo, Selectors, select_rules
from .signals import SHIELD

MODES = ("warn", "raise", "collect")
Key = Tuple[str, str, int]  # (rule, path, line)
WorkerKey = Tuple[str, str, int, int]  # (rule, path, line, worker)


class Guard:
    def __init__(self, mode: str = "warn", select: Selectors = None, ignore: Selectors = None,
                 report: Optional[str] = None, check_every_step: bool = False, worker: Optional[int] = None,
                 config: Optional[Config] = None, extend_select: Selectors = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.check_every_step = check_every_step
        # As `trainlint check` selects them: the catalog's default set (no opt-in rule), then the
        # project's [tool.trainlint] (``config``, read by `trainlint run`), then select/ignore.
        self.rules = select_rules(select, ignore, config, extend_select)
        self.report = report
        self.findings: List[Finding] = []  # one per rule and source line, in the order first seen
        self.counts: Dict[Union[Key, WorkerKey], int] = {}  # occurrences of each
        self.printed: Set[Key] = set()
        self._by_key: Dict[Key, Finding] = {}
        self._depth = 0
        # Set when the guard ends: the worker processes that died or could not be checked.
        self.errors: List[FileError] = []
        # This guard runs in worker process ``worker`` of a guarded parent (see .workers), which
        # prints the summary and writes the report.
        self.worker = worker
        self._first_worker = 0  # the workers started before this guard are not its own

    # The hub calls this under its lock.
    def record(self, key: Key, rule: RuleInfo, message: str) -> Finding:
        self.counts[key] = self.counts.get(key, 0) + 1
        finding = self._by_key.get(key)
        if finding is None:
            _, path, line = key
            finding = self._by_key[key] = Finding(
                path=path, line=line, column=1, rule=rule.id, name=rule.name, severity=rule.severity,
                message=message, end_line=line, end_column=1,
            )
            self.findings.append(finding)
        return finding

    # Starting and ending hold SIGINT (see .signals): a Ctrl-C that lands meanwhile comes out of
    # the ``with`` statement once the patches are all in or all out. These two frames hold by
    # themselves, and each of their lines is either before any change or followed by a release.
    # No hold encloses these (a guard starts and ends in the user's code), so each releases all
    # the holds of its thread at its end: one left by an exception no handler saw ends there too.
    @SHIELD.protect
    def __enter__(self) -> "Guard":
        SHIELD.hold()
        depth = self._depth
        try:
            self._start()
            return _released(self)
        except BaseException:  # also a Ctrl-C that came while starting: the guard does not start
            SHIELD.hold()
            self._unstart(depth)

    @SHIELD.protect
    def __exit__(self, exc_type, exc, tb) -> None:
        SHIELD.hold()
        try:
            self._end(finished=exc_type is None)
        finally:
            SHIELD.release(0)

    def _start(self) -> None:
        with HUB.lock:
            self._depth += 1
            if self._depth == 1:
                HUB.attach(self)  # which leaves nothing attached if it fails
                self._first_worker = len(HUB.workers.started)

    def _unstart(self, depth: int) -> None:
        """Undo this start, whatever part of it was done (back to ``depth``); release the holds,
        then re-raise what is being handled (or a Ctrl-C held meanwhile)."""
        try:
            with HUB.lock:
                self._depth = depth
                if not depth and self in HUB.guards:
                    HUB.detach(self, finished=False)
        finally:
            SHIELD.release(0)
        raise  # noqa: PLE0704 (called from an except clause: re-raises its exception)

    def _end(self, finished: bool) -> None:
        with HUB.lock:
            try:
                self._depth -= 1
                if self._depth:
                    return
                self._add_workers()
                HUB.detach(self, finished=finished)
            finally:
                if not self._depth:
                    self._ended()

    def _ended(self) -> None:
        try:
            if self in HUB.guards:  # an exception no handler saw cut the above short
                HUB.detach(self, finished=False)
        finally:
            # An enclosing warn-mode guard prints the summary that covers this one, and a worker's
            # parent the one that covers the worker.
            summarise = self.mode == "warn" and self.worker is None and not any(g.mode == "warn" for g in HUB.guards)
            if self.report:
                write_report(report_path(self.report), self.findings, self.errors)
            if summarise and self.findings:
                sys.stderr.write(self.summary())
            if summarise:
                sys.stderr.write(self.error_summary())

    def _add_workers(self) -> None:
        """The findings of the worker processes started while this guard was on, on its rules."""
        found, errors = HUB.workers.collect(self._first_worker)
        for finding, count in found:
            if finding.rule in self.rules:
                self.findings.append(finding)
                self.counts[self._key(finding)] = count
        self.errors.extend(errors)

    def __call__(self, function):
        @functools.wraps(function)
        def guarded(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        return guarded

    @staticmethod
    def _key(finding: Finding) -> Union[Key, WorkerKey]:
        key = (finding.rule, finding.path, finding.line)
        return key if finding.worker is None else key + (finding.worker,)

    def count(self, finding: Finding) -> int:
        """How many times the finding occurred."""
        return self.counts[self._key(finding)]

    def summary(self) -> str:
        lines = [f"trainlint: {len(self.findings)} training invariant finding{'s' if len(self.findings) != 1 else ''}"]
        for f in self.findings:
            count = self.count(f)
            worker = "" if f.worker is None else f", worker {f.worker}"
            lines.append(f"  {f.location}: {f.rule} {f.name} ({count} time{'s' if count != 1 else ''}{worker})")
        return "\n".join(lines) + "\n"

    def error_summary(self) -> str:
        """The worker processes that died or could not be checked, one line each ("" if none)."""
        return "".join(f"trainlint: {e.path}: {e.message}\n" for e in self.errors)


def guard(mode: str = "warn", select: Selectors = None, ignore: Selectors = None,
          report: Optional[str] = None, check_every_step: bool = False, extend_select: Selectors = None) -> Guard:
    """A guard over the code it wraps; see the module documentation. ``extend_select="ADVICE"``
    adds the advice tier to the default rules, as ``trainlint check --extend-select ADVICE`` does."""
    return Guard(mode=mode, select=select, ignore=ignore, report=report, check_every_step=check_every_step,
                 extend_select=extend_select)


def _released(guard: Guard) -> Guard:
    SHIELD.release(0)
    return guard
