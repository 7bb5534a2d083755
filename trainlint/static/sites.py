"""Every call of a module with its syntactic context: function, enclosing loops, if-tests, withs.

Pattern rules (the ones that are not about event order) read this index instead of re-walking the
tree: one pass, shared by all of them.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from .module import Function, ModuleModel, block
from .names import dotted
from .project import names_an_import
from .walk import children


@dataclass(frozen=True)
class CallSite:
    call: cst.Call
    statement: cst.CSTNode  # the simple statement (or compound header) holding the call
    function: Optional[Function]
    loops: Tuple[cst.CSTNode, ...]  # enclosing For/While, outermost first
    tests: Tuple[cst.BaseExpression, ...]  # conditions that hold here: enclosing if/while tests, negated in else branches and after early returns
    withs: Tuple[cst.BaseExpression, ...]  # enclosing with-items

    @property
    def name(self) -> str:
        func = self.call.func
        kind = type(func)  # exact types: see names.dotted
        if kind is cst.Attribute:
            return func.attr.value
        return func.value if kind is cst.Name else ""

    @property
    def receiver(self) -> Optional[str]:
        func = self.call.func
        return dotted(func.value) if isinstance(func, cst.Attribute) else None


_PROJECT_DEPTH = 3  # modules a training call is followed through (a loop, its epoch function, its step)


class SiteIndex:
    def __init__(self, model: ModuleModel) -> None:
        # The model owns its index (``model.sites()``): a strong link back would make a cycle.
        self.model = weakref.proxy(model)
        self._model_ref = weakref.ref(model)  # the model itself, for tables keyed by it weakly
        self.sites: List[CallSite] = []
        self.statement_order: Dict[int, int] = {}  # id(statement) -> pre-order position
        self.loops_of: Dict[int, Tuple[cst.CSTNode, ...]] = {}  # id(small statement) -> enclosing loops
        self._functions = {id(fn.node): fn for fn in model.all_functions}
        self.exceptional: Set[int] = set()  # ids of calls inside except handlers (not training paths)
        self._handler_depth = 0
        self._visit(model.module.body, None, (), (), ())
        self._trains: Dict[int, bool] = {}
        # Indexes built once: rules ask these questions per site, which would otherwise be quadratic.
        self._by_function: Dict[int, List[CallSite]] = {}
        self._by_name: Dict[str, List[CallSite]] = {}
        self.function_of_loop: Dict[int, Optional[Function]] = {}
        for site in self.sites:
            self._by_function.setdefault(id(site.function), []).append(site)
            self._by_name.setdefault(site.name, []).append(site)
            for loop in site.loops:
                self.function_of_loop.setdefault(id(loop), site.function)
        self._training_loops: Optional[List[cst.CSTNode]] = None
        self._by_call: Optional[Dict[int, CallSite]] = None

    # ----------------------------------------------------------------- indexing
    def _visit(self, body: Sequence[cst.CSTNode], fn, loops, tests, withs) -> None:
        guard: Tuple[cst.BaseExpression, ...] = ()
        for stmt in body:
            self.statement_order[id(stmt)] = len(self.statement_order)
            tests_here = tests + guard
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self.loops_of[id(small)] = loops
                    self._calls_in(small, stmt, fn, loops, tests_here, withs)
            elif isinstance(stmt, cst.FunctionDef):
                inner = self._functions.get(id(stmt))
                self._visit(block(stmt.body), inner, (), (), ())
            elif isinstance(stmt, cst.ClassDef):
                self._visit(block(stmt.body), None, (), (), ())
            elif isinstance(stmt, cst.If):
                branch, branch_tests = stmt, tests_here
                while True:  # an elif chain, iteratively: its length is the program's
                    self._calls_in(branch.test, branch, fn, loops, branch_tests, withs)
                    self._visit(block(branch.body), fn, loops, branch_tests + (branch.test,), withs)
                    orelse, branch_tests = branch.orelse, branch_tests + (_negated(branch.test),)
                    if isinstance(orelse, cst.Else):
                        self._visit(block(orelse.body), fn, loops, branch_tests, withs)
                    if not isinstance(orelse, cst.If):
                        break
                    branch = orelse
                    self.statement_order[id(branch)] = len(self.statement_order)
                if _returns_early(stmt):
                    guard = guard + (_negated(stmt.test),)  # ``if rank != 0: return`` guards what follows
            elif isinstance(stmt, (cst.For, cst.While)):
                header = stmt.iter if isinstance(stmt, cst.For) else stmt.test
                self._calls_in(header, stmt, fn, loops, tests_here, withs)
                inner_tests = tests_here + ((stmt.test,) if isinstance(stmt, cst.While) else ())
                self._visit(block(stmt.body), fn, loops + (stmt,), inner_tests, withs)
                if stmt.orelse is not None:
                    self._visit(block(stmt.orelse.body), fn, loops, tests_here, withs)
            elif isinstance(stmt, cst.With):
                items = tuple(item.item for item in stmt.items)
                for item in items:
                    self._calls_in(item, stmt, fn, loops, tests_here, withs)
                self._visit(block(stmt.body), fn, loops, tests_here, withs + items)
            elif isinstance(stmt, (cst.Try, cst.TryStar)):
                self._visit(block(stmt.body), fn, loops, tests_here, withs)
                for handler in stmt.handlers:
                    self._handler_depth += 1
                    self._visit(block(handler.body), fn, loops, tests_here, withs)
                    self._handler_depth -= 1
                for part in (stmt.orelse, stmt.finalbody):
                    if part is not None:
                        self._visit(block(part.body), fn, loops, tests_here, withs)
            elif isinstance(stmt, cst.Match):
                for case in stmt.cases:
                    self._visit(block(case.body), fn, loops, tests_here, withs)

    def _calls_in(self, node, stmt, fn, loops, tests, withs) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            kind = type(current)  # exact types: see names.dotted
            if kind is cst.Lambda or kind is cst.FunctionDef or kind is cst.ClassDef:
                continue
            if kind is cst.Call:
                self.sites.append(CallSite(current, stmt, fn, loops, tests, withs))
                if self._handler_depth:
                    self.exceptional.add(id(current))
            stack.extend(children(current))

    # ----------------------------------------------------------------- queries
    def in_function(self, fn: Optional[Function]) -> List[CallSite]:
        return self._by_function.get(id(fn), [])

    def named(self, *names: str) -> List[CallSite]:
        """The call sites of these names (``site.name``: a method's or function's last name)."""
        if len(names) == 1:
            return self._by_name.get(names[0], [])
        return [site for name in names for site in self._by_name.get(name, [])]

    def of_call(self, call: cst.Call) -> Optional[CallSite]:
        if self._by_call is None:
            self._by_call = {id(site.call): site for site in self.sites}
        return self._by_call.get(id(call))

    def calls_of(self, fn: Function) -> List[CallSite]:
        """Call sites of a local function or method (by name; ``self.name(...)`` for methods)."""
        found = []
        for site in self._by_name.get(fn.name, []):
            func = site.call.func
            if isinstance(func, cst.Name) and func.value == fn.name and fn.cls is None:
                found.append(site)
            elif isinstance(func, cst.Attribute) and func.attr.value == fn.name and fn.cls is not None:
                found.append(site)
        return found

    def is_training_step(self, site: CallSite) -> bool:
        """backward() or an optimizer step (or a call of a training routine defined elsewhere,
        such as an imported train_one_epoch): what makes a loop a training loop."""
        if self.is_step_itself(site):
            return True
        return self.local_callee(site) is None and self._trains_in_project(site)

    def is_step_itself(self, site: CallSite) -> bool:
        """The call is a backward or an optimizer's (or loss scaler's) step, not a call that may
        lead to one."""
        if site.name in ("backward", "manual_backward"):
            return True  # Tensor.backward, torch.autograd.backward, the libraries' (accelerator, engine, Lightning)
        if site.name == "step":
            role = self.model.roles.get(site.receiver)
            return role is not None and role.kind in ("optimizer", "scaler")
        return False

    def _trains_in_project(self, site: CallSite, depth: int = 0) -> bool:
        """A call of another module's project function that runs a backward or an optimizer step
        (itself or through what it calls): an imported ``train_one_epoch``, or ``trainer.train_step``
        of the instances the receiver can be. Its module's text decides first, without parsing
        (``Project.may_train``); a function found is then read: one that only evaluates does not
        train, whatever its module's text holds."""
        project = self.model.project
        name = dotted(site.call.func)
        if project is None or name is None:
            return False
        if project.may_train(self.model, name):
            model = self._model_ref()
            # a function, or the ``__init__`` of a class (``Dataset(...)`` builds, it does not train)
            function = project.function(model, name) or project.method(model, name, "__init__")
            if function is None or function.owner is None:
                return True  # a name the module assigns or re-exports: what it does is not read here
            return function.owner.sites().runs_a_step(function, depth=depth + 1)
        func = site.call.func
        if not isinstance(func, cst.Attribute) or names_an_import(self.model, name.split(".", 1)[0]):
            return False
        # ``trainer.train_step(batch)``: a method of the instances the receiver can be, defined in
        # another module of the project
        reached = self.model.objects.eval(func.value, site.function)
        if not reached or any(o.cls is None or o.unknown for o in reached):
            return False
        for obj in reached:
            owner = obj.class_module()
            method = owner.method_of_class(obj.cls, func.attr.value) if owner is not None and owner is not self.model else None
            if method is None or method.owner is None or not method.owner.sites().runs_a_step(method, depth=depth + 1):
                return False
        return True

    def runs_a_step(self, fn: Function, seen: Optional[Set[int]] = None, depth: int = 0) -> bool:
        """Does ``fn``, or a function it calls (of this module, or of the project a few modules
        deep), run a backward or an optimizer step itself?"""
        seen = set() if seen is None else seen
        if id(fn.node) in seen or len(seen) > 8:
            return False
        seen.add(id(fn.node))
        for site in self.in_function(fn):
            if self.is_step_itself(site):
                return True
            # by name only: asking another module's objects would compute its whole flow
            callee = self._named_local_callee(site)
            if callee is not None:
                if self.runs_a_step(callee, seen, depth):
                    return True
            elif depth < _PROJECT_DEPTH and self._trains_in_project(site, depth):
                return True
        return False

    def trains(self, fn: Function, depth: int = 0) -> bool:
        """Does this function (or a local function it calls) backpropagate or step an optimizer?"""
        cached = self._trains.get(id(fn.node))
        if cached is not None:
            return cached
        self._trains[id(fn.node)] = False  # recursion guard
        result = False
        for site in self.in_function(fn):
            if self.is_training_step(site) or (depth < 4 and self._calls_training(site, depth)):
                result = True
                break
        self._trains[id(fn.node)] = result
        return result

    def _calls_training(self, site: CallSite, depth: int) -> bool:
        callee = self.local_callee(site)
        return callee is not None and self.trains(callee, depth + 1)

    def _named_local_callee(self, site: CallSite) -> Optional[Function]:
        """``helper(...)`` or ``self.method(...)``: the local callee its spelling names in this
        module (``local_callee`` without the objects a receiver can be)."""
        func = site.call.func
        if isinstance(func, cst.Name):
            return self.model.functions.get(func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = site.function.cls if site.function is not None else None
            return self.model.methods.get((cls, func.attr.value)) if cls else None
        return None

    def local_callee(self, site: CallSite) -> Optional[Function]:
        func = site.call.func
        if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                          and func.value.value == "self"):
            return self._named_local_callee(site)
        if isinstance(func, cst.Attribute) and self.model.classes:
            # ``runner.run()`` / ``Runner(model).run()``: a method of the class its instances have
            reached = self.model.objects.eval(func.value, site.function)
            classes = {o.cls for o in reached if o.cls is not None and o.cls in self.model.classes}
            if len(classes) == 1 and all(o.cls is not None for o in reached):
                return self.model.methods.get((classes.pop(), func.attr.value))
        return None

    def project_callee(self, site: CallSite) -> Optional[Function]:
        """The project function a call runs: one of this module (``local_callee``), a method of
        the instances of another module's class the receiver can be (objects), or a function
        imported from the project."""
        local = self.local_callee(site)
        if local is not None:
            return local
        func = site.call.func
        if isinstance(func, cst.Attribute):
            reached = self.model.objects.eval(func.value, site.function)
            if reached and all(o.cls is not None and not o.unknown for o in reached):
                methods = set()
                for obj in reached:
                    owner = obj.class_module()
                    methods.add(owner.method_of_class(obj.cls, func.attr.value) if owner is not None else None)
                return methods.pop() if len(methods) == 1 else None
            made = self._imported_class_made(reached)
            if made is not None:  # an instance of a project class whose module is read only now
                return self.model.project.method(self._model_ref(), made, func.attr.value)
        name = dotted(func)
        project = self.model.project
        if name and project is not None and name.split(".", 1)[0] in self.model.imports.names:
            return project.function(self._model_ref(), name)
        return None

    def _imported_class_made(self, reached) -> Optional[str]:
        """The imported name that this module calls to make every one of ``reached``
        (``AverageMeter`` of ``self.losses = AverageMeter(names)``), when the objects layer left
        them unknown: the class's module builds no training object, so it was not read for them."""
        model = self._model_ref()
        if model.project is None or not reached:
            return None
        names = set()
        for obj in reached:
            if not obj.unknown or not isinstance(obj.node, cst.Call) or model.preorder.index(obj.node) is None:
                return None
            names.add(dotted(obj.node.func))
        name = names.pop() if len(names) == 1 else None
        return name if name and name.split(".", 1)[0] in model.imports.names else None

    def training_loops(self) -> List[cst.CSTNode]:
        if self._training_loops is None:
            loops: Dict[int, cst.CSTNode] = {}
            for site in self.sites:
                if site.loops and (self.is_training_step(site) or self._calls_training(site, 0)):
                    for loop in site.loops:
                        loops.setdefault(id(loop), loop)
            self._training_loops = list(loops.values())
        return self._training_loops

    def _training_ids(self) -> set:
        return {id(loop) for loop in self.training_loops()}

    def in_training_loop(self, site: CallSite, depth: int = 0) -> bool:
        """Inside a training loop, directly or through the local function it is in."""
        loops = self._training_ids()
        if any(id(loop) in loops for loop in site.loops):
            return True
        if site.function is None or depth > 3:
            return False
        return any(self.in_training_loop(caller, depth + 1) for caller in self.calls_of(site.function))


def _negated(test: cst.BaseExpression) -> cst.BaseExpression:
    """The condition that holds in the else branch (or after an early return): ``not test``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression
    return cst.UnaryOperation(operator=cst.Not(), expression=test)


def _returns_early(stmt: cst.If) -> bool:
    body = block(stmt.body)
    last = body[-1] if body else None
    return (
        stmt.orelse is None
        and isinstance(last, cst.SimpleStatementLine)
        and isinstance(last.body[-1], (cst.Return, cst.Raise))
    )
