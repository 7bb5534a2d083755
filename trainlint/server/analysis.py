"""One document's check for the language server: the editor's unsaved text, under the configuration
``trainlint check`` would use for that file (cli._plan: ``--config`` or the pyproject.toml found
upward, select/ignore, per-file ignores, exclude), through the engine's ``check_file`` with the
CLI's cache. No pygls here."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import click

from ..engine import Settings, _encoding_of, check_file, display_path, rules_for
from ..files import is_excluded
from ..findings import Finding


@dataclass(frozen=True)
class Options:
    """The options of ``trainlint check`` that the server takes: from its command line, then from
    the editor's settings (``initializationOptions`` or ``workspace/didChangeConfiguration``)."""

    config: Optional[str] = None
    select: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    cache: bool = True

    def updated(self, settings: Any) -> "Options":
        """These options with the editor's settings over them: ``{"trainlint": {...}}`` or the
        inner table, keys ``config``, ``select``, ``extendSelect``, ``ignore`` (a string or a list
        of strings), ``cache`` (a boolean). Anything else is left as it was."""
        if isinstance(settings, Mapping) and isinstance(settings.get("trainlint"), Mapping):
            settings = settings["trainlint"]
        if not isinstance(settings, Mapping):
            return self
        changes: Dict[str, Any] = {}
        for key, name in (("select", "select"), ("extendSelect", "extend_select"), ("extend-select", "extend_select"),
                          ("extend_select", "extend_select"), ("ignore", "ignore")):
            value = settings.get(key)
            if isinstance(value, str):
                value = [value]
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                changes[name] = tuple(value)
        if "config" in settings and (settings["config"] is None or isinstance(settings["config"], str)):
            changes["config"] = settings["config"] or None
        if isinstance(settings.get("cache"), bool):
            changes["cache"] = settings["cache"]
        return replace(self, **changes)


@dataclass(frozen=True)
class Failure:
    """Why a document has no findings to show: ``kind`` is ``crash`` (the analysis raised),
    ``config`` (the configuration is invalid) or ``source`` (not analysable Python, such as a
    syntax error while typing); ``line`` and ``column`` (1-based) where the message names them."""

    kind: str
    message: str
    line: int = 1
    column: int = 1


_AT = re.compile(r"at line (\d+)(?:, column (\d+))?")


def failure_of(message: str) -> Failure:
    """A ``FileError`` of the engine's as a Failure: its internal errors are crashes."""
    message = (message.strip().splitlines() or [""])[0]
    if message.startswith("internal error: "):
        return Failure("crash", "analysis failed: " + message[len("internal error: "):])
    at = _AT.search(message)
    line, column = (int(at.group(1)), int(at.group(2) or 1)) if at else (1, 1)
    return Failure("source", "cannot analyze: " + message, line, column)


@dataclass
class Outcome:
    """What checking one document gave: findings by the absolute path of the file they are in (the
    document's own, and other project files' where the witness is there), why the document could
    not be analysed (``failure``), what the work budget left out (``notes``), and the settings it
    was checked under (the quick fixes use the same rules)."""

    findings: Dict[Path, List[Finding]] = field(default_factory=dict)
    failure: Optional[Failure] = None
    notes: List[str] = field(default_factory=list)
    settings: Optional[Settings] = None

    @classmethod
    def crashed(cls, exc: BaseException) -> "Outcome":
        return cls(failure=Failure("crash", f"analysis failed: {summary(exc)}"))


def summary(exc: BaseException) -> str:
    """``RuntimeError: boom``: the exception's type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def settings_for(path: Path, options: Options) -> Settings:
    """The settings ``trainlint check PATH`` uses for this file; ``ConfigProblem`` when the
    configuration (or an option) is invalid."""
    from ..cli import _plan  # the CLI's own resolution, so both agree by construction

    try:
        [(_, settings)] = _plan([str(path)], options.config, options.select, options.ignore, options.extend_select,
                                cache=options.cache, jobs=1)
    except click.ClickException as exc:
        raise ConfigProblem(exc.format_message()) from None
    return settings


class ConfigProblem(ValueError):
    """The configuration cannot be used; the message names the file and the problem."""


def fix_rules(path: Path, settings: Settings):
    """The rules ``trainlint --fix`` fixes in this file (its per-file ignores applied)."""
    return rules_for(path, settings)


def absolute(path: Path) -> Path:
    """The key a file is known by: absolute, symbolic links resolved (the engine resolves the paths
    of the project modules it reads)."""
    return Path(os.path.realpath(path))


def encode(text: str) -> bytes:
    """The bytes the file would have on disk: UTF-8, or the codec its coding declaration names."""
    data = text.encode("utf-8", "surrogatepass")
    encoding = _encoding_of(data)
    if encoding.replace("_", "-").lower() in ("utf-8", "utf-8-sig", "utf8"):
        return data
    try:
        return text.encode(encoding)
    except (UnicodeError, LookupError):
        return data


def analyse(path: Path, text: str, options: Options) -> Outcome:
    """Check the document at ``path`` whose text in the editor is ``text``. A configuration
    problem or a file that cannot be analysed is the outcome's ``failure``; an exception from the
    engine propagates (the server turns it into that document's failure)."""
    try:
        settings = settings_for(path, options)
    except ConfigProblem as exc:
        return Outcome(failure=Failure("config", f"configuration error: {exc}"))
    if is_excluded(path, settings.config.root, settings.config.exclude):
        return Outcome(settings=settings)  # as `trainlint check` leaves an excluded file alone
    findings, errors, notes = check_file(path, settings, encode(text))
    outcome = Outcome(notes=[n.message for n in notes], settings=settings)
    if errors:
        outcome.failure = failure_of(errors[0].message)
    shown = display_path(path)
    home = absolute(path)
    cwd = Path.cwd()
    for finding in findings:
        # Paths as the CLI shows them: relative to the working directory where they lie below it.
        where = home if finding.path == shown else absolute(cwd / finding.path)
        outcome.findings.setdefault(where, []).append(finding)
    return outcome
