"""Abstract objects: which training objects an expression can be, followed through the program.

An object is its allocation site: the constructor call of a known type (torch, or a library
described in ``trainlint/libraries``), a library call that hands back a new object, an instance
of a project class, or a container literal. Objects flow through assignments, tuple unpacking,
returns, arguments bound to parameters (each function's returns are computed once per distinct
abstract input), attributes set on ``self`` or on other objects, string-keyed and indexed
containers, ``tqdm``-style wrappers, library calls that hand back what they are given, and imports
of the project's own modules. An annotation or a name is never evidence here: the role table
falls back to annotations only where no object reaches a path (see ``module.py``).

Fields carry what the rules need to know about an object's relations: a loader's ``sampler``, a
scheduler's ``optimizer``, an instance's attributes, a container's entries (``['train']``,
``[0]``). The path-keyed role table the checker reads is a view of this flow (``paths``): every
access path that holds objects, with the objects it can hold.
"""
from __future__ import annotations

import itertools
import re
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

import libcst as cst

from ..events import ANY_ENTRY
from . import library
from .calls import arg, parameters_given
from .local_values import LocalValues
from .names import access_path, all_params, dotted, plain_key
from .project import following, imported_definition, module_has_event_text, names_an_import, project_of, text_matches
from .roles import LOADER, OPTIMIZER, SAMPLER, SCALER, SCHEDULER, Role, classify_constructor
from .values import UNKNOWN

if TYPE_CHECKING:
    from .module import Function, ModuleModel

Objects = FrozenSet["Obj"]
NONE: Objects = frozenset()
# Calls that hand back their first argument's objects for iteration (a pass over ``tqdm(loader)``
# is a pass over the loader).
_PASS_THROUGH = frozenset({"tqdm", "trange", "prefetch", "skip_first_batches", "iter"})
# Module methods that return the module itself.
_FLUENT = frozenset({"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "train", "eval",
                     "requires_grad_", "to_empty"})
_MAX_UNPACKED = 8  # optimizers handed back by one call (``opt_g, opt_d = self.optimizers()``)
_FIELD_DEPTH = 2  # ``loaders['train'].sampler``: fields of fields named in the role table
_ROUNDS = 3  # passes over a module's assignments: enough for aliases made before their source
_BUILTINS = frozenset(dir(__import__("builtins")))
_PATH_PART = re.compile(r"^\w+|\.\w+|\[[^\]]*\]")  # ``self`` ``.optimizer`` ``['generator']``
_MAX_DEPTH = 4  # calls followed inside one evaluation (callee returns through callee returns)
# A round re-evaluates only the scopes whose reads changed since their last evaluation (on torch,
# the later rounds were half the work and mostly found nothing new). Every growth of a scope's or
# a class's table and of an object's fields is stamped with this clock; a scope keeps what it read.
_CLOCK = itertools.count(1)
_WRITTEN: Dict[tuple, int] = {}  # (id(flow), "scope" or "class", key) -> when it last grew
_VOLATILE = ("volatile",)  # a read whose answer may change with no write (an import cycle being read)
_READS: Optional[Set[object]] = None  # what the scope being evaluated reads: keys and objects
_CONTAINERS = frozenset({cst.Tuple, cst.List, cst.Dict, cst.DictComp, cst.ListComp})  # see _container
# Text that can make a training object: a project module without it is never parsed for this.
_CONSTRUCTS = re.compile(r"DataLoader|Sampler\b|Sampler\(|torch\.optim|\boptim\.\w|Optimizer\b|lr_scheduler|GradScaler|"
                         r"Loss\(|DistributedDataParallel|fully_shard|FullyShardedDataParallel|\.prepare\(|"
                         r"\binitialize\(|\bDDP\(|\bFSDP\(|"
                         # a loss of the project's own, built on torch's (a focal loss): its instances
                         # are known, so what its forward applies to its input is
                         r"cross_entropy|nll_loss")


class Home:
    """The world of one module's own flow: its objects, and those that other modules' functions
    made for it when it called them (see ``ObjectFlow.flow_for``). Each object belongs to one.
    Modules that read each other while their runs are under way (an import cycle) are one world.

    A finished world is kept from one checked file to the next while it is what a fresh
    computation would give: nothing outside its runs changed one of its objects (a caller that
    stored into a module-level object of it, a rule's later question that grew a field), and every
    world it read from is kept too."""

    __slots__ = ("merged_into", "running", "finished", "dirty", "uses")

    def __init__(self) -> None:
        self.merged_into: Optional["Home"] = None
        self.running = 0  # runs of its modules' flows under way
        self.finished = False
        self.dirty = False
        self.uses: Set["Home"] = set()  # worlds whose objects it read

    def find(self) -> "Home":
        home = self
        while home.merged_into is not None:
            home = home.merged_into
        return home

    def read(self, other: "Home") -> None:
        """This world read objects of ``other``'s."""
        mine, theirs = self.find(), other.find()
        if mine is theirs:
            return
        if theirs.running:  # read in the middle of its run (an import cycle): one world, finished together
            mine.merged_into = theirs
            theirs.running += mine.running
            theirs.dirty |= mine.dirty
            theirs.uses |= mine.uses
        elif theirs.finished:
            mine.uses.add(theirs)
        else:
            mine.dirty = True

    def start(self) -> None:
        self.find().running += 1

    def stop(self) -> None:
        home = self.find()
        home.running -= 1
        if not home.running:
            home.finished = True


def changed(obj: "Obj") -> None:
    """``obj`` changed: after its world's runs are done, that is a change from outside them."""
    home = obj.home.find()
    if home.finished:
        home.dirty = True


def keep_finished(flows: Iterable["ObjectFlow"]) -> Set[int]:
    """The ids of those ``flows`` that the next checked file may use as they are: their world
    finished, not changed since, and reading only worlds that are kept too (see ``Home``)."""
    flows = list(flows)
    homes = {}
    for flow in flows:
        home = flow.home.find()
        if home.finished and not home.dirty:
            homes[id(home)] = home
    dropped = True
    while dropped:
        dropped = False
        for key, home in list(homes.items()):
            if any(id(used.find()) not in homes for used in home.uses):
                del homes[key]
                dropped = True
    return {id(flow) for flow in flows if id(flow.home.find()) in homes}


class Obj:
    """One allocation site. Identity is the object; ``fields`` grow as the flow finds stores."""

    __slots__ = ("role", "cls", "_module", "name", "origin", "fields", "node", "given_parameters", "unknown",
                 "changed_at", "home", "declared", "__weakref__")

    def __init__(self, home: Home, role: Optional[Role], name: str, cls: Optional[str] = None,
                 module: Optional["ModuleModel"] = None, origin: Optional[str] = None,
                 node: Optional[cst.CSTNode] = None) -> None:
        self.home = home  # the module flow whose world it belongs to
        self.role = role  # training objects: kind and literal facts; None for instances and containers
        self.cls = cls  # project class instances: the class name
        # and the module defining the class: weakly (it may own this object), with its file to
        # read it again if it was evicted and freed meanwhile
        self._module = (weakref.ref(module), module.path) if module is not None else None
        self.name = name  # the code that allocated it, for messages and debugging
        # An object that came from outside (a parameter, an attribute of ``self`` set elsewhere):
        # nothing is known of it but its identity, named by the path it came in by.
        self.origin = origin
        self.fields: Dict[str, Set["Obj"]] = {}
        self.node = node  # the allocating expression (a constructor call), None if it came in
        # made by a call nothing describes that was given a model's parameters
        # (``instantiate(cfg.optimizer, model.parameters())``): what it is, its methods tell
        self.given_parameters = False
        # returned by a call nothing here describes (or a part of such an object): it may be
        # anything, a training object included; what is asked of it may tell
        self.unknown = False
        self.changed_at = 0  # the clock's time of the last change of its fields (see ObjectFlow._rounds)
        # a parameter annotated with a class name, and its module: what it is an instance of where
        # nothing else tells, read when a method is called on it (see ObjectFlow._declared_class)
        self.declared: Optional[Tuple[str, "weakref.ref[ModuleModel]"]] = None

    def class_module(self) -> Optional["ModuleModel"]:
        if self._module is None:
            return None
        found = self._module[0]()
        if found is None and self._module[1] is not None:
            from .project import _load

            found = _load(self._module[1])
        return found

    def field(self, name: str) -> Objects:
        return frozenset(self.fields.get(name, ()))

    def store(self, name: str, objects: Iterable["Obj"]) -> bool:
        held = self.fields.setdefault(name, set())
        before = len(held)
        held.update(objects)
        if len(held) == before:
            return False
        self.changed_at = next(_CLOCK)
        changed(self)
        return True

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<{self.role.kind if self.role else 'obj'} {self.name}>"


