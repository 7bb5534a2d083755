"""The "Suppress with ``# noqa: TLnnn``" action's text: what ``trainlint --add-noqa`` writes for this
one finding (merged into a ``noqa`` or ``trainlint: ignore[...]`` comment already there, put where
suppression.py reads it, checked to suppress the finding and to leave the code as it was)."""
from __future__ import annotations

from typing import Optional

from ..noqa import NoqaError, add_to_source


def noqa_text(text: str, line: int, rule_id: str) -> Optional[str]:
    """``text`` with a ``noqa`` comment that suppresses ``rule_id`` on ``line`` (1-based), or None
    where none is needed or none can be written safely."""
    try:
        edited, added = add_to_source(text, {line: {rule_id}})
    except NoqaError:
        return None
    return edited if added else None  # nothing added: already suppressed there (a bare ``# noqa``)
