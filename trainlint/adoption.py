"""The command line's adoption options: ``--baseline``, ``--write-baseline``, ``--add-noqa``
(trainlint/baseline.py and trainlint/noqa.py do the work)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

if TYPE_CHECKING:
    from .engine import Report


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def adopt(report: Report, baseline_file: Optional[str], write_baseline: Optional[str], add_noqa: bool) -> int:
    """Write the baseline or the comments and exit; or leave out the findings ``baseline_file``
    records and return how many it recorded."""
    from . import baseline
    from .cli import EXIT_CLEAN, EXIT_ERROR
    from .reporters.text import render_errors

    if write_baseline and add_noqa:
        raise click.UsageError("--write-baseline and --add-noqa are two ways to adopt trainlint: choose one")
    if write_baseline:
        try:
            count = baseline.write(report.findings, Path(write_baseline))
        except baseline.BaselineError as exc:
            raise click.UsageError(str(exc)) from None
        click.echo(render_errors(report), err=True, nl=False)
        click.echo(f"Wrote {_plural(count, 'finding')} to the baseline {write_baseline}.", err=True)
        sys.exit(EXIT_ERROR if report.errors else EXIT_CLEAN)
    known = 0
    if baseline_file:
        try:
            report.findings, known = baseline.apply(report.findings, Path(baseline_file))
        except baseline.BaselineError as exc:
            raise click.UsageError(str(exc)) from None
    if add_noqa:
        from .noqa import add_noqa as write_comments

        added = write_comments(report.findings)
        report.errors = sorted(report.errors + added.errors)
        click.echo(render_errors(report), err=True, nl=False)
        click.echo(f"Added {_plural(added.comments, 'noqa comment')} to {_plural(len(added.files), 'file')}.", err=True)
        sys.exit(EXIT_ERROR if report.errors else EXIT_CLEAN)
    return known
