"""TL307 fsdp-wrap-policy-matched-nothing: FSDP1 built with an auto_wrap_policy that wrapped no
submodule (``transformer_layer_cls`` naming a class the model does not contain). Only the root is
then an FSDP unit: every forward gathers the whole model's parameters at once, the memory plan the
policy was written for silently fails, and nothing errors."""
from __future__ import annotations

import functools
import weakref
from collections import Counter
from typing import Any, List

from .sites import user_site

RULES = ("TL307",)
_POLICY_POSITION = 3  # FullyShardedDataParallel(module, process_group, sharding_strategy, cpu_offload, auto_wrap_policy)


def install(patcher, hub) -> None:
    patcher.after_import("torch.distributed.fsdp", lambda module: _install(patcher, hub, module))


def _install(patcher, hub, module) -> None:
    fsdp = module.FullyShardedDataParallel
    building = []  # FSDP units under construction: the policy builds the inner ones in the root's
    policies_at = weakref.WeakKeyDictionary()  # ModuleWrapPolicy/CustomPolicy -> the user line that built it

    def policy_init_wrapper(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if hub.active and hub.wants("TL307"):
                policies_at[self] = user_site()

        return __init__

    wrap = getattr(module, "wrap", None)
    for name in ("ModuleWrapPolicy", "CustomPolicy"):
        cls = getattr(wrap, name, None)
        if isinstance(cls, type) and "__init__" in vars(cls):
            patcher.wrap(cls, "__init__", policy_init_wrapper, traceable=True)

    def init_wrapper(original):
        def __init__(self, *args, **kwargs):
            building.append(self)
            try:
                original(self, *args, **kwargs)
            finally:
                building.pop()
            policy = kwargs.get("auto_wrap_policy", args[_POLICY_POSITION + 1] if len(args) > _POLICY_POSITION + 1 else None)
            if building or policy is None or not hub.active or not hub.wants("TL307"):
                return
            units = sum(1 for sub in self.modules() if isinstance(sub, fsdp))
            if units == 1:
                wrapped = type(self.module).__name__
                here = user_site()
                built = policies_at.get(policy) if _weakrefable(policy) else None
                at = f" (line {built[1]})" if built is not None and built != here else ""
                blocks = repeated_blocks(self.module)
                have = f" (its repeated blocks: {', '.join(blocks)})" if blocks else ""
                own = f" ({{{blocks[0].split(' ', 1)[0]}}})" if blocks else ""
                hub.found("TL307", here, lambda: (
                    f"FullyShardedDataParallel({wrapped}, auto_wrap_policy=...) wrapped no submodule: its "
                    f"policy {describe_policy(policy)}{at} matched no module of the {wrapped}{have}, so "
                    f"the root is the only FSDP unit and every forward and backward gathers all "
                    f"parameters at once: the memory the sharding was meant to save is spent anyway, "
                    f"until a bigger model runs out of memory; name the model's own block class in the "
                    f"policy{own}."
                ))

        return __init__

    patcher.wrap(fsdp, "__init__", init_wrapper, traceable=True)


def _weakrefable(obj: Any) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


def _names(classes: Any) -> str:
    try:
        return "{" + ", ".join(sorted(getattr(c, "__name__", str(c)) for c in classes)) + "}"
    except TypeError:
        return "{...}"


def describe_policy(policy: Any) -> str:
    """``transformer_auto_wrap_policy(transformer_layer_cls={LlamaDecoderLayer})``,
    ``ModuleWrapPolicy({DecoderLayer})``, or the policy's name."""
    classes = getattr(policy, "_module_classes", None)
    if classes is not None:
        return f"{type(policy).__name__}({_names(classes)})"
    if isinstance(policy, functools.partial):
        name = getattr(policy.func, "__name__", "policy")
        for key in ("transformer_layer_cls", "module_classes"):
            if key in policy.keywords:
                return f"{name}({key}={_names(policy.keywords[key])})"
        return f"{name}(...)"
    return getattr(policy, "__name__", type(policy).__name__)


def repeated_blocks(model: Any, shown: int = 3) -> List[str]:
    """The module classes the model holds several instances of that have children of their own
    (the blocks a wrap policy names): ``Block x2``, most numerous first."""
    counts = Counter(type(m).__name__ for m in model.modules() if m is not model and any(True for _ in m.children()))
    counts.pop("Sequential", None)
    counts.pop("ModuleList", None)
    return [f"{name} x{n}" for name, n in counts.most_common() if n > 1][:shown]
