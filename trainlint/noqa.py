"""``--add-noqa``: suppress every current finding with a ``# noqa: TLnnn`` comment on its line.

The comment goes where trainlint/suppression.py reads it for that finding: the finding's own
line, or, for a line that cannot hold a comment (it ends inside a multi-line string or with a
backslash), the line where that string or continuation ends. Comments are found with tokenize,
never by searching the text, and merged:

- ``# noqa: E501`` (another tool's codes) becomes ``# noqa: E501, TL101``;
- ``# noqa: TL101`` with a new TL102 finding becomes ``# noqa: TL101, TL102``;
- a comment without ``noqa`` (``# type: ignore``) gets ``  # noqa: TL101`` after it;
- a line already suppressing the rule (a bare ``# noqa``, its name) is left alone.

A rewritten file must parse to the same syntax tree as before (comments are not in the tree)
and suppress every finding it was rewritten for, or it is left as it was and reported. Adding
to a file twice adds nothing the second time: its findings are all suppressed by then.

Notebooks get the comment in the cell's source; their JSON is rewritten only when it can be
written back with the layout it had (indent, key order, escaping), else they are left alone.
"""
from __future__ import annotations

import ast
import io
import json
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .catalog import load_catalog
from .findings import FileError, Finding
from .suppression import _IGNORE, _NOQA, CommentLines, parse_suppressions

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # lines as the parser breaks them (fix.split_lines)
_END = re.compile(r"(?:\r\n|\r|\n)\Z")


class NoqaError(Exception):
    """A file the comments could not be added to (it is left as it was)."""


@dataclass
class Added:
    comments: int = 0  # comments written or extended
    files: List[str] = field(default_factory=list)  # files changed
    errors: List[FileError] = field(default_factory=list)


