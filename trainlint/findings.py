"""Findings and per-file errors: what every reporter prints and the JSON format serialises."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int  # 1-based
    column: int  # 1-based
    rule: str
    name: str
    severity: str
    message: str
    end_line: int
    end_column: int  # 1-based, just past the last character

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        # The public JSON order: rule first, then where, then what.
        keys = ("rule", "name", "severity", "path", "line", "column", "end_line", "end_column", "message")
        return {key: data[key] for key in keys}


@dataclass(frozen=True, order=True)
class FileError:
    path: str
    message: str

    def to_json(self) -> Dict[str, Any]:
        return {"path": self.path, "message": self.message}
