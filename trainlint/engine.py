"""Checking files: read, skip/suppress, analyze with the rules in force, and collect findings.

One file's failure (unreadable, not Python, a syntax error, an internal error) becomes a
:class:`FileError` for that file; every other file is still checked. Results are cached by content
hash, and many files are checked in parallel processes.
"""
from __future__ import annotations

import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

from .cache import Cache, cache_dir, key
from .catalog import SEVERITY_OF_TIER, load_catalog, matches, may_fire
from .config import Config, ignored_for
from .files import SourceError, compiles, decode_source, discover, read_bytes
from .pacing import paced_collection, start_worker, worker_analyzed
from .findings import FileError, FileNote, Finding
from .notebooks import load_notebook
from .static import library
from .static.project import Project, parsed_count, parsed_since  # no libcst: see analyze_results
from .suppression import Suppressions, may_skip_file, parse_suppressions

PARALLEL_MIN_FILES = 16  # below this, starting worker processes costs more than it saves


def analyze_results(source: str, rules: FrozenSet[str], position=None, project: Optional[Project] = None,
                    incomplete: Optional[List[str]] = None):
    """``static.analyzer.analyze_results``, imported on first need: libcst and the analyzer load
    only for a file that may hold a finding or that does not compile. Most files of a repository
    are not training code; they are settled here, as the analyzer would settle them (no findings,
    syntax checked), so ``trainlint`` on them and ``--version`` never import libcst."""
    if not _may_fire(source, rules, project) and compiles(source):
        return []
    from .static.analyzer import analyze_results as analyze, plain_position

    return analyze(source, rules, position or plain_position, project, incomplete)


def _may_fire(source: str, rules: FrozenSet[str], project: Optional[Project]) -> bool:
    """A superset of the analyzer's pre-filter (``could_fire``, or a project module imported whose
    text can train), computed without libcst; tests/test_startup.py checks that it stays one."""
    catalog = load_catalog()
    if any(rule_id not in catalog or may_fire(catalog[rule_id], source) for rule_id in rules):
        return True
    if library.current().mentioned(source):
        return True
    return project is not None and (project.imports_training_text(source) or project.read_for(source, rules))



def _analysis_errors() -> tuple:
    """The exceptions that say a file cannot be analyzed: the analyzer's only once it is loaded
    (nothing raises AnalysisError before), so the engine need not import it to catch them."""
    analyzer = sys.modules.get("trainlint.static.analyzer")
    return (SourceError, analyzer.AnalysisError) if analyzer is not None else (SourceError,)


@dataclass(frozen=True)
class Settings:
    rules: FrozenSet[str]  # rule ids in force (after select/ignore)
    advice: FrozenSet[str] = frozenset()  # rules whose advice-tier findings are shown too
    config: Config = field(default_factory=Config)
    cache: bool = True
    jobs: int = 1
    respect_gitignore: bool = True


@dataclass
class Report:
    findings: List[Finding] = field(default_factory=list)
    errors: List[FileError] = field(default_factory=list)
    files: int = 0  # files checked (including those with errors)
    incomplete: List[FileNote] = field(default_factory=list)  # what budgets left out, per file
    git_ignored: int = 0  # files found in the directories given but left out as git ignores them


def combine(reports: Iterable[Report]) -> Report:
    """One report in the public order: findings by path, (cell,) line, column, rule; errors by path."""
    total = Report()
    for report in reports:
        total.findings.extend(report.findings)
        total.errors.extend(report.errors)
        total.files += report.files
        total.git_ignored += report.git_ignored
        total.incomplete.extend(report.incomplete)
    total.findings.sort(key=lambda f: (f.path, f.cell or 0, f.line, f.column, f.rule))
    total.errors.sort()
    total.incomplete = sorted(set(total.incomplete))
    return total


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


def check_source(text: str, path: str, settings: Settings, project: Optional[Project] = None,
                 incomplete: Optional[List[str]] = None) -> List[Finding]:
    """Findings for one module's source, with the rules in force for ``path`` (per-file-ignores).
    With a ``project``, calls into the other modules of the user's project are followed, and a
    finding whose statement is in one of them is reported in that file. ``incomplete`` receives
    what the analysis's budget left out."""
    return _module_findings(text, path, rules_for(Path(path), settings), settings, project=project,
                            incomplete=incomplete)


