"""One pass over a module's statements: imports, functions, classes and the assignments roles need.

Only statements are walked here (expressions are looked at where a statement is interpreted), which
keeps the cost of files without training code close to the parse itself.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import libcst as cst

from .calls import arg
from .names import ImportMap, Selector, access_path, dotted, keyed, literal_key, plain_key, selectors
from .roles import (
    LOADER,
    SAMPLER,
    SCHEDULER,
    Role,
    RoleTable,
    classify_constructor,
    role_from_annotation,
)
from . import library
from .values import Values
from .walk import Preorder, walk

Body = Sequence[cst.CSTNode]


class Function:
    """A ``def`` of a module. Its links up (to the enclosing function and to the module) are weak:
    the module owns its functions, and a back link would make every model a reference cycle,
    whose tree only the cyclic garbage collector could free (a quarter of a large run's time).
    A check pins the models it reads (``project.pinning``), so no link dies during one."""

    __slots__ = ("node", "name", "cls", "params", "nested", "assigns", "aug_assigns", "returns",
                 "_parent", "_owner", "__weakref__")

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
        self._parent = weakref.ref(parent) if parent is not None else None
        self._owner = weakref.ref(owner)

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
        for candidate in _all_params(self.node.params):
            if candidate.name.value == param:
                return candidate.default
        return None


def block(node: cst.BaseSuite) -> Body:
    return node.body if isinstance(node, cst.IndentedBlock) else [node]  # type: ignore[return-value]


class ModuleModel:
    def __init__(self, module: cst.Module, source: str, path: Optional["Path"] = None) -> None:
        self.module = module
        self.source = source
        self.path = path  # the file, when known (other modules of a project are found from it)
        self.imports = ImportMap()
        self.functions: Dict[str, Function] = {}  # module-level functions
        self.methods: Dict[Tuple[str, str], Function] = {}
        self.classes: Dict[str, cst.ClassDef] = {}
        self.all_functions: List[Function] = []
        self.module_assigns: List[Tuple[cst.BaseExpression, cst.BaseExpression]] = []
        self.module_aug_assigns: List[cst.AugAssign] = []
        self.roles_pending_annotations: List[Tuple[str, cst.BaseExpression]] = []
        self.appended: Dict[str, List[cst.BaseExpression]] = {}  # list name -> what .append/.extend put in
        self.loop_sources: Dict[str, List[cst.BaseExpression]] = {}  # loop variable -> the iterables it runs over
        # Assignments under ``if value == literal:`` tests: (function, target, value, the tests)
        self.selected_assigns: List[Tuple[Optional[Function], cst.BaseExpression, cst.BaseExpression, Tuple[Selector, ...]]] = []
        self._under: Tuple[Selector, ...] = ()
        self._collect(module.body, cls=None, func=None)
        self.roles = RoleTable()
        self._assigned: Optional[Dict[str, List[cst.BaseExpression]]] = None
        self._class_assigned: Optional[Dict[Tuple[str, str], List[Tuple[Function, cst.BaseExpression]]]] = None
        self._sites = None
        self._preorder: Optional[Preorder] = None
        self._values: Optional[Values] = None
        self._memo: Dict[str, object] = {}
        self.project = None  # the checked file's Project, when its imports can be followed
        # Project modules whose loaders this one adopted, with their (size, mtime) then.
        self.data_sources: List[Tuple["ModuleModel", Tuple[int, int]]] = []
        self._infer_roles()

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
                if isinstance(stmt, cst.For):
                    for target in walk(stmt.target):
                        if isinstance(target, cst.Name):
                            self.loop_sources.setdefault(target.value, []).append(stmt.iter)
                for child in _child_blocks(stmt):
                    self._collect(child, cls, func)

    def _collect_function(self, node: cst.FunctionDef, cls: Optional[str], parent: Optional[Function]) -> None:
        params = [p.name.value for p in _all_params(node.params)]
        fn = Function(node, node.name.value, cls if parent is None else None, parent, params, owner=self)
        self.all_functions.append(fn)
        if parent is not None:
            parent.nested.setdefault(fn.name, fn)
        elif cls is not None:
            self.methods.setdefault((cls, fn.name), fn)
        else:
            self.functions.setdefault(fn.name, fn)
        for param in _all_params(node.params):
            if param.annotation is not None:
                self.roles_pending_annotations.append((param.name.value, param.annotation.annotation))
        self._collect(fn.body, cls=None, func=fn)
        if fn.cls is not None and _is_property(node):
            # ``self.optimizer`` read through a property is what the property returns.
            attribute = cst.Attribute(value=cst.Name("self"), attr=cst.Name(fn.name))
            fn.assigns.extend((attribute, value) for value in fn.returns)

    def _collect_small(self, small: cst.BaseSmallStatement, func: Optional[Function]) -> None:
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            self.imports.add(small)
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
        if self._under:
            self.selected_assigns.append((func, target, value, self._under))

    # ----------------------------------------------------------------- roles
    def _infer_roles(self) -> None:
        scopes = [self.module_assigns] + [fn.assigns for fn in self.all_functions]
        for name, annotation in self.roles_pending_annotations:
            self.roles.set(name, role_from_annotation(annotation))
        # Two rounds so aliases and unpacking see roles assigned later in the file.
        for _ in range(2):
            for scope in scopes:
                for target, value in scope:
                    self._role_of_assignment(target, value, scope)
        if self.path is not None and self._adopt_project_data(scopes):
            for scope in scopes:  # aliases of the adopted loaders (``loader = train_loader``)
                for target, value in scope:
                    self._role_of_assignment(target, value, scope)
        for func, target, value, tests in self.selected_assigns:
            self._role_under_tests(func, target, value, tests)

    def _adopt_project_data(self, scopes) -> bool:
        """``train_loader, val_loader = build_loaders(cfg)`` with ``build_loaders`` in another module
        of the project that builds a ``DistributedSampler``: the loaders and samplers it returns,
        read in that module (the loader's sampler becomes ``train_loader.sampler`` here). Only data
        objects cross modules this way: they are what TL301 follows from the script that builds
        them into the loop that iterates them."""
        from .project import data_builder  # project.py builds on this module

        adopted = False
        for scope in scopes:
            for target, value in scope:
                name = dotted(value.func) if isinstance(value, cst.Call) else None
                if not name or name in self.functions or name.split(".", 1)[0] not in self.imports.names:
                    continue
                unpacked = isinstance(target, (cst.Tuple, cst.List))
                targets = [e.value for e in target.elements] if unpacked else [target]
                paths = [dotted(t) for t in targets]
                if not all(paths) or any(self.roles.get(p) for p in paths):
                    continue
                builder = data_builder(self, name)
                if builder is None or builder.owner is None:
                    continue
                roles = builder.owner.roles_returned(builder, len(targets) if unpacked else None)
                for path, role in zip(paths, roles):
                    adopted |= self._adopt(path, role, builder.owner)
        return adopted

    def _adopt(self, path: str, role: Optional[Role], other: "ModuleModel") -> bool:
        if role is None or role.kind not in (LOADER, SAMPLER):
            return False
        if role.kind == LOADER:
            sampler = other.roles.get(role.sampler) if role.sampler else None
            if sampler is not None and sampler.kind == SAMPLER:
                self.roles.set(f"{path}.sampler", sampler)
                role = replace(role, sampler=f"{path}.sampler")
            else:
                role = replace(role, sampler=None)
        return self.roles.set(path, role)

    def roles_returned(self, fn: Function, count: Optional[int]) -> List[Optional[Role]]:
        """The roles of what ``fn`` returns: one value, or a tuple of ``count`` (the first return
        that gives any)."""
        for ret in fn.returns:
            if count is None:
                role = self._role_in_function(fn, ret, 1)
                if role is not None:
                    return [role]
            elif isinstance(ret, (cst.Tuple, cst.List, cst.Call)):
                roles = self._roles_of_tuple(ret, count)
                if any(roles):
                    return roles
        return [None] * (count or 1)

    def _role_under_tests(self, func: Optional[Function], target: cst.BaseExpression,
                          value: cst.BaseExpression, tests: Tuple[Selector, ...]) -> None:
        """``self.scheduler`` is a plateau scheduler under ``if cfg["kind"] == "plateau":`` and a
        per-update one under ``elif cfg["kind"] == "invsqrt":``: the table's one role is the
        first; a use under the same test reads the object that test built."""
        path = dotted(target)
        scope = func.assigns if func is not None else self.module_assigns
        role = self.role_of_value(value)
        if role is not None and role.kind == SCHEDULER:
            role = _optimizer_read_from(role, scope)
        if path is not None and role is not None and role != self.roles.get(path):
            self.roles.alternative(path, tests, role)

    def _role_of_assignment(self, target: cst.BaseExpression, value: cst.BaseExpression,
                            scope: Sequence[Tuple[cst.BaseExpression, cst.BaseExpression]] = ()) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            for path, role in zip(elements, self._roles_of_tuple(value, len(elements))):
                self.roles.set(dotted(path), role)
            return
        path = dotted(target)
        if path is None and literal_key(target) is not None and self._holds_data(value):
            path = access_path(target)  # ``samplers["train"] = DistributedSampler(...)``
        if isinstance(value, cst.Dict):
            self._roles_of_entries(path, value)
        self._role_of_path(path, value, scope)

    def _role_of_path(self, path: Optional[str], value: cst.BaseExpression,
                      scope: Sequence[Tuple[cst.BaseExpression, cst.BaseExpression]] = ()) -> None:
        role = self.role_of_value(value)
        if role is not None and role.kind == SCHEDULER and isinstance(value, (cst.Name, cst.Attribute)):
            role = _optimizer_stored_alongside(role, scope)
        elif role is not None and role.kind == SCHEDULER:
            role = _optimizer_read_from(role, scope)
        constructor = self._constructor_call(value)
        if role is not None and role.kind == LOADER and role.sampler is None and constructor is not None and path:
            # DataLoader(ds, sampler=DistributedSampler(ds)), here or returned by a local helper:
            # the sampler is reachable as loader.sampler.
            inline = next((a.value for a in constructor.args if a.keyword is not None and a.keyword.value == "sampler"), None)
            sampler_role = self.role_of_value(inline) if isinstance(inline, cst.Call) else None
            if sampler_role is not None and sampler_role.kind == SAMPLER:
                self.roles.set(f"{path}.sampler", sampler_role)
                role = replace(role, sampler=f"{path}.sampler")
        self.roles.set(path, role)

    def _roles_of_entries(self, path: Optional[str], value: cst.Dict) -> None:
        """``loaders = {"train": DataLoader(..., sampler=sampler)}``: each string-keyed entry is an
        access path of its own (``loaders['train']``), for loaders and samplers only: the objects
        whose passes and epochs TL301 follows (other kinds kept in a dict stay unknown)."""
        for element in value.elements:
            key = plain_key(element.key) if isinstance(element, cst.DictElement) else None
            if key is not None and self._holds_data(element.value):
                self._role_of_path(keyed(path, key), element.value)

    def _holds_data(self, value: cst.BaseExpression) -> bool:
        role = self.role_of_value(value)
        return role is not None and role.kind in (LOADER, SAMPLER)

    def _filled(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        """``expr`` with its variables replaced by what was put in them (assigned, appended, or
        iterated over for a loop variable), so that ``AdamW(groups)`` shows the
        ``model.named_parameters()`` that ``groups`` was built from. Names are matched module-wide;
        ``depth`` counts the variables followed."""
        if isinstance(expr, cst.Name) and depth < 4:
            sources = self.values_assigned(expr.value) + self.appended.get(expr.value, []) + self.loop_sources.get(expr.value, [])
            return cst.List([cst.Element(self._filled(s, depth + 1)) for s in sources]) if sources else expr
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set, cst.Dict)):
            return cst.List([cst.Element(self._filled(e.value, depth)) for e in expr.elements])
        return expr

    def _constructor_call(self, value: cst.BaseExpression) -> Optional[cst.Call]:
        """The call that builds the value: itself, or what a local helper returns."""
        if not isinstance(value, cst.Call):
            return None
        helper = self.functions.get(dotted(value.func) or "")
        if helper is not None and len(helper.returns) == 1 and isinstance(helper.returns[0], cst.Call):
            return helper.returns[0]
        return value

    def role_of_value(self, value: cst.BaseExpression, depth: int = 0) -> Optional[Role]:
        if isinstance(value, cst.IfExp):
            return self.role_of_value(value.body, depth) or self.role_of_value(value.orelse, depth)
        if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
            return self.roles.get(access_path(value))
        if not isinstance(value, cst.Call):
            return None
        role = classify_constructor(value, self.imports, self._filled) or self._role_of_class_alias(value)
        if role is not None and role.kind == SAMPLER and role.shuffle is None:
            # ``shuffle=SHUFFLE`` / ``shuffle=args.shuffle``: a constant or the command line's default
            return replace(role, shuffle=self.values.boolean(arg(value, 3, "shuffle")))
        if role is not None:
            return role
        func_path = dotted(value.func) or ""
        method = func_path.rsplit(".", 1)[-1]
        if method in _PASS_THROUGH and value.args and value.args[0].keyword is None:
            # ``epoch_iterator = tqdm(train_dataloader)``: iterating it is a pass over the loader.
            role = self.role_of_value(value.args[0].value, depth)
            return role if role is not None and role.kind == LOADER else None
        returned = self._returns_given(value)
        if returned is not None:
            roles = returned.for_count(1)
            if roles is not None:  # ``opt = self.optimizers()``
                return Role(roles[0]) if roles[0] is not None else None
            if len(value.args) == 1 and value.args[0].keyword is None:
                # accelerator.prepare(x) returns x prepared: same role.
                return self.role_of_value(value.args[0].value, depth)
        helper = self.functions.get(func_path)
        if helper is not None and depth < 2:
            for ret in helper.returns:
                role = self._role_in_function(helper, ret, depth + 1)
                if role is not None:
                    return role
        return None

    def _role_of_class_alias(self, call: cst.Call) -> Optional[Role]:
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

    def _role_in_function(self, fn: Function, value: cst.BaseExpression, depth: int) -> Optional[Role]:
        role = self.role_of_value(value, depth)
        if role is None and isinstance(value, cst.Name):
            for target, assigned in fn.assigns:
                if isinstance(target, cst.Name) and target.value == value.value:
                    role = self.role_of_value(assigned, depth)
                    if role is not None:
                        break
        return role

    def _returns_given(self, call: cst.Call) -> Optional[library.Returned]:
        """What the call hands back, when the library descriptions say it hands back objects."""
        func_path = dotted(call.func) or ""
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        receiver_role = self.roles.get(dotted(receiver)) if receiver is not None else None
        qualified = self.imports.qualify(call.func) or (func_path if "." in func_path else None)
        return library.current().returns_given(qualified, func_path.rsplit(".", 1)[-1], receiver_role.kind if receiver_role else None)

    def _roles_of_tuple(self, value: cst.BaseExpression, count: int) -> List[Optional[Role]]:
        if isinstance(value, (cst.Tuple, cst.List)):
            return [self.role_of_value(e.value) for e in value.elements]
        if isinstance(value, cst.Call):
            returned = self._returns_given(value)
            if returned is not None:
                # accelerator.prepare / amp.initialize / fabric.setup return their arguments in order;
                # deepspeed.initialize returns an engine and an optimizer (library descriptions).
                roles = returned.for_count(count)
                if roles is not None:
                    return [Role(role) if role is not None else None for role in roles]
                return [self.role_of_value(a.value) for a in value.args if a.keyword is None]
            helper = self.functions.get(dotted(value.func) or "")
            if helper is not None:
                for ret in helper.returns:
                    if isinstance(ret, cst.Tuple) and len(ret.elements) == count:
                        return [self._role_in_function(helper, e.value, 1) for e in ret.elements]
        return [None] * count

    def method_of_class(self, class_name: str, method: str) -> Optional[Function]:
        """A method of a class defined here, or imported from the project."""
        local = self.methods.get((class_name, method))
        if local is None and self.project is not None:
            return self.project.method(self, class_name, method)
        return local

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


_PASS_THROUGH = frozenset({"tqdm", "enumerate", "trange", "prefetch", "skip_first_batches"})
_CALL_RE = re.compile(r"(\bdef\s+)?\b([A-Za-z_]\w*)\s*\(")


def _is_property(node: cst.FunctionDef) -> bool:
    """``@property`` / ``@functools.cached_property`` (the getter, not ``@x.setter``)."""
    return any((dotted(d.decorator) or "").rsplit(".", 1)[-1] in ("property", "cached_property") for d in node.decorators)


def _all_params(params: cst.Parameters) -> List[cst.Param]:
    result = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            result.append(star)
    return result


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


def _optimizer_read_from(role: Role, scope: Sequence[Tuple[cst.BaseExpression, cst.BaseExpression]]) -> Role:
    """A scheduler built over a local that reads a stored optimizer (``optimizer = self.optimizer``,
    perhaps unwrapped as ``optimizer = optimizer.optimizer`` for an fp16 wrapper): the optimizer
    stepped elsewhere is the stored one."""
    name = role.optimizer
    if not name or "." in name:
        return role
    read = {dotted(v) for t, v in scope if dotted(t) == name}
    read = {path for path in read if path is None or not path.startswith(name + ".")}
    if len(read) == 1 and "." in (next(iter(read)) or ""):
        return replace(role, optimizer=read.pop())
    return role


def _optimizer_stored_alongside(role: Role, scope: Sequence[Tuple[cst.BaseExpression, cst.BaseExpression]]) -> Role:
    """A scheduler stored under a new name (``self.scheduler = scheduler``) in a scope that also
    stores its optimizer under a new name (``self.optimizer = optimizer``): where the stored
    scheduler is stepped, its optimizer is the stored one."""
    stored = {dotted(t) for t, v in scope if role.optimizer and dotted(v) == role.optimizer} - {None, role.optimizer}
    return replace(role, optimizer=stored.pop()) if len(stored) == 1 else role
