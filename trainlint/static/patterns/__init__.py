"""Pattern rules: findings that are about one statement and its context, not about event order.

Each rule module exposes ``RULES = {rule_id: check}`` where ``check(ctx)`` yields :class:`Match`es.
They read the shared :class:`~trainlint.static.sites.SiteIndex` and the module's roles, so none of
them walks the tree again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Optional, Tuple

import libcst as cst

from ..module import ModuleModel
from ..sites import SiteIndex

NodeLine = Callable[[cst.CSTNode], Optional[str]]  # "line 17", as messages say it


@dataclass(frozen=True)
class Match:
    rule: str
    node: cst.CSTNode  # where the finding is reported
    render: Callable[[NodeLine], str]  # the message, given a way to number other statements
    # A recipe or a cost, not a bug (a rule's advice tier): TL502 on a forward whose outputs are
    # dropped. Shown only when advice is selected.
    advice: bool = False
    # The module of ``node`` when it is not the checked file's (a model's softmax in its own file,
    # reported from the file that hands that model to a training function).
    origin: Optional[ModuleModel] = None
    # Statements of other modules that the message names, each with its module: ``render``'s
    # line function places them by file and line (``models/Update.py line 45``).
    mentions: Tuple[Tuple[cst.CSTNode, ModuleModel], ...] = ()


@dataclass
class Context:
    model: ModuleModel
    sites: SiteIndex

    def code(self, node: cst.CSTNode) -> str:
        return " ".join(self.model.module.code_for_node(node).split())

    def label(self, call: cst.Call) -> str:
        text = self.code(call)
        return text if len(text) <= 48 else self.code(call.func) + "(...)"

    def qualify(self, node: cst.BaseExpression) -> str:
        return self.model.imports.qualify(node) or ""


Check = Callable[[Context], Iterable[Match]]


def registry() -> Dict[str, Check]:
    from . import distributed, loops, numerics, optimizers, precision

    rules: Dict[str, Check] = {}
    for module in (distributed, loops, numerics, optimizers, precision):
        rules.update(module.RULES)
    return rules


def through_project_registry() -> Dict[str, Check]:
    """The parts of pattern rules that look into functions of other project modules the file
    calls (``train(model, ...)`` handing a softmax model to a loop that applies cross-entropy):
    run also in a file without the rule's own trigger text, when it calls into its project."""
    from . import distributed, loops, numerics

    return {**numerics.THROUGH_PROJECT, **loops.THROUGH_PROJECT, **distributed.THROUGH_PROJECT}
