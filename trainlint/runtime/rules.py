"""Which rules the guard checks: ids, names and severities come from the catalog.

Torch-free: a guard validates its ``select``/``ignore`` when it is created, before anything is hooked.
"""
from __future__ import annotations

import importlib
from typing import Dict, FrozenSet, Iterable, NamedTuple, Optional, Union

from ..catalog import load_catalog, unknown_selectors
from ..config import Config, resolve_selection, split_selectors


class RuleInfo(NamedTuple):
    id: str
    name: str
    severity: str
    opt_in: bool = False


# Rules of the shared ordering checker whose events the hooks reproduce faithfully at runtime (each one
# is covered by a buggy/clean program pair in tests/runtime). The checker's other invariants still see
# the events; their findings are dropped until their runtime semantics are confirmed the same way.
FLOW_RULES = ("TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL201", "TL203", "TL301", "TL402")

# Modules that install hooks producing checker events, and modules that inspect values for one
# family of rules each (their ``RULES``). Adding a runtime check is adding a module to CHECK_MODULES.
HOOK_MODULES = ("hooks_optim", "hooks_hand", "hooks_grads", "hooks_amp", "hooks_data", "hooks_parallel", "hooks_processes")
CHECK_MODULES = (
    "check_attention", "check_loss", "check_modes", "check_nonfinite", "check_optimizer", "check_precision", "check_remainder",
    "check_save", "check_schedule", "check_sharding",
)

Selectors = Union[None, str, Iterable[str]]


def known_rules() -> Dict[str, RuleInfo]:
    """Every rule the guard could report, from the catalog (runtime-only entries included)."""
    return {r.id: RuleInfo(r.id, r.name, r.severity, r.opt_in) for r in load_catalog().values()}


def check_module(name: str):
    return importlib.import_module(f"{__package__}.{name}")


def checkable() -> FrozenSet[str]:
    """Rules with a runtime check. A check whose rule is not in the catalog is not run: its id, name
    and severity would have no source of truth."""
    ids = set(FLOW_RULES)
    for name in CHECK_MODULES:
        ids.update(check_module(name).RULES)
    return frozenset(ids & set(known_rules()))


def _split(selectors: Selectors) -> Optional[list]:
    if selectors is None:
        return None
    if isinstance(selectors, str):
        selectors = [selectors]
    return split_selectors(selectors)


def select_rules(select: Selectors = None, ignore: Selectors = None, config: Optional[Config] = None,
                 extend_select: Selectors = None) -> FrozenSet[str]:
    """The rules ``trainlint check`` would run with this ``--select``/``--extend-select``/``--ignore``
    under ``config`` (the catalog's default set of errors and warnings, when there is none), that
    the guard can check. Unknown selectors raise ValueError."""
    chosen_selectors, ignored, extended = _split(select), _split(ignore) or [], _split(extend_select) or []
    unknown = unknown_selectors((chosen_selectors or []) + ignored + extended)
    if unknown:
        raise ValueError(f"unknown rule(s): {', '.join(unknown)} (see `trainlint rules`)")
    return resolve_selection(config or Config(), chosen_selectors, ignored, extended).rules & checkable()
