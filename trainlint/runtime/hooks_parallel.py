"""Gradient sync of DDP and FSDP models: FORWARD events, bracketed by NO_SYNC_ENTER/EXIT when the
backward they lead to will not all-reduce (TL203).

The checker's model is DDP's: the forward decides whether the next backward syncs. At runtime the
hooks read the real decision where each wrapper makes it, and show the checker a forward with that
decision just before the backward it governs:
  - DDP reads ``require_backward_grad_sync`` in forward (``no_sync()`` and hand-managed flags alike);
  - FSDP1 (``no_sync()``) and FSDP2 (``set_requires_gradient_sync``) decide in the backward pass, so
    their forward only records how to ask, and the question is asked at backward().
"""
from __future__ import annotations

import weakref
from typing import Optional

from ..events import EventKind
from .sites import Site, user_site
from .stream import Stream


def emit_forward(hub, stream: Stream, synced: bool, site: Optional[Site] = None) -> None:
    site = site or user_site()
    if synced:
        hub.emit(stream, EventKind.FORWARD, "model(...)", site)
        return
    hub.emit(stream, EventKind.NO_SYNC_ENTER, "no_sync()", site)
    hub.emit(stream, EventKind.FORWARD, "model(...)", site)
    hub.emit(stream, EventKind.NO_SYNC_EXIT, "end of no_sync()", site)


def flush_pending_forward(hub, stream: Stream, site: Site) -> None:
    """At backward(), when an FSDP forward is pending: that forward, with the sync decision the
    model has now."""
    pending, stream.pending_sync = stream.pending_sync, None
    emit_forward(hub, stream, pending(), site)


def install(patcher, hub) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def ddp_forward(original):
        def forward(self, *args, **kwargs):
            if hub.active and torch.is_grad_enabled():  # DDP prepares no reduction without grad
                emit_forward(hub, hub.streams.stream, bool(self.require_backward_grad_sync))
            return original(self, *args, **kwargs)

        return forward

    patcher.wrap(DistributedDataParallel, "forward", ddp_forward, per_step=True, traceable=True)
    patcher.after_import("torch.distributed.fsdp", lambda _: _install_fsdp(patcher, hub))


def _install_fsdp(patcher, hub) -> None:
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState

    def fsdp1_forward(original):
        def forward(self, *args, **kwargs):
            if not hub.active or not torch.is_grad_enabled():
                return original(self, *args, **kwargs)
            stream = hub.streams.stream
            if "fsdp" in stream.busy:  # nested FSDP1 instances: the outermost is the root
                return original(self, *args, **kwargs)
            stream.busy.add("fsdp")
            hub.sharded = True
            try:
                root = weakref.ref(self)
                stream.pending_sync = lambda: bool(getattr(root(), "_sync_gradients", True))
                return original(self, *args, **kwargs)
            finally:
                stream.busy.discard("fsdp")

        return forward

    def fsdp2_root_pre_forward(original):
        # Every fully_shard module's pre-forward hook calls this; only the iteration's root keeps
        # the state as its forward root. Patched on the class because the hooks are bound methods.
        def _root_pre_forward(self, module, args, kwargs):
            result = original(self, module, args, kwargs)
            if hub.active and torch.is_grad_enabled() and self._state_ctx.iter_forward_root is self:
                hub.sharded = True
                state = weakref.ref(self)
                hub.streams.stream.pending_sync = lambda: _fsdp2_syncs(state())
            return result

        return _root_pre_forward

    patcher.wrap(FullyShardedDataParallel, "forward", fsdp1_forward, per_step=True, traceable=True)
    patcher.wrap(FSDPState, "_root_pre_forward", fsdp2_root_pre_forward, per_step=True, traceable=True)


def _fsdp2_syncs(state) -> bool:
    """Whether the backward will reduce-scatter: ``set_requires_gradient_sync`` sets ``reduce_grads``
    on the param groups of every state it reaches."""
    if state is None:
        return True
    groups = [g for s in state._state_ctx.all_states for g in s._fsdp_param_groups]
    return any(g.reduce_grads for g in groups) if groups else True