class ObjectFlow:
    """The objects of one module's expressions, computed once per module (flow-insensitive)."""

    def __init__(self, model: "ModuleModel", serving: Optional["ObjectFlow"] = None, exported: bool = False) -> None:
        # weak, like every link back to a model: it owns this flow (see module.Function)
        self._model = weakref.ref(model)
        # A module's own flow serves itself. Another module's functions that it calls are computed
        # for it by a flow of its own for that module (``flow_for``): what they make and store is
        # part of this module's world, so a second module calling the same function with its
        # objects never sees the first one's, and this flow can be kept across checked files.
        self._serving = weakref.ref(serving) if serving is not None else None
        self.home = serving.home if serving is not None else Home()
        self._helpers: "weakref.WeakKeyDictionary[ModuleModel, ObjectFlow]" = weakref.WeakKeyDictionary()
        # Only the module level, which is what other modules read of it (``ModuleModel.exported``):
        # the same whatever else of the module was computed, so a reader's verdict never depends
        # on whether something else ran the module whole first.
        self._exported = exported
        self._top_level_done = False
        self._allocated: Dict[Tuple[int, int], Obj] = {}  # (id(call node), index) -> its object
        # (function or None for module level) -> access path -> objects
        self.scopes: Dict[Optional[int], Dict[str, Set[Obj]]] = {}
        self._scope_of: Dict[int, "Function"] = {}
        self._class_paths: Dict[Tuple[str, str], Set[Obj]] = {}  # (class, "self.x") -> objects
        self._wrapping: Set[Tuple[Optional[int], str]] = set()  # (scope, variable) bound to ``tqdm(x)``
        self._summaries: Dict[tuple, Objects] = {}
        self._locals: Dict[tuple, Dict[str, Objects]] = {}  # see locals_given
        self._outside: Dict[tuple, Obj] = {}  # (scope, path) -> the object that came in there
        self._active: Set[tuple] = set()
        self._context: Optional[int] = None  # the call whose callee is being read (see _call)
        self._changed = False
        self._read: Dict[object, "ModuleModel"] = {}  # project modules read for their objects, by path
        self._answered: List[Tuple[str, Obj, Optional["Function"]]] = []  # see _answer_protocols
        self._asked_of: Dict[int, Dict[str, Set[Tuple[str, int]]]] = {}
        self._settled: Optional[Dict[Tuple[int, Optional[int]], Tuple[cst.BaseExpression, Objects]]] = None  # see run()
        self._definitions: Dict[Tuple[str, bool], Optional[Tuple["ModuleModel", str]]] = {}
        self.complete = False  # every scope computed (ModuleModel.objects)

    @property
    def model(self) -> "ModuleModel":
        """The module (alive while anyone asks: it is asked through it)."""
        return self._model()

    # ----------------------------------------------------------------- whole module
    def run(self) -> None:
        """Every scope of the module: its top level and each function, callers before callees."""
        model = self.model
        self._top_level_done = True
        self.home.start()
        try:
            self._rounds([(None, model.module_assigns)] + [(fn, fn.assigns) for fn in _callers_first(model)])
            self._answer_protocols([model.top] + list(model.all_functions))
        finally:
            self.home.stop()
        self._settled = {}  # from now on, what an expression is asked again is answered from here

    def flow_for(self, model: "ModuleModel") -> "ObjectFlow":
        """The flow that computes ``model``'s functions for this module's world (see __init__)."""
        serving = self._serving() if self._serving is not None else self
        if model is serving.model:
            return serving
        found = serving._helpers.get(model)
        if found is None:
            found = serving._helpers[model] = ObjectFlow(model, serving)
        return found

    def _exported_flow(self) -> "ObjectFlow":
        """What other modules read of this flow's module: its module level (see __init__)."""
        flow = self.model.exported()
        flow.top_level()
        self.home.read(flow.home)
        return flow

    def top_level(self) -> Dict[str, Set[Obj]]:
        """The module's top-level objects: computed alone for a flow of the module level only."""
        if self._serving is not None:
            return self._exported_flow().top_level()
        if not self._top_level_done:
            self._top_level_done = True
            self.home.start()
            try:
                self._rounds([(None, self.model.module_assigns)])
            finally:
                self.home.stop()
        return self.scopes.get(None, {})

    def _rounds(self, scopes) -> None:
        global _READS
        for fn, _ in scopes:
            if fn is not None:
                self._scope_of[id(fn.node)] = fn
        evaluated: Dict[Optional[int], Tuple[int, Set[object]]] = {}  # scope -> (when, what it read)
        for _ in range(_ROUNDS):
            self._changed = False
            for fn, assigns in scopes:
                key = id(fn.node) if fn is not None else None
                if key in evaluated and not _stale(*evaluated[key]):
                    continue  # nothing it read has changed: it would bind what it bound
                evaluated[key] = (next(_CLOCK), set())
                outer, _READS = _READS, evaluated[key][1]
                try:
                    for target, value in assigns:
                        self._bind(target, self.eval(value, fn), fn)
                        if _passes_through(value) and type(target) is cst.Name:
                            self._wrapping.add((key, target.value))
                    self._run_method_statements(fn, None)
                    if fn is not None:
                        for loop_target, sources in fn.owner.memo(f"loop targets {id(fn.node)}", lambda f=fn: list(_loop_targets(f))):
                            self._bind(loop_target, self._iterated(sources, fn), fn)
                    if len(scopes) > 1:
                        # The whole module: a function's parameters hold what its calls here pass
                        # (``train_epoch(model, loader, optimizer)`` in ``main``), bound as soon as
                        # the caller is read, so that a callee read after it (callers come first)
                        # never takes a parameter for something that came in from outside.
                        self._bind_calls_of(fn, self.model, self.model.sites())
                finally:
                    _READS = outer
            self._instances_into_classes()
            if not self._changed:
                break

    def _bind_calls_of(self, fn: Optional["Function"], model: "ModuleModel", sites) -> None:
        """The objects ``fn``'s calls pass to this module's functions, bound to their parameters."""
        statements = fn.calls if fn is not None else model.top.calls
        made = {id(call) for call in statements}
        # the calls made as statements, and a method called on an instance anywhere, also inside
        # another call's arguments (``states.append(client.train(net=m))``); the rest of the
        # nested calls are left out: on torch, evaluating all their arguments cost a third more
        for call in (site.call for site in sites.in_function(fn)):
            name = dotted(call.func)
            target, constructed = _called_here(model, name, fn) if name is not None and id(call) in made else (None, False)
            if target is None and isinstance(call.func, cst.Attribute):
                target = self._method_of_instances(call.func, fn)
            if target is None or target is fn:
                continue
            method = constructed or (target.cls is not None and isinstance(call.func, cst.Attribute))
            for param, argument in parameters_given(call, target.params, method):
                objects = self.eval(argument, fn)
                # a method's own ``self`` is its instance (see _from_outside); a plain function's
                # first parameter, whatever its name, is what the call passes
                if objects and not (target.cls is not None and param == target.params[0]):
                    self._grow(self._scope(target).setdefault(param, set()), objects, "scope", id(target.node))

    def _method_of_instances(self, func: cst.Attribute, fn: Optional["Function"]) -> Optional["Function"]:
        """``local.train`` where ``local`` can only be instances of one class of this module: that
        class's method (``LocalUpdate(args).train(net=model)`` gives ``train`` its ``net``)."""
        model = self.model
        names = model.memo("method names", lambda: frozenset(name for _, name in model.methods))
        if func.attr.value not in names:
            return None  # no class here has such a method (``x.append``, ``torch.cat``): nothing to evaluate
        objects = self.eval(func.value, fn)
        classes = {o.cls for o in objects}
        if len(classes) != 1 or None in classes or any(o.class_module() is not self.model for o in objects):
            return None
        return self.model.method_of_class(classes.pop(), func.attr.value)

    def _instances_into_classes(self) -> None:
        """``self.x`` in a method of a class is ``x`` of any instance of it: what its constructions
        here stored on the instances (``__init__`` run with the caller's arguments) is what the
        methods read, beside what came in from outside."""
        model = self.model
        for obj in list(self._allocated.values()):
            if obj.cls is None or not obj.fields or obj.class_module() is not model:
                continue
            for name, objects in obj.fields.items():
                if not name.startswith("["):
                    held = self._class_paths.setdefault((obj.cls, f"self.{name}"), set())
                    self._grow(held, objects, "class", obj.cls)

    def paths(self) -> Iterable[Tuple[str, Objects, Optional["Function"]]]:
        """Every access path with the objects it holds (module level first, then each function,
        then each class's ``self`` attributes, and last a variable holding a progress bar over
        what another one holds: ``bar = tqdm(self.train_loader)``), expanded one level into the
        fields of the objects (``trainer.train_data`` for an instance, ``loader.sampler``). The
        role table names an object by the first path it meets it at: never ``bar.sampler``."""
        wrappers = []
        for key, table in self.scopes.items():
            fn = self._scope_of.get(key) if key is not None else None
            for path, objects in table.items():
                if (key, path) in self._wrapping:
                    wrappers.append((path, objects, fn))
                    continue
                yield path, frozenset(objects), fn
                yield from _field_paths(path, objects)
        for (_, path), objects in self._class_paths.items():
            yield path, frozenset(objects), None
            yield from _field_paths(path, objects)
        for path, objects, fn in wrappers:
            yield path, frozenset(objects), fn
            yield from _field_paths(path, objects)
        # last: a path where a constructed object also arrives keeps that object's facts
        for path, obj, fn in self._answered:
            yield path, frozenset({obj}), fn

    def _answer_protocols(self, functions: Iterable["Function"]) -> None:
        """An object that came in from outside is known by what the code asks of it: one that is
        both stepped and zeroed is an optimizer; one that steps an optimizer it is given, or scales
        a loss, and then updates itself is a GradScaler; one stepped and asked its learning rate is
        a scheduler. What a function asks of a parameter includes what the functions it passes
        the parameter to ask. The role is what those methods mean, for every path the object
        arrives by."""
        asked: Dict[Obj, Set[Tuple[str, int]]] = {}
        seen: List[Tuple[str, Obj, Optional["Function"]]] = []
        for unit in functions:
            fn = unit if unit is not self.model.top else None  # the module level's own statements
            sole = _sole_stepped_after_backward(unit)
            for path, methods in self._asked(unit, 0, set()).items():
                if path == sole:
                    methods = methods | {_SOLE_STEP}
                head = re.split(r"[.\[]", path, maxsplit=1)[0]
                found = self._at_path(path, fn)
                if any(obj.role is not None for obj in found):
                    continue  # a path that holds a known training object is known by it
                for obj in found:
                    # (an instance of a project class is known by its class, not by what is asked of it)
                    if (obj.origin is not None or obj.unknown) and obj.role is None and obj.cls is None:
                        asked.setdefault(obj, set()).update(methods)
                        seen.append((path, obj, fn if head != "self" else None))
        for obj, methods in asked.items():
            kind = OPTIMIZER if obj.given_parameters and ("step", 0) in methods else _answered_kind(methods)
            if kind is not None:
                obj.role = Role(kind)
                changed(obj)  # an object of another module's world, known here by its methods
        self._answered = [(path, obj, fn) for path, obj, fn in dict.fromkeys(seen) if obj.role is not None]

    # ----------------------------------------------------------------- bindings
    def _scope(self, fn: Optional["Function"]) -> Dict[str, Set[Obj]]:
        return self.scopes.setdefault(id(fn.node) if fn is not None else None, {})

    def _bind(self, target: cst.BaseExpression, objects: Objects, fn: Optional["Function"]) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for index, element in enumerate(target.elements):
                if isinstance(element, cst.StarredElement):
                    return
                self._bind(element.value, _element(objects, index), fn)
            return
        if not objects:
            return
        if isinstance(target, cst.Subscript):
            key = _subscript_key(target)
            if key is not None:
                for holder in self.eval(target.value, fn):
                    self._changed |= holder.store(key, objects)
            return
        path = dotted(target)
        if path is None:
            return
        if isinstance(target, cst.Attribute):
            # ``trainer.loader = loader`` / ``self.loader = loader``: a field of the objects held
            # (instances built here), and, for ``self`` in a method, a path of the whole class.
            for holder in self.eval(target.value, fn):
                self._changed |= holder.store(target.attr.value, objects)
            if path.startswith("self.") and fn is not None and _method_class(fn) is not None:
                held = self._class_paths.setdefault((_method_class(fn), path), set())
                self._grow(held, objects, "class", _method_class(fn))
                return
        self._grow(self._scope(fn).setdefault(path, set()), objects, "scope", id(fn.node) if fn is not None else None)

    def _grow(self, held: Set[Obj], objects: Iterable[Obj], table: str, key) -> None:
        """Add ``objects`` to a table entry; a growth is a change the next round must see."""
        if _add(held, objects):
            self._changed = True
            _WRITTEN[(id(self), table, key)] = next(_CLOCK)

    def _at_path(self, path: str, fn: "Function") -> Objects:
        """The objects at an access path (``self.optimizer['generator']``) in ``fn``: its longest
        prefix that holds objects, then their fields; a path nothing reaches is what came in from
        outside, or from a call nothing describes."""
        found = self._lookup(path, fn)
        if found:
            return found
        parts = _PATH_PART.findall(path)
        for end in range(len(parts) - 1, 0, -1):
            found = self._lookup("".join(parts[:end]), fn)
            if found:
                for part in parts[end:]:
                    found = _field(found, part.lstrip("."))
                return found
        outside = self._from_outside(path, parts[0] if parts else path, fn)
        return frozenset({outside}) if outside is not None else NONE

    def _asked(self, fn: "Function", depth: int, active: Set[int]) -> Dict[str, Set[Tuple[str, int]]]:
        """The methods ``fn``'s statements call on each variable path (``opt.step()``), and, for a
        variable handed on to a function of the project, what that function asks of its parameter."""
        known = self._asked_of.get(id(fn.node)) if getattr(fn, "owner", None) in (None, self.model) else None
        if known is not None:
            return known
        asked = _own_asks(fn)
        if depth < _MAX_DEPTH and id(fn.node) not in active:
            active.add(id(fn.node))
            model = getattr(fn, "owner", None) or self.model  # the module level has no owner link
            for call in fn.calls:
                name = dotted(call.func)
                scope = fn if fn is not model.top else None
                target = _local_function(model, name, scope) if name is not None else None
                if target is None and name is not None and model is self.model and call.args and names_an_import(model, name):
                    # ``fit(net, opt, loader)`` imported from another module of the project that
                    # may train: what its function (and the functions of its module it hands
                    # ``opt`` to) asks of ``opt`` is asked of the object handed to it
                    project = project_of(model)
                    target = project.function(model, name) if project.may_train(model, name) else None
                if target is None:
                    continue
                inner = self._asked(target, depth + 1, active)
                for param, argument in parameters_given(call, target.params, target.cls is not None):
                    path = dotted(argument)
                    for key, methods in inner.items():
                        if path is not None and (key == param or key.startswith(param + ".")):
                            asked.setdefault(path + key[len(param):], set()).update(methods)
            active.discard(id(fn.node))
        if getattr(fn, "owner", None) in (None, self.model):
            # (another module's function is not kept by node: that module may be freed first)
            self._asked_of[id(fn.node)] = asked
        return asked

    def _lookup(self, path: str, fn: Optional["Function"]) -> Objects:
        if self._serving is not None:
            return self._exported_flow()._lookup(path, fn)
        reads = _READS
        scope = fn
        while scope is not None:
            if reads is not None:
                reads.add((id(self), "scope", id(scope.node)))
            found = self.scopes.get(id(scope.node), {}).get(path)
            if found:
                return frozenset(found)
            cls = _method_class(scope)
            if cls is not None and path.startswith("self."):
                if reads is not None:
                    reads.add((id(self), "class", cls))
                found = self._class_paths.get((cls, path))
                if found:
                    return frozenset(found)
            scope = scope.parent
        if reads is not None:
            reads.add((id(self), "scope", None))
        return frozenset(self.top_level().get(path, ()))

    # ----------------------------------------------------------------- expressions
    def eval(self, expr: Optional[cst.BaseExpression], fn: Optional["Function"],
             bound: Optional[Dict[str, Objects]] = None, depth: int = 0) -> Objects:
        if expr is None:
            return NONE
        if self._settled is not None and bound is None:
            # the rules ask about the same expressions again and again once the module is done
            key = (id(expr), id(fn.node) if fn is not None else None)
            found = self._settled.get(key)
            if found is None:
                # the expression is kept with its answer: a node parsed for one question and
                # freed must not hand its id, and this answer, to the next one
                found = self._settled[key] = (expr, self._eval(expr, fn, None, depth))
            return found[1]
        return self._eval(expr, fn, bound, depth)

    def _eval(self, expr: cst.BaseExpression, fn: Optional["Function"],
              bound: Optional[Dict[str, Objects]], depth: int) -> Objects:
        # exact types (libcst's node classes are final): an isinstance that fails goes through
        # ABCMeta's Python-level hook, and this runs for most expressions of every module read
        kind = type(expr)
        if kind is cst.Name or kind is cst.Attribute:
            path = dotted(expr)
            if path is not None:
                head = path.split(".", 1)[0]
                if bound is not None and head in bound:
                    found = bound[head]
                    for part in path.split(".")[1:]:
                        found = _field(found, part)
                    return found
                found = self._lookup(path, fn)
                if found:
                    return found
                if kind is cst.Name:
                    found = self._imported(expr.value)
                    if found:
                        return found
                outside = self._from_outside(path, head, fn)
                if outside is not None:
                    return frozenset({outside})
            if kind is cst.Attribute:
                return _field(self.eval(expr.value, fn, bound, depth), expr.attr.value)
            return NONE
        if kind is cst.Subscript:
            key = _subscript_key(expr)
            path = dotted(expr.value)
            if key is None:
                return NONE
            return _field(self.eval(expr.value, fn, bound, depth), key) or (
                frozenset(self._lookup(f"{path}{key}", fn)) if path else NONE)
        if kind is cst.IfExp:
            return self.eval(expr.body, fn, bound, depth) | self.eval(expr.orelse, fn, bound, depth)
        if kind is cst.BooleanOperation:
            return self.eval(expr.left, fn, bound, depth) | self.eval(expr.right, fn, bound, depth)
        if kind in _CONTAINERS:
            return self._container(expr, fn, bound, depth)
        if kind is cst.Call:
            return self._call(expr, fn, bound, depth)
        return NONE

    def _from_outside(self, path: str, head: str, fn: Optional["Function"]) -> Optional[Obj]:
        """What a parameter or an attribute of ``self`` holds when nothing here puts an object
        in it: one unknown object per such path (per class for ``self.x``, per function for a
        parameter), so the two places that read it read the same object (a scheduler built over
        ``optimizer = self.optimizer`` steps with ``self.optimizer.step()``)."""
        if self._serving is not None:
            return self._exported_flow()._from_outside(path, head, fn)
        if fn is None:
            return self._free_at_module_level(path, head)
        if path == "self" and _method_class(fn) is not None:
            # the instance itself, handed on (``build_loader(dataset, self)``): one per class,
            # holding what its methods store on ``self``
            key: tuple = ("instance", _method_class(fn))
            obj = self._outside.get(key)
            if obj is None:
                obj = self._outside[key] = Obj(self.home, None, path, cls=_method_class(fn), module=self.model, origin=path)
            return obj
        if head == "self" and path != "self" and _method_class(fn) is not None:
            key = ("class", _method_class(fn), path)
        elif head in fn.params and head not in ("self", "cls"):
            key = (id(fn.node), path)
        else:
            return None
        obj = self._outside.get(key)
        if obj is None:
            obj = self._outside[key] = Obj(self.home, None, path, origin=path)
            written = _annotated_name(fn, path) if path == head else None
            if written is not None:
                obj.declared = (written, weakref.ref(self.model))
        return obj

    def _declared_class(self, obj: Obj) -> None:
        """A parameter nothing here passes, annotated with a class of the project (``source:
        DataSource``), is taken for an instance of that class once a method is called on it: the
        method is the class's. An annotation is read only where no object reaches the parameter,
        and only for a class whose module can make training objects (an instance of any other adds
        nothing to what came in: on torch, most parameters are annotated with such classes)."""
        written, model_ref = obj.declared
        obj.declared = None
        model = model_ref()
        if model is None:
            return
        found = (model, written) if written in model.classes else self.flow_for(model)._project_definition(written)
        if found is not None and found[1] in found[0].classes and _makes_training_objects(found[0]):
            obj.cls, obj._module = found[1], (weakref.ref(found[0]), found[0].path)
            changed(obj)

    def _free_at_module_level(self, path: str, head: str) -> Optional[Obj]:
        """A name the module uses but never binds (a notebook cell's or a snippet's ``optimizer``
        from elsewhere): one unknown object per path, which what is asked of it may tell."""
        model = self.model
        bound = model.memo("bound at module level", lambda: frozenset(
            dotted(t) or "" for t, _ in model.module_assigns) | {n for t, _ in model.module_assigns
                                                                 if isinstance(t, (cst.Tuple, cst.List))
                                                                 for n in (dotted(e.value) for e in t.elements) if n})
        if (head in bound or head in model.imports.names or head in model.functions or head in model.classes
                or head in _BUILTINS):
            return None
        key = ("module", path)
        obj = self._outside.get(key)
        if obj is None:
            obj = self._outside[key] = Obj(self.home, None, path, origin=path)
        return obj

    def _container(self, expr, fn, bound, depth) -> Objects:
        entries: Dict[str, Objects] = {}
        if isinstance(expr, (cst.DictComp, cst.ListComp)):
            # ``{split: DataLoader(...) for split in splits}``: every entry is what the one
            # expression makes, under any key (see _field)
            entries[ANY_ENTRY] = self.eval(expr.value if isinstance(expr, cst.DictComp) else expr.elt, fn, bound, depth)
        elif isinstance(expr, cst.Dict):
            for element in expr.elements:
                key = plain_key(element.key) if isinstance(element, cst.DictElement) else None
                if key is not None:
                    entries[f"[{key!r}]"] = self.eval(element.value, fn, bound, depth)
        else:
            for index, element in enumerate(expr.elements):
                if isinstance(element, cst.StarredElement):
                    break
                entries[f"[{index}]"] = self.eval(element.value, fn, bound, depth)
        # An empty dict is a container too: entries stored into it later (``loaders = {}`` then
        # ``loaders["train"] = DataLoader(...)``, in any method for ``self.loaders``) are its fields.
        if not any(entries.values()) and not (type(expr) is cst.Dict and not expr.elements):
            return NONE
        obj = self._allocate(expr, None, "container")
        for key, objects in entries.items():
            obj.store(key, objects)
        return frozenset({obj})

    def _allocate(self, node: cst.CSTNode, role: Optional[Role], name: str, cls: Optional[str] = None,
                  index: int = 0, module: Optional["ModuleModel"] = None, context: Optional[int] = None) -> Obj:
        key = (id(node), index) if context is None else (id(node), index, context)
        obj = self._allocated.get(key)
        if obj is None:
            obj = self._allocated[key] = Obj(self.home, role, name, cls, module, node=node)
        return obj

    def _call(self, call: cst.Call, fn, bound, depth) -> Objects:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _FLUENT:
            return self.eval(func.value, fn, bound, depth)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        role = classify_constructor(call, self.model.imports, self.model.filled) or self.model.class_alias_role(call)
        if role is not None:
            return frozenset({self._constructed(call, role, fn, bound, depth)})
        name = dotted(func) or ""
        if _passes_through(call):
            return frozenset(o for o in self.eval(positional[0], fn, bound, depth) if o.role and o.role.kind == LOADER)
        if depth >= _MAX_DEPTH:
            return NONE
        callee = self._callee(call, fn, bound, depth)
        if callee is not None:
            target, instances = callee
            if target is _NO_INIT:
                return instances
            args = self._arguments(call, target, fn, bound, depth, instances)
            summary = self.flow_for(target.owner).summary(target, args, depth + 1, id(call))
            return instances if target.name == "__init__" and instances is not None else summary
        returned = self._library_returns(call, fn, bound, depth)
        if returned is not None:
            return self._handed_back(call, returned, positional, fn, bound, depth)
        # what a call nothing describes returns inside a function is one object per call of that
        # function: a config factory's ``instantiate(cfg.optimizer)`` and ``instantiate(cfg.checkpointer)``
        # return two objects, not the factory's one (the call, not its input: inputs grow round by
        # round, and an object made anew for each would split what the program holds as one)
        made = self._allocate(call, None, name or "call", context=self._context)
        given = any(_parameters_of_a_module(a.value) for a in call.args)
        if not made.unknown:  # just made
            made.unknown = True
            made.given_parameters = given
        elif given and not made.given_parameters:
            made.given_parameters = True
            changed(made)
        return frozenset({made})

    def _handed_back(self, call, returned: library.Returned, positional, fn, bound, depth) -> Objects:
        """``accelerator.prepare(model, opt, loader)`` hands back its arguments in order;
        ``deepspeed.initialize`` an engine and an optimizer; ``self.optimizers()`` any number of
        optimizers (one object, its entries the others); ``copy.deepcopy(model)`` a new object of
        each kind and class its argument can be (an EMA copy put in eval is not the model)."""
        if returned.copies:
            return frozenset(self._copy(call, o) for o in self.eval(positional[0], fn, bound, depth)) if positional else NONE
        if returned.each is not None:
            first = self._allocate(call, Role(returned.each), dotted(call.func) or "returned")
            for index in range(1, _MAX_UNPACKED):
                first.store(f"[{index}]", {self._allocate(call, Role(returned.each), first.name, index=index)})
            first.store("[0]", {first})
            return frozenset({first})
        if returned.roles is not None:
            entries = [frozenset({self._allocate(call, Role(kind), f"{dotted(call.func)}[{index}]", index=index)})
                       if kind else NONE for index, kind in enumerate(returned.roles)]
        elif len(call.args) == 1 and positional:
            return self.eval(positional[0], fn, bound, depth)
        else:
            entries = [self.eval(value, fn, bound, depth) for value in positional]
        holder = self._allocate(call, None, "returned")
        for index, objects in enumerate(entries):
            holder.store(f"[{index}]", objects)
        return frozenset({holder})

    def _copy(self, call: cst.Call, original: Obj) -> Obj:
        copy = self._allocate(call, original.role, original.name, original.cls, index=id(original),
                              module=original.class_module() if original.cls is not None else None)
        copy.unknown = original.unknown or original.origin is not None
        copy.given_parameters = original.given_parameters
        return copy

    def _library_returns(self, call: cst.Call, fn, bound, depth) -> Optional[library.Returned]:
        """What a library call hands back (``accelerator.prepare(...)``), when the descriptions
        say so. A method entry applies to a method of an object that is not the project's own,
        of the entry's kind or unknown; a plain function only by its imported qualified name."""
        func = call.func
        name = dotted(func) or ""
        qualified = self.model.imports.qualify(func) or (name if "." in name else None)
        if not isinstance(func, cst.Attribute):
            return library.current().returns_given(qualified, name, None, method=False)
        holders = self.eval(func.value, fn, bound, depth)
        if any(h.cls is not None and _defines(h, func.attr.value) for h in holders):
            return None  # the project's own method (one inherited from a library is the library's)
        kinds = {h.role.kind for h in holders if h.role is not None}
        kind = kinds.pop() if len(kinds) == 1 else None
        return library.current().returns_given(qualified, func.attr.value, kind)

    def _constructed(self, call, role: Role, fn, bound, depth) -> Obj:
        if role.kind == SAMPLER and role.shuffle is None:
            # ``shuffle=SHUFFLE`` / ``shuffle=args.shuffle``: a constant or the command line's
            # default; ``shuffle=shuffle``: what every caller of the function passes
            given = arg(call, 3, "shuffle")
            value = self.model.values.boolean(given)
            if value is None and fn is not None and given is not None:
                found = LocalValues(self.model, fn).value(given, call)
                value = None if found is UNKNOWN else bool(found)
            if value is not None:
                role = replace(role, shuffle=value, shuffle_when=None)
        obj = self._allocate(call, role, dotted(call.func) or "object")
        if role.kind == LOADER:
            sampler = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "sampler"), None)
            found = self.eval(sampler, fn, bound, depth)
            obj.store("sampler", (o for o in found if o.role is not None and o.role.kind == SAMPLER))
        elif role.kind == SCHEDULER:
            obj.store("optimizer", self.eval(arg(call, 0, "optimizer"), fn, bound, depth))
        return obj

    def _callee(self, call: cst.Call, fn, bound, depth) -> Optional[Tuple["Function", Optional[Objects]]]:
        """The function a call runs and, for a class, the instance it makes (its ``__init__``
        runs with it as ``self``)."""
        func = call.func
        if isinstance(func, cst.Attribute):
            for holder in self.eval(func.value, fn, bound, depth):
                if holder.declared is not None:
                    self._declared_class(holder)
                owner = holder.class_module() if holder.cls is not None else None
                if owner is not None:
                    method = owner.method_of_class(holder.cls, func.attr.value)
                    if method is not None:
                        return method, frozenset({holder})
            name = dotted(func)
            if name is None:
                return None
        else:
            name = dotted(func)
            if name is None:
                return None
        local = _local_function(self.model, name, fn)
        if local is not None:
            return local, None
        if name in self.model.classes:
            return self._instance(call, self.model, name, fn, bound, depth)
        found = self._project_definition(name)
        if found is None and names_an_import(self.model, name) and self._hands_objects(call, fn, bound, depth):
            # a class of a module with no training text, read because the call hands it training
            # objects (its arguments are evaluated only for a name some import gives)
            found = self._project_definition(name, classes=True)
        if found is None:
            return None
        other, defined = found
        if defined in other.functions:
            return other.functions[defined], None
        if defined in other.classes:
            return self._instance(call, other, defined, fn, bound, depth)
        return None

    def _hands_objects(self, call: cst.Call, fn, bound, depth) -> bool:
        """Does the call give a training object (or something holding one) to its callee?"""
        return any(o.role is not None or (_reading(o).fields and not o.unknown) for a in call.args for o in self.eval(a.value, fn, bound, depth))

    def _instance(self, call: cst.Call, owner: "ModuleModel", class_name: str, fn, bound, depth):
        # a project optimizer or scheduler (a subclass of torch's) is one, whatever its name; a
        # scheduler's optimizer is the object its constructor is given, as for torch's own
        role = owner.inherited_role(class_name, call)
        instance = self._allocate(call, role, class_name, cls=class_name, module=owner)
        if role is not None and role.kind == SCHEDULER:
            instance.store("optimizer", self.eval(arg(call, 0, "optimizer"), fn, bound, depth))
        init = owner.method_of_class(class_name, "__init__")
        return (init if init is not None else _NO_INIT), frozenset({instance})

    def _arguments(self, call: cst.Call, target: "Function", fn, bound, depth, instances) -> Tuple[Tuple[str, Objects], ...]:
        params = list(target.params)
        given: Dict[str, Objects] = {}
        if instances is not None and params and params[0] in ("self", "cls"):
            given[params[0]] = instances
        for param, value in parameters_given(call, params, target.cls is not None or instances is not None):
            given[param] = self.eval(value, fn, bound, depth)
        return tuple(sorted((k, v) for k, v in given.items() if v))

    def summary(self, target: "Function", args: Tuple[Tuple[str, Objects], ...], depth: int,
                site: Optional[int] = None) -> Objects:
        """What ``target`` returns given these argument objects: computed once per distinct input,
        its stores (``self.x = param``) applied to the objects it was given. ``site``: the call
        being read (see _call)."""
        # the instance a method runs on may have grown since (``data.setup()`` stored the loader
        # that ``data.train_dataloader()`` returns): a summary is of its arguments as they are now
        key = (id(target.node), args, max((o.changed_at for _, objects in args for o in objects), default=0))
        known = self._summaries.get(key)
        if known is not None:
            return known
        if key in self._active:
            return NONE  # recursion: what the outer call returns is what it finds without it
        self._active.add(key)
        outer, self._context = self._context, site
        try:
            bound: Dict[str, Objects] = dict(args)
            for target_node, value in target.assigns:
                objects = self.eval(value, target, bound, depth)
                _bind_locally(target_node, objects, bound)
                if isinstance(target_node, cst.Attribute):
                    for holder in self.eval(target_node.value, target, bound, depth):
                        holder.store(target_node.attr.value, objects)
            self._run_method_statements(target, bound, depth)
            result = frozenset(o for ret in target.returns for o in self.eval(ret, target, bound, depth))
        finally:
            self._active.discard(key)
            self._context = outer
        self._summaries[key] = result
        return result

    def _run_method_statements(self, fn: Optional["Function"], bound, depth: int = 0) -> None:
        """A method called as a statement on an instance of a project class (``self.build()``,
        ``data.setup(rank)``) runs: what it stores on the instance is there for what is read of it
        later (``return self.train_loader``, ``data.train_dataloader()``). Only in a module whose
        text trains or makes training objects: in any other, nothing asks what the instance holds
        (on torch, evaluating every receiver of such calls cost a tenth more)."""
        model = fn.owner if fn is not None else self.model
        if not (_makes_training_objects(model) or module_has_event_text(model)):
            return
        for call in _statement_method_calls(model, fn):
            receivers = self.eval(call.func.value, fn, bound, depth)
            for obj in receivers:
                if obj.declared is not None:
                    self._declared_class(obj)
            # (a class whose module makes no training object stores none but what it is given)
            if any(o.cls is not None and _makes_training_objects(o.class_module()) for o in receivers):
                self.eval(call, fn, bound, depth)

    def locals_given(self, fn: "Function", args: Tuple[Tuple[str, Objects], ...]) -> Dict[str, Objects]:
        """``fn``'s parameters and locals when a call gives its parameters these objects: its
        assignments and loop targets read with them (once per distinct input). For a function of
        another module run for the checked file with the checked file's objects (see flow's
        Interpreter.objects); this flow is the checked file's own for that module (``flow_for``)."""
        key = (id(fn.node), args)
        known = self._locals.get(key)
        if known is not None:
            return known
        bound: Dict[str, Objects] = dict(args)
        loops = fn.owner.memo(f"loop targets {id(fn.node)}", lambda: list(_loop_targets(fn))) if fn.owner else []
        for _ in range(2):  # a loop over what an assignment after it in the text makes, and back
            for target_node, value in fn.assigns:
                _bind_locally(target_node, self.eval(value, fn, bound), bound)
            for loop_target, sources in loops:
                _bind_locally(loop_target, self._iterated(sources, fn, bound), bound)
        self._locals[key] = bound
        return bound

    def _iterated(self, sources: List[cst.BaseExpression], fn, bound: Optional[Dict[str, Objects]] = None) -> Objects:
        """``for loader in (train_loader, val_loader)`` / ``for name, loader in loaders.items()`` /
        ``for callback in callbacks``."""
        found: Set[Obj] = set()
        for source in sources:
            while _passes_through(source):
                source = source.args[0].value  # ``tqdm(callbacks)`` visits what ``callbacks`` holds
            if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and source.func.attr.value in ("values", "items"):
                entries = [o for holder in self.eval(source.func.value, fn, bound) for o in _all_entries(holder)]
                found.update(entries)
            elif isinstance(source, (cst.Tuple, cst.List)):
                found.update(o for e in source.elements for o in self.eval(e.value, fn, bound))
            elif isinstance(source, (cst.Name, cst.Attribute)) and dotted(source) is not None:
                # ``for callback in callbacks`` over a list a caller built: its entries (read from
                # what the scope binds; evaluating every loop's source cost a tenth on torch)
                held = self.eval(source, fn, bound) if bound is not None else self._lookup(dotted(source), fn)
                found.update(o for holder in held if holder.cls is None for o in _all_entries(holder))
        return frozenset(found)

    # ----------------------------------------------------------------- the project
    def _project_definition(self, name: str, classes: bool = False) -> Optional[Tuple["ModuleModel", str]]:
        """(module, name) of a function or class of another project module that ``name`` refers
        to through imports (``from data import build``, ``import pkg.data as d; d.build``, a
        package ``__init__`` re-exporting it). A module is read when its text builds training
        objects, or (``classes``: the call hands training objects to it) defines the class."""
        key = (name, classes)
        if key in self._definitions:
            return self._definitions[key]
        found = imported_definition(self.model, name, _CONSTRUCTS, self._read, classes)
        if found is not None or not following():
            # asked again for every expression that names it; not kept when an import cycle
            # being read answered None for now
            self._definitions[key] = found
        else:
            self.home.dirty = True  # a provisional answer: not kept for the next checked file
            if _READS is not None:
                _READS.add(_VOLATILE)
        return found

    def reaching(self, expr: cst.BaseExpression, fn: Optional["Function"], callers, depth: int = 0) -> Objects:
        """The objects ``expr`` can be, with a parameter followed back to what this module's
        callers pass for it (``callers(fn)``: its call sites, as (call, calling function)); a
        parameter nobody here passes stays the object that came in from outside."""
        found: Set[Obj] = set()
        for obj in self.eval(expr, fn):
            head, _, rest = (obj.origin or "").partition(".")
            if fn is None or head not in fn.params or head in ("self", "cls") or depth >= _MAX_DEPTH:
                found.add(obj)
                continue
            passed = False
            for call, caller in callers(fn):
                if fn.cls is not None and not self._calls_instance_of(call, fn.cls, caller):
                    continue
                for param, value in parameters_given(call, fn.params, fn.cls is not None):
                    if param == head:
                        passed = True
                        objects = self.reaching(value, caller, callers, depth + 1)
                        for part in rest.split(".") if rest else ():
                            objects = _field(objects, part)
                        found.update(objects)
            if not passed:
                found.add(obj)
        return frozenset(found)

    def allocated_here(self, obj: Obj) -> bool:
        """Was ``obj`` allocated by an expression of this module?"""
        return obj.node is not None and self._allocated.get((id(obj.node), 0)) is obj

    def _calls_instance_of(self, call: cst.Call, cls: str, caller: Optional["Function"]) -> bool:
        """``self.run(...)`` in a method of the class, or ``runner.run(...)`` on an instance of it."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            return caller is not None and _method_class(caller) == cls
        return any(o.cls == cls for o in self.eval(func.value, caller))

    def _imported(self, name: str) -> Objects:
        """A module-level object of another project module (``from setup import train_loader``)."""
        if name not in self.model.imports.names:
            return NONE  # a local or a builtin: nobody's import (asked for every name read)
        found = self._project_definition(name)
        if found is None:
            return NONE
        other, defined = found
        flow = other.exported()
        table = flow.top_level()
        self.home.read(flow.home)
        if _READS is not None:
            _READS.add((id(flow), "scope", None))
        return frozenset(table.get(defined, ()))


class _NoInit:
    """A project class without ``__init__``: constructing it makes the instance, nothing else."""

    name = "__init__"
    node = None


_NO_INIT = _NoInit()


def _callers_first(model: "ModuleModel") -> List["Function"]:
    """The module's functions, each after the functions and module level that call it by name or
    construct its class (a depth-first order of those calls; a cycle keeps the order it is met
    in): a caller's arguments are bound to the callee's parameters before the callee is read."""
    functions = model.all_functions
    callees: Dict[int, List["Function"]] = {}
    for fn in [model.top] + functions:
        found = []
        for call in fn.calls:
            name = dotted(call.func)
            if name is None:
                continue
            target, _ = _called_here(model, name, fn if fn is not model.top else None)
            if target is not None and target is not fn:
                found.append(target)
        callees[id(fn.node)] = found
    done: Set[int] = set()
    finished: List["Function"] = []

    def visit(fn: "Function") -> None:
        stack = [(fn, iter(callees.get(id(fn.node), ())))]
        done.add(id(fn.node))
        while stack:
            current, pending = stack[-1]
            following = next((c for c in pending if id(c.node) not in done), None)
            if following is None:
                stack.pop()
                finished.append(current)
                continue
            done.add(id(following.node))
            stack.append((following, iter(callees.get(id(following.node), ()))))

    for fn in [model.top] + functions:
        if id(fn.node) not in done:
            visit(fn)
    ordered = [fn for fn in reversed(finished) if fn is not model.top]
    return ordered if len(ordered) == len(functions) else functions


def _stale(when: int, reads: Set[object]) -> bool:
    """Has anything in ``reads`` changed after ``when``?"""
    for read in reads:
        if read is _VOLATILE:
            return True
        changed = read.changed_at if type(read) is Obj else _WRITTEN.get(read, 0)
        if changed > when:
            return True
    return False


def _reading(holder: Obj) -> Obj:
    """``holder``'s fields are read by the scope being evaluated."""
    if _READS is not None:
        _READS.add(holder)
    return holder


