"""Suppression comments: ``# noqa``, ``# noqa: TL101``, ``# trainlint: ignore[TL101]``, skip-file."""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, Optional, Set

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[\w\-]+(?:[,\s]+[\w\-]+)*))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*trainlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_SKIP_FILE = re.compile(r"^#\s*trainlint:\s*skip-file\s*$", re.IGNORECASE)
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
    return {code.strip().upper() for code in re.split(r"[,\s]+", text) if code.strip()}


def parse_suppressions(source: str) -> Suppressions:
    """Real comments only (tokenize), so text in strings never suppresses; cheap when none exist."""
    result = Suppressions()
    lowered = source.lower()
    if "noqa" not in lowered and "trainlint:" not in lowered:
        return result
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result  # the parser reports the real problem
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        text = token.string
        if _SKIP_FILE.match(text.strip()) and token.line.strip() == text.strip():
            result.skip_file = True
            continue
        codes: Set[str] = set()
        for pattern in (_NOQA, _IGNORE):
            match = pattern.search(text)
            if match:
                codes |= _codes(match.group("codes"))
        if codes:
            result.by_line.setdefault(token.start[0], set()).update(codes)
    return result
