"""The "Suppress with ``# noqa: TLnnn``" edit. suppression.py reads a suppression from the comment
tokens of the line a finding starts on (its first line, even for a statement that spans several),
so that is the only line where the comment can go: merged into a ``# noqa:`` or ``# trainlint:
ignore[...]`` comment already there, else appended to the line. Where that line ends inside a
string, or with a line-continuation backslash, no comment can be written there (it would become
part of the string, or break the statement), and there is no edit."""
from __future__ import annotations

import io
import tokenize
from typing import Optional, Tuple

from ..files import compiles
from ..suppression import _IGNORE, _NOQA, parse_suppressions

Edit = Tuple[int, int, str]  # character offsets [start, end) into the text, and what goes there


def _physical_lines(text: str):
    import re

    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)


def noqa_edit(text: str, line: int, rule_id: str, rule_name: str = "") -> Optional[Edit]:
    """Where and what to write so that a ``noqa`` comment suppresses ``rule_id`` on ``line``
    (1-based), or None. The edit is checked: the comment must be read as suppressing the rule on
    that line, and a text that compiled must still compile."""
    lines = _physical_lines(text)
    if not 1 <= line <= len(lines):
        return None
    physical = lines[line - 1]
    body = physical.rstrip("\r\n")
    line_start = sum(len(item) for item in lines[:line - 1])
    comment: Optional[tokenize.TokenInfo] = None
    inside_token = False
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.start[0] > line:
                break
            if token.type == tokenize.COMMENT and token.start[0] == line:
                comment = token
            elif token.start[0] <= line < token.end[0] and token.type not in (tokenize.NL, tokenize.NEWLINE):
                inside_token = True  # a string that goes on past this line's end
    except (tokenize.TokenError, SyntaxError):
        return None
    edit: Optional[Edit] = None
    if comment is not None:
        start = line_start + comment.start[1]
        for pattern in (_NOQA, _IGNORE):
            match = pattern.search(comment.string)
            if match is None:
                continue
            codes = match.group("codes")
            if pattern is _NOQA and codes is None:
                return None  # a bare `# noqa` suppresses everything already
            if pattern is _IGNORE and codes is None:
                return None  # so does a bare `# trainlint: ignore`
            at = start + match.end("codes")
            edit = (at, at, f", {rule_id}" if codes.strip() else rule_id)
            break
        else:
            end = line_start + len(body.rstrip())
            edit = (end, line_start + len(body), f"  # noqa: {rule_id}")
    elif not inside_token and not body.rstrip().endswith("\\"):
        end = line_start + len(body.rstrip())
        edit = (end, line_start + len(body), f"  # noqa: {rule_id}")
    if edit is None:
        return None
    edited = text[:edit[0]] + edit[2] + text[edit[1]:]
    if not parse_suppressions(edited).suppresses(line, rule_id, rule_name or rule_id):
        return None
    if compiles(text) and not compiles(edited):
        return None
    return edit
