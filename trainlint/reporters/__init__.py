"""Output formats. Each reporter turns a :class:`~trainlint.engine.Report` into text."""
from __future__ import annotations

from typing import Callable, Dict

from ..engine import Report
from . import github as github_reporter
from . import json as json_reporter
from . import sarif as sarif_reporter
from . import text as text_reporter

Render = Callable[[Report, bool], str]

FORMATS: Dict[str, Render] = {
    "text": text_reporter.render,
    "json": json_reporter.render,
    "sarif": sarif_reporter.render,
    "github": github_reporter.render,
}
