"""What the static engine may take as evidence: the one place that decides it, for every rule.

- **Unknown is never absent.** A call whose body the engine cannot read (imported from a module it
  did not analyze, a method of an object it cannot type) and that receives training objects may do
  anything to them: it becomes an OPAQUE event naming what it received, and each invariant forgets
  what that call could have changed (a set_epoch, a step, a backward, a train()). A call that
  receives no training object cannot touch them and is no event at all.
- **Callees are judged by their bodies.** A local function's effect is summarised once (the event
  kinds it may produce, through the functions it calls) and reused at every call site; its name
  says nothing.
- **An iteration** is a pass of a loop that trains: its body (with the functions it calls) may
  backpropagate and may step an optimizer (or update parameters by hand: see hand.py). **An
  epoch** is a pass over a loader whose loop trains; an evaluation pass over the same loader is
  not one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, Optional, Set, Tuple

import libcst as cst

from ..events import FAMILY_DATA, FAMILY_GRADS, FAMILY_MODES, Event, EventKind
from . import library
from .hand import update_in
from .module import Function, ModuleModel
from .names import dotted
from .roles import (
    ACCELERATOR, ENGINE, FABRIC, LOADER, LOSS_FN, LOSS_SCALER, OPTIMIZER, PIPELINE, SAMPLER, SCALER, SCHEDULER, WRAPPED,
    classify_constructor,
)
from .walk import children

if TYPE_CHECKING:  # pragma: no cover
    from .extract import Extractor, Frame
    from .objects import Objects

# Roles whose objects an unknown call could use to backpropagate, step, clip or zero gradients.
_GRAD_ROLES = frozenset({OPTIMIZER, SCALER, ENGINE, ACCELERATOR, PIPELINE, SCHEDULER, WRAPPED, FABRIC, LOSS_SCALER})
_DATA_ROLES = frozenset({LOADER, SAMPLER})
_OTHER_ROLES = frozenset({LOSS_FN})

# Methods of role objects that are known not to produce training events (the ones that do are
# recognised by the extractor). Anything else called on such an object is unknown.
_PURE_METHODS = frozenset({
    "state_dict", "load_state_dict", "get_last_lr", "get_lr", "get_scale", "is_enabled", "scale",
    "add_param_group", "print", "gather", "gather_for_metrics", "wait_for_everyone", "log", "save",
    "save_state", "load_state", "unwrap_model", "init_trackers", "end_training", "reduce",
    "pad_across_processes", "get_state_dict", "save_model", "register_for_checkpointing", "prepare",
    "autocast", "parameters", "named_parameters", "modules", "named_modules", "children", "to",
    "cuda", "cpu", "float", "half", "register_buffer", "register_forward_hook", "register_comm_hook",
    "__len__", "set_sampler_epoch", "get_global_step", "is_gradient_accumulation_boundary",
    "save_checkpoint", "load_checkpoint", "get_lr_schedule", "keys", "values", "items", "get",
    # context managers the extractor models as sync switches (or that only gate processes)
    "accumulate", "no_sync", "join_uneven_inputs", "main_process_first", "local_main_process_first",
    "split_between_processes",
})
# Functions that only read what they receive.
_PURE_FUNCTIONS = frozenset({
    "len", "print", "range", "enumerate", "zip", "isinstance", "issubclass", "hasattr", "getattr",
    "str", "int", "float", "bool", "repr", "type", "id", "min", "max", "sum", "list", "dict", "tuple",
    "set", "sorted", "reversed", "iter", "next", "format", "round", "abs", "any", "all", "map", "filter",
    "vars", "deepcopy", "copy", "tqdm", "trange",
})
_PURE_MODULES = ("torch.", "numpy.", "math.", "logging.", "os.", "time.", "json.", "random.", "wandb.",
                 "copy.", "tqdm.", "sys.", "pathlib.", "shutil.", "pickle.")


_MAY_BACKWARD = frozenset({EventKind.BACKWARD, EventKind.OPAQUE})
_MAY_STEP = frozenset({EventKind.OPTIMIZER_STEP, EventKind.OPAQUE})


def _all_calls(node: cst.CSTNode) -> Iterable[cst.Call]:
    """Every call under ``node`` except inside nested functions, classes and lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)  # exact types: see names.dotted
        if (kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda) and current is not node:
            continue
        if kind is cst.Call:
            yield current
        stack.extend(children(current))


