"""The JSON format: a public, versioned contract (see README, "JSON output")."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report

VERSION = 1


def document(report: Report) -> dict:
    data = {
        "version": VERSION,
        "findings": [finding.to_json() for finding in report.findings],
        "errors": [error.to_json() for error in report.errors],
    }
    if report.incomplete:  # optional: only when a budget left part of a file unexplored
        data["incomplete"] = [note.to_json() for note in report.incomplete]
    return data


def render(report: Report, color: bool = False) -> str:
    return json.dumps(document(report), indent=2) + "\n"
