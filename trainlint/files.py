"""Finding the files to check and reading them as text, with a clear error for anything else."""
from __future__ import annotations

import errno
import fnmatch
import io
import os
import re
import stat
import subprocess
import tokenize
from pathlib import Path
from typing import Iterable, List, NamedTuple, Optional, Sequence

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
        relative = resolved(path).relative_to(resolved(root)).as_posix()
    except ValueError:
        relative = path.as_posix()
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, pattern + "/*"):
            return True
        if any(fnmatch.fnmatch(part, pattern) for part in Path(relative).parts):
            return True
    return False


def resolved(path: Path) -> Path:
    """``path.resolve()``, except that a symbolic link that cannot be resolved (a loop) stays
    itself, in its resolved directory: pathlib raises RuntimeError (Python < 3.13) for a loop."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.parent.resolve() / path.name


def _skipped_dir(path: Path) -> bool:
    if path.name in SKIPPED_DIRS or path.name.endswith(".egg-info"):
        return True
    try:
        return (path / "pyvenv.cfg").exists()
    except OSError:  # a directory without search permission: listing it will say so
        return False


def _reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    return exc.strerror or str(exc)


def path_error(name: str) -> Optional[str]:
    """Why a path named on the command line cannot be checked at all (missing, a symbolic link
    loop, refused by the file system, an unreadable directory), or None. These are per-file
    errors: the other paths of the run are still checked."""
    try:
        info = os.stat(name)
    except FileNotFoundError:
        return None if os.path.islink(name) else "no such file or directory"  # dangling: read says
    except OSError as exc:
        reason = _reason(exc)
        return reason if isinstance(exc, PermissionError) or exc.errno == errno.ELOOP else f"cannot access: {reason}"
    except ValueError:  # an embedded NUL byte
        return "invalid path"
    if stat.S_ISDIR(info.st_mode) and not os.access(name, os.R_OK | os.X_OK):
        return "permission denied: directory is not readable"
    return None


class Discovery(NamedTuple):
    files: List[Path]  # sorted
    errors: List[FileError]
    git_ignored: int  # source files found in directories but left out because git ignores them


def discover(
    paths: Iterable[str], root: Path, exclude: Sequence[str] = (), respect_gitignore: bool = True
) -> Discovery:
    """Files to check. Explicitly named files are checked unless the config excludes them;
    directories are searched for ``*.py``/``*.ipynb`` files, skipping VCS, virtualenv and build
    directories and, inside a git work tree, what git ignores."""
    files: List[Path] = []
    errors: List[FileError] = []
    git_ignored = 0
    for name in paths:
        path = Path(name)
        problem = path_error(name)
        if problem is not None:
            errors.append(FileError(name, problem))
        elif path.is_dir():
            loops: List[Path] = []
            found = list(_walk(path, root, exclude, errors, loops))
            if respect_gitignore:
                walked = len(found)
                found, loops = git_unignored(path, found), git_unignored(path, loops)
                git_ignored += walked - len(found)
            files.extend(found)
            errors.extend(FileError(str(loop), "symbolic link loop") for loop in loops)
        elif not is_excluded(path, root, exclude):
            files.append(path)
    unique = sorted(dict.fromkeys(files), key=lambda p: p.as_posix())
    return Discovery(unique, errors, git_ignored)


def _walk(top: Path, root: Path, exclude: Sequence[str], errors: List[FileError], loops: List[Path]) -> Iterable[Path]:
    """The source files below ``top``, as ``os.walk`` would find them (symbolic links to
    directories are not followed); a directory that cannot be listed is an error, and symbolic
    links that loop are collected in ``loops`` (whatever their name: one may stand for a directory)."""
    pending = [top]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            errors.append(FileError(str(directory), f"cannot list directory: {_reason(exc)}"))
            continue
        subdirs = []
        for entry in entries:
            path = directory / entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_link = not is_dir and entry.is_symlink()
            except OSError:
                is_dir = is_link = False
            if is_dir:
                if not _skipped_dir(path) and not is_excluded(path, root, exclude):
                    subdirs.append(path)
                continue
            if is_link:
                try:
                    if os.path.isdir(path):
                        continue  # a link to a directory: not followed
                except OSError:
                    pass
                if _loops(path):
                    if not is_excluded(path, root, exclude):
                        loops.append(path)
                    continue
            if entry.name.endswith(SOURCE_SUFFIXES) and not is_excluded(path, root, exclude):
                yield path
        pending.extend(reversed(subdirs))


def _loops(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


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


_UNKNOWN_CODEC = re.compile(r"unknown encoding(?: for [^:]*)?: (\S+)")


def decode_source(data: bytes, notes: Optional[List[str]] = None) -> str:
    """The file's text, decoded as Python does (BOM, PEP 263 coding cookie, else UTF-8). A cookie
    naming a codec this Python does not have (``future_fstrings``, ``pyxl``: preprocessors a
    package registers at run time) is read as UTF-8, with a note in ``notes``: the source is still
    Python, and refusing it would hide the whole file."""
    if b"\x00" in data:
        raise SourceError("binary file, not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        unknown = _UNKNOWN_CODEC.search(str(exc))
        if unknown is not None:
            encoding = "utf-8"
            if notes is not None:
                notes.append(f"the coding declaration names {unknown.group(1)!r}, a codec this Python does not have "
                             f"(a source preprocessor?): read as UTF-8 and analysed as written")
        elif "invalid or missing" not in str(exc):
            raise SourceError(f"invalid encoding declaration: {exc}") from None
        else:
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


# A line that starts a statement at column 0 (not an ``else:``/``except:`` continuing one): a
# boundary where a module can be cut in two, each part compiling on its own iff they do together.
_TOP_LEVEL_LINE = re.compile(r"\n(?=[A-Za-z_])(?!(?:else|elif|except|finally|case)\b)")
_CHUNK = 64 * 1024


def compiles(text: str) -> bool:
    """Does CPython compile ``text``? True proves the module is valid Python; False only means the
    analyzer must look (it reports the exact error, or accepts what only libcst parses).

    Compiled in parts of about 64 KiB cut at top-level lines: a 10 MB module compiled whole holds
    about 1 GB of syntax tree; in parts, a few MB, and in half the time. A cut inside a string,
    brackets or a block makes the first part fail (it ends inside them), so parts that all compile
    prove the whole does."""
    import warnings

    start = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the analyzer's business, not this test's
        while start < len(text):
            cut = _TOP_LEVEL_LINE.search(text, start + _CHUNK) if len(text) - start > _CHUNK else None
            end = cut.end() if cut is not None else len(text)
            try:
                compile(text[start:end], "<source>", "exec", dont_inherit=True)
            except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
                return False
            start = end
    return True


def git_unignored(directory: Path, files: List[Path]) -> List[Path]:
    """The files git does not ignore (every .gitignore, .git/info/exclude, global excludes), asked
    of git itself so the rules are exactly git's. Outside a work tree, or without git: all files."""
    if not files:
        return files
    try:
        result = subprocess.run(
            ["git", "-C", str(directory), "check-ignore", "--stdin", "-z"],
            input=b"\0".join(os.fsencode(resolved(p)) for p in files),
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return files
    if result.returncode not in (0, 1):  # 128: not a git work tree
        return files
    ignored = {Path(os.fsdecode(p)) for p in result.stdout.split(b"\0") if p}
    return [p for p in files if resolved(p) not in ignored]
