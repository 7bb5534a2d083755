"""Garbage collection paced by the source analyzed, not by allocation counts.

Analyzing a file allocates its whole syntax tree and the engine's models of it, which stay alive
until the file is done and are then garbage held in reference cycles (functions point at their
module, interpreters at their evidence). CPython's generational collector, triggered every few
hundred allocations, scans those young survivors again and again: on a large package that was a
quarter of the run time. Here automatic collection is off while files are checked, and one full
collection runs after every few megabytes of analyzed source (or every few hundred files), so
each file's garbage is scanned about once and memory stays bounded.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# Trees and models cost about 40 bytes of memory per byte of source: ~4 MB of source between
# collections keeps the extra memory near 150 MiB whatever the number of files.
SOURCE_BYTES_PER_COLLECTION = 4_000_000
FILES_PER_COLLECTION = 250


class Pacer:
    """Counts the source analyzed since the last collection and collects when it is enough."""

    def __init__(self, active: bool) -> None:
        self.active = active  # False where collection was already off: the host's choice stands
        self._bytes = 0
        self._files = 0

    def analyzed(self, size: int) -> None:
        if not self.active:
            return
        self._bytes += size
        self._files += 1
        if self._bytes >= SOURCE_BYTES_PER_COLLECTION or self._files >= FILES_PER_COLLECTION:
            gc.collect()
            self._bytes = self._files = 0


@contextmanager
def paced_collection() -> Iterator[Pacer]:
    """Automatic collection off for the block (restored after it, also on errors); the block
    reports each analyzed file to the pacer."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield Pacer(active=enabled)
    finally:
        if enabled:
            gc.enable()


_worker_pacer = Pacer(active=False)


def start_worker() -> None:
    """In a worker process of the pool (its whole life is checking files): pace collection."""
    global _worker_pacer
    _worker_pacer = Pacer(active=gc.isenabled())
    gc.disable()


def worker_analyzed(size: int) -> None:
    _worker_pacer.analyzed(size)