def _add(held: Set[Obj], objects: Iterable[Obj]) -> bool:
    before = len(held)
    held.update(objects)
    return len(held) != before


def _field(objects: Iterable[Obj], name: str) -> Objects:
    found: Set[Obj] = set()
    for holder in objects:
        held = _reading(holder).fields.get(name)
        if held is None and name.startswith("["):
            held = holder.fields.get(ANY_ENTRY)  # an entry of a container a comprehension made
        if held is None and holder.unknown:
            # a part of an unknown object is unknown too, and one object per part (the elements
            # of ``model, opt, loader = engine.boost(...)`` are told apart by their methods);
            # made when first read, as a fresh computation would: no change of its world
            part = Obj(holder.home, None, f"{holder.name}{name}" if name.startswith("[") else f"{holder.name}.{name}")
            part.unknown = True
            held = holder.fields[name] = {part}
            holder.changed_at = next(_CLOCK)
        elif held is None and holder.origin is not None and name.startswith("["):
            # an element of what came in from outside came from outside too (``self.optimizer,
            # self.lr_scheduler = optimizers``): one object per element, known by its methods
            part = Obj(holder.home, None, f"{holder.name}{name}", origin=f"{holder.origin}{name}")
            held = holder.fields[name] = {part}
            holder.changed_at = next(_CLOCK)
        found.update(held or ())
    return frozenset(found)


