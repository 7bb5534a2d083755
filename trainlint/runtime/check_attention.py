"""SDPA arguments: TL803 dropout_p > 0 while the calling module is in eval mode, TL804 attn_mask
together with is_causal=True, TL805 a boolean mask in the "True = hide" convention."""
from __future__ import annotations

from .sites import frame_site, user_frame

RULES = ("TL803", "TL804", "TL805")
_MASKS_KEPT = 64


def _argument(args, kwargs, index: int, name: str, default):
    return args[index] if len(args) > index else kwargs.get(name, default)


def install(patcher, hub) -> None:
    import torch
    import torch.nn.functional as F

    judged = {}  # (id, version) of each boolean mask seen -> inverted? (a mask is read once)

    def inverted(mask) -> bool:
        if mask.dtype is not torch.bool or mask.dim() < 2 or mask.size(-1) != mask.size(-2):
            return False
        key = (id(mask), mask._version)
        verdict = judged.get(key)
        if verdict is None:
            if len(judged) >= _MASKS_KEPT:
                judged.clear()
            # No query may attend to its own position: the mask hides what it should keep.
            verdict = judged[key] = not bool(mask.diagonal(dim1=-2, dim2=-1).any())
        return verdict

    def check(args, kwargs) -> None:
        attn_mask = _argument(args, kwargs, 3, "attn_mask", None)
        if attn_mask is not None and hub.wants("TL805") and inverted(attn_mask):
            hub.found("TL805", frame_site(user_frame()), lambda: (
                "scaled_dot_product_attention() gets a boolean attn_mask whose diagonal is all False: "
                "it is True on the positions to hide (the masked_fill convention), but SDPA reads True "
                "as 'attend', so every token attends only to the future and never to itself; pass "
                "torch.tril(...).bool() (True = attend), or is_causal=True alone."
            ))
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
