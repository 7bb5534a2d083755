"""Findings as the Language Server Protocol shows them: diagnostics, hovers, text edits and code
actions, as JSON-shaped dicts (the protocol module turns them into lsprotocol's types). Pure
functions: no pygls, no engine, no I/O.

Positions: the engine's lines and columns are 1-based and count characters (code points), its end
column just past the last character; LSP's are 0-based and count the code units of the encoding
the client and server agreed on (UTF-16 unless the client offers another), lines broken at
``\\n``, ``\\r\\n`` or ``\\r``.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence

from ..catalog import Rule, get_rule
from ..findings import Finding
from ..reporters.sarif import DOCS
from .analysis import Failure

SOURCE = "trainlint"
# LSP DiagnosticSeverity by the level a finding is shown at (its tier's, or the configuration's
# [tool.trainlint.severity]): error -> Error, warning -> Warning, and advice (shown as "info") ->
# Information, not Hint: advice appears only when the user selected it (`--extend-select ADVICE`),
# and editors hide Hints from their problem lists (VS Code draws them as faint dots), which would
# hide what was asked for.
ERROR, WARNING, INFORMATION, HINT = 1, 2, 3, 4
SEVERITY = {"error": ERROR, "warning": WARNING, "info": INFORMATION}
FAILURE_SEVERITY = {"crash": ERROR, "config": ERROR, "source": WARNING}
_BREAK = re.compile(r"\r\n|\r|\n")


def text_lines(text: str) -> List[str]:
    """The lines as LSP counts them, without their ends (a text ending in a line end has an empty last line)."""
    return _BREAK.split(text)


def units(text: str, encoding: str = "utf-16") -> int:
    """The length of ``text`` in the code units of ``encoding`` (``utf-8``, ``utf-16`` or ``utf-32``)."""
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def position(lines: Sequence[str], line: int, column: int, encoding: str = "utf-16") -> Dict[str, int]:
    """The LSP position of the 0-based ``line`` and 0-based character ``column`` (clamped to the text)."""
    if not lines:
        return {"line": 0, "character": 0}
    if line >= len(lines):
        return {"line": len(lines) - 1, "character": units(lines[-1], encoding)}
    line = max(line, 0)
    return {"line": line, "character": units(lines[line][:max(column, 0)], encoding)}


def span(lines: Sequence[str], line: int, column: int, end_line: int, end_column: int,
         encoding: str = "utf-16") -> Dict[str, Dict[str, int]]:
    """The LSP range of a 1-based span whose end column is just past its last character."""
    start = position(lines, line - 1, column - 1, encoding)
    end = position(lines, end_line - 1, end_column - 1, encoding)
    if (end["line"], end["character"]) < (start["line"], start["character"]):
        end = start
    return {"start": start, "end": end}


def offset_position(text: str, offset: int, encoding: str = "utf-16") -> Dict[str, int]:
    """The LSP position of a character offset into ``text``."""
    before = text[:offset]
    breaks = list(_BREAK.finditer(before))
    start = breaks[-1].end() if breaks else 0
    return {"line": len(breaks), "character": units(before[start:], encoding)}


def doc_url(rule: Rule) -> str:
    """The rule's documentation: its catalog entry in the repository, as the SARIF helpUri gives it."""
    return DOCS.format(path=rule.doc_path)


def diagnostic(finding: Finding, lines: Sequence[str], encoding: str = "utf-16") -> dict:
    rule = get_rule(finding.rule)
    result = {
        "range": span(lines, finding.line, finding.column, finding.end_line, finding.end_column, encoding),
        "severity": SEVERITY.get(finding.severity, WARNING),
        "code": finding.rule,
        "source": SOURCE,
        "message": f"[{finding.name}] {finding.message}",
        # Where the engine put it, so that a code action can find the finding again.
        "data": {"rule": finding.rule, "line": finding.line, "column": finding.column},
    }
    if rule is not None:
        result["codeDescription"] = {"href": doc_url(rule)}
    return result


