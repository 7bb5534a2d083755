"""Findings and per-file errors: what every reporter prints and the JSON format serialises."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Optional, Tuple


_TIER_OF_SEVERITY = {"info": "advice"}


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
    cell: Optional[int] = None  # notebooks: 1-based code cell; line and column are within it
    # error, warning or advice (catalog.TIERS): the rule's, or advice for a finding that is a
    # recipe of a rule whose other findings are bugs. ``severity`` is how it is shown.
    tier: str = field(default="", compare=False)
    # The witness path (calls, assumed conditions, the statements involved), shown with --trace;
    # not part of a finding's identity.
    trace: Tuple[str, ...] = field(default=(), compare=False)
    # The runtime guard: which of a guarded program's worker processes found it (the rank
    # torch.multiprocessing.spawn gave it, or the order the program started it); None in the
    # process the guard started in.
    worker: Optional[int] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "trace", tuple(self.trace))  # a list when read back from the cache
        if not self.tier:
            object.__setattr__(self, "tier", _TIER_OF_SEVERITY.get(self.severity, self.severity))

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        # The public JSON order: rule first, then where, then what.
        keys = ("rule", "name", "severity", "tier", "path", "line", "column", "end_line", "end_column", "message")
        result = {key: data[key] for key in keys}
        if self.cell is not None:
            result["cell"] = self.cell
        if self.trace:
            result["trace"] = list(self.trace)
        if self.worker is not None:
            result["worker"] = self.worker
        return result

    @property
    def location(self) -> str:
        """``path:line:col`` (``nb.ipynb:cell 3:12:5`` in notebooks)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"


@dataclass(frozen=True, order=True)
class FileError:
    path: str
    message: str
    worker: Optional[int] = None  # the runtime guard: a worker process that died or went unchecked

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {"path": self.path, "message": self.message}
        if self.worker is not None:
            data["worker"] = self.worker
        return data


@dataclass(frozen=True, order=True)
class FileNote:
    """A part of a file's analysis its work budget left out (trainlint/static/budget.py): the file
    was checked, but a finding may be missing there. Not an error: the exit code is unchanged."""

    path: str
    message: str

    def to_json(self) -> Dict[str, Any]:
        return {"path": self.path, "message": self.message}
