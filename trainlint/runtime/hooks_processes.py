"""The worker processes a guarded program starts (``torch.multiprocessing.spawn``,
``multiprocessing.Process``): followed under a guard of their own when they start with the spawn
or forkserver method (see :mod:`.workers`), recorded as not checked otherwise. DataLoader workers
only load data: they are neither followed nor reported.
"""
from __future__ import annotations

from .sites import user_site
from .workers import FOLLOWED_METHODS, FORKED, NOT_IMPORTABLE, Worker, importable_in_workers


def _loads_data(process) -> bool:
    target = getattr(process, "_target", None)
    return (getattr(target, "__module__", None) or "").startswith("torch.utils.data")


def _start_method(process) -> str:
    # A plain multiprocessing.Process has none of its own: it starts with the default context's,
    # which its start() fixes in any case.
    import multiprocessing

    return getattr(process, "_start_method", None) or multiprocessing.get_start_method()


def _worker_mode(guards) -> str:
    """A worker checks as strictly as the strictest guard it was started under (collect if the
    last guard is detaching on another thread)."""
    modes = {g.mode for g in guards}
    return next((mode for mode in ("raise", "warn") if mode in modes), "collect")


def install(patcher, hub) -> None:
    from multiprocessing.process import BaseProcess

    def start_wrapper(original):
        def start(self):
            if not hub.active or _loads_data(self):
                return original(self)
            site, method = user_site(), _start_method(self)
            unchecked = (FORKED.format(method=method) if method not in FOLLOWED_METHODS
                         else "" if importable_in_workers() else NOT_IMPORTABLE)
            if unchecked:
                result = original(self)
                hub.workers.add(Worker(hub.workers.index(self), site, self, None, unchecked))
                return result
            run = hub.workers.guarded_run(self, sorted(hub.wanted), _worker_mode(hub.guards),
                                          check_every_step=not hub.sampler.enabled)
            self.run = run  # pickled with the process object for the child (see .workers)
            try:
                result = original(self)
            finally:
                if run.inner is None:
                    del self.run
                else:
                    self.run = run.inner
            hub.workers.add(Worker(run.index, site, self, run))
            return result

        return start

    patcher.wrap(BaseProcess, "start", start_wrapper, traceable=True)