def _element(objects: Objects, index: int) -> Objects:
    return _field(objects, f"[{index}]")


def _all_entries(holder: Obj) -> Iterable[Obj]:
    for key, objects in _reading(holder).fields.items():
        if key.startswith("["):
            yield from objects


def _subscript_key(node: cst.Subscript) -> Optional[str]:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    key = plain_key(value)
    if key is not None:
        return f"[{key!r}]"
    if isinstance(value, cst.Integer):
        return f"[{int(value.value, 0)}]"
    return None


def _bind_locally(target: cst.BaseExpression, objects: Objects, bound: Dict[str, Objects]) -> None:
    if isinstance(target, cst.Name):
        if objects:  # flow-insensitive: a name assigned on two branches holds both objects
            bound[target.value] = bound.get(target.value, NONE) | objects
    elif isinstance(target, (cst.Tuple, cst.List)):
        for index, element in enumerate(target.elements):
            if isinstance(element, cst.StarredElement):
                return
            _bind_locally(element.value, _element(objects, index), bound)


def _field_paths(path: str, objects: Iterable[Obj], depth: int = 0) -> Iterable[Tuple[str, Objects, None]]:
    """The paths into the objects' fields, two levels deep (``loaders['train'].sampler``)."""
    if depth >= _FIELD_DEPTH:
        return
    fields: Dict[str, Set[Obj]] = {}
    for obj in objects:
        for name, held in obj.fields.items():
            fields.setdefault(name, set()).update(held)
    for name, held in fields.items():
        inner = f"{path}{name}" if name.startswith("[") else f"{path}.{name}"
        yield inner, frozenset(held), None
        yield from _field_paths(inner, held, depth + 1)


