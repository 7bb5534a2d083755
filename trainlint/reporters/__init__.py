"""Output formats. Each reporter turns a :class:`~trainlint.engine.Report` into text."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Dict, Optional

import click

from . import full as full_reporter
from . import github as github_reporter
from . import json as json_reporter
from . import sarif as sarif_reporter
from . import text as text_reporter

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report

Render = Callable[["Report", bool], str]

# In the order `--help` lists them: the two formats people read, then the ones tools read.
FORMATS: Dict[str, Render] = {
    "full": full_reporter.render,
    "concise": text_reporter.render,
    "text": text_reporter.render,  # the name `--format` has always had for `concise`
    "json": json_reporter.render,
    "sarif": sarif_reporter.render,
    "github": github_reporter.render,
}
HUMAN = frozenset({"full", "concise"})  # with errors, warnings and the summary on stderr
_ALIASES = {"text": "concise"}


def choose_format(output_format: Optional[str], format_option: Optional[str], terminal: bool) -> str:
    """The format, by its canonical name: ``--output-format``, or ``--format`` (the older name of
    the same option; both may be given if they agree); without either, ``full`` on a terminal and
    ``concise`` otherwise (a pipe, a file, a CI log: what scripts have always read)."""
    chosen = {_ALIASES.get(name, name) for name in (output_format, format_option) if name is not None}
    if len(chosen) > 1:
        raise click.UsageError(f"--output-format {output_format} and --format {format_option} disagree (they are one option)")
    if chosen:
        return chosen.pop()
    return "full" if terminal else "concise"


def render(name: str, report: Report, color: bool = False, trace: bool = False) -> str:
    """The report in format ``name``; the findings' witnesses only with ``trace`` (``--trace``).
    The full format places the statements a message names from them, so it always gets them."""
    if name == "full":
        return full_reporter.render(report, color, trace)
    if not trace:
        report = replace(report, findings=[replace(f, trace=()) for f in report.findings])
    return FORMATS[name](report, color)
