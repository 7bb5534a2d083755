"""Checking files: read, skip/suppress, analyze with the rules in force, and collect findings.

One file's failure (unreadable, not Python, a syntax error, an internal error) becomes a
:class:`FileError` for that file; every other file is still checked.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import FrozenSet, Iterable, List, Tuple

from .catalog import load_catalog, matches
from .config import Config, ignored_for
from .files import SourceError, discover, read_source
from .findings import FileError, Finding
from .static.analyzer import AnalysisError, analyze
from .suppression import parse_suppressions


@dataclass(frozen=True)
class Settings:
    rules: FrozenSet[str]  # rule ids in force (after select/ignore)
    config: Config = field(default_factory=Config)


@dataclass
class Report:
    findings: List[Finding] = field(default_factory=list)
    errors: List[FileError] = field(default_factory=list)
    files: int = 0  # files checked (including those with errors)


def display_path(path: Path) -> str:
    """As the user gave it; relative to the working directory when it lies below it."""
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()


def rules_for(path: Path, settings: Settings) -> FrozenSet[str]:
    ignored = ignored_for(settings.config, path)
    if not ignored:
        return settings.rules
    catalog = load_catalog()
    return frozenset(r for r in settings.rules if not any(matches(catalog[r], s) for s in ignored))


def check_source(text: str, path: str, rules: FrozenSet[str], config: Config) -> List[Finding]:
    suppressions = parse_suppressions(text)
    if suppressions.skip_file or not rules:
        return []
    catalog = load_catalog()
    findings = []
    for rule_id, (line, column, end_line, end_column), message in analyze(text, rules):
        rule = catalog[rule_id]
        if suppressions.suppresses(line, rule.id, rule.name):
            continue
        severity = config.severity.get(rule.id, rule.severity)
        findings.append(Finding(path, line, column, rule.id, rule.name, severity, message, end_line, end_column))
    return findings


def check_file(path: Path, settings: Settings) -> Tuple[List[Finding], List[FileError]]:
    shown = display_path(path)
    try:
        text = read_source(path)
        return check_source(text, shown, rules_for(path, settings), settings.config), []
    except (SourceError, AnalysisError) as exc:
        return [], [FileError(shown, str(exc))]
    except RecursionError:
        return [], [FileError(shown, "nesting too deep to analyze")]
    except MemoryError:
        return [], [FileError(shown, "out of memory while analyzing")]
    except Exception as exc:  # noqa: BLE001 - one file's internal error must not stop the run
        return [], [FileError(shown, f"internal error: {type(exc).__name__}: {exc}")]


def check_paths(paths: Iterable[str], settings: Settings) -> Report:
    files, errors = discover(paths, settings.config.root, settings.config.exclude)
    report = Report(errors=list(errors), files=len(files))
    for path in files:
        findings, file_errors = check_file(path, settings)
        report.findings.extend(findings)
        report.errors.extend(file_errors)
    report.findings.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    report.errors.sort()
    return report


def default_jobs() -> int:
    return os.cpu_count() or 1
