"""One pass over a module's statements: imports, functions, classes and the assignments roles need.

Only statements are walked here (expressions are looked at where a statement is interpreted), which
keeps the cost of files without training code close to the parse itself.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import libcst as cst

from .names import ImportMap, Selector, access_path, all_params, dotted, selectors
from .roles import (
    LOADER,
    OPTIMIZER,
    SCHEDULER,
    Role,
    RoleTable,
    classify_constructor,
    library_base_role,
    role_from_annotation,
)
from .values import Values
from .walk import Preorder, walk

if TYPE_CHECKING:
    from .objects import Obj, ObjectFlow

Body = Sequence[cst.CSTNode]


class Function:
    """A ``def`` of a module. Its links up (to the enclosing function and to the module) are weak:
    the module owns its functions, and a back link would make every model a reference cycle,
    whose tree only the cyclic garbage collector could free (a quarter of a large run's time).
    A check pins the models it reads (``project.pinning``), so no link dies during one."""

    __slots__ = ("node", "name", "cls", "params", "nested", "assigns", "aug_assigns", "returns",
                 "method_calls", "calls", "_parent", "_owner", "__weakref__")

    def __init__(self, node: cst.FunctionDef, name: str, cls: Optional[str], parent: Optional["Function"],
                 params: List[str], owner: "ModuleModel") -> None:
        self.node = node
        self.name = name
        self.cls = cls  # enclosing class name for methods
        self.params = params
        self.nested: Dict[str, "Function"] = {}
        self.assigns: List[Tuple[cst.BaseExpression, cst.BaseExpression]] = []
        self.aug_assigns: List[cst.AugAssign] = []
        self.returns: List[cst.BaseExpression] = []
        # Methods called in statements of this function (``opt.step()``, ``scaler.scale(loss).backward()``):
        # (receiver, method, positional argument count). What an object answers tells what it is.
        self.method_calls: List[Tuple[cst.BaseExpression, str, int]] = []
        self.calls: List[cst.Call] = []  # calls made as statements or assigned (``run_step(model, opt)``)
        self._parent = weakref.ref(parent) if parent is not None else None
        self._owner = weakref.ref(owner)

    @property
    def hook(self) -> bool:
        """A method there for subclasses to override: its body does nothing (``pass``, ``...``, a
        docstring) or only raises NotImplementedError. Which code runs is the object's class's."""
        if self.cls is None:
            return False
        return all(_does_nothing(stmt) for stmt in block(self.node.body))

    @property
    def abstract(self) -> bool:
        """A hook every subclass must fill in (it raises NotImplementedError, or is decorated
        ``@abstractmethod``): the code that calls it always runs someone's override. (A hook that
        does nothing by default is often left so, which is why only these make their callers
        worth exploring: tried, treating every ``pass`` hook so made torch._inductor and
        torch.distributed an eighth slower, 48.5 s against 43 s.)"""
        owner = self.owner
        return self.hook and (
            any(owner is not None and owner.imports.qualify(d.decorator) in _ABSTRACT_DECORATORS for d in self.node.decorators)
            or any(isinstance(s, cst.Raise) for stmt in block(self.node.body) for s in _small_statements(stmt)))

    @property
    def parent(self) -> Optional["Function"]:
        """The enclosing function of a nested def."""
        return self._parent() if self._parent is not None else None

    @property
    def owner(self) -> Optional["ModuleModel"]:
        """The module that defines it."""
        return self._owner()

    @property
    def body(self) -> Body:
        body = self.node.body
        return body.body if isinstance(body, cst.IndentedBlock) else [body]

    def default(self, param: str) -> Optional[cst.BaseExpression]:
        """The default value of a parameter, when it has one."""
        for candidate in all_params(self.node.params):
            if candidate.name.value == param:
                return candidate.default
        return None


def block(node: cst.BaseSuite) -> Body:
    return node.body if isinstance(node, cst.IndentedBlock) else [node]  # type: ignore[return-value]


# What abc marks a method every subclass must fill in with (by what the decorator was imported as).
_ABSTRACT_DECORATORS = frozenset({"abc.abstractmethod", "abc.abstractproperty"})


def _small_statements(stmt: cst.CSTNode) -> Sequence[cst.BaseSmallStatement]:
    """The small statements of a simple statement line (or one-line suite); none for a compound one."""
    return stmt.body if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()


def _does_nothing(stmt: cst.CSTNode) -> bool:
    """``pass``, ``...``, a docstring, or ``raise NotImplementedError``: the body of an abstract method."""
    small = _small_statements(stmt)
    return bool(small) and all(
        isinstance(s, cst.Pass) or (isinstance(s, cst.Expr) and isinstance(s.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)))
        or (isinstance(s, cst.Raise) and s.exc is not None
            and dotted(s.exc.func if isinstance(s.exc, cst.Call) else s.exc) == "NotImplementedError")
        for s in small)


class ModuleModel:
    def __init__(self, module: cst.Module, source: str, path: Optional["Path"] = None) -> None:
        self.module = module
        self.source = source
        self.path = path  # the file, when known (other modules of a project are found from it)
        self.imports = ImportMap()
        self.star_imports: List[str] = []  # ``from m import *``: the modules named
        self.functions: Dict[str, Function] = {}  # module-level functions
        self.methods: Dict[Tuple[str, str], Function] = {}
        self.classes: Dict[str, cst.ClassDef] = {}
        self.all_functions: List[Function] = []
        self.module_assigns: List[Tuple[cst.BaseExpression, cst.BaseExpression]] = []
        self.module_aug_assigns: List[cst.AugAssign] = []
        # the module level's calls made as statements or assigned, and its method calls (see Function)
        self.top = TopLevel()
        self.roles_pending_annotations: List[Tuple[Function, str, cst.BaseExpression]] = []
        self.appended: Dict[str, List[cst.BaseExpression]] = {}  # list name -> what .append/.extend put in
        self.loop_sources: Dict[str, List[cst.BaseExpression]] = {}  # loop variable -> the iterables it runs over
        # Assignments under ``if value == literal:`` tests: (function, target, value, the tests)
        self.selected_assigns: List[Tuple[Optional[Function], cst.BaseExpression, cst.BaseExpression, Tuple[Selector, ...]]] = []
        self._under: Tuple[Selector, ...] = ()
        self._collect(module.body, cls=None, func=None)
        self._roles: Optional[RoleTable] = None
        self._assigned: Optional[Dict[str, List[cst.BaseExpression]]] = None
        self._class_assigned: Optional[Dict[Tuple[str, str], List[Tuple[Function, cst.BaseExpression]]]] = None
        self._sites = None
        self._preorder: Optional[Preorder] = None
        self._values: Optional[Values] = None
        self._memo: Dict[str, object] = {}
        self.project = None  # the checked file's Project, when its imports can be followed
        # Project modules whose loaders this one adopted, with their (size, mtime) then.
        self.data_sources: List[Tuple["ModuleModel", Tuple[int, int]]] = []
        self._objects: Optional["ObjectFlow"] = None
        self._exported: Optional["ObjectFlow"] = None

    # ----------------------------------------------------------------- collection
    def _collect(self, body: Body, cls: Optional[str], func: Optional[Function]) -> None:
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self._collect_small(small, func)
            elif isinstance(stmt, cst.FunctionDef):
                self._collect_function(stmt, cls, func)
            elif isinstance(stmt, cst.ClassDef):
                self.classes.setdefault(stmt.name.value, stmt)
                self._collect(block(stmt.body), cls=stmt.name.value, func=func)
            elif isinstance(stmt, cst.If):
                branch: Optional[cst.If] = stmt
                while branch is not None:  # an elif chain, iteratively: its length is the program's
                    outer = self._under
                    self._under = outer + selectors(branch.test)
                    self._collect(block(branch.body), cls, func)
                    self._under = outer
                    orelse = branch.orelse
                    branch = orelse if isinstance(orelse, cst.If) else None
                    if isinstance(orelse, cst.Else):
                        self._collect(block(orelse.body), cls, func)
            else:
                if isinstance(stmt, cst.With):
                    for item in stmt.items:
                        _record_method_calls(item.item, func if func is not None else self.top)
                if isinstance(stmt, cst.For):
                    for target in walk(stmt.target):
                        if isinstance(target, cst.Name):
                            self.loop_sources.setdefault(target.value, []).append(stmt.iter)
                for child in _child_blocks(stmt):
                    self._collect(child, cls, func)

    def _collect_function(self, node: cst.FunctionDef, cls: Optional[str], parent: Optional[Function]) -> None:
        params = [p.name.value for p in all_params(node.params)]
        fn = Function(node, node.name.value, cls if parent is None else None, parent, params, owner=self)
        self.all_functions.append(fn)
        if parent is not None:
            parent.nested.setdefault(fn.name, fn)
        elif cls is not None:
            self.methods.setdefault((cls, fn.name), fn)
        else:
            self.functions.setdefault(fn.name, fn)
        for param in all_params(node.params):
            if param.annotation is not None:
                self.roles_pending_annotations.append((fn, param.name.value, param.annotation.annotation))
        self._collect(fn.body, cls=None, func=fn)
        if fn.cls is not None and _is_property(node):
            # ``self.optimizer`` read through a property is what the property returns.
            attribute = cst.Attribute(value=cst.Name("self"), attr=cst.Name(fn.name))
            fn.assigns.extend((attribute, value) for value in fn.returns)

    def _collect_small(self, small: cst.BaseSmallStatement, func: Optional[Function]) -> None:
        if isinstance(small, cst.Expr):
            _record_method_calls(small.value, func if func is not None else self.top)
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            self.imports.add(small)
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                self.star_imports.append("." * len(small.relative) + (dotted(small.module) or "") if small.module else "." * len(small.relative))
        elif isinstance(small, cst.Assign):
            for target in small.targets:
                self._assign(func, target.target, small.value)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._assign(func, small.target, small.value)
        elif isinstance(small, cst.AugAssign):
            (func.aug_assigns if func else self.module_aug_assigns).append(small)
        elif isinstance(small, cst.Return) and func is not None and small.value is not None:
            func.returns.append(small.value)
        elif isinstance(small, cst.Expr) and _fills_list(small.value):
            self.appended.setdefault(small.value.func.value.value, []).append(small.value.args[0].value)
        elif isinstance(small, cst.Expr) and _shards_in_place(small.value):
            # FSDP2's fully_shard(model) wraps the module in place: as if `model = fully_shard(model)`.
            self._assign(func, small.value.args[0].value, small.value)

    def _assign(self, func: Optional[Function], target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        (func.assigns if func else self.module_assigns).append((target, value))
        _record_method_calls(value, func if func is not None else self.top)
        if self._under:
            self.selected_assigns.append((func, target, value, self._under))

    # ----------------------------------------------------------------- roles
    @property
    def objects(self) -> "ObjectFlow":
        """Which objects each expression of the module can be (see objects.py), computed once."""
        flow = self.flow()
        if not flow.complete:
            flow.complete = True  # set first: the run asks for the module's objects itself
            try:
                flow.run()
            except BaseException:
                self._objects = None  # a failed run (a stack too shallow) leaves nothing half-done
                raise
        return flow

    def exported(self) -> "ObjectFlow":
        """The flow of the module level alone: what other modules read of this one (its
        top-level objects, the bindings its functions see when another module calls them)."""
        if self._exported is None:
            from .objects import ObjectFlow  # objects.py builds on this module

            self._exported = ObjectFlow(self, exported=True)
        return self._exported

    def kept_flows(self) -> List["ObjectFlow"]:
        """The object flows computed so far (``project.start_check`` decides which stay)."""
        return [flow for flow in (self._objects, self._exported) if flow is not None]

    def forget_flow(self, flow: "ObjectFlow") -> None:
        """Drop ``flow`` (and, for the whole module's, the roles read from it)."""
        if flow is self._exported:
            self._exported = None
        if flow is self._objects:
            self.forget_objects()

    def forget_objects(self) -> None:
        """Drop the object flow and the roles read from it: something outside its own run
        changed it, or it read a module's flow that changed (see ``objects.Home``)."""
        self._objects = None
        self._roles = None

    def flow(self) -> "ObjectFlow":
        """The module's object flow, its scopes computed only as asked (see ``objects``)."""
        if self._objects is None:
            from .objects import ObjectFlow  # objects.py builds on this module

            self._objects = ObjectFlow(self)
        return self._objects

    @property
    def roles(self) -> RoleTable:
        """What kind of training object each access path holds, computed on first use: a module
        read only for one function's summary or one constructor never computes it."""
        if self._roles is None:
            self._roles = RoleTable()
            try:
                self._infer_roles()
            except BaseException:
                self._roles = None  # retried whole (on a deeper stack), never read half-filled
                raise
        return self._roles

    def _infer_roles(self) -> None:
        """The role table is a view of the object flow: each access path that holds training
        objects of one kind gets their role, and names its objects canonically (the loader's
        sampler, the scheduler's optimizer). An annotation is read only for a parameter no
        object reaches."""
        holders = self.roles.holders
        for path, objects, _ in self.objects.paths():
            for obj in objects:
                if obj.role is not None:
                    holders.setdefault(obj, path)
        for path, objects, fn in self.objects.paths():
            trained = [o for o in objects if o.role is not None]
            if trained and fn is not None:
                self.roles.scopes.setdefault(path.split(".", 1)[0], set()).add(id(fn.node))
            if not trained or any(o.role.kind != trained[0].role.kind for o in trained):
                continue
            self.roles.set(path, self._seen_from(self._role_of_objects(trained), trained, fn))
            named = {holders[o] for o in trained}
            if len(named) == 1:
                # one object, or the alternatives one variable holds (``optimizer = AdamW(...)``
                # or ``RAdam(...)`` by configuration): known by that variable's name
                self.roles.canonical.setdefault(path, named.pop())
        for fn, name, annotation in self.roles_pending_annotations:
            role = role_from_annotation(annotation)
            if role is not None:
                self.roles.scopes.setdefault(name, set()).add(id(fn.node))
            self.roles.set(name, role)
        for func, target, value, tests in self.selected_assigns:
            self._role_under_tests(func, target, value, tests)

    def _seen_from(self, role: Role, objects: List["Obj"], fn: Optional[Function]) -> Role:
        """An optimizer built by a function over its parameter's model (``build(model)``) names
        that model by the builder's parameter; seen from anywhere else, which model it is has no
        name there (so any model's zero_grad may clear it, rather than none)."""
        if role.kind != OPTIMIZER or not (role.module or role.modules):
            return role
        sites = self.sites()
        for obj in objects:
            site = sites.of_call(obj.node) if isinstance(obj.node, cst.Call) else None
            builder = site.function if site is not None else None
            heads = {m.split(".", 1)[0] for m in ((role.module,) if role.module else role.modules)}
            if builder is not None and builder is not fn and heads & set(builder.params):
                return replace(role, module=None, modules=())
        return role

    def _role_of_objects(self, objects: List["Obj"]) -> Role:
        role = _shared_role([o.role for o in objects])
        if role.kind == LOADER:
            samplers = {s for o in objects for s in o.field("sampler")}
            sampler = self.roles.holders.get(next(iter(samplers))) if len(samplers) == 1 else None
            role = replace(role, sampler=sampler)
        elif role.kind == SCHEDULER:
            # the optimizers it schedules: what its constructor was given that is one (an FP16
            # wrapper's ``optimizer.optimizer`` reaches the inner optimizer, and the wrapper too)
            given = {s for o in objects for s in o.field("optimizer")}
            optimizers = {s for s in given if s.role is not None and s.role.kind == OPTIMIZER} or given
            named = {self.roles.holders.get(o) or o.origin for o in optimizers}
            if len(named) == 1 and None not in named:
                role = replace(role, optimizer=named.pop())
        return role

    def _role_under_tests(self, func: Optional[Function], target: cst.BaseExpression,
                          value: cst.BaseExpression, tests: Tuple[Selector, ...]) -> None:
        """``self.scheduler`` is a plateau scheduler under ``if cfg["kind"] == "plateau":`` and a
        per-update one under ``elif cfg["kind"] == "invsqrt":``: the table's one role is the
        first; a use under the same test reads the object that test built."""
        path = dotted(target)
        trained = [o for o in self.objects.eval(value, func) if o.role is not None]
        if path is None or not trained or any(o.role.kind != trained[0].role.kind for o in trained):
            return
        role = self._role_of_objects(trained)
        if role != self.roles.get(path):
            self.roles.alternative(path, tests, role)

    def filled(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        """``expr`` with its variables replaced by what was put in them (assigned, appended, or
        iterated over for a loop variable), so that ``AdamW(groups)`` shows the
        ``model.named_parameters()`` that ``groups`` was built from. Names are matched module-wide;
        ``depth`` counts the variables followed."""
        if isinstance(expr, cst.Name) and depth < 4:
            sources = (self.values_assigned(expr.value) + self.appended.get(expr.value, [])
                       + self.loop_sources.get(expr.value, []) + self._added(expr.value))
            return cst.List([cst.Element(self.filled(s, depth + 1)) for s in sources]) if sources else expr
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
            return cst.List([cst.Element(self.filled(e.value, depth)) for e in expr.elements])
        return expr

    def _added(self, name: str) -> List[cst.BaseExpression]:
        """What ``name += value`` added, anywhere in the module (``params += head.parameters()``)."""
        augmented = self.module_aug_assigns + [a for fn in self.all_functions for a in fn.aug_assigns]
        return [a.value for a in augmented if isinstance(a.target, cst.Name) and a.target.value == name
                and isinstance(a.operator, cst.AddAssign)]

    def role_of_value(self, value: cst.BaseExpression, fn: Optional[Function] = None) -> Optional[Role]:
        """The role of the training objects ``value`` can be (None unless they share one kind)."""
        if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)) and fn is None:
            return self.roles.get(access_path(value))
        trained = [o for o in self.objects.eval(value, fn) if o.role is not None]
        if not trained or any(o.role.kind != trained[0].role.kind for o in trained):
            return None
        return self._role_of_objects(trained)

    def class_alias_role(self, call: cst.Call) -> Optional[Role]:
        """``sampler_cls = RandomSampler if single else DistributedSampler`` then
        ``sampler_cls(dataset)``: on the path where the alias is the training class, the call
        builds that object."""
        if not isinstance(call.func, cst.Name):
            return None
        values = self.values_assigned(call.func.value)
        if len(values) != 1 or not isinstance(values[0], cst.IfExp):
            return None
        for branch in (values[0].body, values[0].orelse):
            if isinstance(branch, (cst.Name, cst.Attribute)):
                role = classify_constructor(call.with_changes(func=branch), self.imports)
                if role is not None:
                    return role
        return None


    def method_of_class(self, class_name: str, method: str, depth: int = 0, project=None,
                        here_only: bool = False) -> Optional[Function]:
        """A method of a class defined here, or imported from the project (``project``: the one to
        resolve imports in, this module's own by default); one it inherits is found in its bases,
        in order (``class Plain(Backend)`` runs ``Backend.distribute``). ``here_only``: only
        classes this module defines are read (no other module is parsed)."""
        local = self.methods.get((class_name, method))
        if local is not None or depth > _MAX_BASES:
            return local
        if class_name in self.classes:
            for base in self.classes[class_name].bases:
                name = dotted(base.value) if base.keyword is None else None
                found = self.method_of_class(name, method, depth + 1, project, here_only) \
                    if name and name != class_name else None
                if found is not None:
                    return found
            return None
        if here_only:
            return None
        project = self._resolving(project)
        return project.method(self, class_name, method, depth) if project is not None else None

    def _resolving(self, project=None):
        """The project this module's imports are resolved in (``project``, else its own)."""
        if project is None and self.project is None and self.path is not None:
            from .project import project_of  # project.py reads modules with this one

            project = project_of(self)
        return project or self.project

    def inherited_role(self, class_name: str, call: cst.Call, depth: int = 0) -> Optional[Role]:
        """The role an instance of class ``class_name`` (defined here) made by ``call`` has from
        the torch class it derives from, through the project's own bases (roles.library_base_role)."""
        if depth > _MAX_BASES or class_name not in self.classes:
            return None
        for base in self.classes[class_name].bases:
            if base.keyword is not None:
                continue
            role = library_base_role(self.imports.qualify(base.value) or "", call, self.filled)
            if role is not None:
                return role
            name = dotted(base.value)
            if not name or name == class_name:
                continue
            project = self._resolving() if name not in self.classes else None
            found = (self, name) if name in self.classes else project.class_of(self, name) if project is not None else None
            role = found[0].inherited_role(found[1], call, depth + 1) if found is not None else None
            if role is not None:
                return role
        return None

    def inherited_methods(self, class_name: str) -> List[Function]:
        """The methods class ``class_name`` (defined here) inherits from classes of the project
        and does not define itself, each the nearest definition of its name (the ``step`` of a
        shared base class that a model class only configures)."""
        own = {name for cls, name in self.methods if cls == class_name}
        found: Dict[str, Function] = {}
        for owner, base in self._project_bases(class_name, 0, set()):
            for (cls, name), fn in owner.methods.items():
                if cls == base and name not in own:
                    found.setdefault(name, fn)
        return list(found.values())

    def _project_bases(self, class_name: str, depth: int, seen: set) -> Iterator[Tuple["ModuleModel", str]]:
        """(module, class) of each base of class ``class_name`` here that the project defines,
        each followed by its own bases (depth first, as Python's order is for single bases)."""
        if depth > _MAX_BASES or class_name not in self.classes:
            return
        for base in self.classes[class_name].bases:
            name = dotted(base.value) if base.keyword is None else None
            if not name or name == class_name:
                continue
            project = self._resolving() if name not in self.classes else None
            found = (self, name) if name in self.classes else project.class_of(self, name) if project is not None else None
            if found is None or (id(found[0]), found[1]) in seen:
                continue
            seen.add((id(found[0]), found[1]))
            yield found
            yield from found[0]._project_bases(found[1], depth + 1, seen)

    def memo(self, name: str, compute):
        """A fact of this module alone (independent of who calls into it), computed once."""
        if name not in self._memo:
            self._memo[name] = compute()
        return self._memo[name]

    @property
    def values(self) -> Values:
        """Constants, command-line defaults and dataclass fields of this module (see values.py)."""
        if self._values is None:
            self._values = Values(self.module, [t for fn in self.all_functions for t, _ in fn.assigns], self.preorder.nodes)
        return self._values

    @property
    def preorder(self) -> Preorder:
        """The module's nodes in pre-order, listed once (see ``Preorder``)."""
        if self._preorder is None:
            self._preorder = Preorder(self.module)
        return self._preorder

    def subtree(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """``node`` and its descendants, sliced from the module's single walk."""
        return self.preorder.subtree(node)

    def sites(self):
        """The module's call-site index, built once (a project module serves many checked files)."""
        if self._sites is None:
            from .sites import SiteIndex  # sites.py builds on this module

            self._sites = SiteIndex(self)
        return self._sites

    def values_assigned(self, path: str) -> List[cst.BaseExpression]:
        """Every value assigned to an access path anywhere in the module (indexed once)."""
        if self._assigned is None:
            self._assigned = {}
            for target, value in self.module_assigns + [a for fn in self.all_functions for a in fn.assigns]:
                key = dotted(target)
                if key:
                    self._assigned.setdefault(key, []).append(value)
        return self._assigned.get(path, [])

    def values_in_scope(self, path: str, fn: Optional[Function]) -> List[cst.BaseExpression]:
        """What ``path`` can hold where ``fn`` reads it: ``self.x`` as the class's methods set it, a
        local as this function (or an enclosing one) assigns it, a free name as the module does. A
        parameter holds what callers pass, which is not another function's local of the same name."""
        if fn is None:
            return [value for target, value in self.module_assigns if dotted(target) == path]
        head = path.split(".", 1)[0]
        if head == "self" and fn.cls is not None:
            return [value for _, value in self.assignments_in_class(fn.cls, path)]
        scope: Optional[Function] = fn
        while scope is not None:
            local = [value for target, value in scope.assigns if dotted(target) == path]
            if local or head in scope.params:
                return local
            scope = scope.parent
        return [value for target, value in self.module_assigns if dotted(target) == path]

    def assignments_in_class(self, cls: str, path: str) -> List[Tuple[Function, cst.BaseExpression]]:
        """(method, value) for every assignment to ``path`` in the methods of class ``cls``: what
        ``self.x`` is for that class (indexed once)."""
        if self._class_assigned is None:
            self._class_assigned = {}
            for fn in self.all_functions:
                if fn.cls is not None:
                    for target, value in fn.assigns:
                        key = dotted(target)
                        if key:
                            self._class_assigned.setdefault((fn.cls, key), []).append((fn, value))
        return self._class_assigned.get((cls, path), [])

    # ----------------------------------------------------------------- call graph
    def called_names(self) -> Dict[str, int]:
        """How often each local function name appears called in the text (``name(``), defs excluded."""
        names = {fn.name for fn in self.all_functions}
        counts: Dict[str, int] = {}
        for match in _CALL_RE.finditer(self.source):
            name = match.group(2)
            if name in names and match.group(1) is None:
                counts[name] = counts.get(name, 0) + 1
        return counts


_CALL_RE = re.compile(r"(\bdef\s+)?\b([A-Za-z_]\w*)\s*\(")
_MAX_BASES = 4  # classes followed up a hierarchy to find an inherited method


def _shared_role(roles: List[Role]) -> Role:
    """What objects of one kind built at several places have in common: each fact they agree on,
    and the models every one of them trains."""
    first = roles[0]
    if all(r == first for r in roles[1:]):
        return first
    shared = {name: value if all(getattr(r, name) == value for r in roles) else None
              for name, value in vars(first).items() if name != "kind"}
    shared["modules"] = _trained_by_all([r.modules for r in roles])
    return Role(first.kind, **shared)


def _trained_by_all(owners: List[Tuple[str, ...]]) -> Tuple[str, ...]:
    """The models that optimizers built at several places all update: each model of the first
    that every other one updates too, or a part of, or a whole holding it (``embed_layer`` and
    ``embed_layer.node_projs`` overlap)."""
    def overlaps(a: str, b: str) -> bool:
        return a == b or a.startswith(b + ".") or b.startswith(a + ".")

    if any(not found for found in owners):
        return ()
    return tuple(m for m in owners[0] if all(any(overlaps(m, o) for o in other) for other in owners[1:]))


def _is_property(node: cst.FunctionDef) -> bool:
    """``@property`` / ``@functools.cached_property`` (the getter, not ``@x.setter``)."""
    return any((dotted(d.decorator) or "").rsplit(".", 1)[-1] in ("property", "cached_property") for d in node.decorators)


def _child_blocks(stmt: cst.CSTNode) -> Iterator[Body]:
    """Statement lists nested in a compound statement (if/for/while/with/try/match)."""
    for attr in ("body", "orelse", "finalbody"):
        child = getattr(stmt, attr, None)
        if child is None:
            continue
        if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            yield block(child)
        elif isinstance(child, (cst.If, cst.Else, cst.Finally)):
            if isinstance(child, cst.If):
                yield [child]
            else:
                yield block(child.body)
    for handler in getattr(stmt, "handlers", ()) or ():
        yield block(handler.body)
    for case in getattr(stmt, "cases", ()) or ():
        yield block(case.body)


# Methods whose one argument is stepped or unscaled for the caller (``scaler.step(optimizer)``):
# recorded as a pseudo-method asked of the argument.
HANDED_ON = {"step": "(stepped by another)", "unscale_": "(unscaled by another)"}


class TopLevel:
    """The module level's statements, as a Function records its own (``method_calls``, ``calls``)."""

    node = None

    def __init__(self) -> None:
        self.method_calls: List[Tuple[cst.BaseExpression, str, int]] = []
        self.calls: List[cst.Call] = []


def _record_method_calls(value: cst.BaseExpression, func: Union[Function, TopLevel]) -> None:
    """Each method call of a statement's (or an assigned value's, or a with-item's) call chain:
    ``scaler.scale(loss).backward()`` calls ``backward`` on ``scaler.scale(loss)`` and ``scale``
    on ``scaler``; ``scheduler.get_last_lr()[0]`` calls ``get_last_lr``."""
    while isinstance(value, cst.Subscript):
        value = value.value
    if isinstance(value, cst.Call):
        func.calls.append(value)
    _record_chain(value, func)


def _record_chain(value: cst.BaseExpression, func: Union[Function, TopLevel], depth: int = 0) -> None:
    """The method calls of a call chain, and of the calls its arguments make
    (``log(scheduler.get_last_lr()[0])``), a few levels deep."""
    while isinstance(value, cst.Subscript):
        value = value.value
    while isinstance(value, cst.Call):
        if depth < 3:
            for argument in value.args:
                if isinstance(argument.value, (cst.Call, cst.Subscript)):
                    _record_chain(argument.value, func, depth + 1)
        if not isinstance(value.func, cst.Attribute):
            return
        positional = sum(1 for a in value.args if a.keyword is None and not a.star)
        func.method_calls.append((value.func.value, value.func.attr.value, positional))
        if value.func.attr.value in HANDED_ON and positional == 1 and value.args[0].keyword is None:
            # ``scaler.step(optimizer)``: what the argument is asked, through the object it is given to
            func.method_calls.append((value.args[0].value, HANDED_ON[value.func.attr.value], 0))
        value = value.func.value


def _fills_list(value: cst.BaseExpression) -> bool:
    """``groups.append(p)`` / ``groups.extend(ps)`` on a plain variable."""
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Name)
        and value.func.attr.value in ("append", "extend") and len(value.args) == 1 and value.args[0].keyword is None
    )


def _shards_in_place(value: cst.BaseExpression) -> bool:
    return (
        isinstance(value, cst.Call) and bool(value.args) and value.args[0].keyword is None
        and (dotted(value.func) or "").rsplit(".", 1)[-1] == "fully_shard" and dotted(value.args[0].value) is not None
    )
