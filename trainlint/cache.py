"""Content-hash cache of per-file results in ``.trainlint_cache/``.

The key covers the file's bytes, trainlint's version, the catalog, and everything in the
configuration that changes findings, so a hit is exactly what a fresh run would report. Anything
unreadable or unexpected in the cache is a miss, never an error.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .catalog import SEVERITIES, TIERS, catalog_digest, load_catalog
from .findings import FileError, FileNote, Finding

FORMAT = 2
DIRECTORY = ".trainlint_cache"


def cache_dir(root: Path) -> Path:
    override = os.environ.get("TRAINLINT_CACHE_DIR")
    return Path(override) if override else root / DIRECTORY


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """Size and mtime of trainlint's own modules and library descriptions: an edited or reinstalled
    analyzer (a git checkout between releases keeps the version) must not be answered from results
    of the old code."""
    package = Path(__file__).resolve().parent
    stats = []
    for module in sorted([*package.rglob("*.py"), *package.rglob("*.toml")]):
        try:
            info = module.stat()
        except OSError:
            continue
        stats.append(f"{module.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(stats).encode()).hexdigest()


def key(data: bytes, kind: str, rules: frozenset, severity: dict, library: str = "") -> str:
    """``library``: the digest of the library descriptions in force (a project's own included)."""
    digest = hashlib.sha256()
    for part in (f"v{FORMAT}", __version__, _code_fingerprint(), catalog_digest(), kind, ",".join(sorted(rules)),
                 json.dumps(severity, sort_keys=True), library):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(data)
    return digest.hexdigest()


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file; OSError otherwise. Opened without blocking
    and checked before reading: a FIFO put where an entry (or a module it names) should be would
    otherwise hang the run, and a device would never end."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return handle.read()


def _digest_of(path: Path) -> Optional[str]:
    try:
        return hashlib.sha256(_read_regular(path)).hexdigest()
    except OSError:
        return None


# The fields of a stored finding and their types (``path`` only for another module's finding).
_INT_FIELDS = ("line", "column", "end_line", "end_column")
_STR_FIELDS = ("rule", "name", "severity", "message")


def _finding(item: Any, path: str) -> Finding:
    """A stored finding read back, or ValueError for anything a fresh run could not have stored."""
    if not isinstance(item, dict) or not set(item) <= {"path", "cell", "trace", "tier", "worker", *_INT_FIELDS, *_STR_FIELDS}:
        raise ValueError("not a finding")
    if not all(type(item.get(k)) is int for k in _INT_FIELDS) or not all(type(item.get(k)) is str for k in _STR_FIELDS):
        raise ValueError("not a finding")
    if type(item.get("path", "")) is not str or type(item.get("tier", "")) is not str \
            or any(type(item.get(k, 0)) not in (int, type(None)) for k in ("cell", "worker")):
        raise ValueError("not a finding")
    trace = item.get("trace", [])
    if not isinstance(trace, list) or not all(type(step) is str for step in trace):
        raise ValueError("not a finding")
    if item["rule"] not in load_catalog() or item["severity"] not in SEVERITIES or item.get("tier", "error") not in TIERS:
        raise ValueError("not a finding")  # the reporters look these up
    return Finding(**{"path": path, **item})


class Cache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, digest: str) -> Path:
        return self.directory / digest[:2] / f"{digest}.json"

    def get(self, digest: str, path: str) -> Optional[Tuple[List[Finding], List[FileError], List[FileNote]]]:
        try:
            data = json.loads(_read_regular(self._path(digest)).decode("utf-8"))
            if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != __version__:
                return None
            modules, stored, messages = data.get("modules", {}), data["findings"], data["errors"]
            notes = data.get("incomplete", [])
            # Valid JSON of the wrong shape (another tool's, an edited or older entry) is a miss too.
            if not isinstance(modules, dict) or not all(type(v) is str for v in modules.values()):
                return None
            if not isinstance(stored, list) or not isinstance(messages, list) or not all(type(m) is str for m in messages):
                return None
            if not isinstance(notes, list) or not all(type(n) is str for n in notes):
                return None
            if any(_digest_of(Path(dep)) != expected for dep, expected in modules.items()):
                return None  # a project module the result depends on has changed
            findings = [_finding(item, path) for item in stored]
            errors = [FileError(path, message) for message in messages]
            return findings, errors, [FileNote(path, note) for note in notes]
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return None  # absent, corrupt or foreign: recompute

    def put(self, digest: str, findings: List[Finding], errors: List[FileError],
            modules: Optional[Dict[Path, str]] = None, path: Optional[str] = None,
            notes: Sequence[FileNote] = ()) -> None:
        """``modules``: the other project modules the analysis read, with their content digests.
        Findings in those modules keep their own path; the checked file's (``path``) is implied."""
        entry = {
            "format": FORMAT,
            "version": __version__,
            "findings": [{k: v for k, v in f.__dict__.items() if k != "path" or (path is not None and v != path)}
                         for f in findings],
            "errors": [e.message for e in errors],
            "incomplete": [n.message for n in notes],
            "modules": {str(path): value for path, value in (modules or {}).items()},
        }
        target = self._path(digest)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._mark()
            fd, temporary = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(entry, handle)
            os.replace(temporary, target)  # atomic: parallel runs never see half an entry
        except OSError:
            pass  # a read-only tree still gets checked, just without a cache

    def _mark(self) -> None:
        ignore = self.directory / ".gitignore"
        if not os.path.lexists(ignore):
            _write_new(ignore, "# Created by trainlint; safe to delete.\n*\n")
            _write_new(self.directory / "CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` with ``text``. What is already there is left alone, never opened: a FIFO
    in its place would block the run (and a parallel run may have just written it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