def failure_diagnostic(failure: Failure, lines: Sequence[str], encoding: str = "utf-16") -> dict:
    """The one diagnostic of a document that could not be analysed: at the line its message names
    (a syntax error's), else on the first line, to the end of that line."""
    start = position(lines, failure.line - 1, failure.column - 1, encoding)
    end = position(lines, failure.line - 1, len(lines[failure.line - 1]) if 0 < failure.line <= len(lines) else 0, encoding)
    if end["character"] < start["character"]:
        end = start
    return {"range": {"start": start, "end": end}, "severity": FAILURE_SEVERITY.get(failure.kind, ERROR),
            "source": SOURCE, "message": failure.message}


def note_diagnostic(note: str) -> dict:
    """A part of the file the analysis's work budget left out: a finding may be missing there."""
    return {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "severity": INFORMATION, "source": SOURCE, "message": f"analysis incomplete: {note}"}


def diagnostics(items: Iterable[object], text: str, encoding: str = "utf-16") -> List[dict]:
    """The diagnostics of one file: its findings, failure and notes, in that order."""
    lines = text_lines(text)
    result = []
    for item in items:
        if isinstance(item, Finding):
            result.append(diagnostic(item, lines, encoding))
        elif isinstance(item, Failure):
            result.append(failure_diagnostic(item, lines, encoding))
        elif isinstance(item, str):
            result.append(note_diagnostic(item))
    return result


def contains(rng: dict, pos: dict) -> bool:
    at = (pos["line"], pos["character"])
    return (rng["start"]["line"], rng["start"]["character"]) <= at <= (rng["end"]["line"], rng["end"]["character"])


def overlaps(a: dict, b: dict) -> bool:
    """Do two ranges share a position (touching counts: a cursor at a diagnostic's end is on it)?"""
    return contains(a, b["start"]) or contains(a, b["end"]) or contains(b, a["start"])


def hover_markdown(findings: Sequence[Finding]) -> str:
    """What hovering a finding shows: its message and witness (the ``--trace`` lines), then the
    rule's documentation (``trainlint explain``)."""
    from ..cli import render_explanation

    parts = []
    for finding in findings:
        rule = get_rule(finding.rule)
        head = f"**{finding.rule}** `{finding.name}` ({finding.tier}): {finding.message}"
        if rule is not None:
            head += f" [docs]({doc_url(rule)})"
        parts.append(head)
        if finding.trace:
            parts.append("Witness (`trainlint --trace`):\n\n```text\n" + "\n".join(finding.trace) + "\n```")
        if rule is not None:
            parts.append(render_explanation(rule).rstrip())
    return "\n\n---\n\n".join(parts) if len(findings) > 1 else "\n\n".join(parts)


def text_edit(old: str, new: str, encoding: str = "utf-16") -> Optional[dict]:
    """One LSP TextEdit that turns ``old`` into ``new``: the lines between their common first and
    last lines replaced (None: no change)."""
    if old == new:
        return None
    old_lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", old)
    new_lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", new)
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (tail < min(len(old_lines), len(new_lines)) - head
           and old_lines[len(old_lines) - 1 - tail] == new_lines[len(new_lines) - 1 - tail]):
        tail += 1
    start = sum(len(line) for line in old_lines[:head])
    end = len(old) - sum(len(line) for line in old_lines[len(old_lines) - tail:])
    replacement = "".join(new_lines[head:len(new_lines) - tail])
    return replace_edit(old, start, end, replacement, encoding)


def replace_edit(text: str, start: int, end: int, replacement: str, encoding: str = "utf-16") -> dict:
    """The TextEdit replacing the characters ``text[start:end]`` with ``replacement``."""
    return {"range": {"start": offset_position(text, start, encoding), "end": offset_position(text, end, encoding)},
            "newText": replacement}


def action(title: str, kind: str, uri: str, edit: dict, diagnostics: Sequence[dict] = (), preferred: bool = False) -> dict:
    result = {"title": title, "kind": kind, "edit": {"changes": {uri: [edit]}}}
    if diagnostics:
        result["diagnostics"] = list(diagnostics)
    if preferred:
        result["isPreferred"] = True
    return result
