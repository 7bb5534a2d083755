"""The ``full`` format: each finding's line (as in the concise format), then its source, like
ruff's and rustc's code frames: a few lines around the statement, with line numbers, the
statement's columns underlined (``^^^``), and the other statements the message names underlined
too (``---``, with their role: the ``step`` a scheduler step runs before, the ``previous`` step of
a step run twice), in their own file's frame (``::: engine.py:14:9``) when they are in another
module of the project.

Where the other statements are comes from the finding's witness (``Finding.trace``, the lines
``--trace`` prints: ``step: loss_scaler.step(optimizer) (engine.py line 14)``); a finding with no
witness (a pattern rule's) has its message's ``(line 12)`` references shown instead. A file named
there is looked for beside the finding's file, then in the directories above it (the message
names it relative to the file that was checked), and shown only if the line holds the statement
the witness names: a frame of the wrong file would be worse than none. The witness lines
themselves are printed under the frames (``= through main() ...``) only with ``--trace``.
"""
from __future__ import annotations

import io
import json
import os
import re
import tokenize
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import click

from .text import SEVERITY_COLOR, header

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report
    from ..findings import Finding

CONTEXT = 2  # lines shown before and after each underlined statement
SPAN_LINES = 4  # a statement longer than this shows its first lines and its last one
TAB = 4  # display width of a tab stop
_SECONDARY_COLOR = "blue"

# A witness line naming a statement: ``step: loss_scaler.step(optimizer) (engine.py line 14)``.
_ROLE_LINE = re.compile(r"^(?P<role>[^:()]+): (?P<label>.*) \((?P<where>[^()]*)\)$")
# Where it is, as messages say it (trainlint/static/analyzer.py: ``lines_seen_from``).
_WHERE = re.compile(r"^(?:cell (?P<cell>\d+), line (?P<cell_line>\d+)|(?:(?P<file>.+) )?line (?P<line>\d+))$")
# A line a pattern rule's message names: ``(line 12)``, ``at line 13``, ``(engine.py line 14)``.
_MESSAGE_LINE = re.compile(r"(?:(?P<file>[\w.\-/]+\.pyi?) )?\b(?:cell (?P<cell>\d+), )?line (?P<line>\d+)\b")
_NOT_STATEMENTS = ("through ", "on this path ")


@dataclass(frozen=True)
class Mark:
    """A statement to underline: 1-based lines, 0-based character offsets (``end`` just past
    the last character, on ``end_line``)."""

    line: int
    start: int
    end_line: int
    end: int
    label: str
    primary: bool


@dataclass(frozen=True)
class Source:
    """A file (or a notebook's cell) as the frames show it."""

    shown: str  # path as the findings show it
    cell: Optional[int]
    lines: Tuple[str, ...]

    def where(self, line: int, column: int) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.shown}:{cell}{line}:{column}"


class _Sources:
    """Files read once per report; None for one that cannot be read."""

    def __init__(self) -> None:
        self._texts: Dict[str, Optional[str]] = {}
        self._sources: Dict[Tuple[str, Optional[int]], Optional[Source]] = {}

    def text(self, shown: str) -> Optional[str]:
        if shown not in self._texts:
            self._texts[shown] = _read(Path(shown))
        return self._texts[shown]

    def get(self, shown: str, cell: Optional[int]) -> Optional[Source]:
        if (shown, cell) not in self._sources:
            self._sources[shown, cell] = self._source(shown, cell)
        return self._sources[shown, cell]

    def _source(self, shown: str, cell: Optional[int]) -> Optional[Source]:
        text = self.text(shown)
        if text is None:
            return None
        if cell is None:
            return Source(shown, None, tuple(_split_lines(text)))
        cell_text = _cell_text(text, cell)
        return None if cell_text is None else Source(shown, cell, tuple(cell_text.splitlines()))


def _read(path: Path) -> Optional[str]:
    from ..files import SourceError, decode_source, read_bytes

    try:
        return decode_source(read_bytes(path))
    except (SourceError, OSError):
        return None


def _split_lines(text: str) -> List[str]:
    """Lines as the parser counts them: ends at ``\\n``, ``\\r\\n`` or ``\\r`` only (never at a form
    feed or U+2028, where ``str.splitlines`` would break and shift every line after it)."""
    return re.split(r"\r\n|\r|\n", text[:-1] if text.endswith(("\n", "\r")) else text) if text else []


def _cell_text(text: str, cell: int) -> Optional[str]:
    """A notebook's cell (1-based, counting every cell, as findings do), as trainlint.notebooks
    reads it."""
    try:
        cells = json.loads(text).get("cells")
        source = cells[cell - 1].get("source", "")
    except (ValueError, AttributeError, IndexError, TypeError):
        return None
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        source = "".join(source)
    return source if isinstance(source, str) else None


# --------------------------------------------------------------------------- where statements are
def _code_end(text: str) -> int:
    """Offset just past a line's code: before a trailing comment, blanks and a block's colon."""
    end = len(text.rstrip())
    if "#" in text:
        try:
            for token in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
                if token.type == tokenize.COMMENT:
                    end = len(text[: token.start[1]].rstrip())
                    break
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
    if text[:end].endswith(":"):
        end -= 1
    return end