class Evidence:
    """Evidence questions for one module, answered once and cached."""

    def __init__(self, model: ModuleModel, extractor: "Extractor",
                 local_callee: Callable[[cst.Call, "Frame"], Optional[Function]],
                 foreign_summary: Callable[[Function], FrozenSet[EventKind]],
                 objects: Callable[[cst.BaseExpression, "Frame"], "Objects"]) -> None:
        self.model = model
        self.extractor = extractor
        self.local_callee = local_callee
        self.foreign_summary = foreign_summary  # summaries of functions of other project modules
        self.objects = objects  # which objects an expression can be where a frame runs
        self._summaries: Dict[int, FrozenSet[EventKind]] = {}
        self._by_hand: Dict[int, bool] = {}  # see updates_by_hand
        self._loops: Dict[Tuple[int, Optional[str]], FrozenSet[EventKind]] = {}
        self.mode_targets = self._eval_receivers()
        self._attributes = frozenset(
            dotted(node) for target, _ in model.module_assigns + [a for fn in model.all_functions for a in fn.assigns]
            for node in ([e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target])
            if isinstance(node, cst.Attribute)
        )
        self._holds_loaders = any(role.kind == LOADER for role in model.roles.roles.values())
        self._self_holds_roles = any(path.startswith("self.") and role.kind in _GRAD_ROLES | _DATA_ROLES
                                     for path, role in model.roles.roles.items())

    # ----------------------------------------------------------------- unknown calls
    def opaque(self, call: cst.Call, frame: "Frame") -> Optional[Event]:
        """An OPAQUE event for a call the engine cannot read that receives training objects.
        Its name says nothing: ``callback.on_after_backward(step)`` receives a counter and
        reaches no training object, whatever it is called."""
        if self.is_pure(call):
            return None
        func = call.func
        received = [arg.value for arg in call.args]
        if isinstance(func, cst.Attribute) and dotted(func) not in self._attributes and not self._built_loaders(func.value, frame):
            received.append(func.value)  # a method of the receiver (``self.attribute(x)`` calls the object stored there)
        reach: Set[str] = set()
        families: Set[str] = set()
        for expr in received:
            path = frame.resolve_keyed(expr)
            if path is None:
                continue
            self._classify(path, reach, families, frame)
        if not families:
            return None
        return self.extractor._event(call, kind=EventKind.OPAQUE, label=self.extractor.callee_label(call),
                                     families=frozenset(families), reach=tuple(sorted(reach)))

    def _built_loaders(self, receiver: cst.BaseExpression, frame: "Frame") -> bool:
        """Is ``receiver`` only loaders built here by a library's constructor (or a progress bar
        over one, which iterates it: ``pbar = tqdm(loader)``)? Their one method that reaches the
        sampler's epoch is ``set_epoch``, an event of its own: ``pbar.set_postfix(loss=...)``
        changes nothing of the loader."""
        if not self._holds_loaders:
            return False
        found = self.objects(receiver, frame)
        return bool(found) and all(o.role is not None and o.role.kind == LOADER and o.node is not None and o.cls is None
                                   and o.origin is None and not o.unknown for o in found)

    def is_pure(self, call: cst.Call) -> bool:
        """Known not to produce training events: builtins, torch/numpy/logging functions, the
        read-only methods of training objects, constructors of training objects."""
        func = call.func
        kind = type(func)  # exact types: see names.dotted
        name = func.attr.value if kind is cst.Attribute else func.value if kind is cst.Name else ""
        if kind is cst.Name and name in _PURE_FUNCTIONS and name not in self.model.imports.names:
            return True
        if kind is cst.Name and name in self.model.classes and (name, "__init__") not in self.model.methods:
            return True  # a class of the module without __init__: constructing it runs nothing of ours
        qualified = self.model.imports.qualify(func) or ""
        if qualified.startswith(_PURE_MODULES) or qualified in ("print", "len"):
            return True
        if kind is cst.Attribute and dotted(func) not in self._attributes and name in _PURE_METHODS:
            return True
        if qualified and (library.current().function(qualified, name) == ()
                          or library.current().returns_given(qualified, name, None, method=False) is not None):
            # described as data: a library function that does nothing to training objects
            # (``amp.scale_loss``), or one that only hands its arguments back (``amp.initialize``)
            return True
        project = self.extractor.project or self.model.project
        if project is not None and (dotted(func) or "").split(".", 1)[0] in self.model.imports.names and project.inert(self.model, dotted(func)):
            return True  # a project function whose text holds no training event
        # building a scheduler over the optimizer, a sampler over the dataset... (also the
        # project's own subclass of a torch scheduler or optimizer)
        return classify_constructor(call, self.model.imports) is not None or self._builds_library_subclass(call)

    def _builds_library_subclass(self, call: cst.Call) -> bool:
        name = dotted(call.func)
        if not name:
            return False
        if name in self.model.classes:
            return self.model.inherited_role(name, call) is not None
        project = self.extractor.project or self.model.project
        found = project.class_of(self.model, name) if project is not None and name.split(".", 1)[0] in self.model.imports.names else None
        return found is not None and found[0].inherited_role(found[1], call) is not None

    def _classify(self, path: str, reach: Set[str], families: Set[str], frame: "Frame") -> None:
        roles = self.model.roles
        role = self.extractor.role(path, frame=frame)
        if role is not None and (role.kind in _GRAD_ROLES or role.kind not in _DATA_ROLES | _OTHER_ROLES):
            # a project's own kind of object (described in [tool.trainlint.library]) may act on gradients
            families.add(FAMILY_GRADS)
            reach.add(path)
        if role is not None and role.kind in _DATA_ROLES:
            families.add(FAMILY_DATA)
            reach.add(path)
            if role.kind == LOADER and role.sampler:
                reach.add(role.sampler)
        if path == "self" and self._self_holds_roles:
            # ``helper(self)`` or an inherited method: it can reach every training attribute.
            families.update((FAMILY_GRADS, FAMILY_DATA, FAMILY_MODES))
            reach.add("self")
        if any(path == t or t.startswith(path + ".") for t in self.mode_targets):
            families.add(FAMILY_MODES)
            reach.add(path)
        for held in _held_roles(roles.roles, path):
            # An object holding a loader or optimizer (``self.train_loader`` given as ``self``).
            self._classify(held, reach, families, frame)

    def _eval_receivers(self) -> FrozenSet[str]:
        """Modules whose eval() the module calls: the only ones whose mode any rule follows."""
        if "eval(" not in self.model.source:
            return frozenset()
        return frozenset(
            site.receiver for site in self.model.sites().sites
            if site.name == "eval" and site.receiver and not site.call.args
        )

    # ----------------------------------------------------------------- summaries
    def call_kinds(self, call: cst.Call, frame: "Frame") -> FrozenSet[EventKind]:
        """The event kinds a call may produce: its own event, its callee's summary, or OPAQUE."""
        callee = self.local_callee(call, frame)
        if callee is not None and callee.abstract:
            return frozenset({EventKind.OPAQUE})  # what runs is a subclass's override: unknown here
        if callee is not None:
            return self.summary(callee) if callee.owner in (None, self.model) else self.foreign_summary(callee)
        events = self.extractor.call_events(call, frame)
        if events:
            return frozenset(event.kind for event in events)
        opaque = self.opaque(call, frame)
        if opaque is not None and FAMILY_GRADS in opaque.families:
            return frozenset({EventKind.OPAQUE})
        return frozenset()

    def summary(self, fn: Function) -> FrozenSet[EventKind]:
        """Event kinds a local function may produce, through the functions it calls; computed once."""
        cached = self._summaries.get(id(fn.node))
        if cached is not None:
            return cached
        self._summaries[id(fn.node)] = frozenset()  # recursion: what is known so far
        from .extract import Frame  # the frame type lives with the extractor

        frame = Frame(fn, cls=fn.cls)
        kinds: Set[EventKind] = set()
        for stmt in fn.body:
            for call in _all_calls(stmt):
                kinds |= self.call_kinds(call, frame)
            if self.updates_by_hand(stmt, fn):
                kinds.add(EventKind.OPTIMIZER_STEP)
        result = frozenset(kinds)
        self._summaries[id(fn.node)] = result
        return result

    # ----------------------------------------------------------------- iterations and epochs
    def trains(self, loop: cst.CSTNode, frame: "Frame") -> bool:
        """Does a pass of this loop train: may it backpropagate and may it step an optimizer?"""
        kinds = self._loop_kinds(loop, frame)
        return bool(kinds & _MAY_BACKWARD) and bool(kinds & _MAY_STEP)

    def steps(self, loop: cst.CSTNode, frame: "Frame") -> bool:
        """May a pass of this loop step an optimizer? Its passes are iterations even when the
        backward is somewhere the engine cannot see."""
        return bool(self._loop_kinds(loop, frame) & _MAY_STEP)

    def _loop_kinds(self, loop: cst.CSTNode, frame: "Frame") -> FrozenSet[EventKind]:
        key = (id(loop), frame.cls)
        cached = self._loops.get(key)
        if cached is None:
            kinds: Set[EventKind] = set()
            for call in _all_calls(loop.body):
                kinds |= self.call_kinds(call, frame)
            if self.updates_by_hand(loop.body, frame.function):
                kinds.add(EventKind.OPTIMIZER_STEP)
            cached = self._loops[key] = frozenset(kinds)
        return cached

    # ----------------------------------------------------------------- updates written by hand
    def hand_update(self, loop: cst.CSTNode, fn: Optional[Function]) -> Optional[cst.CSTNode]:
        """The update statement of a loop that updates a module's parameters from their gradients
        (see hand.py); a fact of the module, computed once per loop."""
        if type(loop) is not cst.For:
            return None
        return self.model.memo(f"hand_update.{id(loop)}", lambda: update_in(loop, fn, self.model))

    def updates_by_hand(self, node: cst.CSTNode, fn: Optional[Function]) -> bool:
        """Does ``node`` hold such a loop? It may then step, whether or not its gradients are off
        where it runs (the flow decides that: only then is the update one)."""
        known = self._by_hand.get(id(node))
        if known is None:
            # (the text test once per module: scanning a long module's text for every statement
            # asked was 1 % of checking a large package)
            known = self._by_hand[id(node)] = self.model.memo("mentions .grad", lambda: ".grad" in self.model.source) and any(
                type(sub) is cst.For and self.hand_update(sub, fn) is not None for sub in self.model.preorder.code(node))
        return known


def _held_roles(roles: Dict[str, object], path: str) -> Iterable[str]:
    if path == "self":
        return []
    # ``self.train_loader`` (an attribute) or ``loaders['train']`` (a string-keyed entry)
    return [p for p in roles for prefix in (path + ".", path + "[") if p.startswith(prefix) and "." not in p[len(prefix):]]
