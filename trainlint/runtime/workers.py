"""Worker processes under the guard: the training a guarded program runs in processes it starts.

``torch.multiprocessing.spawn`` (and ``start_processes``) and ``multiprocessing`` with the spawn or
forkserver method start each worker as a fresh interpreter, which unpickles the process object the
parent hands it. When a guarded process starts one (:mod:`.hooks_processes`), the object it
pickles carries a :class:`GuardedRun` in place of its ``run`` method, an instance attribute taken
off again once ``start()`` has pickled it. In the child, ``BaseProcess._bootstrap`` calls it: it
starts a guard with the parent's rules and mode, runs the process's own ``run`` (the target, or a
subclass's method) and, however that ends, writes the findings to the worker's own file in a
directory of the parent's guard session. The parent reads the files when its guard ends and tags
each finding with the worker's index. A worker that died, exited with an error status, was still
running or was not followed is an error of the report, never silence.

Nothing is installed for this: no ``.pth`` file in site-packages (coverage.py's way, which needs
an install step a fresh clone lacks and starts in every interpreter of the environment) and no
environment variable the program's other subprocesses would inherit. The child imports this
module because unpickling the process object names it, on the ``sys.path`` that the spawn
preparation data copies from the parent, so it works wherever the parent could import trainlint.

A forked worker is a copy of the parent in the middle of its guard session, its hooks and guards
included (and any lock another thread held at the fork), so it is not followed: it is reported as
not checked. So is a worker that could not import trainlint, rather than one that fails to start.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from ..findings import FileError, Finding
from .report import write_atomically
from .sites import Site, display_path

FOLLOWED_METHODS = ("spawn", "forkserver")
FORKED = ("it was started with the {method} method: a forked worker is a copy of this process in the middle of "
          "its guard session, which the guard does not follow; start workers with the spawn or forkserver method "
          "(torch.multiprocessing.spawn does)")
NOT_IMPORTABLE = ("trainlint cannot be imported on the sys.path it starts with (this process imported it from "
                  "elsewhere); install trainlint, or put it on PYTHONPATH")


def importable_in_workers() -> bool:
    """Whether a spawned worker, which starts with this process's ``sys.path`` and the import
    hooks of its site-packages (an editable install's), finds trainlint. ``trainlint run`` puts the
    script's directory first in ``sys.path``, where a checkout run from its own root was found."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is not None and find_spec("trainlint", None) is not None:
            return True
    return False


class GuardedRun:
    """What a followed worker runs instead of its ``run`` method (see the module documentation).
    ``inner``: a ``run`` the program itself set on the process object, run in its place."""

    def __init__(self, index: int, report: str, rules: Sequence[str], mode: str, check_every_step: bool,
                 inner: Optional[Callable[[], Any]] = None) -> None:
        self.index = index
        self.report = report
        self.rules = tuple(rules)
        self.mode = mode
        self.check_every_step = check_every_step
        self.inner = inner

    def __call__(self) -> None:
        from multiprocessing import current_process

        from .guard import Guard  # the guard module imports the hub, which owns a Workers

        guard = Guard(mode=self.mode, select=list(self.rules), check_every_step=self.check_every_step,
                      worker=self.index)
        try:
            with guard:
                if self.inner is not None:
                    self.inner()
                else:
                    # _bootstrap made the process object the current process before calling run.
                    process = current_process()
                    type(process).run(process)
        finally:
            findings = [dict(f.to_json(), count=guard.count(f)) for f in guard.findings]
            errors = [e.to_json() for e in guard.errors]
            write_atomically(self.report, json.dumps({"findings": findings, "errors": errors}))


class Worker(NamedTuple):
    index: int
    site: Site  # the user's line that started it
    process: Any  # the multiprocessing process object
    run: Optional[GuardedRun]  # None: not followed,
    unchecked: str = ""  # and why


class Workers:
    """The worker processes started during one guard session, and the directory of their reports
    (one file per worker, so workers never write to the same file)."""

    def __init__(self) -> None:
        self.started: List[Worker] = []
        self._lock = threading.Lock()  # TORCH_MP_PARALLEL_START starts workers from several threads
        self._directory: Optional[str] = None
        self._reports = 0
        self._unranked = 0  # workers with no rank of their own, numbered in the order they start

    def index(self, process: Any) -> int:
        """The rank torch.multiprocessing gives the worker (its ``fn(i, ...)``), else its place among
        the workers this session started."""
        target = getattr(process, "_target", None)
        if getattr(target, "__module__", None) == "torch.multiprocessing.spawn" and getattr(target, "__name__", "") == "_wrap":
            return process._args[1]
        with self._lock:
            self._unranked += 1
            return self._unranked - 1

    def guarded_run(self, process: Any, rules: Sequence[str], mode: str, check_every_step: bool) -> GuardedRun:
        with self._lock:
            if self._directory is None:
                self._directory = tempfile.mkdtemp(prefix=f"trainlint-workers-{os.getpid()}-")
            self._reports += 1
            report = os.path.join(self._directory, f"worker-{self._reports}.json")
        return GuardedRun(self.index(process), report, rules, mode, check_every_step, vars(process).get("run"))

    def add(self, worker: Worker) -> None:
        with self._lock:
            self.started.append(worker)

    def collect(self, first: int = 0) -> Tuple[List[Tuple[Finding, int]], List[FileError]]:
        """The findings (with their counts) and the errors of the workers started from ``first`` on."""
        findings: List[Tuple[Finding, int]] = []
        errors: List[FileError] = []
        for worker in self.started[first:]:
            path = display_path(worker.site[0])
            which = f"worker {worker.index} started at line {worker.site[1]}"
            if worker.run is None:
                errors.append(FileError(path, f"{which} was not checked: {worker.unchecked}", worker.index))
                continue
            report = _read(worker.run.report)
            if report is not None:
                findings.extend((_finding(f, worker.index), f["count"]) for f in report["findings"])
                errors.extend(FileError(e["path"], e["message"], worker.index) for e in report["errors"])
            ending = _ending(worker.process, reported=report is not None)
            if ending:
                outcome = "its findings until then are included" if report is not None else "its training was not checked"
                errors.append(FileError(path, f"{which} {ending}: {outcome}", worker.index))
        return findings, errors

    def close(self) -> None:
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def _read(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError):  # never written (the worker died first), or cut short
        return None


def _finding(data: dict, worker: int) -> Finding:
    fields = ("path", "line", "column", "rule", "name", "severity", "message", "end_line", "end_column")
    return Finding(**{key: data[key] for key in fields}, worker=worker)


def _ending(process: Any, reported: bool) -> str:
    """How a followed worker ended, if that is worth an error ("" if it ended well)."""
    try:
        code = process.exitcode  # None while it runs
    except ValueError:  # closed by the program, which it can only be once it has ended
        code = 0
    if code is None:
        # Its report is written once its run is over: a worker that wrote it is only exiting.
        return "" if reported else "was still running when the guard ended"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"was killed by signal {name}"
    if code > 0:
        return f"exited with status {code}"
    return "" if reported else "ended without a report"
