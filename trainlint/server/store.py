"""What each analysed document reported, by the file it is in. A finding whose witness ends in
another file of the project is that file's (``engine.py``'s, when ``train.py`` was checked), so a
file's diagnostics are the union of what every open document reported into it."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Hashable, List, Mapping, Sequence, Set


class DiagnosticStore:
    def __init__(self) -> None:
        self._by_source: Dict[str, Dict[Path, List[Hashable]]] = {}

    def replace(self, source: str, by_file: Mapping[Path, Sequence[Hashable]]) -> Set[Path]:
        """What ``source`` (a document's URI) reports now; the files whose diagnostics may have
        changed (those it reported into before and now)."""
        before = self._by_source.pop(source, {})
        now = {path: list(items) for path, items in by_file.items()}
        self._by_source[source] = now
        return set(before) | set(now)

    def drop_source(self, source: str) -> Set[Path]:
        """``source`` reports nothing any more (closed); the files affected."""
        return set(self._by_source.pop(source, {}))

    def drop_file(self, path: Path) -> None:
        """``path`` is gone (deleted): nothing is reported into it any more."""
        for by_file in self._by_source.values():
            by_file.pop(path, None)

    def items(self, path: Path) -> List[Hashable]:
        """Everything reported into ``path``, each once (the same finding of ``engine.py`` found
        from ``train.py`` and from ``engine.py`` itself is one, as in ``trainlint check``)."""
        return list(dict.fromkeys(item for by_file in self._by_source.values() for item in by_file.get(path, ())))

    def files(self) -> Set[Path]:
        return {path for by_file in self._by_source.values() for path in by_file}
