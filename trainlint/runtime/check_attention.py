"""SDPA arguments: TL803 dropout_p > 0 while the calling module is in eval mode, TL804 attn_mask
together with is_causal=True."""
from __future__ import annotations

from .sites import frame_site, user_frame

RULES = ("TL803", "TL804")


def _argument(args, kwargs, index: int, name: str, default):
    return args[index] if len(args) > index else kwargs.get(name, default)


def install(patcher, hub) -> None:
    import torch
    import torch.nn.functional as F

    def check(args, kwargs) -> None:
        attn_mask = _argument(args, kwargs, 3, "attn_mask", None)
        dropout_p = _argument(args, kwargs, 4, "dropout_p", 0.0)
        is_causal = _argument(args, kwargs, 5, "is_causal", False)
        if attn_mask is not None and is_causal and hub.wants("TL804"):
            frame = user_frame()
            hub.found("TL804", frame_site(frame), lambda: (
                "scaled_dot_product_attention() gets attn_mask together with is_causal=True, which "
                "PyTorch documents as mutually exclusive: backends disagree (some raise, the CPU math "
                "path combines the two masks), so the attention the model trains with depends on "
                "device and version; fold the causal mask into attn_mask, or pass only is_causal=True."
            ))
        if dropout_p and hub.wants("TL803"):
            frame = user_frame()
            owner = frame.f_locals.get("self") if frame is not None else None
            # The module whose forward made the call: in eval mode, dropout must be off.
            if isinstance(owner, torch.nn.Module) and not owner.training:
                hub.found("TL803", frame_site(frame), lambda: (
                    f"scaled_dot_product_attention() applies dropout_p={dropout_p} while "
                    f"{type(owner).__name__} is in eval mode: unlike nn.Dropout, the functional call "
                    f"does not know model.eval(), so validation scores and generations are randomly "
                    f"perturbed; pass dropout_p=p if self.training else 0.0."
                ))

    def sdpa_wrapper(original):
        def scaled_dot_product_attention(*args, **kwargs):
            if hub.active:  # (compiled code calls the original: see patches.py)
                check(args, kwargs)
            return original(*args, **kwargs)

        return scaled_dot_product_attention

    patcher.wrap(F, "scaled_dot_product_attention", sdpa_wrapper, per_step=True, traceable=True)
