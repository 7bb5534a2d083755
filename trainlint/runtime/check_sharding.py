"""TL307 fsdp-wrap-policy-matched-nothing: FSDP1 built with an auto_wrap_policy that wrapped no
submodule (``transformer_layer_cls`` naming a class the model does not contain). Only the root is
then an FSDP unit: every forward gathers the whole model's parameters at once, the memory plan the
policy was written for silently fails, and nothing errors."""
from __future__ import annotations

from .sites import user_site

RULES = ("TL307",)
_POLICY_POSITION = 3  # FullyShardedDataParallel(module, process_group, sharding_strategy, cpu_offload, auto_wrap_policy)


def install(patcher, hub) -> None:
    patcher.after_import("torch.distributed.fsdp", lambda module: _install(patcher, hub, module))


def _install(patcher, hub, module) -> None:
    fsdp = module.FullyShardedDataParallel
    building = []  # FSDP units under construction: the policy builds the inner ones in the root's

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
                hub.found("TL307", user_site(), lambda: (
                    f"FullyShardedDataParallel({wrapped}, auto_wrap_policy=...) wrapped no submodule: "
                    f"the policy matched nothing in the model (a transformer_layer_cls or module class "
                    f"the model does not contain), so the root is the only FSDP unit and every forward "
                    f"gathers all parameters at once; name the model's own block class in the policy."
                ))

        return __init__

    patcher.wrap(fsdp, "__init__", init_wrapper)
