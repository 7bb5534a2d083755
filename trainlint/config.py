"""``[tool.trainlint]`` in pyproject.toml: which rules run where, and at what severity."""
from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from .catalog import ADVICE, SEVERITIES, Rule, get_rule, load_catalog, matches

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - older interpreters only
    import tomli as tomllib

KEYS = ("select", "extend-select", "ignore", "exclude", "per-file-ignores", "severity", "library")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and the problem."""


@dataclass(frozen=True)
class Config:
    path: Optional[Path] = None  # the pyproject.toml it came from (None: defaults)
    select: Optional[List[str]] = None
    extend_select: List[str] = field(default_factory=list)  # added to the default set or to select
    ignore: List[str] = field(default_factory=list)
    exclude: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    severity: Dict[str, str] = field(default_factory=dict)  # rule id -> severity
    # The project's own training APIs, described like trainlint/libraries/*.toml
    library: Dict[str, list] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()


def find_config(start: Path) -> Config:
    """The first pyproject.toml with a [tool.trainlint] table, from ``start`` upward."""
    current = start.resolve()
    if current.is_file() or not current.exists():
        current = current.parent
    for directory in [current, *current.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            table = _read_table(candidate)
            if table is not None:
                return _parse(candidate, table)
    return Config()


def configs_for(paths: Sequence[str]) -> List[Tuple[Config, List[str]]]:
    """Each path argument with the config found upward from it, paths sharing a config grouped, so
    ``trainlint projA projB`` checks each project under its own settings."""
    by_start: Dict[Path, Config] = {}  # pre-commit passes many files from few directories
    groups: Dict[Optional[Path], Tuple[Config, List[str]]] = {}
    for name in paths:
        start = Path(name).resolve()
        start = start if start.is_dir() else start.parent
        if start not in by_start:
            by_start[start] = find_config(start)
        config = by_start[start]
        groups.setdefault(config.path, (config, []))[1].append(name)
    return list(groups.values())


def load_config(path: Path) -> Config:
    """An explicitly named config file (pyproject.toml with [tool.trainlint], or a trainlint.toml)."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    table = _read_table(path)
    if table is None:
        raise ConfigError(f"{path}: no [tool.trainlint] table")
    return _parse(path, table)


def _read_table(path: Path) -> Optional[dict]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table")
    if path.name == "pyproject.toml":
        return tool.get("trainlint")
    return tool.get("trainlint", data)  # a trainlint.toml holds the keys at its top level


def _string_list(path: Path, key: str, value) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.trainlint] {key} must be a list of strings")
    return list(value)


def _selectors(path: Path, key: str, value) -> List[str]:
    selectors = _string_list(path, key, value)
    catalog = load_catalog().values()
    for selector in selectors:
        # An empty selector would match every rule (every id starts with "").
        if not selector.strip() or not any(matches(rule, selector) for rule in catalog):
            raise ConfigError(f"{path}: [tool.trainlint] {key}: unknown rule {selector!r}")
    return selectors


def _table(path: Path, key: str, value, shape: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [tool.trainlint] {key} must be a table of {shape}")
    return value


def _severities(path: Path, table: dict) -> Dict[str, str]:
    severity: Dict[str, str] = {}
    for key, value in table.items():
        rule = get_rule(key)
        if rule is None:
            raise ConfigError(f"{path}: [tool.trainlint] severity: unknown rule {key!r}")
        if value not in SEVERITIES:
            raise ConfigError(f"{path}: [tool.trainlint] severity.{key} must be one of {', '.join(SEVERITIES)}")
        severity[rule.id] = value
    return severity


def _parse(path: Path, table) -> Config:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.trainlint] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: [tool.trainlint] unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    per_file = _table(path, "per-file-ignores", table.get("per-file-ignores", {}), "glob = [rules]")
    return Config(
        path=path,
        select=_selectors(path, "select", table["select"]) if "select" in table else None,
        extend_select=_selectors(path, "extend-select", table.get("extend-select", [])),
        ignore=_selectors(path, "ignore", table.get("ignore", [])),
        exclude=_string_list(path, "exclude", table.get("exclude", [])),
        per_file_ignores={glob: _selectors(path, f"per-file-ignores.{glob}", v) for glob, v in per_file.items()},
        severity=_severities(path, _table(path, "severity", table.get("severity", {}), "rule = severity")),
        library=_library(path, table.get("library", {})),
    )