def add_noqa(findings: Sequence[Finding]) -> Added:
    """Write the comments for ``findings`` into their files."""
    by_file: Dict[str, List[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.path, []).append(f)
    result = Added()
    for path, found in sorted(by_file.items()):
        try:
            if path.endswith(".ipynb"):
                count = _add_to_notebook(Path(path), found)
            else:
                count = _add_to_file(Path(path), found)
        except NoqaError as exc:
            result.errors.append(FileError(path, f"cannot add noqa comments: {exc}"))
            continue
        if count:
            result.comments += count
            result.files.append(path)
    return result


def _wanted(findings: Iterable[Finding]) -> Dict[int, Set[str]]:
    wanted: Dict[int, Set[str]] = {}
    for f in findings:
        wanted.setdefault(f.line, set()).add(f.rule)
    return wanted


def _add_to_file(path: Path, findings: Sequence[Finding]) -> int:
    from .engine import _encoding_of
    from .files import SourceError, decode_source, read_bytes

    try:
        data = read_bytes(path)
        text = decode_source(data)
    except SourceError as exc:
        raise NoqaError(str(exc)) from None
    new, count = add_to_source(text, _wanted(findings))
    if count:
        try:
            path.write_bytes(new.encode(_encoding_of(data)))
        except (OSError, UnicodeEncodeError) as exc:
            raise NoqaError(f"cannot write: {getattr(exc, 'strerror', None) or exc}") from None
    return count


def add_to_source(source: str, wanted: Dict[int, Set[str]]) -> Tuple[str, int]:
    """``source`` with ``# noqa`` comments for the rule ids of each line of ``wanted``, and how
    many comments were written or extended. Raises NoqaError where it cannot be done safely."""
    lines = _LINE.findall(source)
    moved, comments = _comments(source)
    catalog = load_catalog()
    targets: Dict[int, Set[str]] = {}
    for line, rules in wanted.items():
        target = moved.get(line, line)
        if not 1 <= target <= len(lines):
            raise NoqaError(f"line {line} is not in the file")
        targets.setdefault(target, set()).update(rules)
    existing = parse_suppressions(source)
    count = 0
    for target, rules in sorted(targets.items()):
        needed = sorted(r for r in rules if not existing.on_line(target, r, catalog[r].name if r in catalog else r))
        if not needed:
            continue
        line = lines[target - 1]
        end = _END.search(line)
        ending = end.group() if end else ""
        body = line[: len(line) - len(ending)]
        comment = comments.get(target)
        if comment is not None:
            column, text = comment
            if body[column:column + len(text)] != text:
                raise NoqaError(f"line {target}: the comment is not where tokenize put it")
            body = body[:column] + _merged(text, needed) + body[column + len(text):]
        else:
            body = body.rstrip(" \t") + "  # noqa: " + ", ".join(needed)
        lines[target - 1] = body + ending
        count += 1
    if not count:
        return source, 0
    new = "".join(lines)
    _verify(source, new, wanted)
    return new, count


def _merged(comment: str, needed: List[str]) -> str:
    """The comment with ``needed`` added to its ``noqa`` (or ``trainlint: ignore[...]``) codes, or
    a ``noqa`` after it."""
    for pattern in (_NOQA, _IGNORE):
        match = pattern.search(comment)
        if match is not None and match.group("codes") and match.group("codes").strip():
            at = match.end("codes")
            return comment[:at] + ", " + ", ".join(needed) + comment[at:]
    return comment.rstrip() + "  # noqa: " + ", ".join(needed)


def _comments(source: str) -> Tuple[Dict[int, int], Dict[int, Tuple[int, str]]]:
    """(lines that cannot hold a comment -> where theirs goes, line -> (column, text) of its comment)."""
    lines = CommentLines()
    comments: Dict[int, Tuple[int, str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            lines.feed(token)
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = (token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError) as exc:
        raise NoqaError(f"tokenize cannot read it ({exc})") from None
    return lines.result(), comments


def _tree(source: str) -> Optional[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.dump(ast.parse(source), include_attributes=False)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _verify(old: str, new: str, wanted: Dict[int, Set[str]]) -> None:
    before = _tree(old)
    if before is not None and _tree(new) != before:
        raise NoqaError("the comments would change the code (left as it was)")
    suppressions = parse_suppressions(new)
    catalog = load_catalog()
    for line, rules in wanted.items():
        for rule in rules:
            if not suppressions.suppresses(line, rule, catalog[rule].name if rule in catalog else rule):
                raise NoqaError(f"a comment would not suppress {rule} on line {line} (left as it was)")


# ------------------------------------------------------------------------------------ notebooks

def _add_to_notebook(path: Path, findings: Sequence[Finding]) -> int:
    from .files import SourceError, decode_source, read_bytes
    from .notebooks import _cell_source, _neutralise

    try:
        text = decode_source(read_bytes(path))
        data = json.loads(text)
        cells = data["cells"]
    except (SourceError, ValueError, KeyError, TypeError) as exc:
        raise NoqaError(f"cannot read the notebook: {exc}") from None
    dump = _layout(text, data)
    if dump is None:
        raise NoqaError("its JSON cannot be written back with the layout it has (left as it was)")
    by_cell: Dict[int, List[Finding]] = {}
    for f in findings:
        by_cell.setdefault(f.cell or 0, []).append(f)
    count = 0
    for number, found in sorted(by_cell.items()):
        if not 1 <= number <= len(cells) or not isinstance(cells[number - 1], dict):
            raise NoqaError(f"cell {number} is not in the notebook")
        cell = cells[number - 1]
        raw = _cell_source(cell, number)
        neutral = _neutralise(raw)
        raw_lines = raw.splitlines(keepends=True)
        code = "\n".join(neutral) + "\n"
        new_code, added = add_to_source(code, _wanted(found))
        if not added:
            continue
        new_lines = new_code.split("\n")[:-1]
        for index, (before, after) in enumerate(zip(neutral, new_lines)):
            if before != after:
                if raw_lines[index].rstrip("\r\n") != before:
                    raise NoqaError(f"cell {number}, line {index + 1} is not plain Python (left as it was)")
                raw_lines[index] = after + raw_lines[index][len(before):]
        cell["source"] = raw_lines if isinstance(cell.get("source"), list) else "".join(raw_lines)
        count += added
    if count:
        try:
            path.write_text(dump(data), encoding="utf-8")
        except OSError as exc:
            raise NoqaError(f"cannot write: {exc.strerror or exc}") from None
    return count


def _layout(text: str, data: object):
    """A function that writes ``data`` as ``text`` was written (nbformat: indent 1, unescaped
    UTF-8, a final newline), or None when no usual layout gives the text back unchanged."""
    trailing = text[len(text.rstrip("\r\n")):]
    for indent in (1, 2, 4, None, "\t"):
        for separators in (None, (",", ":")):
            for ascii_only in (False, True):
                def dump(value, indent=indent, separators=separators, ascii_only=ascii_only) -> str:
                    return json.dumps(value, indent=indent, separators=separators, ensure_ascii=ascii_only) + trailing
                if dump(data) == text:
                    return dump
    return None
