"""Roles: what kind of training object a constructor builds, and the role table the checker reads.

``classify_constructor`` says what a call builds (optimizer, scheduler, scaler, sampler, loader,
...), judged by what the callee resolves to through imports or by the library descriptions. The
``RoleTable`` maps access paths to roles; it is filled from the object flow (objects.py), which
follows each object from where it is built to every path that can hold it. Annotations are read
only where no object reaches a parameter. Naming conventions are used only by the event
extractor, as a last resort for receivers nothing explains.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from ..events import CADENCE_BATCH, CADENCE_EPOCH, CADENCE_METRIC, any_entry
from .calls import arg, kwarg, literal_bool, literal_str
from . import library
from .library import Argument
from .names import ImportMap, Selector, access_path, dotted
from .walk import walk

OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
SCALER = "scaler"
SAMPLER = "sampler"
LOADER = "loader"
ACCELERATOR = "accelerator"
LOSS_FN = "loss_fn"
WRAPPED = "wrapped_model"
PIPELINE = "pipeline_schedule"  # torch.distributed.pipelining: step() runs forward and backward
ENGINE = "engine"  # DeepSpeed engines: backward() scales for accumulation, step() steps the optimizer
FABRIC = "fabric"  # Lightning Fabric: backward(loss), setup(model, optimizer)
LOSS_SCALER = "loss_scaler"  # called with (loss, optimizer): scaled backward, then the step (timm)


@dataclass(frozen=True)
class Role:
    kind: str
    cadence: Optional[str] = None  # schedulers
    optimizer: Optional[str] = None  # schedulers: access path of their optimizer
    shuffle: Optional[bool] = None  # DistributedSampler: literal shuffle value (None: not literal)
    shuffle_when: Optional[str] = None  # DistributedSampler: the expression given for shuffle, not literal
    sampler: Optional[str] = None  # loaders: access path of their DistributedSampler
    reduction: Optional[str] = None  # loss modules: "mean" | "sum" | "none" | None (not literal)
    module: Optional[str] = None  # optimizers: the model whose parameters they update
    modules: Tuple[str, ...] = ()  # optimizers: every model they update, when there are several
    wrapper: Optional[str] = None  # wrapped models: "ddp", "dp" or "fsdp" (what their state_dict keys carry)


_SCHEDULER_CADENCE = {
    "OneCycleLR": CADENCE_BATCH,
    "CyclicLR": CADENCE_BATCH,
    "ReduceLROnPlateau": CADENCE_METRIC,
    "StepLR": CADENCE_EPOCH,
    "MultiStepLR": CADENCE_EPOCH,
    "ExponentialLR": CADENCE_EPOCH,
    "CosineAnnealingLR": None,  # T_max decides: epochs or steps
    "CosineAnnealingWarmRestarts": None,
    "LambdaLR": None,
    "MultiplicativeLR": None,
    "LinearLR": None,
    "ConstantLR": None,
    "PolynomialLR": None,
    "SequentialLR": None,
    "ChainedScheduler": None,
    "LRScheduler": None,
    "_LRScheduler": None,
}
_SCALERS = {"GradScaler", "ShardedGradScaler"}
_LOSS_CLASSES = {
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss",
    "HuberLoss", "KLDivLoss", "CTCLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
    "MultiLabelSoftMarginLoss", "SoftMarginLoss", "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "MultiMarginLoss", "MultiLabelMarginLoss",
}
Expand = Callable[[cst.BaseExpression], cst.BaseExpression]
_WRAPPERS = {"DistributedDataParallel": "ddp", "DDP": "ddp", "DataParallel": "dp",
             "FullyShardedDataParallel": "fsdp", "FSDP": "fsdp", "fully_shard": "fsdp"}
# Apex's DistributedDataParallel wraps like torch's (its state_dict keys carry ``module.`` too).
_WRAPPER_LIBRARIES = ("torch", "apex.parallel")


def params_owners(node: Optional[cst.CSTNode], expand: Optional[Expand] = None) -> Tuple[str, ...]:
    """Every model an optimizer's params argument comes from: the ``X`` of each ``X.parameters()``
    / ``X.named_parameters()`` in it, without those inside another (``model.backbone`` is part of
    ``model``), in order. Empty when one of them is not a plain path (then which modules it trains
    is not known). ``expand`` replaces the variables in it by what was put in them
    (``AdamW(grouped_parameters)``)."""
    if node is None:
        return ()
    if expand is not None and isinstance(node, cst.BaseExpression):
        node = expand(node)
    owners: List[str] = []
    for sub in walk(node):
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute) and sub.func.attr.value in (
            "parameters", "named_parameters"
        ):
            owner = dotted(sub.func.value)
            if owner is None:
                return ()
            owners.append(owner)
    roots = [o for o in dict.fromkeys(owners) if not any(o.startswith(other + ".") for other in owners if other != o)]
    return tuple(roots)


def params_owner(node: Optional[cst.CSTNode], expand: Optional[Expand] = None) -> Optional[str]:
    """The model an optimizer's params argument comes from: the common prefix of every
    ``X.parameters()`` receiver in it (``model`` for param groups built from ``model.backbone``
    and ``model.head``), None when they share none (see ``params_owners``)."""
    owners = [owner.split(".") for owner in params_owners(node, expand)]
    if not owners:
        return None
    common = owners[0]
    for parts in owners[1:]:
        shared = 0
        while shared < min(len(common), len(parts)) and common[shared] == parts[shared]:
            shared += 1
        common = common[:shared]
    return ".".join(common) or None


def _horizon_cadence(horizon: Optional[cst.BaseExpression]) -> Optional[str]:
    """A horizon that is plainly a number of epochs (``T_max=epochs``, ``args.num_epochs``) makes an
    epoch schedule; anything computed (``epochs * len(loader)``) is left undecided."""
    name = (dotted(horizon) or "").rsplit(".", 1)[-1] if horizon is not None else ""
    return CADENCE_EPOCH if "epoch" in name.lower() else None


def _counts_iterations(horizon: Optional[cst.BaseExpression]) -> bool:
    """``StepLR(opt, step_size=args.decay_iters)``: decay points counted in iterations make a
    per-batch schedule, whatever the class is usually used for."""
    if horizon is None:
        return False
    if any(isinstance(sub, cst.Call) and dotted(sub.func) == "len" for sub in walk(horizon)):
        return True  # ``int(len(train_loader) * epochs // 3)``: counted in batches
    names = [dotted(sub) or "" for sub in walk(horizon) if isinstance(sub, (cst.Name, cst.Attribute))]
    return any("iter" in name.rsplit(".", 1)[-1].lower() for name in names)


def library_base_role(qualified: str, call: cst.Call, expand: Optional[Expand] = None) -> Optional[Role]:
    """The role an instance of a project class gets from a torch base class it derives from,
    ``qualified`` (``class AdamW(torch.optim.Optimizer)`` is an optimizer, ``class
    WarmupMultiStepLR(_LRScheduler)`` a scheduler: their step() is the library's protocol,
    whatever the subclass computes in it). Its constructor is read as the base's: the optimizer
    first (a scheduler) or the parameters (an optimizer); the cadence is the subclass's own, unknown."""
    if qualified.startswith("torch.optim.lr_scheduler.") or qualified == "torch.optim.LRScheduler":
        return Role(SCHEDULER, optimizer=dotted(arg(call, 0, "optimizer") or cst.Name("_")))
    last = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.optim.") and last[:1].isupper():
        params = arg(call, 0, "params")
        return Role(OPTIMIZER, module=params_owner(params, expand), modules=params_owners(params, expand))
    return None


