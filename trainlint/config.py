"""``[tool.trainlint]`` in pyproject.toml: which rules run where, and at what severity."""
from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence

from .catalog import SEVERITIES, get_rule, load_catalog, matches

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - older interpreters only
    import tomli as tomllib

KEYS = ("select", "ignore", "exclude", "per-file-ignores", "severity")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and the problem."""


@dataclass(frozen=True)
class Config:
    path: Optional[Path] = None  # the pyproject.toml it came from (None: defaults)
    select: Optional[List[str]] = None
    ignore: List[str] = field(default_factory=list)
    exclude: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    severity: Dict[str, str] = field(default_factory=dict)  # rule id -> severity

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
    if path.name == "pyproject.toml":
        return data.get("tool", {}).get("trainlint")
    return data.get("tool", {}).get("trainlint", data)


def _string_list(path: Path, key: str, value) -> List[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.trainlint] {key} must be a list of strings")
    return list(value)


def _selectors(path: Path, key: str, value) -> List[str]:
    selectors = _string_list(path, key, value)
    catalog = load_catalog().values()
    for selector in selectors:
        if not any(matches(rule, selector) for rule in catalog):
            raise ConfigError(f"{path}: [tool.trainlint] {key}: unknown rule {selector!r}")
    return selectors


def _parse(path: Path, table: dict) -> Config:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.trainlint] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: [tool.trainlint] unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: [tool.trainlint] per-file-ignores must be a table of glob = [rules]")
    severities = table.get("severity", {})
    if not isinstance(severities, dict):
        raise ConfigError(f"{path}: [tool.trainlint] severity must be a table of rule = severity")
    severity: Dict[str, str] = {}
    for key, value in severities.items():
        rule = get_rule(key)
        if rule is None:
            raise ConfigError(f"{path}: [tool.trainlint] severity: unknown rule {key!r}")
        if value not in SEVERITIES:
            raise ConfigError(f"{path}: [tool.trainlint] severity.{key} must be one of {', '.join(SEVERITIES)}")
        severity[rule.id] = value
    return Config(
        path=path,
        select=_selectors(path, "select", table["select"]) if "select" in table else None,
        ignore=_selectors(path, "ignore", table.get("ignore", [])),
        exclude=_string_list(path, "exclude", table.get("exclude", [])),
        per_file_ignores={glob: _selectors(path, f"per-file-ignores.{glob}", v) for glob, v in per_file.items()},
        severity=severity,
    )


def split_selectors(values: Iterable[str]) -> List[str]:
    """``--select TL1,TL2 --select TL3`` -> ["TL1", "TL2", "TL3"]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def effective_rules(select: Optional[Sequence[str]], ignore: Sequence[str]) -> FrozenSet[str]:
    """Default: every rule that is not opt-in. ``select`` replaces the default (and can enable
    opt-in rules); ``ignore`` removes."""
    catalog = load_catalog().values()
    if select is None:
        chosen = {r.id for r in catalog if not r.opt_in}
    else:
        chosen = {r.id for r in catalog if any(matches(r, s) for s in select)}
    return frozenset(r for r in chosen if not any(matches(load_catalog()[r], s) for s in ignore))


def ignored_for(config: Config, path: Path) -> List[str]:
    """per-file-ignores selectors that apply to a file (globs relative to the config's directory)."""
    try:
        relative = path.resolve().relative_to(config.root.resolve()).as_posix()
    except ValueError:
        relative = path.as_posix()
    return [s for glob, selectors in config.per_file_ignores.items() if fnmatch.fnmatch(relative, glob) for s in selectors]
