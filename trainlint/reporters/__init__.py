"""Output formats. Each reporter turns a :class:`~trainlint.engine.Report` into text."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict

from . import github as github_reporter
from . import json as json_reporter
from . import sarif as sarif_reporter
from . import text as text_reporter

if TYPE_CHECKING:  # the engine (and what it imports) loads only when a file is checked
    from ..engine import Report

Render = Callable[["Report", bool], str]

FORMATS: Dict[str, Render] = {
    "text": text_reporter.render,
    "json": json_reporter.render,
    "sarif": sarif_reporter.render,
    "github": github_reporter.render,
}
