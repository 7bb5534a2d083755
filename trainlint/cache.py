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
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import __version__
from .catalog import load_catalog
from .findings import FileError, Finding

FORMAT = 1
DIRECTORY = ".trainlint_cache"


def cache_dir(root: Path) -> Path:
    override = os.environ.get("TRAINLINT_CACHE_DIR")
    return Path(override) if override else root / DIRECTORY


def _catalog_fingerprint() -> str:
    return ",".join(f"{r.id}:{r.name}:{r.severity}" for r in load_catalog().values())


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
    for part in (f"v{FORMAT}", __version__, _code_fingerprint(), _catalog_fingerprint(), kind, ",".join(sorted(rules)),
                 json.dumps(severity, sort_keys=True), library):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(data)
    return digest.hexdigest()


def _digest_of(path: Path) -> Optional[str]:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class Cache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, digest: str) -> Path:
        return self.directory / digest[:2] / f"{digest}.json"

    def get(self, digest: str, path: str) -> Optional[Tuple[List[Finding], List[FileError]]]:
        try:
            data = json.loads(self._path(digest).read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or data.get("version") != __version__:
                return None
            if any(_digest_of(Path(dep)) != expected for dep, expected in data.get("modules", {}).items()):
                return None  # a project module the result depends on has changed
            findings = [Finding(**{"path": path, **item}) for item in data["findings"]]
            errors = [FileError(path, message) for message in data["errors"]]
            return findings, errors
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None  # absent, corrupt or foreign: recompute

    def put(self, digest: str, findings: List[Finding], errors: List[FileError],
            modules: Optional[Dict[Path, str]] = None, path: Optional[str] = None) -> None:
        """``modules``: the other project modules the analysis read, with their content digests.
        Findings in those modules keep their own path; the checked file's (``path``) is implied."""
        entry = {
            "format": FORMAT,
            "version": __version__,
            "findings": [{k: v for k, v in f.__dict__.items() if k != "path" or (path is not None and v != path)}
                         for f in findings],
            "errors": [e.message for e in errors],
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
        if not ignore.exists():
            ignore.write_text("# Created by trainlint; safe to delete.\n*\n", encoding="utf-8")
            (self.directory / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n", encoding="utf-8")
