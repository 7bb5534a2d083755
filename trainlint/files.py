"""Finding the files to check and reading them as text, with a clear error for anything else."""
from __future__ import annotations

import fnmatch
import io
import os
import stat
import subprocess
import tokenize
from pathlib import Path
from typing import Iterable, List, Sequence, Tuple

from .findings import FileError

MAX_BYTES = 10 * 1024 * 1024
SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "env", ".tox", ".nox", "build", "dist",
    "node_modules", "site-packages", ".trainlint_cache", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
})
SOURCE_SUFFIXES = (".py", ".ipynb")


class SourceError(Exception):
    """A file that cannot be read as Python source; the message is for the user."""


def is_excluded(path: Path, root: Path, patterns: Sequence[str]) -> bool:
    """fnmatch-style globs against the path relative to the project root and each of its parts."""
    if not patterns:
        return False
    try:
        relative = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        relative = path.as_posix()
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, pattern + "/*"):
            return True
        if any(fnmatch.fnmatch(part, pattern) for part in Path(relative).parts):
            return True
    return False


def _skipped_dir(path: Path) -> bool:
    return path.name in SKIPPED_DIRS or path.name.endswith(".egg-info") or (path / "pyvenv.cfg").exists()


def discover(
    paths: Iterable[str], root: Path, exclude: Sequence[str] = (), respect_gitignore: bool = True
) -> Tuple[List[Path], List[FileError]]:
    """Files to check, sorted. Explicitly named files are checked unless the config excludes them;
    directories are searched for ``*.py``/``*.ipynb`` files, skipping VCS, virtualenv and build
    directories and, inside a git work tree, what git ignores."""
    files: List[Path] = []
    errors: List[FileError] = []
    for name in paths:
        path = Path(name)
        if not os.path.lexists(path):
            errors.append(FileError(name, "no such file or directory"))
        elif path.is_dir():
            if os.access(path, os.R_OK | os.X_OK):
                found = list(_walk(path, root, exclude, errors))
                files.extend(git_unignored(path, found) if respect_gitignore else found)
            else:
                errors.append(FileError(name, "permission denied: directory is not readable"))
        elif not is_excluded(path, root, exclude):
            files.append(path)
    unique = sorted(dict.fromkeys(files), key=lambda p: p.as_posix())
    return unique, errors


def _walk(top: Path, root: Path, exclude: Sequence[str], errors: List[FileError]) -> Iterable[Path]:
    def on_error(exc: OSError) -> None:
        errors.append(FileError(str(exc.filename or top), f"cannot list directory: {exc.strerror}"))

    for directory, subdirs, filenames in os.walk(top, onerror=on_error):
        base = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if not _skipped_dir(base / d) and not is_excluded(base / d, root, exclude))
        for filename in sorted(filenames):
            path = base / filename
            if filename.endswith(SOURCE_SUFFIXES) and not is_excluded(path, root, exclude):
                yield path


def read_bytes(path: Path) -> bytes:
    try:
        info = path.stat()
        # A FIFO or device named *.py would block or never end; only regular files are read.
        if not stat.S_ISREG(info.st_mode):
            raise SourceError("not a regular file")
        if info.st_size > MAX_BYTES:
            raise SourceError(f"file too large ({info.st_size / 1024 / 1024:.1f} MB > {MAX_BYTES // 1024 // 1024} MB)")
        return path.read_bytes()
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        raise SourceError(f"cannot read file: {exc.strerror or exc}") from None


def decode_source(data: bytes) -> str:
    """The file's text, decoded as Python does (BOM, PEP 263 coding cookie, else UTF-8)."""
    if b"\x00" in data:
        raise SourceError("binary file, not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing" not in str(exc):
            raise SourceError(f"invalid encoding declaration: {exc}") from None
        encoding = "utf-8"  # undecodable first lines and no cookie: say where decoding fails
    try:
        # The BOM, if any, is not part of the text: detect_encoding says utf-8-sig for it.
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"cannot decode as {encoding} (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            f"declare the encoding with a '# -*- coding: ... -*-' line"
        ) from None
    except UnicodeError as exc:  # codecs such as idna fail without a position
        raise SourceError(f"cannot decode as {encoding}: {exc}") from None
    except LookupError:  # a codec that exists but is not a text encoding (rot13, hex)
        raise SourceError(f"coding declaration names {encoding!r}, which is not a text encoding") from None


def git_unignored(directory: Path, files: List[Path]) -> List[Path]:
    """The files git does not ignore (every .gitignore, .git/info/exclude, global excludes), asked
    of git itself so the rules are exactly git's. Outside a work tree, or without git: all files."""
    if not files:
        return files
    try:
        result = subprocess.run(
            ["git", "-C", str(directory), "check-ignore", "--stdin", "-z"],
            input=b"\0".join(str(p.resolve()).encode() for p in files),
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return files
    if result.returncode not in (0, 1):  # 128: not a git work tree
        return files
    ignored = {Path(p.decode()) for p in result.stdout.split(b"\0") if p}
    return [p for p in files if p.resolve() not in ignored]
