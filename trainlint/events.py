"""The event vocabulary shared by the static engine and the runtime guard.

The static engine derives events from the syntax tree and its control flow; the guard derives the
same events from hooks in a live run. Both feed them to :mod:`trainlint.checker`, so one program
gets one verdict whichever way it is checked.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, FrozenSet, Iterable, Optional, Tuple


class EventKind(str, enum.Enum):
    ZERO_GRAD = "zero_grad"
    BACKWARD = "backward"
    UNSCALE = "unscale"  # scaler.unscale_(optimizer)
    CLIP = "clip"  # clip_grad_norm_ / clip_grad_value_ and framework equivalents
    OPTIMIZER_STEP = "optimizer_step"  # optimizer.step() or scaler.step(optimizer)
    SCALER_UPDATE = "scaler_update"
    SCHEDULER_STEP = "scheduler_step"
    SET_EPOCH = "set_epoch"  # sampler.set_epoch(epoch)
    LOADER_ITER = "loader_iter"  # a new pass over a data loader begins (iter(loader))
    TRAIN_MODE = "train"
    EVAL_MODE = "eval"
    NO_SYNC_ENTER = "no_sync_enter"  # gradient sync off for the following forwards (no_sync, ...)
    NO_SYNC_EXIT = "no_sync_exit"
    SYNC_MANAGED = "sync_managed"  # the code sets DDP's require_backward_grad_sync itself
    FORWARD = "forward"  # a forward pass of a DDP/FSDP-wrapped model (where DDP decides to sync)
    # Static only (the guard sees what really happens), except OPAQUE: the guard feeds one after
    # compiled code ran hooked calls it could not see (trainlint/runtime/patches.py).
    OPAQUE = "opaque"  # a call whose body is unknown and that receives training objects: may do anything to them
    TRAINING_START = "training_start"  # a training loop is entered: what ran before was setup, not an iteration
    ITERATION = "iteration"  # a training loop starts another pass (the back edge)


# Loss kinds carried by BACKWARD events (what reached backward(), as far as it can be told).
LOSS_MEAN = "mean"  # a mean-reduced loss, not divided or rescaled afterwards
LOSS_DIVIDED = "divided"  # divided / multiplied / normalised before backward
LOSS_SUM = "sum"  # sum-reduced: accumulation needs no division
LOSS_UNKNOWN = "unknown"

# Scheduler cadences carried by SCHEDULER_STEP events.
CADENCE_BATCH = "batch"
CADENCE_EPOCH = "epoch"
CADENCE_METRIC = "metric"  # ReduceLROnPlateau and scheduler.step(metric): ordered by validation

# OPTIMIZER_STEP target of an update written by hand (``p -= lr * p.grad`` over a module's
# parameters with gradients off): no optimizer object. Its steps are one stepper's; which
# parameters a zero_grad() clears is not known on either side, so every zero_grad clears them.
HAND_UPDATE = "parameters updated by hand"
# The in-place tensor methods through which such an update changes a parameter (``p -= x`` runs
# ``sub_``, ``p += x`` ``add_``...): what the static engine reads and the guard watches.
HAND_UPDATE_METHODS = frozenset({"add_", "sub_", "mul_", "div_", "addcdiv_", "addcmul_", "lerp_", "copy_"})

# What an OPAQUE call may do, by the objects it receives.
FAMILY_GRADS = "grads"  # backward, zero_grad, clip, unscale, optimizer and scheduler steps
FAMILY_DATA = "data"  # set_epoch, passes over a loader
FAMILY_MODES = "modes"  # train() / eval() of the modules it receives
ALL_FAMILIES = frozenset({FAMILY_GRADS, FAMILY_DATA, FAMILY_MODES})
EVERYTHING = "*"  # OPAQUE reach: a call that may act on any object (a callee too deep to follow)


@dataclass(frozen=True, eq=False)
class Event:
    """One training event. Identity-hashed: the same call site yields the same object statically.

    ``target`` identifies the object acted on (an access path such as ``self.optimizer`` statically,
    ``id:1234`` at runtime); ``None`` means unknown, which matches any object of the right role.
    """

    kind: EventKind
    target: Optional[str] = None
    label: str = ""  # how messages name the statement, e.g. "optimizer.step()"
    site: Any = None  # static: the libcst node; runtime: (filename, line)
    optimizer: Optional[str] = None  # SCHEDULER_STEP, UNSCALE: the optimizer it belongs to
    scaled: bool = False  # BACKWARD through scaler.scale(loss)
    loss: Optional[str] = None  # BACKWARD: one of the LOSS_* kinds
    # OPTIMIZER_STEP: statically known accumulation boundary? ZERO_GRAD: ends the window on purpose
    # (at the boundary, or discarding a skipped batch)
    boundary: Optional[bool] = None
    accum: Optional[str] = None  # OPTIMIZER_STEP: how the code names k, for messages
    cadence: Optional[str] = None  # SCHEDULER_STEP: one of the CADENCE_* kinds
    shuffle: Optional[bool] = None  # LOADER_ITER: the loader's DistributedSampler shuffles
    # LOADER_ITER: the setting that decides whether it shuffles, where the program leaves it to one
    # (``shuffle=cfg["shuffle"]``): a run with it on is one of the program's runs
    shuffle_when: Optional[str] = None
    sampler: Optional[str] = None  # LOADER_ITER: its DistributedSampler (None: none known)
    via_scaler: bool = False  # OPTIMIZER_STEP: scaler.step(optimizer); CLIP: threshold times the loss scale
    manages_grads: bool = False  # OPTIMIZER_STEP: step(closure) (LBFGS) or an engine step handles grads
    each: bool = False  # OPTIMIZER_STEP: one of several optimizers stepped in turn by a loop
    module: Optional[str] = None  # OPTIMIZER_STEP: the model whose parameters it updates
    # OPTIMIZER_STEP: the models it updates, when there are several. BACKWARD (static only): the
    # objects whose calls computed the loss (``model`` of ``criterion(model(x), y)``)
    modules: Tuple[str, ...] = ()
    # OPAQUE: the families of events the call may produce (see FAMILY_*) and the access paths it
    # received, so an invariant forgets only what the call could have changed.
    families: FrozenSet[str] = frozenset()
    reach: Tuple[str, ...] = ()
    origin: Any = None  # static: the project module whose statement this is (None: the checked file)
    # static, EVAL_MODE and OPTIMIZER_STEP: the function whose statement this is (None: module level)
    scope: Any = None


# Statically, an entry of a container a comprehension made is named with this key: one object
# under any key (``{split: DataLoader(...) for split in splits}``).
ANY_ENTRY = "[*]"
_ENTRY_KEY = re.compile(r"\[[^\[\]]*\]")


def as_written(name: Optional[str], path: Optional[str]) -> Optional[str]:
    """``name`` (a field of the object at ``path``) as the code at ``path`` spells it: the entry
    ``self.loaders[*].sampler`` read through ``self.loaders['train']`` is
    ``self.loaders['train'].sampler``. Any other name is itself."""
    if not name or ANY_ENTRY not in name or not path:
        return name
    prefix = any_entry(path)
    return path + name[len(prefix):] if name.startswith(prefix) else name


def any_entry(path: str) -> str:
    """``path`` with each subscript read as any entry: ``self.loaders[*]`` of ``self.loaders['train']``."""
    return _ENTRY_KEY.sub(ANY_ENTRY, path)


def reaches(event: Event, path: Optional[str]) -> bool:
    """Could an OPAQUE call have acted on the object at ``path``? (It received it, an object that
    contains it, or something inside it.) An unknown path could be anything."""
    return reached(event.reach, path)


def reached(reach: Iterable[str], path: Optional[str]) -> bool:
    """Could calls that received ``reach`` have acted on the object at ``path``?"""
    reach = tuple(reach)
    if path is None or EVERYTHING in reach:
        return True
    return any(path == r or _inside(path, r) or _inside(r, path) for r in reach)


def _inside(path: str, container: str) -> bool:
    """``loader.sampler`` is inside ``loader``, ``loaders['train']`` inside ``loaders``."""
    return path.startswith(container + ".") or path.startswith(container + "[")


def same_object(a: Optional[str], b: Optional[str]) -> bool:
    """Unknown targets match anything: precision is kept by the rules, not by guessing identity."""
    return a is None or b is None or a == b
