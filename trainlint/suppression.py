"""Suppression comments: ``# noqa``, ``# noqa: TL101``, ``# trainlint: ignore[TL101]``, skip-file."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, Optional, Set

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

    def suppresses(self, line: int, rule_id: str, rule_name: str) -> bool:
        codes = self.by_line.get(line)
        return bool(codes) and (ALL in codes or rule_id.upper() in codes or rule_name.upper() in codes)


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