def _library(path: Path, value) -> Dict[str, list]:
    """``[tool.trainlint.library]``: checked now, so a mistake is a config error, not a crash later."""
    from .static.library import LibraryError, build, shipped_tables  # static engine: loaded on use

    table = _table(path, "library", value, "objects / methods / functions / returns")
    try:
        build(shipped_tables() + [(f"{path}: [tool.trainlint.library]", table)])
    except (LibraryError, KeyError, TypeError) as exc:
        raise ConfigError(str(exc) if isinstance(exc, LibraryError) else f"{path}: [tool.trainlint.library]: {exc!r}") from None
    return table


def split_selectors(values: Iterable[str]) -> List[str]:
    """``--select TL1,TL2 --select TL3`` -> ["TL1", "TL2", "TL3"]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _specificity(selector: str) -> int:
    """How narrowly a selector names rules: ALL < TL < TL1 < TL10 < one rule (id or name)."""
    if selector.strip().upper() == "ALL":
        return 0
    if selector.strip().upper() == ADVICE:
        return 1  # as broad as a prefix: ``--select ADVICE --ignore TL702`` drops TL702
    return 5 if get_rule(selector.strip()) is not None else len(selector.strip())


def _strongest(rule: Rule, selectors: Sequence[str]) -> int:
    return max((_specificity(s) for s in selectors if matches(rule, s)), default=-1)


def _apply(current: FrozenSet[str], select: Optional[Sequence[str]], extend: Sequence[str],
           ignore: Sequence[str]) -> FrozenSet[str]:
    """One layer of selection, as ruff resolves it: a layer's ``select`` replaces the rule set
    (and can enable opt-in rules), its ``extend-select`` adds to what it has; where a select and an
    ignore of the layer both match a rule, the more specific one wins, an ignore on a tie
    (``select TL1`` + ``ignore TL101``, and the reverse)."""
    chosen = set()
    for rule in load_catalog().values():
        ignored = _strongest(rule, ignore)
        if _strongest(rule, extend) > ignored:
            keep = True
        elif select is None:
            keep = rule.id in current and ignored < 0
        else:
            keep = _strongest(rule, select) > ignored
        if keep:
            chosen.add(rule.id)
    return frozenset(chosen)


@dataclass(frozen=True)
class Selection:
    rules: FrozenSet[str]  # the rule ids in force
    # Rules whose advice-tier findings are shown too (TL901 on a weights-only export nothing resumes from):
    # those selected by ``ADVICE``, ``ALL`` or their own id or name, not by a prefix.
    advice: FrozenSet[str]


def resolve_selection(config: Config, cli_select: Optional[Sequence[str]], cli_ignore: Sequence[str],
                      cli_extend: Sequence[str] = ()) -> Selection:
    """The rules in force: every rule that is not advice, then the config's layer, then the command
    line's. As in ruff, a command-line ``--select`` starts over (the config's select, extend-select
    and ignore no longer apply) and ``--ignore`` alone removes rules from what the config chose."""
    default = frozenset(r.id for r in load_catalog().values() if not r.opt_in)
    rules = _apply(_apply(default, config.select, config.extend_select, config.ignore), cli_select, cli_extend, cli_ignore)
    selectors = list(cli_select or ()) + list(cli_extend)
    if cli_select is None:
        selectors += list(config.select or ()) + list(config.extend_select)
    catalog = load_catalog()
    advice = frozenset(rule for rule in rules if any(_names_advice(catalog[rule], s) for s in selectors))
    return Selection(rules, advice)


def _names_advice(rule: Rule, selector: str) -> bool:
    selector = selector.strip()
    return selector.upper() in ("ALL", ADVICE) or rule.id == selector.upper() or rule.name == selector


def resolve_rules(config: Config, cli_select: Optional[Sequence[str]], cli_ignore: Sequence[str]) -> FrozenSet[str]:
    return resolve_selection(config, cli_select, cli_ignore).rules


def ignored_for(config: Config, path: Path) -> List[str]:
    """per-file-ignores selectors that apply to a file: globs match its path relative to the
    config's directory, or its file name (so ``"__init__.py"`` means every ``__init__.py``)."""
    try:
        relative = path.resolve().relative_to(config.root.resolve()).as_posix()
    except ValueError:
        relative = path.as_posix()
    return [
        selector
        for glob, selectors in config.per_file_ignores.items()
        if fnmatch.fnmatch(relative, glob) or fnmatch.fnmatch(path.name, glob)
        for selector in selectors
    ]