def _defines(instance: Obj, method: str) -> bool:
    """Does the project class of ``instance`` (or a project base of it) define ``method``? An
    unreadable class module may define anything."""
    owner = instance.class_module()
    return owner is None or owner.method_of_class(instance.cls, method) is not None


def _annotated_name(fn: "Function", name: str) -> Optional[str]:
    """The class that parameter ``name`` of ``fn`` is annotated with, as written, if any."""
    annotation = next((p.annotation.annotation for p in all_params(fn.node.params)
                       if p.name.value == name and p.annotation is not None), None)
    written = _declared_name(annotation) if annotation is not None else None
    return written if written is not None and written not in _BUILTINS else None


def _declared_name(annotation: cst.BaseExpression) -> Optional[str]:
    """The class an annotation names: ``X``, ``pkg.X``, ``"X"``, and the ``X`` of ``Optional[X]``
    and ``X | None``."""
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        return text if isinstance(text, str) and re.fullmatch(r"[A-Za-z_][\w.]*", text) else None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not (isinstance(s, cst.Name) and s.value == "None")]
        return _declared_name(sides[0]) if len(sides) == 1 else None
    if isinstance(annotation, cst.Subscript) and (dotted(annotation.value) or "").rsplit(".", 1)[-1] == "Optional" \
            and len(annotation.slice) == 1 and isinstance(annotation.slice[0].slice, cst.Index):
        return _declared_name(annotation.slice[0].slice.value)
    return dotted(annotation)