def _module_findings(text: str, path: str, rules: FrozenSet[str], settings: Settings, position=None,
                     project: Optional[Project] = None, incomplete: Optional[List[str]] = None) -> List[Finding]:
    if may_skip_file(text) and parse_suppressions(text).skip_file:
        return []
    catalog = load_catalog()
    findings: List[Finding] = []
    # With no rules left for the file, analyze still reports a syntax error: the file is not Python.
    results = analyze_results(text, rules, position, project, incomplete)
    if not results:
        return findings  # the file's comments are read only when there is something to suppress
    suppressions = parse_suppressions(text)
    elsewhere: Dict[Path, Suppressions] = {}
    for result in results:
        line, column, end_line, end_column = result.span
        rule = catalog[result.rule]
        shown, noqa = path, suppressions
        if result.path is not None:
            shown = display_path(result.path)
            noqa = elsewhere.get(result.path)
            if noqa is None:
                noqa = elsewhere[result.path] = _suppressions_of(result.path)
            if noqa.skip_file:
                continue
        if noqa.suppresses(line, rule.id, rule.name):
            continue
        tier = "advice" if result.advice else rule.tier
        if tier == "advice" and not rule.opt_in and rule.id not in settings.advice:
            continue  # a recipe of a rule whose bugs are on by default: shown when advice is asked for
        severity = settings.config.severity.get(rule.id, SEVERITY_OF_TIER[tier])
        findings.append(Finding(shown, line, column, rule.id, rule.name, severity, result.message, end_line, end_column,
                                trace=result.trace, tier=tier))
    return findings