def classify_constructor(call: cst.Call, imports: ImportMap, expand: Optional[Expand] = None) -> Optional[Role]:
    """The role of the object a call constructs, judged by what the callee resolves to (``expand``:
    see ``params_owner``)."""
    qualified = imports.qualify(call.func) or ""
    last = (qualified or dotted(call.func) or "").rsplit(".", 1)[-1]
    if not last:
        return None
    resolved = bool(qualified)
    # Unresolved names (star imports, re-exports) are accepted for distinctive class names only.
    if last in _SCHEDULER_CADENCE and (not resolved or "lr_scheduler" in qualified or qualified.startswith("torch.optim")):
        cadence = _SCHEDULER_CADENCE[last]
        if last == "CosineAnnealingLR":
            cadence = _horizon_cadence(arg(call, 1, "T_max"))
        elif last in ("StepLR", "MultiStepLR") and _counts_iterations(arg(call, 1, "step_size" if last == "StepLR" else "milestones")):
            cadence = None
        return Role(SCHEDULER, cadence=cadence, optimizer=dotted(arg(call, 0, "optimizer") or cst.Name("_")))
    if last in _SCALERS and (not resolved or qualified.startswith("torch")):
        return Role(SCALER)
    if last == "DistributedSampler" and (not resolved or qualified.startswith("torch")):
        shuffle = kwarg(call, "shuffle")
        positional_shuffle = arg(call, 3, "shuffle")
        value = True if shuffle is None and positional_shuffle is None else literal_bool(positional_shuffle)
        given = None if value is not None or positional_shuffle is None else _setting(positional_shuffle)
        return Role(SAMPLER, shuffle=value, shuffle_when=given)
    if last == "DataLoader" and (not resolved or qualified.startswith("torch")):
        sampler = kwarg(call, "sampler")
        return Role(LOADER, sampler=access_path(sampler.value) if sampler is not None else None)
    if last in _LOSS_CLASSES and (not resolved or qualified.startswith("torch")):
        reduction = kwarg(call, "reduction")
        return Role(LOSS_FN, reduction=literal_str(reduction.value) if reduction is not None else "mean")
    if last in _WRAPPERS and (not resolved or qualified.startswith(_WRAPPER_LIBRARIES)):
        return Role(WRAPPED, wrapper=_WRAPPERS[last])
    if last.startswith("Schedule") and qualified.startswith("torch.distributed.pipelining"):
        return Role(PIPELINE)
    if (qualified.startswith("torch.optim.") and last[:1].isupper() and "lr_scheduler" not in qualified
            and last != "Optimizer") or last == "ZeroRedundancyOptimizer":
        params = arg(call, 0, "params")
        return Role(OPTIMIZER, module=params_owner(params, expand), modules=params_owners(params, expand))
    return _library_role(call, qualified, last, expand)


