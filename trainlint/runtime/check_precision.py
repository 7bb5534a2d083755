"""TL401 fp16-without-scaler: a backward pass through a float16 autocast region that no GradScaler
scaled. Reported at the autocast line, as the static analyzer does; bfloat16, and float16 regions
entered without gradients (evaluation), are not findings."""
from __future__ import annotations

from .sites import user_site

RULES = ("TL401",)


def install(patcher, hub) -> None:
    import torch
    from torch.amp.autocast_mode import autocast

    def enter_wrapper(original):
        def __enter__(self):
            result = original(self)
            # torch.cuda.amp.autocast and torch.cpu.amp.autocast enter through this method too.
            if (hub.active and self._enabled
                    and self.fast_dtype == torch.float16 and torch.is_grad_enabled()):
                hub.streams.stream.fp16_autocast = user_site()
                hub.wake(on_backward)  # a float16 run: from now on, every backward is checked
            return result

        return __enter__

    def on_backward(stream, site, label, loss, scaled) -> None:
        region, stream.fp16_autocast = stream.fp16_autocast, None
        if region is not None and not scaled:
            hub.found("TL401", region, lambda: (
                f"torch.autocast(dtype=torch.float16) runs the forward that {label} (line {site[1]}) "
                f"backpropagates with no GradScaler: gradients smaller than fp16 can hold underflow "
                f"to zero and large ones overflow to inf, so layers silently stop learning; scale "
                f"the loss with torch.amp.GradScaler, or autocast to bfloat16."
            ))

    patcher.wrap(autocast, "__enter__", enter_wrapper, per_step=True, traceable=True)
    hub.observe("backward", RULES, on_backward, awake=False)
