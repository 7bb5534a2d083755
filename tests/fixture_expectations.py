"""Reading ``# expect: TL101, TL103`` annotations from fixture programs (shared by the tests)."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import List, Set, Tuple

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# ``# expect: TL101, TL202:advice``: a rule id, with ``:advice`` where the finding is of the advice
# tier though its rule's default tier is higher (shown only when advice is selected).
_EXPECT = re.compile(r"#\s*expect:\s*((?:TL[0-9]{3}(?::advice)?[, ]*)+)")
_ENTRY = re.compile(r"(TL[0-9]{3})(:advice)?")


def expected_entries(source: str) -> Set[Tuple[int, str, bool]]:
    """(line, rule id, advice) named by ``# expect:`` comments (real comments only, via tokenize)."""
    expected = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            match = _EXPECT.search(token.string)
            if match:
                for rule, advice in _ENTRY.findall(match.group(1)):
                    expected.add((token.start[0], rule, bool(advice)))
    return expected


def expected_findings(source: str) -> Set[Tuple[int, str]]:
    """(line, rule id) pairs named by ``# expect:`` comments, whatever their tier."""
    return {(line, rule) for line, rule, _ in expected_entries(source)}


AUTOFIX = FIXTURES / "autofix"  # before/after pairs for --fix, checked by test_autofix.py
PROJECTS = FIXTURES / "projects"  # multi-file programs, checked together by test_projects.py


def fixture_files() -> List[Path]:
    return sorted(
        p for p in FIXTURES.rglob("*.py")
        if "__pycache__" not in p.parts and AUTOFIX not in p.parents and PROJECTS not in p.parents
    )