def _setting(expr: cst.BaseExpression) -> Optional[str]:
    """How the program spells a flag it leaves to a setting (``cfg["shuffle"]``), for messages;
    ``None`` (falsy, like ``False``) is no setting."""
    if isinstance(expr, cst.Name) and expr.value == "None":
        return None
    return cst.Module([]).code_for_node(expr)


def _library_role(call: cst.Call, qualified: str, last: str, expand: Optional[Expand]) -> Optional[Role]:
    """A third-party constructor, as the library descriptions tell (see library.py)."""
    built = library.current().constructed(qualified or None, last)
    if built is None:
        return None
    if built.role == OPTIMIZER:
        where = built.params or Argument(0, "params")
        params = arg(call, where.position or 0, where.keyword or "params")
        return Role(OPTIMIZER, module=params_owner(params, expand), modules=params_owners(params, expand))
    if built.role == SCHEDULER:
        where = built.optimizer or Argument(0, "optimizer")
        optimizer = arg(call, where.position or 0, where.keyword or "optimizer")
        return Role(SCHEDULER, cadence=built.cadence, optimizer=dotted(optimizer or cst.Name("_")))
    return Role(built.role)


_ANNOTATION_ROLES = {
    "Optimizer": OPTIMIZER,
    "LRScheduler": SCHEDULER,
    "_LRScheduler": SCHEDULER,
    "GradScaler": SCALER,
    "DistributedSampler": SAMPLER,
    "DataLoader": LOADER,
    "Accelerator": ACCELERATOR,
}


def role_from_annotation(annotation: cst.BaseExpression) -> Optional[Role]:
    last = (dotted(annotation) or "").rsplit(".", 1)[-1]
    kind = _ANNOTATION_ROLES.get(last)
    if kind is None:
        return None
    if kind == SAMPLER:
        return Role(SAMPLER, shuffle=None)
    return Role(kind)


class RoleTable:
    """Access path -> Role, flow-insensitive over the module (``self.x`` is class-wide)."""

    def __init__(self) -> None:
        self.roles: Dict[str, Role] = {}
        # path -> (the ``value == literal`` tests it was assigned under, the role it got there)
        self.alternatives: Dict[str, List[Tuple[Tuple[Selector, ...], Role]]] = {}
        # Each training object (objects.Obj) -> the path that names it: the first that holds it.
        # A path holding exactly one object is known by that name (``canonical``), so a sampler
        # reached as ``train_sampler`` and as ``loader.sampler`` is one target for the checker.
        self.holders: Dict[object, str] = {}
        self.canonical: Dict[str, str] = {}
        # variable name -> the functions (id of their node; None: module level) whose own
        # variable of that name holds objects or is annotated (see ``filled_in``)
        self.scopes: Dict[str, Set[Optional[int]]] = {}

    def get(self, path: Optional[str], held: Tuple[Selector, ...] = ()) -> Optional[Role]:
        """The role of ``path``; where the same tests hold as when one of its other assignments
        ran (``held``: the tests of the enclosing ifs), that assignment's role."""
        if not path:
            return None
        if held:
            for tests, role in self.alternatives.get(path, ()):
                if set(tests) <= set(held):
                    return role
        found = self.roles.get(path)
        if found is None and "[" in path:
            # an entry of a container a comprehension made holds what its one expression makes,
            # under any key (``{split: DataLoader(...) for split in splits}['train']``)
            found = self.roles.get(any_entry(path))
        return found

    def alternative(self, path: str, tests: Tuple[Selector, ...], role: Role) -> None:
        self.alternatives.setdefault(path, []).append((tests, role))

    def set(self, path: Optional[str], role: Optional[Role]) -> bool:
        if not path or role is None or path in self.roles:
            return False
        self.roles[path] = role
        return True

    def filled_in(self, name: str, fn) -> bool:
        """Does ``fn``'s own variable ``name`` hold objects here (or carry an annotation)?"""
        return id(fn.node) in self.scopes.get(name, ())

    def name_of(self, path: Optional[str]) -> Optional[str]:
        """The name the checker knows the object at ``path`` by (``path`` itself if not one object)."""
        return self.canonical.get(path, path) if path else path

    def sampler_of(self, loader_path: Optional[str]) -> Optional[str]:
        role = self.get(loader_path)
        return role.sampler if role is not None and role.kind == LOADER else None