def _code_start(text: str) -> int:
    return len(text) - len(text.lstrip())


def _closing(text: str, opening: int) -> Optional[int]:
    """The parenthesis closing the one at ``opening``, on the same line."""
    depth = 0
    for i in range(opening, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _locate(text: str, label: str) -> Optional[Tuple[int, int]]:
    """Where on this line a witness's label is (``torch.nn.utils.clip_grad_norm_(...)``,
    ``for ... in loader``: the label elides with ``...``); None if its head is not there."""
    if label in text:
        start = text.index(label)
        return start, start + len(label)
    parts = [part for part in label.split("...") if part.strip()]
    if not parts or parts[0] not in text:
        return None
    start = text.index(parts[0])
    end = start + len(parts[0])
    if parts[0].endswith("("):  # a call whose arguments the label leaves out: to its parenthesis
        close = _closing(text, end - 1)
        return (start, close + 1) if close is not None else (start, max(end, _code_end(text)))
    for part in parts[1:]:
        found = text.find(part, end)
        if found < 0:
            return start, max(end, _code_end(text))
        end = found + len(part)
    return start, end


def _whole_line(text: str) -> Tuple[int, int]:
    start, end = _code_start(text), _code_end(text)
    return (start, end) if end > start else (start, max(start + 1, len(text)))


def _resolve(finding_path: str, relative: str) -> List[str]:
    """Paths, as shown, a message's ``engine.py`` may be: beside the finding's file, then above."""
    if os.path.isabs(relative):
        return [relative]
    base = Path(finding_path).parent
    found = []
    for directory in [base, *base.parents][:32]:
        candidate = Path(os.path.normpath(directory / relative)).as_posix()
        if os.path.isfile(candidate):
            found.append(candidate)
    # Absolute paths: their parents end at the root; a relative one stops at the working
    # directory, so the directories above it are tried too.
    if not base.is_absolute():
        up = Path("..")
        for _ in range(8):
            candidate = Path(os.path.normpath(up / relative)).as_posix()
            if os.path.isfile(candidate) and candidate not in found:
                found.append(candidate)
            up = up / ".."
    return found


def _related(f: Finding, sources: _Sources) -> Tuple[List[Tuple[Source, Mark]], List[str]]:
    """The other statements the finding names, each in its file; and those that could not be
    placed, as notes."""
    if f.trace:  # the witness's statements but the reported one: (role, label, where)
        named = [m for m in (_ROLE_LINE.match(step) for step in f.trace if not step.startswith(_NOT_STATEMENTS)) if m]
        references = [(m.group("role").strip(), m.group("label"), m.group("where"))
                      for m in named if m.group("role").strip() != "reported"]
    else:  # a pattern rule's finding: the lines its message names
        references = [(None, None, m.group(0)) for m in _MESSAGE_LINE.finditer(f.message)]
    placed: List[Tuple[Source, Mark]] = []
    unplaced: List[str] = []
    seen = set()
    for role, label, where in references:
        found = _place(f, role, label, where, sources)
        if found is None:
            if role is not None:
                unplaced.append(f"{role}: {label} ({where})")
            continue
        source, mark = found
        key = (source.shown, source.cell, mark.line, mark.label)
        if role is None and (source.shown, source.cell, mark.line) == (f.path, f.cell, f.line):
            continue  # a message naming the reported line itself
        if key not in seen:
            seen.add(key)
            placed.append(found)
    return placed, unplaced


def _place(f: Finding, role: Optional[str], label: Optional[str], where: str, sources: _Sources
           ) -> Optional[Tuple[Source, Mark]]:
    """The file and columns of a statement a finding names ``where`` (``engine.py line 14``)."""
    match = _WHERE.match(where) if role is not None else _MESSAGE_LINE.fullmatch(where)
    if match is None:
        return None  # ``unknown line``: the witness does not know it
    groups = match.groupdict()
    relative, cell = groups.get("file"), groups.get("cell")
    line = int(groups.get("line") or groups.get("cell_line"))
    cell_number = int(cell) if cell is not None else (f.cell if relative is None else None)
    for shown in _resolve(f.path, relative) if relative is not None else [f.path]:
        source = sources.get(shown, cell_number)
        if source is None or not 1 <= line <= len(source.lines):
            continue
        text = source.lines[line - 1]
        columns = _locate(text, label) if label else None
        if columns is None and ((label and relative is not None) or not text.strip()):
            continue  # another file's line that does not hold the statement: not the file meant
        start, end = columns if columns is not None else _whole_line(text)
        return source, Mark(line, start, line, end, role or "named in the message", False)
    return None


# --------------------------------------------------------------------------- drawing
def _width(text: str) -> int:
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _shown_text(text: str) -> str:
    return text.expandtabs(TAB)


def _underline(text: str, start: int, end: int) -> Tuple[int, int]:
    """Display column and width of characters ``start:end`` of the line."""
    before = _width(text[:start].expandtabs(TAB))
    return before, max(1, _width(text[:end].expandtabs(TAB)) - before)


class _Painter:
    def __init__(self, color: bool, severity: str) -> None:
        self.color, self.severity = color, severity

    def gutter(self, text: str) -> str:
        return click.style(text, fg=_SECONDARY_COLOR, bold=True) if self.color else text

    def mark(self, text: str, primary: bool) -> str:
        if not self.color:
            return text
        return click.style(text, fg=SEVERITY_COLOR.get(self.severity) if primary else _SECONDARY_COLOR, bold=True)


def _mark_rows(source: Source, mark: Mark) -> Dict[int, Tuple[int, int]]:
    """Per line of the statement, the character range underlined on it."""
    rows = {}
    last = min(mark.end_line, len(source.lines))
    for line in range(mark.line, last + 1):
        text = source.lines[line - 1]
        start = mark.start if line == mark.line else _code_start(text)
        end = mark.end if line == mark.end_line else _code_end(text)
        if line != mark.line and line != last and end <= start:
            continue  # a blank line inside the statement
        rows[line] = (start, max(end, start + 1))
    return rows


def _frame(source: Source, marks: Sequence[Mark], width: int, paint: _Painter) -> List[str]:
    """One file's lines around its marks, with the marks underlined."""
    count = len(source.lines)
    rows_of = [(mark, _mark_rows(source, mark)) for mark in marks]
    shown = set()
    for mark, rows in rows_of:
        lines = sorted(rows) or [mark.line]
        if len(lines) > SPAN_LINES + 1:
            lines = lines[:SPAN_LINES] + lines[-1:]
        shown.update(lines)
        shown.update(range(max(1, lines[0] - CONTEXT), lines[0]))
        shown.update(range(lines[-1] + 1, min(count, lines[-1] + CONTEXT) + 1))
    shown.update([n + 1 for n in shown if n + 2 in shown])  # one hidden line is no gap worth a "..."
    marked = {line for _, rows in rows_of for line in rows}
    runs: List[List[int]] = []
    for n in sorted(n for n in shown if 1 <= n <= count):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    for run in runs:  # blank context lines at the edges of a run say nothing
        while run and run[0] not in marked and not source.lines[run[0] - 1].strip():
            run.pop(0)
        while run and run[-1] not in marked and not source.lines[run[-1] - 1].strip():
            run.pop()
    runs = [run for run in runs if run]
    displayed = {n for run in runs for n in run}
    labelled = {id(mark): max((n for n in rows if n in displayed), default=None) for mark, rows in rows_of}
    bar = paint.gutter(" " * width + " |")
    out = [bar]
    for index, run in enumerate(runs):
        if index:
            out.append(paint.gutter("." * 3))
        for n in run:
            text = source.lines[n - 1]
            out.append(paint.gutter(f"{n:>{width}} |") + (" " + _shown_text(text) if text else ""))
            for mark, rows in rows_of:
                if n in rows:
                    column, length = _underline(text, *rows[n])
                    label = f" {mark.label}" if labelled[id(mark)] == n and mark.label else ""
                    out.append(bar + " " + " " * column + paint.mark(("^" if mark.primary else "-") * length + label, mark.primary))
    out.append(bar)
    return out


def _gutter_width(groups: Sequence[Tuple[Source, Sequence[Mark]]]) -> int:
    last = [min(len(source.lines), max(m.end_line for m in marks) + CONTEXT) for source, marks in groups]
    return len(str(max(last, default=1)))


def render_finding(f: Finding, color: bool, trace: bool, sources: _Sources) -> List[str]:
    paint = _Painter(color, f.severity)
    lines = [header(f, color)]
    primary_source = sources.get(f.path, f.cell)
    related, unplaced = _related(f, sources)
    groups: List[Tuple[Source, List[Mark]]] = []
    if primary_source is not None and 1 <= f.line <= len(primary_source.lines):
        groups.append((primary_source, [Mark(f.line, f.column - 1, f.end_line, f.end_column - 1, f.rule, True)]))
    for source, mark in related:
        for group_source, marks in groups:
            if (group_source.shown, group_source.cell) == (source.shown, source.cell):
                marks.append(mark)
                break
        else:
            groups.append((source, [mark]))
    width = _gutter_width(groups)
    for index, (source, marks) in enumerate(groups):
        if index or source is not primary_source:
            first = min(marks, key=lambda m: (m.line, m.start))
            lines.append(paint.gutter(" " * width + "::: ") + source.where(first.line, first.start + 1))
        lines.extend(_frame(source, marks, width, paint))
    if not groups:
        lines.append(paint.gutter(" " * width + " = ") + "note: the source could not be read")
    notes = list(f.trace) if trace else [f"note: {step}" for step in unplaced]
    for note in notes:
        lines.append(paint.gutter(" " * width + " = ") + note)
    return lines


def render(report: Report, color: bool = False, trace: bool = False) -> str:
    """The findings with their source; ``trace``: the witness lines under each (``--trace``).
    The findings' ``trace`` must be kept in the report even without ``--trace``: it places the
    statements the message names."""
    sources = _Sources()
    blocks = ["\n".join(render_finding(f, color, trace, sources)) + "\n" for f in report.findings]
    return "\n".join(blocks)
