"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: Report, color: bool = False) -> str:
    lines = []
    for f in report.findings:
        where = f"file={_escape_property(f.path)},line={f.line},col={f.column},endLine={f.end_line},endColumn={f.end_column}"
        title = _escape_property(f.rule if f.cell is None else f"{f.rule} (cell {f.cell})")
        lines.append(f"::{_COMMAND[f.severity]} {where},title={title}::{_escape_data(f'[{f.name}] {f.message}')}")
    for e in report.errors:
        lines.append(f"::error file={_escape_property(e.path)},title=trainlint::{_escape_data(e.message)}")
    for n in report.incomplete:
        lines.append(f"::notice file={_escape_property(n.path)},title=trainlint: analysis incomplete::{_escape_data(n.message)}")
    return "\n".join(lines) + ("\n" if lines else "")
