"""Baselines: adopt trainlint on an existing codebase and fail CI only on new findings.

``--write-baseline FILE`` records the current findings; ``--baseline FILE`` leaves out the
findings recorded there. A finding is recorded as its rule, its file (relative to the baseline's
directory, with ``/``) and its fingerprint (trainlint/fingerprints.py), never its line: a finding
that moves because lines were added above it still matches. The file is JSON, versioned, its
entries sorted, so that rewriting it for the same findings writes the same bytes.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Sequence, Set, Tuple

from .fingerprints import fingerprints
from .findings import Finding

VERSION = 1
Key = Tuple[str, str, str]  # rule, path relative to the baseline's directory, fingerprint


class BaselineError(Exception):
    """A baseline file that cannot be read or is not one."""


def _relative(path: str, directory: Path) -> str:
    return Path(os.path.relpath(os.path.abspath(path), directory)).as_posix()


def keys(findings: Sequence[Finding], baseline: Path) -> List[Key]:
    directory = Path(os.path.abspath(baseline)).parent
    return [(f.rule, _relative(f.path, directory), fingerprint) for f, fingerprint in zip(findings, fingerprints(findings))]


def entries(findings: Sequence[Finding], baseline: Path) -> List[Key]:
    """The baseline's entries for ``findings``, in the file's order: by path, rule, fingerprint."""
    return sorted(set(keys(findings, baseline)), key=lambda k: (k[1], k[0], k[2]))


def render(recorded: Sequence[Key]) -> str:
    document = {
        "version": VERSION,
        "tool": "trainlint",
        "findings": [{"path": path, "rule": rule, "fingerprint": fingerprint} for rule, path, fingerprint in recorded],
    }
    return json.dumps(document, indent=2) + "\n"


def write(findings: Sequence[Finding], baseline: Path) -> int:
    """Record ``findings`` in ``baseline``; returns how many entries it holds."""
    recorded = entries(findings, baseline)
    try:
        baseline.write_text(render(recorded), encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"cannot write the baseline {baseline}: {exc.strerror or exc}") from None
    return len(recorded)


def load(baseline: Path) -> Set[Key]:
    try:
        data = json.loads(baseline.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"cannot read the baseline {baseline}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{baseline} is not a trainlint baseline: {exc}") from None
    if not isinstance(data, dict) or data.get("tool") != "trainlint" or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{baseline} is not a trainlint baseline (written by --write-baseline)")
    if data.get("version") != VERSION:
        raise BaselineError(f"{baseline} is a version {data.get('version')!r} baseline; this trainlint reads version "
                            f"{VERSION}: write it again with --write-baseline")
    entries = set()
    for entry in data["findings"]:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("rule", "path", "fingerprint")):
            raise BaselineError(f"{baseline}: malformed entry {entry!r}")
        entries.add((entry["rule"], entry["path"], entry["fingerprint"]))
    return entries


def apply(findings: Sequence[Finding], baseline: Path) -> Tuple[List[Finding], int]:
    """The findings the baseline does not record, and how many it does."""
    known = load(baseline)
    kept = [f for f, key in zip(findings, keys(findings, baseline)) if key not in known]
    return kept, len(findings) - len(kept)
