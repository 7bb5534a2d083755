"""What the guard raises and warns with. Torch-free, so ``trainlint.TrainingInvariantError`` can be
imported (and caught) by code that never starts a guard."""
from __future__ import annotations

from typing import Optional

from ..findings import Finding


class TrainingInvariantError(RuntimeError):
    """Raised by ``guard(mode="raise")`` at the call that breaks a training invariant."""

    def __init__(self, message: str, finding: Optional[Finding] = None) -> None:
        super().__init__(message)
        self.finding = finding


class TrainingInvariantWarning(UserWarning):
    """Issued by ``guard(mode="warn")``, once per rule and source line, at that line."""
