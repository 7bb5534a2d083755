"""Human-readable output: ``path:line:col: TL101 [clip-after-step] message``, like ruff."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, TextIO

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report

_SEVERITY_COLOR = {"error": "31", "warning": "33", "info": "36"}


def color_enabled(stream: TextIO) -> bool:
    """Colour for a terminal only, and never when NO_COLOR is set and non-empty (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def render(report: Report, color: bool = False) -> str:
    lines: List[str] = []
    for f in report.findings:
        where = _paint(f"{f.location}:", "1", color)
        code = _paint(f.rule, _SEVERITY_COLOR.get(f.severity, "0"), color)
        lines.append(f"{where} {code} [{f.name}] {f.message}")
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