def _makes_training_objects(module: Optional["ModuleModel"]) -> bool:
    """Can the code of ``module`` make a training object (see _CONSTRUCTS)? An unreadable one may."""
    if module is None:
        return True
    if module.path is not None:
        return text_matches(module.path, _CONSTRUCTS)  # kept by path: a module may be parsed again
    return module.memo("makes training objects", lambda: bool(_CONSTRUCTS.search(module.source)))


def _passes_through(expr: cst.BaseExpression) -> bool:
    """``tqdm(loader)``, ``iter(loader)``: iterating it is a pass over its first argument."""
    if type(expr) is not cst.Call:
        return False
    func = expr.func
    last = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
    return last in _PASS_THROUGH and any(a.keyword is None and not a.star for a in expr.args)


def _statement_method_calls(model: "ModuleModel", fn: Optional["Function"]) -> List[cst.Call]:
    """The method calls a scope makes as statements on a variable or an attribute path
    (``self.build()``, ``data.setup(rank)``, ``self.data.setup(rank)``): read for what they store
    on the instance they are called on."""
    def compute() -> List[cst.Call]:
        calls, assigns = (fn.calls, fn.assigns) if fn is not None else (model.top.calls, model.module_assigns)
        assigned = {id(value) for _, value in assigns}
        imported = model.imports.names
        found = []
        for call in calls:
            if id(call) in assigned or not isinstance(call.func, cst.Attribute):
                continue
            head = (dotted(call.func.value) or "").split(".", 1)[0]
            if head and head not in imported and head not in _BUILTINS:  # not ``os.makedirs(...)``
                found.append(call)
        return found
    return model.memo(f"statement method calls {id(fn.node) if fn is not None else None}", compute)