def _suppressions_of(path: Path) -> Suppressions:
    try:
        return parse_suppressions(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return parse_suppressions("")


def check_notebook(text: str, path: str, settings: Settings, incomplete: Optional[List[str]] = None) -> List[Finding]:
    """A notebook's cells, joined; its own findings only (no project modules: a notebook's imports
    resolve against the kernel's working directory, which the file does not tell)."""
    notebook = load_notebook(text)

    def position(line: int) -> str:
        cell, cell_line = notebook.cell_position(line)
        return f"cell {cell}, line {cell_line}"

    findings = []
    for f in _module_findings(notebook.source, path, rules_for(Path(path), settings), settings, position,
                              incomplete=incomplete):
        cell, line = notebook.cell_position(f.line)
        end_cell, end_line = notebook.cell_position(f.end_line)
        end_column = f.end_column if end_cell == cell else f.column + 1
        findings.append(replace(f, cell=cell, line=line, end_line=end_line if end_cell == cell else line, end_column=end_column))
    return findings


FileResult = Tuple[List[Finding], List[FileError], List[FileNote]]


def _analyze(path: Path, shown: str, data: bytes, settings: Settings, project: Optional[Project] = None
             ) -> FileResult:
    left_out: List[str] = []
    try:
        text = decode_source(data, left_out)
        if path.suffix == ".ipynb":
            findings = check_notebook(text, shown, settings, left_out)
        else:
            findings = check_source(text, shown, settings, project, left_out)
        return findings, [], [FileNote(shown, note) for note in left_out]
    except _analysis_errors() as exc:
        return [], [FileError(shown, str(exc))], []
    except RecursionError:
        return [], [FileError(shown, "nesting too deep to analyze")], []
    except MemoryError:
        return [], [FileError(shown, "out of memory while analyzing")], []


def check_file(path: Path, settings: Settings, data: Optional[bytes] = None) -> FileResult:
    """``data``: the file's content to check instead of what is on disk (an editor's unsaved text,
    see trainlint/server/); cached by content like a file's."""
    shown = display_path(path)
    try:
        if data is None:
            data = read_bytes(path)
        described = library.activate(settings.config.library)  # the shipped descriptions and the project's
        store: Optional[Cache] = Cache(cache_dir(settings.config.root)) if settings.cache else None
        shown_rules = rules_for(path, settings) | {f"{rule}:advice" for rule in settings.advice}
        digest = key(data, path.suffix, shown_rules, settings.config.severity, described.digest) if store else ""
        cached = store.get(digest, shown) if store else None
        if cached is not None:
            return cached
        project = Project(path)
        findings, errors, notes = _analyze(path, shown, data, settings, project)
        if store:
            store.put(digest, findings, errors, project.read, shown, notes)
        return findings, errors, notes
    except SourceError as exc:
        return [], [FileError(shown, str(exc))], []
    except Exception as exc:  # noqa: BLE001 - one file's internal error must not stop the run
        return [], [FileError(shown, f"internal error: {type(exc).__name__}: {exc}")], []


def _check_file_star(args: Tuple[Path, Settings]) -> FileResult:
    result = check_file(*args)
    worker_analyzed()
    return result


def check_paths(paths: Iterable[str], settings: Settings) -> Report:
    """Every file under ``paths``, each file's failure an error of its own (never an exception)."""
    files, errors, git_ignored = discover(paths, settings.config.root, settings.config.exclude, settings.respect_gitignore)
    report = Report(errors=[replace(e, path=display_path(Path(e.path))) for e in errors], files=len(files),
                    git_ignored=git_ignored)
    if settings.jobs > 1 and len(files) >= PARALLEL_MIN_FILES:
        from concurrent.futures import ProcessPoolExecutor  # only worth importing for many files

        with ProcessPoolExecutor(max_workers=settings.jobs, initializer=start_worker) as pool:
            results = list(pool.map(_check_file_star, [(p, settings) for p in files], chunksize=8))
    else:
        results = _check_in_reuse_order(files, settings)
    for findings, file_errors, notes in results:
        report.findings.extend(findings)
        report.errors.extend(file_errors)
        report.incomplete.extend(notes)
    # A statement of engine.py reached from train.py and from engine.py itself is one finding.
    report.findings = list(dict.fromkeys(report.findings))
    return combine([report])


def _check_in_reuse_order(files: List[Path], settings: Settings) -> List[FileResult]:
    """Each file's result, in ``files``' order. A module parsed to follow a call from one checked
    file is checked soon after it when it is among ``files``: its tree is still kept then, so it
    is parsed once for both (a whole package imports itself everywhere). Soon means in the order
    they were parsed, before the modules those checks follow in turn: depth first, a ring of
    modules importing their neighbours would be walked round and every tree evicted before its
    turn."""
    pending = OrderedDict((path.resolve(), path) for path in files)
    soon: "OrderedDict[Path, None]" = OrderedDict()  # parsed to be followed, still to be checked
    results: Dict[Path, FileResult] = {}
    with paced_collection() as pacer:
        while pending:
            resolved = next((p for p in soon if p in pending), None)
            if resolved is not None:
                path = pending.pop(resolved)
            else:
                resolved, path = pending.popitem(last=False)
            soon.pop(resolved, None)
            mark = parsed_count()
            results[resolved] = check_file(path, settings)
            pacer.analyzed()
            for followed in parsed_since(mark):
                if followed in pending:
                    soon.setdefault(followed)
    return [results[path.resolve()] for path in files]


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass(frozen=True)
class Change:
    path: str
    rules: Tuple[str, ...]
    diff: str
    error: Optional[str] = None  # why the fix could not be written (the file is left as it was)


def fix_paths(paths: Iterable[str], settings: Settings, write: bool,
              unanalyzed: Optional[List[FileError]] = None) -> List[Change]:
    """Autofix every Python file (notebooks are not rewritten); with ``write``, save the result in
    the file's own encoding and line endings. A file that cannot be read or analyzed is left as it
    is, with its error in ``unanalyzed`` (``--diff`` reports it; ``--fix`` leaves it to the check
    that follows); a file that cannot be written is a change with an ``error``, and the other files
    are fixed."""
    import difflib

    from .fix import fix_source
    from .static.analyzer import AnalysisError

    files = discover(paths, settings.config.root, settings.config.exclude, settings.respect_gitignore).files
    changes = []
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            data = read_bytes(path)
            text = decode_source(data)
            fixed, rules = fix_source(text, rules_for(path, settings))
        except (SourceError, AnalysisError, RecursionError) as exc:
            if unanalyzed is not None:
                reason = "nesting too deep to analyze" if isinstance(exc, RecursionError) else str(exc)
                unanalyzed.append(FileError(display_path(path), reason))
            continue
        if fixed == text:
            continue
        shown = display_path(path)
        diff = "".join(difflib.unified_diff(
            text.splitlines(keepends=True), fixed.splitlines(keepends=True), f"a/{shown}", f"b/{shown}"))
        if write:
            try:
                path.write_bytes(fixed.encode(_encoding_of(data)))
            except OSError as exc:
                reason = "permission denied" if isinstance(exc, PermissionError) else exc.strerror or str(exc)
                changes.append(Change(shown, tuple(rules), diff, f"cannot write the fix: {reason}"))
                continue
        changes.append(Change(shown, tuple(rules), diff))
    return changes


def _encoding_of(data: bytes) -> str:
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return "utf-8"
    return encoding
