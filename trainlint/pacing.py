"""Garbage collection paced by how much the heap grew, not by allocation counts.

Analyzing a file allocates its whole syntax tree and the engine's models of it. They hold no
reference cycles (links back to a module are weak, a check's interpreters are closed when it
ends), so reference counting frees them the moment they are done with. What the cyclic collector
would find is little, but CPython's generational collector, triggered every few hundred
allocations, would still scan those young trees again and again: on a large package that was a
quarter of the run time. Here automatic collection is off while files are checked, and a full
collection runs once the heap has grown by a budget of objects (CPython's own count of container
objects allocated and not yet freed since the last collection), so the cyclic garbage that does
arise (a closure of ``ast.literal_eval``, an exception's traceback) stays bounded.

Most of those collections are young: they look only at the objects allocated since the previous
one, where that garbage is (it is made and dropped within one file's check; between files nothing
that lives on is in a cycle). A full collection also walks every tree kept for reuse, which is
most of its cost and frees nothing there; one in ``FULL_EVERY`` is full all the same, so a cycle
that did outlive a collection is still freed.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# A million container objects is some 100 MiB. The count rises only with the models kept for
# reuse (a few dozen modules, reached early) and with cyclic garbage, so on a whole package
# (torch: 2,285 files) this means a handful of collections, not hundreds.
NET_OBJECTS_PER_COLLECTION = 1_000_000
FULL_EVERY = 4
_YOUNG = 1  # generations 0 and 1: everything allocated since the previous paced collection


class Pacer:
    """Collects when the heap has grown by the budget since the last collection."""

    def __init__(self, active: bool) -> None:
        self.active = active  # False where collection was already off: the host's choice stands
        self._collections = 0

    def analyzed(self) -> None:
        """A file was analyzed: collect if the heap grew enough since the last collection."""
        if self.active and gc.get_count()[0] >= NET_OBJECTS_PER_COLLECTION:
            self._collections += 1
            if self._collections % FULL_EVERY:
                gc.collect(_YOUNG)
            else:
                gc.collect()


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


def worker_analyzed() -> None:
    _worker_pacer.analyzed()
