"""``trainlint run [OPTIONS] SCRIPT [ARGS]...``: run a training script under the guard.

The script runs as ``__main__`` with the argv and ``sys.path[0]`` that ``python SCRIPT ARGS`` would
give it, so it behaves the same, also under torchrun::

    python -m torch.distributed.run --nproc_per_node=2 -m trainlint run train.py --epochs 3

The exit status is the script's own; in raise mode the TrainingInvariantError propagates.
"""
from __future__ import annotations

import builtins
import importlib.machinery
import io
import os
import sys
import tempfile
import time
import traceback
import types
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterator, Optional, Sequence

import click

from ..config import ConfigError, find_config, load_config
from .guard import MODES, Guard
from .report import collect_ranks, merged_summary, rank_and_world, report_path

# How long rank 0 waits, after its own run, for the other ranks' reports.
MERGE_TIMEOUT_S = float(os.environ.get("TRAINLINT_MERGE_TIMEOUT", "30"))


@contextmanager
def as_main(script: str, args: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python script args`` sets them; restored afterwards."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args]
    sys.path[0:1] = [os.path.dirname(os.path.abspath(script))]
    try:
        yield
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def run_script(script: str, args: Sequence[str], guard: Guard, keep_main: bool = False) -> int:
    """Run ``script`` as ``__main__`` under ``guard``; its exit status (SystemExit included).

    As ``python script`` does: ``__file__`` and the code's filename absolute, a fresh module in
    ``sys.modules["__main__"]``. With ``keep_main`` that module stays there, so the script's
    globals are alive (and ``import __main__`` finds them) while its atexit handlers run; the
    command line uses it, tests that run several scripts in one process do not."""
    path = os.path.abspath(script)
    with io.open_code(path) as source:
        code = compile(source.read(), path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __spec__=None, __package__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path),
                         __builtins__=builtins)
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        with as_main(script, args), guard:
            try:
                exec(code, main.__dict__)
            except SystemExit as exc:
                return _status(exc.code)
        return 0
    finally:
        for name in ("__file__", "__cached__"):  # CPython removes them once the script has run
            main.__dict__.pop(name, None)
        if not keep_main and saved_main is not None:
            sys.modules["__main__"] = saved_main


def print_script_traceback(script: str, exc: BaseException) -> None:
    """The traceback ``python script`` would print: from the script's first frame on, without the
    frames of trainlint run and click."""
    tb = exc.__traceback__
    target = os.path.abspath(script)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    if tb is None and isinstance(exc, SyntaxError):  # the script did not compile: no frame of it ran
        traceback.print_exception(type(exc), exc, None)
        return
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def _status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what the interpreter does with sys.exit("message")
    return 1


def _job_report_path() -> str:
    """Where ranks leave their findings for rank 0 when no --report is given: one place per job."""
    job = f"{os.environ.get('TORCHELASTIC_RUN_ID', 'job')}-{os.environ.get('MASTER_PORT', '0')}"
    return os.path.join(tempfile.gettempdir(), f"trainlint-{job}", "findings.json")


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--mode", type=click.Choice(MODES), default="warn", show_default=True,
              help="warn: print each finding once; raise: stop at the first; collect: only record.")
@click.option("--report", "report", type=click.Path(dir_okay=False), default=None,
              help="Write the findings as JSON (PATH.rankN per rank when WORLD_SIZE > 1).")
@click.option("--select", multiple=True, metavar="RULES",
              help="Rules to check: ids, names or prefixes, comma-separated (opt-in rules only when selected).")
@click.option("--extend-select", multiple=True, metavar="RULES",
              help="Rules to check on top of the default set; `--extend-select ADVICE` adds the advice tier.")
@click.option("--ignore", multiple=True, metavar="RULES", help="Rules not to check.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Use this pyproject.toml/trainlint.toml (default: found upward from SCRIPT, as `trainlint check` does).")
@click.option("--check-every-step", is_flag=True,
              help="Check every step; by default a steady loop is sampled after its first 100 steps.")
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(mode: str, report: Optional[str], select, extend_select, ignore, config_file: Optional[str], check_every_step: bool,
        script: str, args) -> None:
    """Run SCRIPT [ARGS]... as `python SCRIPT ARGS` would, under the runtime guard, checking the rules
    `trainlint check SCRIPT` would."""
    try:
        config = load_config(Path(config_file)) if config_file else find_config(Path(script))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    rank, world = rank_and_world()
    distributed = world > 1
    path = report or (_job_report_path() if distributed else None)
    if path:
        with suppress(FileNotFoundError):
            os.remove(report_path(path))  # a stale report from an earlier run must not be merged
    started = time.time()
    try:
        guard = Guard(mode=mode, select=select or None, ignore=ignore or None, report=path,
                      check_every_step=check_every_step, config=config, extend_select=extend_select or None)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--select/--extend-select/--ignore") from None
    try:
        status = run_script(script, args, guard, keep_main=True)
    except Exception as exc:  # the script failed (raise mode included): report it as Python would
        print_script_traceback(script, exc)
        status = 1
    if mode != "warn":  # a warn-mode guard has said it already
        sys.stderr.write(guard.error_summary())
    if distributed and rank == 0:
        by_rank, missing = collect_ranks(path, world, since=started - 30, timeout=MERGE_TIMEOUT_S)
        sys.stderr.write(merged_summary(by_rank, missing))
        if report is None:
            for other in by_rank:
                with suppress(OSError):
                    os.remove(report_path(path, other))
    sys.exit(status)