def _method_class(fn: "Function") -> Optional[str]:
    while fn is not None:
        if fn.cls is not None:
            return fn.cls
        fn = fn.parent
    return None


def _own_asks(fn: "Function") -> Dict[str, Set[Tuple[str, int]]]:
    """The methods ``fn``'s own statements call on each variable path."""
    asked: Dict[str, Set[Tuple[str, int]]] = {}
    for receiver, method, positional in fn.method_calls:
        path = access_path(receiver)
        if path is not None:
            asked.setdefault(path, set()).add((method, positional))
    return asked


def _called_here(model: "ModuleModel", name: str, fn: Optional["Function"]) -> Tuple[Optional["Function"], bool]:
    """The function of this module a call by ``name`` in ``fn`` runs, and whether it constructs a
    class (``Runner(net, criterion)`` runs its ``__init__``, which gets the arguments after ``self``)."""
    local = _local_function(model, name, fn)
    if local is not None or name not in model.classes:
        return local, False
    init = model.methods.get((name, "__init__"))
    return init, init is not None


def _local_function(model: "ModuleModel", name: str, fn: Optional["Function"]) -> Optional["Function"]:
    scope = fn
    while scope is not None:
        if name in scope.nested:
            return scope.nested[name]
        scope = scope.parent
    if name.startswith("self.") and fn is not None and name.count(".") == 1:
        cls = _method_class(fn)
        if cls is not None:
            return model.method_of_class(cls, name[5:])
    return model.functions.get(name)


