"""Events of GradScaler: which tensors it scaled (read by BACKWARD), UNSCALE, its steps (including
the ones it skips for inf/NaN gradients) and SCALER_UPDATE."""
from __future__ import annotations

import weakref
from typing import Any

from ..events import EventKind
from .hooks_optim import edits_grads, emit_step, subclasses, target

_SCALED_KEPT = 16  # tensors from GradScaler.scale remembered at once: one or two per step in practice


def _mark_scaled(hub, scaled: Any, loss: Any) -> None:
    import torch

    if isinstance(scaled, torch.Tensor):
        if len(hub.scaled) >= _SCALED_KEPT:
            del hub.scaled[next(iter(hub.scaled))]
        # Weak references: the guard must not keep a loss (or its graph) alive.
        hub.scaled[id(scaled)] = (weakref.ref(scaled), weakref.ref(loss))
    elif isinstance(scaled, (list, tuple)) and isinstance(loss, (list, tuple)):
        for one, its_loss in zip(scaled, loss):
            _mark_scaled(hub, one, its_loss)


def install(patcher, hub) -> None:
    from torch.amp import GradScaler

    def scale_wrapper(original):
        def scale(self, outputs):
            result = original(self, outputs)
            if hub.active and result is not outputs:  # a disabled scaler returns its input
                _mark_scaled(hub, result, outputs)
            return result

        return scale

    def unscale_wrapper(original):
        def unscale_(self, optimizer):
            if hub.active and self.is_enabled():
                stream = hub.streams.stream
                if "scaler" not in stream.busy:  # not the unscale_ inside scaler.step()
                    hub.emit(stream, EventKind.UNSCALE, "scaler.unscale_(optimizer)", target=target(self),
                             optimizer=target(optimizer))
                return edits_grads(hub, lambda: original(self, optimizer))
            return original(self, optimizer)

        return unscale_

    def step_wrapper(original):
        def step(self, optimizer, *args, **kwargs):
            if not hub.active or not self.is_enabled():
                return original(self, optimizer, *args, **kwargs)  # then just an optimizer.step()
            stream = hub.streams.stream
            if "scaler" in stream.busy:
                return original(self, optimizer, *args, **kwargs)
            stream.busy.add("scaler")
            stream.scaler_step, stream.scaler_stepped = optimizer, False
            try:
                result = original(self, optimizer, *args, **kwargs)
                skipped = not stream.scaler_stepped
            finally:
                stream.busy.discard("scaler")
                stream.scaler_step, stream.scaler_stepped = None, False
            if skipped:  # inf/NaN gradients: the optimizer's own step() never ran, but this is a step
                hub.skipped_by_scaler.add(optimizer)
                emit_step(hub, stream, optimizer, via_scaler=True)
            return result

        return step

    def update_wrapper(original):
        def update(self, *args, **kwargs):
            if hub.active and self.is_enabled():
                if hub.coasting:
                    hub.sampler.coast_scaler_update(hub.streams.stream)
                else:
                    hub.emit(hub.streams.stream, EventKind.SCALER_UPDATE, "scaler.update()", target=target(self))
            return original(self, *args, **kwargs)

        return update

    wrappers = {"scale": scale_wrapper, "unscale_": unscale_wrapper, "step": step_wrapper, "update": update_wrapper}
    wrapped = set()

    def wrap_scalers(_module=None) -> None:
        for cls in subclasses(GradScaler):  # torch.cuda.amp.GradScaler, FSDP's ShardedGradScaler, ...
            for name, make in wrappers.items():
                if name in vars(cls) and (cls, name) not in wrapped:
                    wrapped.add((cls, name))
                    # update() stays in while the guard coasts: it is how a scaler that skips
                    # every step (a loss gone NaN) still reaches the sampler.
                    patcher.wrap(cls, name, make, per_step=name != "update")

    wrap_scalers()
    # FSDP's ShardedGradScaler overrides scale() and unscale_(); it exists once FSDP is imported.
    patcher.after_import("torch.distributed.fsdp", wrap_scalers)
