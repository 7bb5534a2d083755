"""Human-readable output: ``path:line:col: TL101 [clip-after-step] message``, like ruff (the
``concise`` format, also named ``text``), and what goes to stderr with it."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, TextIO

import click

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report
    from ..findings import Finding

SEVERITY_COLOR = {"error": "red", "warning": "yellow", "info": "cyan"}


def color_enabled(stream: TextIO) -> bool:
    """Colour for a terminal only. ``NO_COLOR`` set and non-empty turns it off (no-color.org);
    otherwise ``FORCE_COLOR`` set and non-empty turns it on even when the stream is not a terminal
    (force-color.org; CI logs that render ANSI). The same precedence as CPython's own colour."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def header(f: Finding, color: bool) -> str:
    """A finding's first line, the same in the concise and the full format."""
    where = click.style(f"{f.location}:", bold=True) if color else f"{f.location}:"
    code = click.style(f.rule, fg=SEVERITY_COLOR.get(f.severity), bold=True) if color else f.rule
    return f"{where} {code} [{f.name}] {f.message}"


def render(report: Report, color: bool = False) -> str:
    lines: List[str] = []
    for f in report.findings:
        lines.append(header(f, color))
        lines.extend(f"    {step}" for step in f.trace)  # only with --trace (see cli.check)
    return "\n".join(lines) + ("\n" if lines else "")


def render_errors(report: Report) -> str:
    """Files that could not be analyzed, then parts of files the analysis had to leave out."""
    return "".join(f"{e.path}: error: {e.message}\n" for e in report.errors) + "".join(
        f"{n.path}: note: analysis incomplete: {n.message}\n" for n in report.incomplete)


def summary(report: Report) -> str:
    if not report.findings and not report.errors:
        return "All checks passed."
    files_with = len({f.path for f in report.findings})
    text = f"Found {len(report.findings)} finding{'s' if len(report.findings) != 1 else ''} in {files_with} file{'s' if files_with != 1 else ''}"
    if report.errors:
        text += f" ({len(report.errors)} file{'s' if len(report.errors) != 1 else ''} could not be analyzed)"
    return text + "."
