"""Worker processes the guard does not follow.

A program that trains in processes it starts itself (``torch.multiprocessing.spawn``,
``multiprocessing.Process``) trains where the guard is not: each child is a fresh interpreter (or a
fork whose findings die with it). Rather than report "0 findings" for a run it never saw, the
guard records where such workers were started and says so when it ends. DataLoader workers only
load data and are not counted.
"""
from __future__ import annotations

from .sites import display_path, user_site


def _loads_data(process) -> bool:
    target = getattr(process, "_target", None)
    return (getattr(target, "__module__", None) or "").startswith("torch.utils.data")


def install(patcher, hub) -> None:
    from multiprocessing.process import BaseProcess

    def start_wrapper(original):
        def start(self):
            if hub.active and not _loads_data(self):
                hub.workers.append(user_site())
            return original(self)

        return start

    patcher.wrap(BaseProcess, "start", start_wrapper, traceable=True)


def unchecked_note(workers, stepped: bool) -> str:
    """What the guard says at its end about the worker processes it did not follow."""
    if not workers:
        return ""
    sites = sorted(set(workers))
    where = ", ".join(f"{display_path(path)}:{line}" for path, line in sites[:3]) + (" ..." if len(sites) > 3 else "")
    here = ("no optimizer step ran in this process, so nothing was checked" if not stepped
            else "only this process's own training was checked")
    return (
        f"trainlint: {len(workers)} worker process{'es' if len(workers) != 1 else ''} started at {where} "
        f"ran unchecked: the guard does not follow processes the program starts, and {here}; enter "
        f"`with trainlint.guard():` in the worker function, or start one process per rank with "
        f"`torchrun ... -m trainlint run SCRIPT`.\n"
    )
