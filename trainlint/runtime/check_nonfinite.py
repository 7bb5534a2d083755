"""TL810 non-finite-loss (runtime only): a NaN/Inf loss reaching backward(), or a non-finite total
gradient norm returned by clip_grad_norm_. Reading a value costs a device sync on GPU, so it is
done only while the rule is selected (``ignore="TL810"`` removes it)."""
from __future__ import annotations

import math

RULES = ("TL810",)


def _when(stream) -> str:
    """The step, for messages; the steps compiled code ran are not counted (see patches.py)."""
    if stream.steps_unseen:
        return "in a training loop whose optimizer steps run in compiled code"
    return f"at optimizer step {stream.steps + 1}"


def install(patcher, hub) -> None:
    import torch

    def value_of(tensor):
        if not isinstance(tensor, torch.Tensor):
            return None
        try:
            return tensor.item()  # item(), unlike float(), does not warn about a tensor that requires grad
        except RuntimeError:  # not a single value (a backward with explicit gradients)
            return None

    def on_backward(stream, site, label, loss, scaled) -> None:
        value = value_of(loss)
        if value is not None and not math.isfinite(value):
            when = _when(stream)
            hub.found("TL810", site, lambda: (
                f"{label} backpropagates a non-finite loss ({value}) {when}: every "
                f"gradient becomes NaN and the next update writes NaN into the weights, so the run is "
                f"lost from here on; find where the loss first diverges (learning rate, log(0), a "
                f"division by zero, fp16 overflow) and stop or skip the step when it is not finite."
            ))

    def on_clip(stream, site, label, norm) -> None:
        # With a GradScaler an inf norm is an overflow the scaler handles by skipping the step.
        if stream.scaled:
            return
        value = value_of(norm)
        if value is not None and not math.isfinite(value):
            when = _when(stream)
            hub.found("TL810", site, lambda: (
                f"{label} finds a non-finite total gradient norm ({value}) {when}: "
                f"clipping multiplies every gradient by max_norm/norm, which turns them all into NaN or "
                f"0, and the step corrupts or freezes the weights; find the non-finite loss or "
                f"gradient that causes it and skip the step when the norm is not finite."
            ))

    hub.observe("backward", RULES, on_backward)
    hub.observe("clip_norm", RULES, on_clip)
