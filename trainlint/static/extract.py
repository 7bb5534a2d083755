"""Events from syntax: which calls are zero_grad, backward, clip, steps, set_epoch, loader passes.

A call's receiver is judged by its role: the objects that can reach it (objects.py), or what the
methods called on it tell (``x.step(optimizer)`` and ``x.update()``: a scaler); a receiver nothing
explains makes no event, whatever it is called. Events are cached per call site and context so
the same statement on different paths is the same event (findings dedupe by identity).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from ..events import (
    ALL_FAMILIES, CADENCE_EPOCH, CADENCE_METRIC, EVERYTHING, FAMILY_GRADS, HAND_UPDATE, LOSS_DIVIDED, LOSS_UNKNOWN, Event,
    EventKind,
)
from . import library
from .calls import arg, literal_bool
from .held import Given, Instances
from .losses import classify_loss
from .module import Function, ModuleModel
from .objects import Objects
from .names import DETACHING, Selector, dotted, keyed, literal_key
from .walk import children, walk
from .roles import LOADER, OPTIMIZER, PIPELINE, SAMPLER, SCALER, SCHEDULER, WRAPPED, Role, RoleTable

_CLIP_FUNCTIONS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}
_ITER_WRAPPERS = {"enumerate", "tqdm", "iter", "islice", "zip", "skip_first_batches", "trange", "prefetch"}
_LABEL_MAX = 48
_FLUENT = {"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "train", "eval", "requires_grad_", "to_empty"}


# The class of the object ``self`` is: (the module it is named in, its name there).
Receiver = Tuple[ModuleModel, str]


@dataclass(frozen=True)
class Frame:
    """Where a statement runs: its function, the caller's arguments for its parameters, context."""

    function: Optional[Function]
    subst: Tuple[Tuple[str, str], ...] = ()
    depth: int = 0
    cls: Optional[str] = None  # class whose methods ``self.name()`` calls reach
    loop_vars: FrozenSet[str] = frozenset()  # names bound by the enclosing for-loops' targets
    explicit_schedule: bool = False  # inside a loop that only steps schedulers (fast-forward)
    accum: Optional[str] = None  # inside an accumulation boundary: how the code names k
    # Inside a branch that leaves the pass (``if not finite: zero_grad(); continue``): what is
    # discarded there is discarded on purpose.
    skipping: bool = False
    # Parameters the caller gave a condition: (parameter, the condition's key, its polarity).
    conditions: Tuple[Tuple[str, str, bool], ...] = ()
    # Inside a training loop: the names that change from one pass to the next (assigned in the
    # loop, or locals of a function it calls). A condition on other names is decided once per run:
    # every pass takes the same branch. None outside training loops.
    varying: Optional[FrozenSet[str]] = None
    counters: Tuple[Tuple[int, str, str], ...] = ()  # enclosing ``for v in range(n)``: (loop id, v, n)
    rebuilt: FrozenSet[str] = frozenset()  # optimizers constructed inside the enclosing training loops
    # Inside a loop over batches (a loader, or a training loop within another): only there is one
    # optimizer step per scheduler step known to be "per batch" rather than per epoch.
    batches: bool = False
    # The ``value == literal`` tests of the enclosing ifs of this function: an attribute assigned
    # different objects under such tests is, here, the one assigned under the same tests.
    held: Tuple[Selector, ...] = ()
    # Counters of the enclosing ``for i, x in enumerate(...)`` / ``for i in range(n)`` loops known
    # to be 0 (their first pass runs) or known not to be (a later pass): ``if i == 0:`` is decided.
    first_pass: FrozenSet[str] = frozenset()
    later_pass: FrozenSet[str] = frozenset()
    # Heads of substituted paths that are parameters no caller bound (see Extractor.unbound_parameter).
    unbound: FrozenSet[str] = frozenset()
    # Gradients are off (inside ``with torch.no_grad():``, or called from there): a loop updating
    # parameters from their gradients here is an optimizer step (see hand.py).
    no_grad: bool = False
    # What the caller passes for this function's parameters, as losses and as scalars (see
    # scales.Scope): a helper's ``loss.backward()`` on a parameter backpropagates the caller's loss.
    given: Given = ()
    instances: Instances = ()  # its parameters given instances of project classes
    # In a function of another module run for the checked file: the objects the caller gives its
    # parameters, in the checked file's world (see Interpreter.objects): a callbacks list the
    # checked file built is the list this function's loop visits.
    objects: Tuple[Tuple[str, Objects], ...] = ()
    # In a function of another module run for the checked file: heads of the substituted paths
    # that are the checked file's own (handed down from it, parameter by parameter), whose roles
    # are the checked file's; any other path is this module's, whatever its spelling.
    caller_heads: FrozenSet[str] = frozenset()
    # The classes of the objects some names hold here (``self``, or a parameter given the caller's
    # ``self``), when known: a subclass of the method's own class, whose ``name()`` runs that
    # class's method, an override included.
    receivers: Tuple[Tuple[str, Receiver], ...] = ()
    # Parameters the caller gave one of its own functions or partials (``loop_body(..., update)``
    # with ``update = functools.partial(apply_update, optimizer)``): calling the parameter runs it,
    # with the partial's call that fixed some arguments (see Interpreter._referenced).
    functions: Tuple[Tuple[str, Function, Optional[cst.Call]], ...] = ()

    def resolve(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        # Module methods that return the module itself: ``model.to(device).train()`` is model.
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _FLUENT:
            expr = expr.func.value
        path = dotted(expr) if expr is not None else None
        if path is None:
            return None
        path = _through_aliases(path, self.function)
        # The longest substituted prefix wins: ``self.train_data`` (an object's attribute bound to
        # the caller's loader) before ``self``.
        best = None
        for param, actual in self.subst:
            if (path == param or path.startswith(param + ".")) and (best is None or len(param) > len(best[0])):
                best = (param, actual)
        return best[1] + path[len(best[0]):] if best is not None else path

    def resolve_keyed(self, expr: Optional[cst.BaseExpression]) -> Optional[str]:
        """``resolve`` that also follows a string-keyed entry (``self.loaders["train"]``)."""
        found = literal_key(expr) if expr is not None else None
        return keyed(self.resolve_keyed(found[0]), found[1]) if found is not None else self.resolve(expr)


def _through_aliases(path: str, fn: Optional[Function]) -> str:
    """``optimizer_ = opt`` then ``optimizer_.step()``: a local assigned once, from another name or
    attribute, is that object (followed up to three aliases)."""
    if fn is None or fn.owner is None:
        return path
    aliases = fn.owner.memo(f"aliases.{id(fn.node)}", lambda: _aliases(fn))
    for _ in range(3):
        head, dot, rest = path.partition(".")
        alias = aliases.get(head)
        if alias is None:
            break
        path = alias + dot + rest
    return path


def _aliases(fn: Function) -> Dict[str, str]:
    assigned: Dict[str, List[cst.BaseExpression]] = {}
    for target, value in fn.assigns:
        if isinstance(target, cst.Name):
            assigned.setdefault(target.value, []).append(value)
        else:
            for node in walk(target):
                if isinstance(node, cst.Name):
                    assigned.setdefault(node.value, []).extend([value, value])  # unpacked: not an alias
    found = {}
    for name, values in assigned.items():
        source = dotted(values[0]) if len(values) == 1 and isinstance(values[0], (cst.Name, cst.Attribute)) else None
        if source is not None and name not in fn.params and source.split(".", 1)[0] != name:
            found[name] = source
    return found


def _last(path: Optional[str]) -> str:
    return (path or "").rsplit(".", 1)[-1]


def _label(model: ModuleModel, call: cst.Call) -> str:
    code = " ".join(model.module.code_for_node(call).split())
    if len(code) <= _LABEL_MAX:
        return code
    return (model.module.code_for_node(call.func).strip() + "(...)")


class Extractor:
    def __init__(self, model: ModuleModel, caller_roles: Optional[RoleTable] = None, origin: Optional[ModuleModel] = None,
                 project=None) -> None:
        self.model = model
        self.project = project  # the checked file's Project: calls into other modules are read in it
        # A function of another project module runs with the checked file's objects substituted
        # for its parameters: their roles are the checked file's.
        self.caller_roles = caller_roles
        self.origin = origin
        self._cache: Dict[tuple, Event] = {}
        self._labels: Dict[int, str] = {}
        # ``scheduler.last_epoch = start_epoch - 1``: a schedule positioned by hand (a resume
        # rewind), so where its steps fall is the program's explicit choice.
        self._positioned = frozenset(
            path[: -len(".last_epoch")]
            for target, _ in model.module_assigns + [a for fn in model.all_functions for a in fn.assigns]
            for path in (dotted(target) or "",) if path.endswith(".last_epoch")
        )

    def _event(self, node: cst.CSTNode, **fields) -> Event:
        key = (id(node),) + tuple(sorted(fields.items()))
        event = self._cache.get(key)
        if event is None:
            label = fields.pop("label", None)
            if label is None:
                label = _label(self.model, node) if isinstance(node, cst.Call) else ""
            event = Event(site=node, label=label, origin=self.origin, **fields)
            self._cache[key] = event
        return event

    def unknown(self, call: cst.Call) -> Event:
        """A call defined elsewhere whose name suggests a training event (``forward_backward_step``,
        ``zero_grad(params)``): its body is not read, so it is not taken as that event; it may do
        anything, and the rules abstain around it."""
        return self._event(call, kind=EventKind.OPAQUE, label=self.callee_label(call), families=ALL_FAMILIES, reach=(EVERYTHING,))

    def callee_label(self, call: cst.Call) -> str:
        """``trainer.fit(...)``: how an unknown call is named in messages (rendered once per call)."""
        label = self._labels.get(id(call))
        if label is None:
            label = self._labels[id(call)] = " ".join(self.model.module.code_for_node(call.func).split()) + "(...)"
        return label

    def role(self, path: Optional[str], held: Tuple[Selector, ...] = (), frame: Optional[Frame] = None) -> Optional[Role]:
        """The role of the object at ``path``. With the ``frame`` the path was resolved in: a
        parameter no caller bound is its function's own variable, never another function's
        variable of the same name (the table is keyed by paths, module-wide)."""
        if frame is not None and self.unbound_parameter(path, frame):
            return None
        if frame is not None and self.caller_roles is not None and path:
            # In a function of another module run for the checked file: a path the checked file
            # handed down, parameter by parameter (Frame.caller_heads), is the checked file's; any
            # other is this module's own, never the caller's variable of the same name.
            head = re.split(r"[.\[]", path, maxsplit=1)[0]
            if head in frame.caller_heads:
                return self.caller_roles.get(path)
            return self.model.roles.get(path, held)
        # No frame: a path of this module's own (a role's field, a target already resolved in
        # this module), never a caller's variable spelled the same.
        return self.model.roles.get(path, held)

    def unbound_parameter(self, path: Optional[str], frame: Frame) -> bool:
        fn = frame.function
        if not path:
            return False
        head = re.split(r"[.\[]", path, maxsplit=1)[0]
        if head in frame.unbound:
            return True
        if fn is None:
            return False
        if head in ("self", "cls") or head not in fn.params or any(param == head for param, _ in frame.subst):
            return False
        return not self.model.roles.filled_in(head, fn)

    def name_of(self, path: Optional[str]) -> Optional[str]:
        """The checker's name for the object at ``path`` (see ``RoleTable.name_of``)."""
        if path and path not in self.model.roles.canonical and self.caller_roles is not None:
            return self.caller_roles.name_of(path)
        return self.model.roles.name_of(path)

    def _is(self, path: Optional[str], kind: str, frame: Optional[Frame] = None) -> bool:
        role = self.role(path, frame=frame)
        return role is not None and role.kind == kind

    # ----------------------------------------------------------------- calls
    def call_events(self, call: cst.Call, frame: Frame) -> Tuple[Event, ...]:
        """The events a call produces, in order: a library call may produce several (timm's
        ``loss_scaler(loss, optimizer)`` is a scaled backward, an unscale and a step)."""
        effects = self._library_effects(call, frame)
        if effects is not None:
            return effects
        event = self._call_event(call, frame)
        return (event,) if event is not None else ()

    def _library_effects(self, call: cst.Call, frame: Frame) -> Optional[Tuple[Event, ...]]:
        described = library.current()
        func = call.func
        if isinstance(func, cst.Attribute):
            receiver = frame.resolve(func.value)
            effects = described.method(self._kind(receiver, frame), func.attr.value)
        else:
            receiver = frame.resolve(func)
            role = self.role(receiver, frame=frame)
            effects = described.method(role.kind, "__call__") if role is not None else described.function(
                self.model.imports.qualify(func), _last(dotted(func)))
        if effects is None:
            return None
        return tuple(event for effect in effects for event in self._effect_events(call, effect, receiver, frame))

    def _kind(self, receiver: Optional[str], frame: Optional[Frame] = None) -> Optional[str]:
        """The role of a receiver: what was built into it, or what the methods called on it tell
        (objects.py, ``[[answers]]`` of trainlint/libraries)."""
        role = self.role(receiver, frame=frame)
        return role.kind if role is not None else None

    def _effect_events(self, call: cst.Call, effect: library.Effect, receiver: Optional[str], frame: Frame) -> Tuple[Event, ...]:
        happens = _given(call, effect)
        if happens is False:
            return ()
        argument = _argument(call, effect.argument)
        optimizer = receiver if effect.optimizer == "receiver" else frame.resolve(argument) if effect.optimizer == "argument" else None
        if happens is None and effect.event in (EventKind.CLIP, EventKind.UNSCALE, EventKind.SCALER_UPDATE):
            # a library call orders its own clip, unscale and scale update; whether it does them
            # changes no invariant the rules check from outside, so "maybe" is left out
            return ()
        if happens is None:
            # the call may or may not step (``update_grad=accumulating``): unknown, the rules abstain
            reach = tuple(sorted({path for path in (receiver, optimizer) if path} or {EVERYTHING}))
            return (self._event(call, kind=EventKind.OPAQUE, families=frozenset({FAMILY_GRADS}), reach=reach,
                                label=f"{_label(self.model, call)} ({effect.event.value}?)"),)
        if effect.event == EventKind.BACKWARD:
            if effect.loss == "divided" or argument is None:
                return (self._event(call, kind=EventKind.BACKWARD, scaled=effect.scaled,
                                    loss=LOSS_DIVIDED if effect.loss == "divided" else LOSS_UNKNOWN),)
            return (self._backward(call, argument, frame, scaled=effect.scaled),)
        if effect.event == EventKind.OPTIMIZER_STEP:
            return (self._optimizer_step(call, optimizer, frame, via_scaler=effect.scaled, manages_grads=effect.manages_grads),)
        if effect.event == EventKind.UNSCALE:
            return (self._event(call, kind=EventKind.UNSCALE, target=receiver, optimizer=optimizer),)
        if effect.event == EventKind.ZERO_GRAD:
            return (self._event(call, kind=EventKind.ZERO_GRAD, target=optimizer),)
        if effect.event == EventKind.SCALER_UPDATE:
            return (self._event(call, kind=EventKind.SCALER_UPDATE, target=receiver),)
        return (self._event(call, kind=effect.event),)

    def _call_event(self, call: cst.Call, frame: Frame) -> Optional[Event]:
        func = call.func
        # ``ddp_model(x)`` or ``self.net(x)`` where the attribute holds the DDP/FSDP wrapper: a
        # forward of the wrapped model (whose sync decision the next backward follows).
        if self._is_wrapped(frame.resolve(func), frame):
            return self._event(call, kind=EventKind.FORWARD, target=frame.resolve(func), label=_last(dotted(func)) + "(...)")
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            # ``self.optimizers["generator"].step()``: an entry of a dict is judged like an
            # attribute (by its role, else by the name of the dict holding it).
            receiver = frame.resolve_keyed(func.value)
            return self._method_event(call, method, func.value, receiver, frame)
        qualified = self.model.imports.qualify(func) or ""
        name = _last(dotted(func))
        if name in _CLIP_FUNCTIONS or qualified.startswith("torch.nn.utils.clip_grad"):
            return self._clip(call)
        if qualified == "torch.autograd.backward" and call.args:
            return self._backward(call, call.args[0].value, frame)
        if name == "iter" and len(call.args) == 1 and id(call) not in self._peeks():
            return self.loader_event(call, call.args[0].value, frame)
        return None

    def _peeks(self) -> FrozenSet[int]:
        """``iter(loader)`` calls whose iterator gives one batch and is dropped (``next(iter(loader))``,
        to read a batch's shape): a look at the data, not a pass that trains on it."""
        def find() -> FrozenSet[int]:
            return frozenset(
                id(node.args[0].value) for node in self.model.preorder.nodes
                if type(node) is cst.Call and _last(dotted(node.func)) == "next" and node.args
                and type(node.args[0].value) is cst.Call and _last(dotted(node.args[0].value.func)) == "iter")
        return self.model.memo("peeked iterators", find)

    def _method_event(self, call, method, receiver_node, receiver, frame) -> Optional[Event]:
        if method == "backward":
            scaling = receiver_node if isinstance(receiver_node, cst.Call) else self._assigned_call(receiver_node, frame)
            if isinstance(scaling, cst.Call) and _last(dotted(scaling.func)) == "scale":
                # scaler.scale(loss).backward(), or scaled = scaler.scale(loss); scaled.backward()
                scaled_loss = scaling.args[0].value if scaling.args else scaling
                return self._backward(call, scaled_loss, frame, scaled=True)
            return self._backward(call, receiver_node, frame)
        if method == "zero_grad":
            if (receiver or "").split(".", 1)[0] in frame.loop_vars:
                # ``for opt in optimizers: opt.zero_grad()``: any of them, so it matches every step.
                return self._event(call, kind=EventKind.ZERO_GRAD, target=None, boundary=_ends_window(frame))
            if self._is(receiver, OPTIMIZER, frame):
                return self._event(call, kind=EventKind.ZERO_GRAD, target=self.name_of(receiver), boundary=_ends_window(frame))
            # model.zero_grad() clears the gradients of that model's parameters, whatever optimizer.
            return self._event(call, kind=EventKind.ZERO_GRAD, module=receiver, boundary=_ends_window(frame))
        if method in _CLIP_FUNCTIONS:
            return self._clip(call)
        if method == "unscale_":
            optimizer = self.name_of(frame.resolve(call.args[0].value)) if call.args else None
            return self._event(call, kind=EventKind.UNSCALE, target=receiver, optimizer=optimizer)
        if method == "step":
            return self._step_event(call, receiver, frame)
        if method == "update" and not call.args and self._is(receiver, SCALER, frame):
            return self._event(call, kind=EventKind.SCALER_UPDATE, target=receiver)
        if method == "set_epoch":
            return self._event(call, kind=EventKind.SET_EPOCH, target=self._sampler_target(receiver, frame))
        if method in ("train", "eval") and receiver and len(call.args) <= 1:
            return self._mode_event(call, method, receiver, frame)
        if method == "set_requires_gradient_sync" and call.args:
            enabled = call.args[0].value
            off = isinstance(enabled, cst.Name) and enabled.value == "False"
            on = isinstance(enabled, cst.Name) and enabled.value == "True"
            if off or on:
                return self._event(call, kind=EventKind.NO_SYNC_ENTER if off else EventKind.NO_SYNC_EXIT, target=receiver)
            return self._event(call, kind=EventKind.SYNC_MANAGED, target=receiver)
        if method == "zero_" and isinstance(call.func, cst.Attribute) and _last(dotted(call.func.value)) == "grad":
            return self._event(call, kind=EventKind.ZERO_GRAD)
        return None

    def _clip(self, call: cst.Call) -> Event:
        """A clip; one whose threshold is multiplied by the loss scale (``max_norm *
        scaler.get_scale()``) clips scaled gradients at the scaled norm: as if unscaled first. A
        threshold multiplied by anything but a number (``max_norm * scale``, the scale passed in)
        may be that too."""
        scale_aware = any(
            (isinstance(node, cst.Attribute) and node.attr.value == "get_scale")
            or (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)
                and not (isinstance(node.left, (cst.Integer, cst.Float)) and isinstance(node.right, (cst.Integer, cst.Float))))
            for a in call.args for node in walk(a.value)
        )
        return self._event(call, kind=EventKind.CLIP, via_scaler=scale_aware)

    def _assigned_call(self, node: cst.BaseExpression, frame: Frame) -> Optional[cst.Call]:
        """The call a local name was assigned from, when it has exactly one assignment here."""
        if not isinstance(node, cst.Name) or frame.function is None:
            return None
        values = [v for t, v in frame.function.assigns if isinstance(t, cst.Name) and t.value == node.value]
        return values[0] if len(values) == 1 and isinstance(values[0], cst.Call) else None

    def _mode_event(self, call: cst.Call, method: str, receiver: str, frame: Frame) -> Optional[Event]:
        if method == "eval" and call.args:
            return None
        training = True
        if call.args:
            flag = call.args[0].value
            if not (isinstance(flag, cst.Name) and flag.value in ("True", "False")):
                return None  # train(mode): unknown mode
            training = flag.value == "True"
        if method == "eval":
            training = False
        return self._event(call, kind=EventKind.TRAIN_MODE if training else EventKind.EVAL_MODE, target=receiver,
                           scope=_scope(frame))

    def _is_wrapped(self, path: Optional[str], frame: Frame) -> bool:
        role = self.role(path, frame=frame)
        return role is not None and role.kind == WRAPPED

    def context_events(self, item: cst.WithItem, frame: Frame) -> Tuple[Optional[Event], Optional[Event]]:
        """Enter/exit events of a with-item: ``model.no_sync()``, ``accelerator.accumulate(model)``."""
        call = item.item
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return None, None
        if call.func.attr.value not in ("no_sync", "accumulate"):
            return None, None
        receiver = frame.resolve(call.func.value)
        enter = self._event(call, kind=EventKind.NO_SYNC_ENTER, target=receiver)
        exit_ = self._event(item, kind=EventKind.NO_SYNC_EXIT, target=receiver, label="end of " + enter.label)
        return enter, exit_

    def _step_event(self, call: cst.Call, receiver: Optional[str], frame: Frame) -> Optional[Event]:
        role = self.role(receiver, frame.held, frame)
        kind = role.kind if role is not None else None
        if kind == PIPELINE:
            # torch.distributed.pipelining schedules run forward and backward inside step().
            return self._event(call, kind=EventKind.BACKWARD, loss=LOSS_UNKNOWN)
        if kind == SCALER and call.args:
            return self._optimizer_step(call, frame.resolve(call.args[0].value), frame, via_scaler=True)
        if kind == OPTIMIZER:
            closure = any(a.keyword is None or a.keyword.value == "closure" for a in call.args)
            return self._optimizer_step(call, receiver, frame, manages_grads=closure)
        if kind == SCHEDULER:
            explicit = frame.explicit_schedule or receiver in self._positioned or (
                any(a.keyword is None or a.keyword.value in ("metrics", "epoch") for a in call.args)
                and not self._position_advanced(call, frame.function)
            )
            cadence = CADENCE_METRIC if explicit else (role.cadence if role is not None else None)
            if cadence == CADENCE_EPOCH and not frame.batches:
                cadence = None  # a full-batch loop's passes may be the epochs
            optimizer = role.optimizer if role is not None else None
            return self._event(call, kind=EventKind.SCHEDULER_STEP, target=receiver, cadence=cadence, optimizer=optimizer)
        return None

    def _position_advanced(self, call: cst.Call, function: Optional[Function]) -> bool:
        """``step(epoch=n)`` where ``n += 1`` ran earlier in the same function: the position is
        the next update's, so stepped before the optimizer it is the ordinary one-step-ahead
        schedule (the update uses the rate meant for the next one)."""
        position = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "epoch"), None)
        path = dotted(position) if position is not None else None
        if path is None or function is None:
            return False
        for node in walk(function.node):
            if node is call:
                return False
            if (isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign)
                    and dotted(node.target) == path):
                return True
        return False

    def _optimizer_step(
        self,
        call: cst.Call,
        optimizer: Optional[str],
        frame: Frame,
        via_scaler: bool = False,
        manages_grads: bool = False,
    ) -> Event:
        # One of several optimizers stepped in turn, or an optimizer built anew on every pass
        # (latent optimisation at inference): each step is a different object's first.
        each = (optimizer or "").split(".", 1)[0] in frame.loop_vars or (optimizer or "") in frame.rebuilt
        # Statically a step counts as an accumulation boundary only inside a recognised structure
        # (a modulo/sync condition, or after a micro-step loop); two losses backpropagated before
        # one step are not accumulation.
        return self._event(
            call,
            kind=EventKind.OPTIMIZER_STEP,
            target=self.name_of(optimizer),
            boundary=frame.accum is not None,
            accum=frame.accum,
            via_scaler=via_scaler,
            manages_grads=manages_grads,
            each=each,
            module=self._module_of(optimizer, frame),
            modules=self._modules_of(optimizer, frame),
            scope=_scope(frame),
        )

    def hand_step(self, update: cst.CSTNode, frame: Frame) -> Event:
        """The optimizer step of a loop that updates parameters by hand (see hand.py), at its
        update statement; a step at an accumulation boundary like any other."""
        return self._event(update, kind=EventKind.OPTIMIZER_STEP, target=HAND_UPDATE, label=self._statement_label(update),
                           boundary=frame.accum is not None, accum=frame.accum)

    def _statement_label(self, node: cst.CSTNode) -> str:
        """How messages name an update: a call as ``_label`` does, ``p -= lr * p.grad`` as written
        (``p -= ...`` if long)."""
        if isinstance(node, cst.Call):
            return _label(self.model, node)
        code = lambda part: " ".join(self.model.module.code_for_node(part).split())  # noqa: E731
        written = code(node)
        if len(written) <= _LABEL_MAX or not isinstance(node, cst.AugAssign):
            return written
        return f"{code(node.target)} {code(node.operator)} ..."

    def _module_of(self, optimizer: Optional[str], frame: Frame) -> Optional[str]:
        role = self.role(optimizer, frame=frame)
        return role.module if role is not None and role.kind == OPTIMIZER else None

    def _modules_of(self, optimizer: Optional[str], frame: Frame) -> Tuple[str, ...]:
        role = self.role(optimizer, frame=frame)
        return role.modules if role is not None and role.kind == OPTIMIZER and role.module is None else ()

    def _backward(self, call: cst.Call, loss_expr: cst.BaseExpression, frame: Frame, scaled: bool = False) -> Event:
        loss = classify_loss(loss_expr, frame.function, self.model, frame.given, frame.instances)
        if literal_bool(arg(call, 1, "retain_graph")) is True:
            # Several losses of one forward, backpropagated one by one over a shared graph: their
            # sum is the objective, not micro-batches to average (TL201 abstains, as the guard does).
            loss = LOSS_UNKNOWN
        return self._event(call, kind=EventKind.BACKWARD, scaled=scaled, loss=loss,
                           modules=_forwarded(loss_expr, frame, self.model))

    def _sampler_target(self, receiver: Optional[str], frame: Frame) -> Optional[str]:
        role = self.role(receiver, frame=frame)
        if role is not None and role.kind == SAMPLER:
            return self.name_of(receiver)
        if role is not None and role.kind == LOADER:
            return role.sampler
        if receiver and receiver.endswith(".sampler"):
            loader = self.role(receiver[: -len(".sampler")], frame=frame)
            return (loader.sampler if loader is not None and loader.kind == LOADER else None) or None
        return None

    # ----------------------------------------------------------------- loops
    def loader_event(self, node: cst.CSTNode, iterable: cst.BaseExpression, frame: Frame) -> Optional[Event]:
        """LOADER_ITER for ``for ... in <loader>`` (through enumerate/tqdm/zip...) or ``iter(loader)``."""
        base = iterable
        while isinstance(base, cst.Call) and base.args:
            if _last(dotted(base.func)) in _ITER_WRAPPERS:
                base = base.args[0].value
                continue
            handed_back = self._handed_back(base)
            if handed_back is None:
                break
            base = handed_back
        loader = frame.resolve_keyed(base)
        role = self.role(loader, frame=frame)
        if role is None or role.kind != LOADER or role.sampler is None:
            return None
        # the sampler's path is in the table the loader's role came from (a caller's, for a loader it handed in)
        table = self.model.roles if self.model.roles.get(loader) is role else (self.caller_roles or self.model.roles)
        sampler_role = table.get(role.sampler)
        is_sampler = sampler_role is not None and sampler_role.kind == SAMPLER
        shuffle = sampler_role.shuffle if is_sampler else None
        shuffle_when = sampler_role.shuffle_when if is_sampler else None
        written = dotted(base) or loader  # as the loop reads it (a callee's parameter: its own name)
        label = f"for ... in {written}" if isinstance(node, cst.For) else f"iter({written})"
        return self._event(node, kind=EventKind.LOADER_ITER, target=loader, sampler=role.sampler, shuffle=shuffle,
                           shuffle_when=shuffle_when, label=label)

    def _handed_back(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The argument a function of the module or project hands back, as is or wrapped in a
        progress bar, on every return (``iterate_tqdm(loader, verbosity)``): iterating its result is
        a pass over that argument."""
        name = dotted(call.func)
        if not name:
            return None
        fn = self.model.functions.get(name)
        if fn is None and self.project is not None and "." not in name:
            fn = self.project.function(self.model, name)
        index = fn.owner.memo(f"handed_back.{id(fn.node)}", lambda: _returned_parameter(fn)) if fn is not None and fn.owner else None
        if index is None:
            return None
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        return positional[index] if index < len(positional) else None


def _returned_parameter(fn: Function) -> Optional[int]:
    """The position of the parameter that every return of ``fn`` hands back (itself, or through
    ``tqdm``/``enumerate``-like wrappers), or None."""
    returned = set()
    for ret in fn.returns:
        while isinstance(ret, cst.Call) and _last(dotted(ret.func)) in _ITER_WRAPPERS and ret.args:
            ret = ret.args[0].value
        returned.add(ret.value if isinstance(ret, cst.Name) else None)
    if len(returned) != 1 or None in returned:
        return None
    (name,) = returned
    return fn.params.index(name) if name in fn.params and not fn.cls else None


def _given(call: cst.Call, effect: library.Effect) -> Optional[bool]:
    """Does the call do this effect? None when it depends on a keyword whose value is not a literal."""
    keyword = effect.only_if_given or effect.unless_false
    if keyword is None:
        return True
    passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
    if passed is None:
        return effect.unless_false is not None  # left at its default: done unless it must be given
    if isinstance(passed, cst.Name) and passed.value in _CONSTANTS:
        value = _CONSTANTS[passed.value]
    elif isinstance(passed, (cst.Integer, cst.Float, cst.SimpleString)):
        value = True
    else:
        return None
    return value is not False if effect.unless_false else value not in (None, False)


_CONSTANTS = {"None": None, "False": False, "True": True}


def _argument(call: cst.Call, where: Optional[library.Argument]) -> Optional[cst.BaseExpression]:
    """The argument a library description points at (by keyword, else by position)."""
    if where is None:
        return None
    if where.keyword is not None:
        by_name = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == where.keyword), None)
        if by_name is not None:
            return by_name
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return positional[where.position] if where.position is not None and where.position < len(positional) else None


def _ends_window(frame: Frame) -> bool:
    """A zero_grad at an accumulation boundary, or in a branch that skips the rest of the pass (a
    non-finite loss discarded), ends the accumulation window on purpose."""
    return frame.accum is not None or frame.skipping


_MAX_FORWARDED = 64  # names followed back from a loss to the calls that computed it


def _forwarded(loss: cst.BaseExpression, frame: Frame, model: ModuleModel) -> Tuple[str, ...]:
    """The objects whose calls computed ``loss`` in the frame's function, as the frame names
    them (``model`` of ``loss = criterion(model(x), y)``, through the names assigned on the way):
    the modules whose forward the backward runs through. A call whose result is detached
    (``G(z).detach()``) is left out; so are library and project functions."""
    fn = frame.function
    assigns = fn.assigns if fn is not None else model.module_assigns
    values: Dict[str, List[cst.BaseExpression]] = {}
    for target, value in assigns:
        for name in _bound_names(target):
            values.setdefault(name, []).append(value)
    found: List[str] = []
    seen = set()
    todo = [loss]
    while todo and len(seen) < _MAX_FORWARDED:
        node = todo.pop()
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in DETACHING:
                continue
            called = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
            path = dotted(called)
            if path is not None and model.imports.qualify(called) is None and path not in model.functions \
                    and path not in model.classes:
                resolved = frame.resolve(called)
                if resolved and resolved not in found:
                    found.append(resolved)
        elif isinstance(node, cst.Name) and node.value not in seen:
            seen.add(node.value)
            todo.extend(values.get(node.value, ()))
        todo.extend(children(node))
    return tuple(found)


def _bound_names(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _bound_names(element.value)]
    return []


def _scope(frame: Frame) -> Optional[int]:
    """The function whose statement an event is (None at module level), as events carry it."""
    return id(frame.function.node) if frame.function is not None else None
