"""Suppression comments: ``# noqa``, ``# noqa: TL101``, ``# trainlint: ignore[TL101]``, skip-file.

A comment suppresses the findings of its own line. A line that cannot hold a comment (one that
ends inside a multi-line string, or with a backslash continuation) takes the comment of the line
where that string or continuation ends, as in ruff: a call whose first line opens a triple-quoted
string is suppressed by a comment after the string's closing quotes. The lines that can hold a
comment keep reading their own only."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, Iterable, Optional, Set

# The trailing look-ahead keeps a marker run into a longer word ("noqa-ish", "ignore-me") from
# reading as a bare marker that would silence every rule on the line.
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[\w-]+(?:[,\s]+[\w-]+)*))?(?![\w-])", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*trainlint:\s*ignore(?:\s*\[(?P<codes>[^\]]*)\])?(?![\w-])", re.IGNORECASE)
_SKIP_FILE = re.compile(r"#\s*trainlint:\s*skip-file", re.IGNORECASE)
ALL = "*"


@dataclass
class Suppressions:
    skip_file: bool = False
    by_line: Dict[int, Set[str]] = field(default_factory=dict)  # line -> rule ids/names, or {"*"}
    # The source the comments were read from: which lines cannot hold a comment of their own is
    # worked out from it only when a finding on a line without one asks (see comment_lines).
    source: str = field(default="", repr=False)
    _moved: Optional[Dict[int, int]] = field(default=None, repr=False)

    def suppresses(self, line: int, rule_id: str, rule_name: str) -> bool:
        if self.on_line(line, rule_id, rule_name):
            return True
        if not self.by_line:
            return False
        moved = self.moved
        return line in moved and self.on_line(moved[line], rule_id, rule_name)

    @property
    def moved(self) -> Dict[int, int]:
        """A line that cannot hold a comment -> the line whose comment stands for it."""
        if self._moved is None:
            self._moved = comment_lines(
                tokenize.generate_tokens(io.StringIO(self.source, newline=None).readline)) if self.source else {}
        return self._moved

    def on_line(self, line: int, rule_id: str, rule_name: str) -> bool:
        """Does the comment of this very line name the rule?"""
        codes = self.by_line.get(line)
        return bool(codes) and (ALL in codes or rule_id.upper() in codes or rule_name.upper() in codes)


_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+: f-strings are several tokens
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_LINE_ENDS = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT)


class CommentLines:
    """Fed a module's tokens in order, learns which lines cannot hold a comment: those that end
    inside a string token spanning several lines, and those ended by a backslash continuation (two
    tokens on different lines with no NEWLINE, NL or comment between them)."""

    def __init__(self) -> None:
        self.moved: Dict[int, int] = {}
        self._previous: Optional[tokenize.TokenInfo] = None
        self._fstrings = []  # start lines of the f-strings open (3.12+)

    def feed(self, token: tokenize.TokenInfo) -> None:
        if token.type == _FSTRING_START:
            self._fstrings.append(token.start[0])
        elif token.type == _FSTRING_END and self._fstrings:
            self._span(self._fstrings.pop(), token.end[0])
        elif token.type == tokenize.STRING:
            self._span(token.start[0], token.end[0])
        previous = self._previous
        if (previous is not None and not self._fstrings and previous.type not in _LINE_ENDS
                and token.type != tokenize.ENDMARKER and token.start[0] > previous.end[0]):
            self._span(previous.end[0], token.start[0])  # a backslash ended previous.end[0]
        if token.type not in (tokenize.INDENT, tokenize.DEDENT):
            self._previous = token

    def _span(self, first: int, last: int) -> None:
        for line in range(first, last):
            self.moved.setdefault(line, last)

    def result(self) -> Dict[int, int]:
        """Each line that cannot hold a comment -> the first line after it that can (chains of
        strings and continuations followed to their end)."""
        final = {}
        for line in self.moved:
            target, seen = self.moved[line], 0
            while target in self.moved and seen < len(self.moved):
                target, seen = self.moved[target], seen + 1
            final[line] = target
        return final


def comment_lines(tokens: Iterable[tokenize.TokenInfo]) -> Dict[int, int]:
    """``CommentLines`` over a whole token stream (a tokenize error ends it: what was read counts)."""
    lines = CommentLines()
    try:
        for token in tokens:
            lines.feed(token)
    except (tokenize.TokenError, SyntaxError):
        pass
    return lines.result()


def _codes(text: Optional[str]) -> Set[str]:
    if not text or not text.strip():
        return {ALL}
    return {code.upper() for code in re.split(r"[,\s]+", text) if code}


def may_skip_file(source: str) -> bool:
    """Could ``source`` hold a skip-file comment? (Cheap; ``parse_suppressions`` says for sure.)"""
    return _SKIP_FILE.search(source) is not None


def parse_suppressions(source: str) -> Suppressions:
    """Real comments only (tokenize), so text in strings never suppresses; cheap when none exist."""
    result = Suppressions()
    lowered = source.lower()
    if "noqa" not in lowered and "trainlint:" not in lowered:
        return result
    # newline=None: a lone "\r" ends a line for the parser too, so line numbers agree with findings.
    tokens = tokenize.generate_tokens(io.StringIO(source, newline=None).readline)
    try:
        for token in tokens:
            if token.type == tokenize.COMMENT:
                _record(token, result)
    except (tokenize.TokenError, SyntaxError):
        pass  # the parser reports the real problem; the comments read so far still count
    result.source = source
    return result


def _record(token: tokenize.TokenInfo, result: Suppressions) -> None:
    text = token.string.strip()
    if _SKIP_FILE.fullmatch(text):
        # Only as a comment on a line of its own, so a trailing mention cannot skip a whole file.
        result.skip_file = result.skip_file or token.line.strip() == text
        return
    codes: Set[str] = set()
    for pattern in (_NOQA, _IGNORE):
        match = pattern.search(text)
        if match:
            codes |= _codes(match.group("codes"))
    if codes:
        result.by_line.setdefault(token.start[0], set()).update(codes)
