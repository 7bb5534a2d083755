"""Fingerprints of findings that survive moving lines: what baselines match and SARIF's
``partialFingerprints`` carry, so a finding keeps its identity across commits.

A finding's fingerprint hashes its rule, the code it points at and the statements its message
names, never a line number:

- the code of its span, as tokens (comments, line breaks and indentation left out, tokens joined
  by one space), so reindenting, rewrapping or adding a comment keeps it;
- its message with every position masked (``line 17``, ``lines 3, 5 and 7``, ``cell 2``): the
  message names the other statements by their code (``runs after optimizer.step() (line 17)``);
- the code of each statement of the same file the message points at by line (the logical line
  that holds it, as tokens), so two findings whose messages differ only in which optimizer they
  name differ too. Statements of other files (``engine.py line 14``) count by their name only.

Findings of one file with the same hash are told apart by an occurrence index in the order of
their positions: ``<hash>:0``, ``<hash>:1``. A copy of a flagged block pasted below the original
is one new finding, the last one.
"""
from __future__ import annotations

import bisect
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .findings import Finding

KEY = "trainlint/v1"  # the key in SARIF's partialFingerprints; a new scheme gets a new key

_SKIPPED = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                      tokenize.ENDMARKER, tokenize.ENCODING})
# "line 17", "lines 3, 5 and 7", "cell 2, line 4", "engine.py line 14"
_POSITION = re.compile(r"\b(?:(?P<file>[\w.-]+\.pyi?) )?(?:cell (?P<cell>\d+), )?lines? (?P<numbers>\d+(?:(?:, | and )\d+)*)")
_CELL = re.compile(r"\bcell \d+")
_NUMBER = re.compile(r"\d+")


@dataclass
class Module:
    """A file as the engine analysed it: its code's tokens, by position, and its logical lines."""

    tokens: List[tokenize.TokenInfo]
    starts: List[Tuple[int, int]]  # each token's start, for bisect
    logical: Dict[int, Tuple[int, int]]  # a line -> (first, last) token index of the logical line holding it
    cells: Optional[Dict[Tuple[int, int], int]] = None  # notebooks: (cell, line in cell) -> module line

    def line(self, finding_cell: Optional[int], line: int) -> Optional[int]:
        if self.cells is None:
            return line
        return self.cells.get((finding_cell or 0, line))

    def code(self, start: Tuple[int, int], end: Tuple[int, int]) -> str:
        """The tokens from ``start`` to ``end`` (0-based columns, end excluded), joined by a space."""
        first = bisect.bisect_left(self.starts, start)
        parts = []
        for token in self.tokens[first:]:
            if token.start >= end:
                break
            if token.end <= end and token.type not in _SKIPPED:
                parts.append(token.string)
        return " ".join(parts)

    def statement(self, line: int) -> str:
        """The logical line holding ``line``, as tokens."""
        span = self.logical.get(line)
        if span is None:
            return ""
        return " ".join(t.string for t in self.tokens[span[0]:span[1] + 1] if t.type not in _SKIPPED)


def module(text: str, notebook: bool = False) -> Module:
    cells = None
    if notebook:
        from .notebooks import load_notebook

        loaded = load_notebook(text)
        text = loaded.source
        cells = {}
        for index, origin in enumerate(loaded.origin, start=1):
            cells.setdefault(origin, index)
    tokens: List[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            tokens.append(token)
    except (tokenize.TokenError, SyntaxError):
        pass  # what was read counts: the analyzer accepted the file, so this is rare
    logical: Dict[int, Tuple[int, int]] = {}
    first = 0
    for index, token in enumerate(tokens):
        if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or index == len(tokens) - 1:
            for line in range(tokens[first].start[0], token.end[0] + 1):
                logical.setdefault(line, (first, index))
            first = index + 1
        elif token.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT) and first == index:
            first = index + 1  # blank and comment lines belong to no statement
    return Module(tokens, [t.start for t in tokens], logical, cells)


def digest(finding: Finding, source: Optional[Module]) -> str:
    """The hash of one finding (no occurrence index): rule, code, masked message, named statements."""
    parts = [finding.rule, _POSITION.sub(_mask, finding.message)]
    if source is not None:
        line, end_line = source.line(finding.cell, finding.line), source.line(finding.cell, finding.end_line)
        if line is not None:
            end = (end_line if end_line is not None else line, finding.end_column - 1)
            parts.append(source.code((line, finding.column - 1), end))
        for match in _POSITION.finditer(finding.message):
            if match.group("file"):
                continue  # another module's statement: named by the message, its code not read here
            cell = int(match.group("cell")) if match.group("cell") else finding.cell
            for number in _NUMBER.findall(match.group("numbers")):
                named = source.line(cell, int(number))
                parts.append(source.statement(named) if named is not None else "")
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _mask(match: "re.Match[str]") -> str:
    text = _NUMBER.sub("#", match.group(0))
    return _CELL.sub("cell #", text)


def read_module(path: str) -> Optional[Module]:
    """The module at a finding's path (as shown: relative to the working directory or absolute),
    or None when it cannot be read as the engine read it."""
    from .files import SourceError, decode_source, read_bytes

    try:
        return module(decode_source(read_bytes(Path(path))), notebook=path.endswith(".ipynb"))
    except (OSError, SourceError, ValueError, RecursionError):
        return None


def fingerprints(findings: Sequence[Finding], read: Callable[[str], Optional[Module]] = read_module) -> List[str]:
    """``<hash>:<occurrence>`` for each finding, in the order given."""
    modules: Dict[str, Optional[Module]] = {}
    hashes = []
    for finding in findings:
        if finding.path not in modules:
            modules[finding.path] = read(finding.path)
        hashes.append(digest(finding, modules[finding.path]))
    order = sorted(range(len(findings)), key=lambda i: (findings[i].path, findings[i].cell or 0, findings[i].line,
                                                        findings[i].column, findings[i].rule, hashes[i]))
    seen: Dict[Tuple[str, str], int] = {}
    result = [""] * len(findings)
    for i in order:
        key = (findings[i].path, hashes[i])
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        result[i] = f"{hashes[i]}:{occurrence}"
    return result
