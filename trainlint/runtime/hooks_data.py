"""Events of the data: batches fetched (for accumulation boundaries), the end of a pass over a
loader (``loader_end``), LOADER_ITER and SET_EPOCH of DistributedSampler.

A pass ends when its DataLoader runs out, unless a loader that wraps it and reads ahead is
iterating it (Accelerate's prepared loaders; ``[[loader_passes]]`` in trainlint/libraries): the
DataLoader inside then runs out while the last batch is still to be used, and the pass ends where
that loader's own pass ends."""
from __future__ import annotations

import weakref
from typing import Any, Optional

from ..events import EventKind
from .hooks_optim import target
from .sites import frame_site, user_frame

_PASSES_KEPT = 8  # passes of wrapping loaders under way at once, per thread


def _name_in(frame: Any, sampler: Any) -> Optional[str]:
    """How the user's code at the loop calls the sampler: a variable holding it, or a loader
    (also an attribute of ``self``) whose ``.sampler`` it is. Used in messages only."""
    scopes = [frame.f_locals]
    owner = frame.f_locals.get("self")
    if owner is not None and hasattr(owner, "__dict__"):
        scopes.append({f"self.{k}": v for k, v in vars(owner).items()})
    for scope in scopes:
        for name, value in scope.items():
            if value is sampler:
                return name
        for name, value in scope.items():
            if getattr(value, "sampler", None) is sampler and not name.startswith("_"):
                return f"{name}.sampler"
    return None


def install(patcher, hub) -> None:
    from torch.utils.data import DistributedSampler
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    from ..static.library import current

    def end_pass(stream) -> None:
        hub.catch_up(stream)  # a step compiled code ran may have consumed the remainder
        hub.notify("loader_end", stream)

    for described in current().loader_passes:
        patcher.after_import(described.module, lambda module, d=described: _wrap_pass(patcher, hub, module, d, end_pass))

    def next_wrapper(original):
        def __next__(self):
            if not hub.active:
                return original(self)
            stream = hub.streams.stream
            try:
                batch = original(self)
            except StopIteration:
                if not stream.wrapped_passes:
                    end_pass(stream)
                raise
            stream.fetches += 1
            if stream.loader is None or stream.loader() is not self:  # a new pass, for the sampler's forecast
                stream.loader = weakref.ref(self)
            return batch

        return __next__

    # Every DataLoader iterator (single- and multi-process) inherits this __next__.
    patcher.wrap(_BaseDataLoaderIter, "__next__", next_wrapper, per_step=True)

    def iter_wrapper(original):
        def __iter__(self):
            if hub.active:
                # Called lazily by the loader at the first batch of a pass: the user frame is the
                # `for batch in loader:` line (or the next()/iter() call). The pass is an epoch of
                # training only if an optimizer steps before the next pass begins: a peek at one
                # batch (next(iter(loader))) or an evaluation pass is not one, so the event waits
                # for that step (see hooks_optim.emit_step).
                frame = user_frame()
                sampler = target(self)
                if sampler not in hub.names:
                    hub.names[sampler] = (_name_in(frame, self) if frame is not None else None) or "sampler"
                if hub.coasting:  # a new pass while the per-step hooks are out: watch again
                    hub.sampler.resume()
                hub.streams.stream.pending_pass = (frame_site(frame), sampler, bool(self.shuffle))
            return original(self)

        return __iter__

    def set_epoch_wrapper(original):
        def set_epoch(self, epoch):
            # Only a new epoch value reshuffles: set_epoch(0) every epoch does not.
            if hub.active and epoch != self.epoch:
                hub.emit(hub.streams.stream, EventKind.SET_EPOCH, "sampler.set_epoch(epoch)", target=target(self))
            return original(self, epoch)

        return set_epoch

    patcher.wrap(DistributedSampler, "__iter__", iter_wrapper)
    patcher.wrap(DistributedSampler, "set_epoch", set_epoch_wrapper)



def _wrap_pass(patcher, hub, module, described, end_pass) -> None:
    """Hook a described loader class: its pass over the DataLoader inside runs from ``begins`` to
    ``ends``, and the DataLoader running out meanwhile is not the end of the pass."""
    cls = getattr(module, described.name)

    def begin_wrapper(original):
        def begins(self, *args, **kwargs):
            if hub.active:
                passes = hub.streams.stream.wrapped_passes
                if len(passes) < _PASSES_KEPT:  # a pass left by a break never ends: bounded memory
                    passes.add(id(self))
            return original(self, *args, **kwargs)

        return begins

    def end_wrapper(original):
        def ends(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            if hub.active:
                stream = hub.streams.stream
                if id(self) in stream.wrapped_passes:
                    stream.wrapped_passes.discard(id(self))
                    end_pass(stream)
            return result

        return ends

    patcher.wrap(cls, described.begins, begin_wrapper)
    patcher.wrap(cls, described.ends, end_wrapper)