def _parameters_of_a_module(expr: cst.BaseExpression) -> bool:
    """``model.parameters()`` / ``model.named_parameters()``."""
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("parameters", "named_parameters"))


# The one object a function steps (no argument) where it also runs a backward: its optimizer
# (a missing zero_grad must not hide what is stepped).
_SOLE_STEP = ("step after backward", 0)


def _sole_stepped_after_backward(fn: "Function") -> Optional[str]:
    """The path of the only object ``fn`` steps with no argument, when ``fn`` also runs a
    backward and steps nothing else; None otherwise."""
    stepped = {access_path(receiver) for receiver, method, positional in fn.method_calls if method == "step"}
    if len(stepped) != 1 or not any(method == "backward" for _, method, _ in fn.method_calls):
        return None
    if any(method == "step" and positional for _, method, positional in fn.method_calls):
        return None
    return stepped.pop()


def _answered_kind(methods: Set[Tuple[str, int]]) -> Optional[str]:
    """The one kind of training object that answers all of ``methods`` ((name, positional
    argument count) pairs), when the combination tells. A module has ``zero_grad`` but no
    ``step``; a scheduler ``step`` but no ``zero_grad``; an engine that also runs ``backward``
    is none of these. The only object stepped where a backward runs is the optimizer. Libraries' objects answer the methods their descriptions list
    (``[[answers]]`` in trainlint/libraries)."""
    names = {name for name, _ in methods}
    if "backward" not in names:
        if ("step", 0) in methods and ("zero_grad" in names or _SOLE_STEP in methods):
            return OPTIMIZER
        if "(unscaled by another)" in names or ("(stepped by another)" in names and "zero_grad" in names):
            return OPTIMIZER  # ``scaler.unscale_(opt)``; ``opt.zero_grad()`` and ``scaler.step(opt)``
        if ("update", 0) in methods and (("step", 1) in methods or ("scale", 1) in methods):
            return SCALER
        if "step" in names and names & {"get_last_lr", "get_lr"}:
            return SCHEDULER
    return library.current().answering(names)


def _loop_targets(fn: "Function") -> Iterable[Tuple[cst.BaseExpression, List[cst.BaseExpression]]]:
    for node in _statements(fn.body):
        if isinstance(node, cst.For):
            yield node.target, [node.iter]


def _statements(body) -> Iterable[cst.CSTNode]:
    """Every statement of a function body, nested blocks included (not nested defs), iteratively:
    an elif chain may be longer than the recursion limit."""
    from .module import _child_blocks

    pending = [iter(body)]
    while pending:
        stmt = next(pending[-1], None)
        if stmt is None:
            pending.pop()
            continue
        yield stmt
        if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            pending.extend(iter(child) for child in reversed(list(_child_blocks(stmt))))

