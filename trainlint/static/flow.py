"""Path exploration: feed the shared checker every path through a function's control flow.

An abstract interpreter over statements. A path state is the checker's state plus the branch
conditions assumed so far (so ``if use_amp:`` taken once is taken again further down). Equal states
merge, which bounds the work; loops run to a fixpoint. Training-loop semantics:

- a loop body runs at least once, and its first iteration neither breaks nor continues (a resume
  ``continue`` or an early ``break`` on the very first batch is not the path anyone trains on);
- assumptions about conditions on variables the loop assigns are forgotten at the back edge;
- exception handlers are not explored: exception paths are not training paths;
- calls to functions and methods of the same module are inlined, depth-bounded, with the caller's
  arguments substituted for the parameters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst

from .. import checker
from ..checker import Violation
from ..events import EVERYTHING, FAMILY_GRADS, FAMILY_MODES, Event, EventKind
from . import library
from .evidence import Evidence
from .extract import Extractor, Frame, Receiver
from .hand import runs_without_grad, turns_grad_off
from .losses import arguments_given
from .module import Function, ModuleModel, block
from .calls import NONE_ARGUMENT, literal_arguments, literal_bool, parameters_given
from .comparisons import Comparison, comparison, floors, satisfiable
from .names import PROGRESS_BARS, dotted, selectors
from .budget import CALL_DEPTH, LOOP_ROUNDS, Budget
from .project import Project
from .roles import LOADER, OPTIMIZER, SAMPLER, SCALER, SCHEDULER
from .sites import SiteIndex
from .walk import children, walk

MAX_CALL_DEPTH = CALL_DEPTH
_MAX_SUPER_INITS = 4  # constructors followed up a class hierarchy through super().__init__(...)
# Objects whose methods are events: handed to another module's function, they make it worth
# following even when its own summary (made without them) has none.
_HANDED_ROLES = frozenset({OPTIMIZER, SCHEDULER, SCALER, LOADER, SAMPLER})


@dataclass(frozen=True)
class PathState:
    checks: checker.State
    assume: FrozenSet[Tuple[str, bool]] = frozenset()
    # Accumulation boundaries (``if (i + 1) % k == 0:`` around a step) of the loops being run whose
    # branch this path has not taken yet: a loop over many batches takes it, so a path that leaves
    # the loop without ever taking it is not a path the program runs.
    unfired: FrozenSet[int] = frozenset()
    # Loops whose last pass this path is in (it took ``else`` of ``if i < n - 1:`` in
    # ``for i in range(n)``): it cannot go round again.
    last_pass: FrozenSet[int] = frozenset()
    # States are hashed over and over when paths merge; hashing nested frozen dataclasses is deep,
    # so the hash is computed once.
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.checks, self.assume, self.unfired, self.last_pass)))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True)
class Witness:
    """Where a violation was seen: the calls being run (outermost first) and the branch
    conditions the path had assumed, as (condition, value)."""

    calls: Tuple[Function, ...]
    assume: FrozenSet[Tuple[str, bool]]
    # For a reported statement of another module: the functions being run when it ran, each with
    # the call that entered it (None: run as an entry point), outermost first.
    reported_in: Tuple[Tuple[Function, Optional[cst.Call]], ...] = ()


@dataclass
class Outcome:
    normal: List[PathState] = field(default_factory=list)
    breaks: List[PathState] = field(default_factory=list)
    continues: List[PathState] = field(default_factory=list)
    returns: List[PathState] = field(default_factory=list)


def _walk_calls(node: cst.CSTNode) -> List[cst.Call]:
    """Calls in evaluation order (arguments and receivers before the call); skips lambdas.
    Iterative: how deep a tree goes (an elif chain of thousands) is the program's to choose."""
    found: List[cst.Call] = []
    stack: List[Tuple[cst.CSTNode, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if children_done:
            found.append(current)  # type: ignore[arg-type]
            continue
        kind = type(current)  # exact types: see names.dotted
        if kind is cst.Lambda or kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        if kind is cst.Call:
            stack.append((current, True))
        stack.extend((child, False) for child in reversed(children(current)))
    return found


# Calls that can be events; anything else is relevant only if it reaches a local function.
# Ambiguous names are also ordinary methods elsewhere (dict.update, env.step, builtin eval).
_AMBIGUOUS = frozenset({"step", "update", "train", "eval", "iter", "zero_", "set_epoch", "unscale_", "no_sync",
                        "accumulate", "set_requires_gradient_sync"})
_EVENT_NAMES = frozenset({
    "backward", "manual_backward", "zero_grad", "step", "unscale_", "update", "set_epoch", "iter",
    "clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "dispatch_clip_grad", "clip_gradients",
    "train", "eval", "no_sync", "accumulate", "set_requires_gradient_sync", "zero_",
})

_COUNTERS = frozenset({"tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange", "itertools.count"})
_JUMP_TYPES = frozenset((cst.Return, cst.Raise, cst.Break, cst.Continue))
_GRAD_EDIT_TYPES = frozenset((cst.Assign, cst.AugAssign, cst.Expr))  # statements that may set .grad


class Interpreter:
    def __init__(self, model: ModuleModel, extractor: Extractor, sites: SiteIndex,
                 project: Optional[Project] = None, root: Optional["Interpreter"] = None,
                 budget: Optional[Budget] = None) -> None:
        self.model = model
        self.extractor = extractor
        self.sites = sites
        self.project = project
        # Functions of other project modules run in an interpreter of their own module, sharing
        # the checked file's findings, call stack and memo.
        self._root = root or self
        self._children: Dict[int, "Interpreter"] = {}
        self.violations: Dict[Violation, None] = root.violations if root else {}
        # For each violation, the path that first showed it: the functions being run and the
        # conditions assumed (``trainlint --trace`` prints it).
        self.witnesses: Dict[Violation, Witness] = root.witnesses if root else {}
        self._counter: Set[Tuple[str, Event]] = root._counter if root else set()  # (rule, event) where a must violation failed
        self.reached: Set[int] = set()  # ids of function nodes explored (as roots or inlined)
        self._stack: List[Function] = root._stack if root else []
        self._entered_by: List[Optional[cst.Call]] = root._entered_by if root else []  # beside _stack
        # where each statement of another module first ran: (function, entering call) outermost first
        self._foreign_stacks: Dict[Event, Tuple[Tuple[Function, Optional[cst.Call]], ...]] = \
            root._foreign_stacks if root else {}
        self._memo: Dict[tuple, List[PathState]] = root._memo if root else {}
        self._fed: Dict[Tuple[checker.State, Event], Tuple[checker.State, List[Violation]]] = root._fed if root else {}
        self.budget: Budget = root.budget if root else budget or Budget()
        self._loop_memo: Dict[tuple, Outcome] = {}  # see _loop
        self._loop_names: Dict[int, FrozenSet[str]] = {}
        self._cond_names: Dict[str, FrozenSet[str]] = {}
        self._varying: Dict[Tuple[str, FrozenSet[str]], bool] = {}
        self._calls: Dict[int, List[cst.Call]] = {}
        self._relevance: Dict[int, bool] = {}
        self._trains_elsewhere: Dict[int, bool] = {}  # per call: see _may_train_elsewhere
        self._parts_of: Dict[Tuple[int, type], Tuple[Tuple[str, bool], ...]] = {}
        self._cond_keys: Dict[int, Tuple[str, bool]] = {}
        self._comparisons: Dict[str, Optional[Comparison]] = {}  # condition key -> it as a comparison with an integer
        self._floors: Optional[Dict[str, int]] = None  # see comparisons.floors
        # ``if loss.requires_grad:`` tests grad mode and the parameters, not the batch: the same
        # branch on every pass of a loop that recomputes ``loss`` (not so for ``for p in params``).
        self._grad_mode_tests: Set[str] = set()
        self._zero_names: Dict[int, FrozenSet[str]] = {}  # see _zero_tested
        self._synthetic: List[cst.For] = []  # loops a framework runs (see run_framework_loops)
        self._calls_parameter: Dict[int, bool] = {}
        self._passed_conditions: Set[str] = set()  # condition keys passed as arguments (see _bind_conditions)
        self._condition_counts: Optional[Dict[str, int]] = None
        self._loaders_matter = any(r.kind == "loader" and r.sampler for r in model.roles.roles.values()) or (
            root is not None and root._loaders_matter)
        wrapped = {path.rsplit(".", 1)[-1] for path, role in model.roles.roles.items() if role.kind == "wrapped_model"}
        # Objects whose call the library descriptions give effects (texar's ``train_op()``).
        described = library.current()
        callable_objects = {path.rsplit(".", 1)[-1] for path, role in model.roles.roles.items()
                            if described.method(role.kind, "__call__") is not None}
        # Aliases such as ``from torch.nn.utils import clip_grad_norm_ as clip`` are events too.
        aliases = {name for name, full in model.imports.names.items() if full.rsplit(".", 1)[-1] in _EVENT_NAMES}
        # Methods the library descriptions give effects (DeepSpeed's ``engine.backward``).
        self._event_names = _EVENT_NAMES | wrapped | callable_objects | aliases | {name for _, name in described.methods}
        self.evidence = Evidence(model, extractor, self._local_callee, self._foreign_summary, self.objects)
        # Facts of the module alone, whoever calls it: computed once per module, not per checked file.
        self._partial_clears = model.memo("partial_clears", lambda: _partial_clears(model))
        self._flags, self._copied = model.memo("literal_flags", lambda: _literal_flags(model))
        self._eventful_ids: Optional[Set[int]] = None  # computed on first use (a child may only be asked for summaries)

        self._sync_managed = model.memo("manages_sync", lambda: _manages_sync(model))

    def close(self) -> None:
        """Drop everything this run holds, its modules' interpreters included. An interpreter is a
        reference cycle (``_root``, and its evidence calls back into it); broken here, the trees
        of modules no longer kept are freed as soon as the check ends, not by a cyclic collection."""
        for child in self._children.values():
            child.__dict__.clear()
        self.__dict__.clear()

    def _is_event_name(self, name: str) -> bool:
        return name in self._event_names

    def _may_event(self, call: cst.Call, fn: Optional[Function], relevance: bool = False) -> bool:
        """Could this call be an event, in some calling context? Names shared with ordinary
        methods (``dict.update``, ``self.step``) count only if the extractor recognises the call
        here, or if its receiver is a parameter (whose role the caller decides)."""
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if self.evidence.opaque(call, Frame(fn, cls=fn.cls if fn else None)) is not None:
            return True  # unknown, and it receives training objects: it may do an event
        if relevance and fn is not None and self._receives_parameter(call, fn):
            # Inside a function that is explored anyway: what it receives is the caller's, so it
            # may be a training object. (Not a reason to explore a function: library code would
            # make every function a root.)
            return True
        if not self._is_event_name(name):
            return False
        if name not in _AMBIGUOUS:
            return True
        if self.extractor.call_events(call, Frame(fn, cls=fn.cls if fn else None)):
            return True
        # ``optimizer.step()`` / ``iter(loader)`` on what a caller gives: an event for that caller
        given = [func.value] if isinstance(func, cst.Attribute) else [a.value for a in call.args]
        return fn is not None and any((dotted(e) or "").split(".", 1)[0] in fn.params for e in given)

    def _receives_parameter(self, call: cst.Call, fn: Function) -> bool:
        params = set(fn.params) - {"self", "cls"}
        if not params or self.evidence.is_pure(call):
            return False
        received = [a.value for a in call.args]
        if isinstance(call.func, cst.Attribute):
            received.append(call.func.value)
        return any((dotted(expr) or "").split(".", 1)[0] in params for expr in received)

    def _eventful_functions(self) -> Set[int]:
        """Functions that can produce an event, directly or through the local functions they call.
        Library code is mostly functions without any: those are neither explored nor inlined.
        Read off the shared call-site index (one walk of the module for every rule)."""
        direct: Set[int] = set()
        calls: Dict[int, Set[str]] = {}
        for site in self.sites.sites:
            fn = site.function
            if fn is None or id(fn.node) in direct:
                continue
            if self._may_event(site.call, fn) or self._may_train_elsewhere(site.call) or self._runs_a_hook(site.call, fn):
                direct.add(id(fn.node))
            else:
                calls.setdefault(id(fn.node), set()).add(site.name)
        if self._loaders_matter or ".grad" in self.model.source:
            # Module facts, whoever the caller: computed once per module.
            edits, loops = self.model.memo("grad_edits_and_loops", lambda: _grad_edits_and_loops(self.model))
            direct |= edits | (loops if self._loaders_matter else set())
            direct |= {id(fn.node) for fn in self.model.all_functions if self.evidence.updates_by_hand(fn.node, fn)}
        eventful = set(direct)
        changed = True
        while changed:
            names = {fn.name for fn in self.model.all_functions if id(fn.node) in eventful}
            changed = False
            for fn in self.model.all_functions:
                if id(fn.node) not in eventful and calls.get(id(fn.node), set()) & names:
                    eventful.add(id(fn.node))
                    changed = True
        return eventful

    def _runs_a_hook(self, call: cst.Call, fn: Function) -> bool:
        """``self._train_epoch(epoch)`` where the class only declares ``_train_epoch`` for its
        subclasses to fill in (see Function.abstract): what runs is the subclass's, which may train."""
        func = call.func
        if fn.cls is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                  and func.value.value == "self"):
            return False
        declared = self.model.method_of_class(fn.cls, func.attr.value, here_only=True)
        return declared is not None and declared.abstract

    @property
    def _eventful(self) -> Set[int]:
        if self._eventful_ids is None:
            self._eventful_ids = self._eventful_functions()
        return self._eventful_ids

    def eventful(self, fn: Function) -> bool:
        return id(fn.node) in self._eventful

    def worth_inlining(self, fn: Function) -> bool:
        """Eventful, or it calls an object its caller passes in (``loss_scaler(loss, optimizer)``
        with ``loss_scaler`` a parameter): what that does depends on the caller's objects."""
        return id(fn.node) in self._eventful or self.calls_parameter(fn)

    def calls_parameter(self, fn: Function) -> bool:
        """Does ``fn`` call the object a parameter holds (``loss_scaler(loss, optimizer)``)?"""
        calls_parameter = self._calls_parameter.get(id(fn.node))
        if calls_parameter is None:
            params = set(fn.params) - {"self", "cls"}
            calls_parameter = self._calls_parameter[id(fn.node)] = bool(params) and any(
                isinstance(site.call.func, cst.Name) and site.call.func.value in params for site in self.sites.in_function(fn)
            )
        return calls_parameter

    def calls(self, node: cst.CSTNode) -> List[cst.Call]:
        cached = self._calls.get(id(node))
        if cached is None:
            cached = self._calls[id(node)] = list(_walk_calls(node))
        return cached

    def relevant(self, node: cst.CSTNode, frame: Frame) -> bool:
        """Can this statement change a path's events or end it? Irrelevant statements are skipped.
        Judged once per statement, whatever the caller: a call that receives a parameter may be
        an event for some caller, so it counts."""
        key = id(node)
        cached = self._relevance.get(key)
        if cached is None:
            cached = False
            fn = frame.function
            for sub in self.model.subtree(node):
                kind = type(sub)  # exact types: see names.dotted
                if kind is cst.Call:
                    callee = self._local_callee(sub, frame, parse=False)
                    # a hook: some object's class may override it (judged once for all objects)
                    cached = (callee.hook or self._owner(callee).worth_inlining(callee)
                              or self._protocol_method(sub, callee, frame)) if callee is not None else (
                        self._may_event(sub, fn, relevance=True) or self._may_train_elsewhere(sub))
                elif kind in _JUMP_TYPES or (kind is cst.For and self._loaders_matter):
                    cached = True
                elif kind in (cst.Assert, cst.Expr) and _ends_the_program(sub, self.model):
                    cached = True
                elif kind is cst.Assign and self._rebound_module(sub) is not None:
                    cached = True
                elif kind is cst.For and self.evidence.hand_update(sub, fn) is not None:
                    cached = True  # a loop updating parameters by hand: a step where gradients are off
                elif kind in _GRAD_EDIT_TYPES and (
                        (kind is cst.Assign and (_clears_grad(sub) or _flag_assigned(sub) in self._flags))
                        or _rescales_grad(sub)):
                    cached = True
                if cached:
                    break
            self._relevance[key] = cached
        return cached

    # ----------------------------------------------------------------- entry points
    def run(self, body: Sequence[cst.CSTNode], frame: Frame, history_known: bool = True) -> None:
        start = [PathState(checker.initial_state(history_known))]
        if self._sync_managed:
            start = self._feed(start, self.extractor._event(self.model.module, kind=EventKind.SYNC_MANAGED))
        if frame.function is not None:
            self._stack.append(frame.function)
            self._entered_by.append(None)
            self.reached.add(id(frame.function.node))
        try:
            self.block(body, start, frame)
        finally:
            if frame.function is not None:
                self._stack.pop()
                self._entered_by.pop()

    def run_framework_loops(self) -> None:
        """Methods a framework calls once per batch (library descriptions' ``loops``): each body
        runs as the body of ``for batch_idx, batch in enumerate(batches)``."""
        described = library.current()
        for class_name, cls in self.model.classes.items():
            loop = self._framework_loop(cls, described, depth=0)
            if loop is None:
                continue
            for name in loop.methods:
                fn = self.model.methods.get((class_name, name))
                params = [p for p in fn.params if p not in ("self", "cls")] if fn is not None else []
                counter, batch = _parameter(params, loop.counter), _parameter(params, loop.batch)
                if fn is None or counter is None:
                    continue
                target = cst.Tuple([cst.Element(cst.Name(counter)), cst.Element(cst.Name(batch or "_"))])
                synthetic = cst.For(target=target, iter=cst.Call(cst.Name("enumerate"), [cst.Arg(cst.Name("batches"))]),
                                    body=fn.node.body)
                self._synthetic.append(synthetic)  # kept alive: the engine keys its caches by node id
                self.run([synthetic], Frame(fn, cls=fn.cls), history_known=True)

    def _framework_loop(self, cls: cst.ClassDef, described: "library.Library", depth: int) -> Optional["library.FrameworkLoop"]:
        for base in cls.bases:
            name = dotted(base.value) or ""
            found = described.loop_methods(self.model.imports.qualify(base.value), name.rsplit(".", 1)[-1])
            local = self.model.classes.get(name)
            if found is None and local is not None and local is not cls and depth < 4:
                found = self._framework_loop(local, described, depth + 1)
            if found is not None:
                return found
        return None

    def _feed(self, states: List[PathState], event: Optional[Event]) -> List[PathState]:
        if event is None:
            return states
        out = []
        fed = self._fed
        if event.origin is not None and event not in self._foreign_stacks:
            self._foreign_stacks[event] = tuple(zip(self._stack, self._entered_by))
        for state in states:
            # Paths merge, and loops go round until nothing new comes: the same checker state
            # meets the same event many times over (100,000 feeds, 2,300 distinct, in one real
            # training script). The checker is a function of the two: fed once per pair.
            known = fed.get((state.checks, event))
            if known is None:
                known = fed[(state.checks, event)] = checker.feed(state.checks, event, evidence=True)
            checks, found = known
            for violation in found:
                if violation.holds:
                    if violation not in self.violations:
                        self.witnesses[violation] = Witness(tuple(self._stack), state.assume,
                                                            self._foreign_stacks.get(violation.at, ()))
                    self.violations.setdefault(violation, None)
                else:
                    self._counter.add((violation.rule, violation.at))
            out.append(PathState(checks, state.assume, state.unfired, state.last_pass))
        return self.budget.paths(out)

    def confirmed(self) -> List[Violation]:
        """Violations that hold: "may" ones on some path, "must" ones on every path that decides
        (none when the exploration ran out of time: the paths it did not reach might not)."""
        complete = "time" not in self.budget.left_out
        return [v for v in self.violations if not v.must or (complete and (v.rule, v.at) not in self._counter)]

    # ----------------------------------------------------------------- statements
    def block(self, body: Sequence[cst.CSTNode], states: List[PathState], frame: Frame) -> Outcome:
        outcome = Outcome()
        current = states
        for stmt in body:
            if not current:
                break
            if not self.relevant(stmt, frame):
                continue
            self.budget.tick(stmt)
            result = self.stmt(stmt, current, frame)
            outcome.breaks += result.breaks
            outcome.continues += result.continues
            outcome.returns += result.returns
            current = result.normal
            # ``if not boundary: continue`` makes the rest of the block the accumulation boundary.
            k = self._boundary_after(stmt)
            if k is not None and frame.accum is None:
                frame = replace(frame, accum=k)
            # A loop that backpropagates but never steps is a micro-step loop: what follows is
            # the accumulation boundary.
            k = self._micro_loop(stmt, frame)
            if k is not None and frame.accum is None:
                frame = replace(frame, accum=k)
        outcome.normal = self.budget.paths(current)
        return outcome

    def stmt(self, stmt: cst.CSTNode, states: List[PathState], frame: Frame) -> Outcome:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self._simple(stmt.body, states, frame)
        if isinstance(stmt, cst.If):
            return self._if(stmt, states, frame)
        if isinstance(stmt, (cst.For, cst.While)):
            return self._loop(stmt, states, frame)
        if isinstance(stmt, cst.With):
            exits = []
            for item in stmt.items:
                states = self._expr(item.item, states, frame)
                enter, exit_ = self.extractor.context_events(item, frame)
                states = self._feed(states, enter)
                exits.append(exit_)
            if not frame.no_grad and any(turns_grad_off(item.item, self.model.imports) for item in stmt.items):
                frame = replace(frame, no_grad=True)
            outcome = self.block(block(stmt.body), states, frame)
            for exit_ in reversed(exits):
                outcome.normal = self._feed(outcome.normal, exit_)
            return outcome
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            body = self.block(block(stmt.body), states, frame)
            for handler in _exhaustion_handlers(stmt, self.calls):
                # ``try: batch = next(it) except StopIteration: it = iter(loader)``: running out of
                # data is the normal way to start another pass, not an error path.
                restarted = self.block(block(handler.body), states, frame)
                body = _merge(body, restarted, body.normal + restarted.normal)
            if stmt.orelse is not None:
                rest = self.block(block(stmt.orelse.body), body.normal, frame)
                body = _merge(body, rest, rest.normal)
            if stmt.finalbody is not None:
                final = self.block(block(stmt.finalbody.body), body.normal, frame)
                body = _merge(body, final, final.normal)
            return body
        if isinstance(stmt, cst.Match):
            states = self._expr(stmt.subject, states, frame)
            outcome = Outcome()
            for case in stmt.cases:
                outcome = _merge(outcome, self.block(block(case.body), states, frame), None)
            outcome.normal = self.budget.paths(outcome.normal + states)
            return outcome
        return Outcome(normal=states)  # def, class: not executed here

    def _simple(self, smalls: Sequence[cst.BaseSmallStatement], states: List[PathState], frame: Frame) -> Outcome:
        outcome = Outcome()
        for small in smalls:
            if isinstance(small, cst.Break):
                outcome.breaks += states
                return outcome
            if isinstance(small, cst.Continue):
                outcome.continues += states
                return outcome
            states = self._expr(small, states, frame)
            if isinstance(small, cst.Return):
                outcome.returns += states
                return outcome
            if isinstance(small, cst.Raise) or _ends_the_program(small, self.model):
                return outcome
            flag = _flag_assigned(small) if isinstance(small, cst.Assign) else None
            if flag in self._flags:
                # ``should_update = True``: the path knows the flag until it is assigned again;
                # ``flag = other`` knows what the path knows of ``other``.
                value = literal_bool(small.value)
                source = small.value.value if value is None and type(small.value) is cst.Name else None
                states = [replace(s, assume=frozenset(a for a in s.assume if a[0] != flag) | (
                    {(flag, value)} if value is not None else {(flag, known) for key, known in s.assume if key == source}))
                    for s in states]
            rebound = self._rebound_module(small)
            if rebound is not None:
                # ``model = Net()`` after ``model.eval()``: the name now holds another module,
                # whose mode nothing here has set (a notebook's later cell, a fresh model per run).
                target = frame.resolve(rebound) or dotted(rebound)
                states = self._feed(states, self.extractor._event(
                    small, kind=EventKind.OPAQUE, label=f"{dotted(rebound)} = ... (another object)",
                    families=frozenset({FAMILY_MODES}), reach=(target,)))
            if isinstance(small, cst.Assign) and _clears_grad(small) and id(small) not in self._partial_clears:
                states = self._feed(states, self.extractor._event(small, kind=EventKind.ZERO_GRAD, label="p.grad = None"))
            elif _rescales_grad(small):
                # ``p.grad = g``, ``p.grad /= k``: gradients set or normalised by hand.
                states = self._feed(states, self.extractor._event(
                    small, kind=EventKind.OPAQUE, label="p.grad = ...", families=frozenset({FAMILY_GRADS}), reach=(EVERYTHING,)))
        outcome.normal = states
        return outcome

    def _protocol_method(self, call: cst.Call, callee: Function, frame: Frame) -> bool:
        """``optimizer.step()`` on the project's own subclass of a torch optimizer or scheduler
        (``class AdamW(Optimizer)``): the library's protocol, an event, not a body to read (its
        body does the update the protocol names); and its construction is building a training
        object, as torch's own (its ``super().__init__(optimizer)`` steps nothing)."""
        if callee.cls is None:
            return False
        if callee.name == "__init__" and not isinstance(call.func, cst.Attribute):
            return (callee.owner or self.model).inherited_role(callee.cls, call) is not None
        if not isinstance(call.func, cst.Attribute):
            return False
        kind = self.extractor._kind(frame.resolve(call.func.value), frame)
        return kind in (OPTIMIZER, SCHEDULER) and bool(self.extractor.call_events(call, frame))

    def _rebound_module(self, small: cst.BaseSmallStatement) -> Optional[cst.BaseExpression]:
        """The target of ``model = <call>`` when ``model`` is a module whose eval() the module
        calls and the call makes another object (not ``model.to(device)``, not a wrapper of the
        same module such as ``DDP(model)`` or ``torch.compile(model)``)."""
        if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(small.value, cst.Call):
            return None
        target = small.targets[0].target
        path = dotted(target)
        if path is None or path not in self.evidence.mode_targets:
            return None
        value = small.value
        if isinstance(value.func, cst.Attribute) and dotted(value.func.value) == path:
            return None  # a method of the same object (model.to(device), model.cuda())
        if any(dotted(a.value) == path for a in value.args):
            return None  # the same module, wrapped or prepared
        return target

    def _expr(self, node: cst.CSTNode, states: List[PathState], frame: Frame) -> List[PathState]:
        for call in self.calls(node):
            callee = self._local_callee(call, frame)
            if callee is not None and not self._protocol_method(call, callee, frame):
                states = self._inline(callee, call, states, frame)
                continue
            events = self.extractor.call_events(call, frame)
            for event in events or (self.evidence.opaque(call, frame),):
                states = self._feed(states, event)
        return states

    # ----------------------------------------------------------------- branches
    def _if(self, stmt: cst.If, states: List[PathState], frame: Frame) -> Outcome:
        """An ``if`` with its ``elif`` chain, run link by link without recursion (the chain's
        length is the program's to choose: thousands of ``elif`` are valid Python)."""
        taken_parts: List[Outcome] = []
        while True:
            taken, orelse, false_states, false_frame = self._branch(stmt, states, frame)
            taken_parts.append(taken)
            if len(orelse) == 1 and isinstance(orelse[0], cst.If) and false_states:
                if self.relevant(orelse[0], false_frame):
                    stmt, states, frame = orelse[0], false_states, false_frame
                    self.budget.tick(stmt)
                    continue
                other = Outcome(normal=false_states)
            else:
                other = self.block(orelse, false_states, false_frame) if orelse else Outcome(normal=false_states)
            break
        merged = other
        for taken in reversed(taken_parts):
            merged = _merge(taken, merged, None)
        merged.normal = self.budget.paths(merged.normal)
        return merged

    def _branch(self, stmt: cst.If, states: List[PathState], frame: Frame):
        """One link of an if/elif chain: the outcome of its body, and what its ``else`` (an
        ``elif`` or a block) runs: (taken, orelse statements, their states, their frame)."""
        states = self._expr(stmt.test, states, frame)
        key, polarity = self._cond_key(stmt.test)
        passed = {param: (caller_key, caller_polarity) for param, caller_key, caller_polarity in frame.conditions}
        constant = None
        if key in passed and passed[key][0] == _CONSTANT_NONE:  # ``if opt is not None:`` where opt is None
            constant = not polarity
        elif key in passed and passed[key][0] == _CONSTANT:  # ``if train:`` where the caller passed False
            # (``if flag is not None:`` holds for False too: the key reads both tests alike)
            constant = None if _compares_with_none(stmt.test) else passed[key][1] == polarity
        elif key in passed:  # ``if update_grad:`` is the caller's condition
            key, polarity = passed[key][0], passed[key][1] if polarity else not passed[key][1]
        body = block(stmt.body)
        orelse: Sequence[cst.CSTNode] = ()
        if isinstance(stmt.orelse, cst.If):
            orelse = [stmt.orelse]
        elif isinstance(stmt.orelse, cst.Else):
            orelse = block(stmt.orelse.body)
        k = self._boundary(stmt.test, frame) or _counter_boundary(stmt, self.model)
        # ``if (i + 1) % k != 0:`` (or ``if not boundary:``) runs the micro-steps: the boundary is its else.
        negative = k is not None and _negated(stmt.test, polarity)
        true_frame = replace(frame, accum=k) if k is not None and not negative and frame.accum is None else frame
        false_frame = replace(frame, accum=k) if negative and frame.accum is None else frame
        held = selectors(stmt.test)
        if held:
            true_frame = replace(true_frame, held=true_frame.held + held)
        if body and isinstance(body[-1], cst.SimpleStatementLine) and isinstance(body[-1].body[-1], (cst.Continue, cst.Break, cst.Raise)):
            true_frame = replace(true_frame, skipping=True)  # ``if not finite: ...; continue``
        only_true = k is None and not orelse and self._calls_named(stmt.body, "set_epoch")
        # Only a condition tested again later is worth remembering: others would multiply paths.
        # In a training loop, a condition on names no pass changes (``if args.inference_only:``)
        # is tested again by the next pass, and takes the same branch there.
        if _requires_grad_of(stmt.test) not in (None, *frame.loop_vars):
            self._grad_mode_tests.add(key)
        remember = self._repeated_conditions().get(key, 0) > 1 or key in self._root._passed_conditions or key in self._copied or (
            frame.varying is not None and (not self._varies(key, frame.varying) or key in self._grad_mode_tests)
        )
        fires = id(stmt)
        if _tests_grad_presence(stmt.test):
            # ``if p.grad is not None:`` over the parameters after a backward: they have gradients.
            return self.block(body, states, true_frame), (), [], frame  # its else is not run
        true_states, false_states = [], []
        # ``if a and not b:`` runs only where a holds and b does not; its else only where some does not
        when_true, when_false = self._parts(stmt.test, cst.And), self._parts(stmt.test, cst.Or, negate=True)
        counts = self._repeated_conditions()
        learned_true = frozenset(fact for fact in when_true if counts.get(fact[0], 0) > 1)
        learned_false = frozenset(fact for fact in when_false if counts.get(fact[0], 0) > 1)
        compared = self._comparisons.get(key)
        taken = _taken_on_this_pass(stmt.test, frame) if constant is None else constant
        for state in states:
            assumed = dict(state.assume).get(key)
            if taken is not None:  # ``if i == 0:`` on the first pass of ``for i, x in enumerate(...)``, or a later one
                assumed = polarity if taken else not polarity
            elif compared is not None and assumed is None:
                can_be_true = self._can_hold(state.assume, compared, polarity)
                can_be_false = self._can_hold(state.assume, compared, not polarity)
                if can_be_true != can_be_false:  # the other assumptions decide this test
                    assumed = polarity if can_be_true else not polarity
                elif not can_be_true:
                    continue  # the path itself cannot run
            if (assumed is None or assumed == polarity) and not _contradicts(state.assume, when_true):
                if fires in state.unfired:
                    state_true = replace(state, unfired=state.unfired - {fires})
                else:
                    state_true = state
                if learned_true:
                    state_true = replace(state_true, assume=_holding(state_true.assume, learned_true))
                true_states.append(replace(state_true, assume=_holding(state_true.assume, {(key, polarity)})) if remember else state_true)
            if only_true:
                continue  # guards of set_epoch (``if distributed:``) hold where a sampler exists
            if (assumed is None or assumed != polarity) and not _contradicts(state.assume, when_false):
                state_false = replace(state, assume=_holding(state.assume, learned_false)) if learned_false else state
                false_states.append(replace(state_false, assume=_holding(state_false.assume, {(key, not polarity)})) if remember else state_false)
        last = self._last_pass_test(stmt.test, frame)
        if last is not None:
            loop_id, when = last
            marked = [replace(s, last_pass=s.last_pass | {loop_id}) for s in (true_states if when else false_states)]
            true_states, false_states = (marked, false_states) if when else (true_states, marked)
        return self.block(body, true_states, true_frame), orelse, false_states, false_frame

    def _repeated_conditions(self) -> Dict[str, int]:
        """How many ``if`` statements of the explored code (module body and functions that can
        produce events) test each condition; computed once."""
        if self._condition_counts is None:
            counts: Dict[str, int] = {}
            scopes = [stmt for stmt in self.model.module.body if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))]
            scopes += [fn.node for fn in self.model.all_functions if self.eventful(fn)]
            for scope in scopes:
                for node in self.model.subtree(scope):
                    if isinstance(node, cst.If):
                        key = self._cond_key(node.test)[0]
                        counts[key] = counts.get(key, 0) + 1
                        for part, _ in self._parts(node.test, cst.And) + self._parts(node.test, cst.Or, negate=True):
                            counts[part] = counts.get(part, 0) + 1
            self._condition_counts = counts
        return self._condition_counts

    def _parts(self, test: cst.BaseExpression, operator: type, negate: bool = False) -> Tuple[Tuple[str, bool], ...]:
        """The conditions (key, polarity) that all hold when ``test`` does (``a and not b``:
        ``a``, not ``b``), or with ``negate`` when it does not (``a or b`` false: neither)."""
        cache_key = (id(test), operator)
        cached = self._parts_of.get(cache_key)
        if cached is None:
            parts: List[cst.BaseExpression] = []
            pending = [test]
            while pending:
                node = pending.pop()
                if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, operator) and not node.lpar:
                    pending.extend((node.right, node.left))
                else:
                    parts.append(node)
            cached = () if len(parts) < 2 else tuple(
                (key, polarity != negate) for key, polarity in (self._cond_key(part) for part in parts))
            self._parts_of[cache_key] = cached
        return cached

    def _cond_key(self, test: cst.BaseExpression) -> Tuple[str, bool]:
        cached = self._cond_keys.get(id(test))
        if cached is None:
            cached = self._cond_keys[id(test)] = self._compute_cond_key(test)
        return cached

    def _compute_cond_key(self, test: cst.BaseExpression) -> Tuple[str, bool]:
        polarity = True
        while True:
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, polarity = test.expression, not polarity
            elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
                test.comparisons[0].comparator, cst.Name
            ) and test.comparisons[0].comparator.value == "None" and isinstance(
                test.comparisons[0].operator, (cst.Is, cst.IsNot)
            ):
                polarity = polarity if isinstance(test.comparisons[0].operator, cst.IsNot) else not polarity
                test = test.left
            else:
                break
        if getattr(test, "lpar", None):
            test = test.with_changes(lpar=[], rpar=[])  # ``if (a and b):`` over lines tests ``a and b``
        for _ in range(3):
            # ``scaler_ = grad_scaler`` (the only value it is ever given): one object, one condition
            values = self.model.values_assigned(test.value) if type(test) is cst.Name else ()
            if len(values) != 1 or type(values[0]) is not cst.Name or test.value in self._parameter_names():
                break  # (a parameter of that name elsewhere holds what its callers pass)
            test = values[0]
        key = " ".join(self.model.module.code_for_node(test).split())
        if key not in self._cond_names:
            self._cond_names[key] = frozenset(_paths(test))
            self._comparisons[key] = comparison(test, self.model.module.code_for_node)
        return key, polarity

    def _parameter_names(self) -> FrozenSet[str]:
        return self.model.memo("parameter names", lambda: frozenset(p for fn in self.model.all_functions for p in fn.params))

    def _can_hold(self, assume: FrozenSet[Tuple[str, bool]], compared: Comparison, holds: bool) -> bool:
        """Can a path with these assumptions also have ``compared`` hold (or not)? Only its
        comparisons of the same expression with integers matter (see comparisons.py)."""
        if self._floors is None:
            self._repeated_conditions()  # every tested condition's key, so every comparison, is known
            self._floors = floors(c for c in self._comparisons.values() if c is not None)
        facts = [(other, value) for key, value in assume
                 for other in (self._comparisons.get(key),) if other is not None and other.subject == compared.subject]
        return satisfiable(facts + [(compared, holds)], self._floors.get(compared.subject))

    def _boundary(self, test: cst.BaseExpression, frame: Optional[Frame] = None, depth: int = 0) -> Optional[str]:
        """``k`` when a condition marks an accumulation boundary (``(i + 1) % k == 0``...),
        also through a local flag (``boundary = (i + 1) % k == 0`` ... ``if boundary:``)."""
        if isinstance(test, cst.UnaryOperation):
            test = test.expression
        if isinstance(test, cst.Name) and frame is not None and frame.function is not None and depth < 2:
            for target, value in frame.function.assigns:
                if isinstance(target, cst.Name) and target.value == test.value:
                    k = self._boundary(value, frame, depth + 1)
                    if k is not None:
                        return k
        for node in walk(test):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
                return " ".join(self.model.module.code_for_node(node.right).split())
        described = library.current().boundaries
        for node in walk(test):
            if isinstance(node, cst.Attribute) and described:
                receiver = frame.resolve(node.value) if frame is not None else dotted(node.value)
                role = self.extractor.role(receiver, frame=frame) if receiver else None
                if role is not None and (role.kind, node.attr.value) in described:
                    return "the accumulation steps"
        if isinstance(test, cst.Attribute) and depth < 2:
            # ``if self.at_boundary:`` set from ``(i + 1) % k == 0`` in another method
            for value in self.model.values_assigned(dotted(test) or ""):
                k = self._boundary(value, frame, depth + 1)
                if k is not None:
                    return k
        return None

    def _boundary_after(self, stmt: cst.CSTNode) -> Optional[str]:
        """``if not boundary: continue``: the statements after it run only at the boundary."""
        if not isinstance(stmt, cst.If) or stmt.orelse is not None:
            return None
        body = block(stmt.body)
        last = body[-1] if body else None
        if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Continue)):
            return None
        k = self._boundary(stmt.test)
        if k is None:
            return None
        _, polarity = self._cond_key(stmt.test)
        return k if _negated(stmt.test, polarity) else None

    def _micro_loop(self, stmt: cst.CSTNode, frame: Frame) -> Optional[str]:
        """How the code names k when ``stmt`` is a loop of micro-steps: its passes backpropagate
        (written there or in a function it calls) and none steps an optimizer."""
        if not isinstance(stmt, (cst.For, cst.While)):
            return None
        calls = self.calls(stmt.body)
        if not (self._calls_named(stmt.body, "backward") or any(self._local_callee(c, frame, parse=False) for c in calls)):
            return None
        kinds = {kind for call in calls for kind in self.evidence.call_kinds(call, frame)}
        if EventKind.BACKWARD not in kinds or kinds & {EventKind.OPTIMIZER_STEP, EventKind.OPAQUE}:
            return None
        if self.evidence.updates_by_hand(stmt.body, frame.function):
            return None
        if isinstance(stmt, cst.For) and isinstance(stmt.iter, cst.Call) and _last_name(stmt.iter.func) == "range" and stmt.iter.args:
            bound = stmt.iter.args[0].value if len(stmt.iter.args) == 1 else None
            # a literal or module constant (not a command-line default, which a run may change)
            count = self.model.values.number(bound) if isinstance(bound, (cst.Name, cst.Integer)) else None
            if count is not None and count <= 1:
                return None  # ``range(MICRO_STEPS)`` with the constant 1: one pass, nothing accumulates
            return _pass_count(self.model.module, stmt.iter)
        return "the number of micro-steps"

    def _calls_named(self, node: cst.CSTNode, name: str) -> bool:
        return any(_last_name(call.func) == name or (isinstance(call.func, cst.Attribute) and call.func.attr.value == name)
                   for call in self.calls(node))

    # ----------------------------------------------------------------- loops
    def _loop(self, stmt, states: List[PathState], frame: Frame) -> Outcome:
        """A loop run from these states, once per distinct input: the passes of an enclosing loop
        enter it again and again with the states they reached before, and re-running it each time
        would make the work exponential in the nesting depth."""
        if frame.first_pass or frame.later_pass:
            tested = self._zero_tested(stmt)
            frame = replace(frame, first_pass=frame.first_pass & tested, later_pass=frame.later_pass & tested)
        key = (id(stmt), frozenset(states), frame, tuple(id(fn.node) for fn in self._stack))
        known = self._loop_memo.get(key)
        if known is None:
            known = self._loop_memo[key] = self._run_loop(stmt, states, frame)
        return Outcome(normal=list(known.normal), breaks=list(known.breaks), continues=list(known.continues),
                       returns=list(known.returns))

    def _run_loop(self, stmt, states: List[PathState], frame: Frame) -> Outcome:
        # A loop updating parameters by hand is one optimizer step (each pass updates one of them),
        # taken as the loop starts; its passes are not iterations of training.
        states = self._feed(states, self._hand_step(stmt, frame))
        trains = self.evidence.trains(stmt, frame)
        steps = trains or self.evidence.steps(stmt, frame)
        if isinstance(stmt, cst.For):
            states = self._expr(stmt.iter, states, frame)
            if trains:  # an epoch is a pass over a loader that trains, not any pass over it
                states = self._feed(states, self.extractor.loader_event(stmt, stmt.iter, frame))
            forever = False
        else:
            states = self._expr(stmt.test, states, frame)
            forever = _always_true(stmt.test)
        body = block(stmt.body)
        assigned = self._assigned_in(stmt)
        iteration = None
        boundaries: FrozenSet[int] = frozenset()
        if steps:
            states = self._feed(states, self.extractor._event(stmt, kind=EventKind.TRAINING_START, label="training loop"))
            iteration = self.extractor._event(stmt, kind=EventKind.ITERATION, label="next iteration")
            batches = frame.varying is not None or (isinstance(stmt, cst.For) and self._over_batches(stmt.iter, frame))
            frame = replace(frame, varying=(frame.varying or frozenset()) | assigned, rebuilt=frame.rebuilt | self._built_in(stmt),
                            batches=frame.batches or batches)
            boundaries = self._boundaries_in(body, frame)
            if boundaries:
                states = [replace(s, unfired=s.unfired | boundaries) for s in states]
        counter = self._tested_pass_counter(stmt)
        if self._only_scheduler_steps(stmt, frame):
            # ``for _ in range(n): scheduler.step()`` fast-forwards a schedule on purpose.
            frame = replace(frame, explicit_schedule=True)
        if isinstance(stmt, cst.For):
            # ``for opt in optimizers: opt.step()`` steps a different object on every pass.
            frame = replace(frame, loop_vars=frame.loop_vars | frozenset(_names(stmt.target)))
            counted = _range_bound(stmt)
            if counted is not None:
                frame = replace(frame, counters=frame.counters + ((id(stmt),) + counted,))
        result = Outcome()
        later_frame = frame
        if counter is not None:  # the first pass has ``i == 0``, every later one not
            later_frame = replace(frame, first_pass=frame.first_pass - {counter}, later_pass=frame.later_pass | {counter})
            frame = replace(frame, first_pass=frame.first_pass | {counter}, later_pass=frame.later_pass - {counter})
        first = self.block(body, states, frame)
        result.returns += first.returns
        head = first.normal or first.continues  # the first pass completes unless it cannot
        if not first.normal and not first.continues:
            result.breaks += first.breaks
        head = self.budget.paths(self._forget(s, assigned) for s in head)
        final = [s for s in head if id(stmt) in s.last_pass]
        head = [s for s in head if id(stmt) not in s.last_pass]
        seen = dict.fromkeys(head)
        work = head
        rounds = 0
        while work and rounds < LOOP_ROUNDS:
            rounds += 1
            again = self.block(body, self._feed(work, iteration), later_frame)
            result.breaks += again.breaks
            result.returns += again.returns
            new = [s for s in (self._forget(s, assigned) for s in again.normal + again.continues) if s not in seen]
            final += [s for s in new if id(stmt) in s.last_pass]
            new = self.budget.paths(s for s in new if id(stmt) not in s.last_pass)
            seen.update(dict.fromkeys(new))
            work = new
        if work:
            self.budget.loop_unsettled(stmt)
        # A loop that tells its last pass apart leaves after that pass, not after any other.
        last_passes = [replace(s, last_pass=s.last_pass - {id(stmt)}) for s in final]
        exits = [] if forever else (last_passes if last_passes else list(seen))
        if boundaries:
            # Some boundary of the loop fired (boundaries in exclusive branches, fp16 or not, never all do).
            fired = [s for s in exits if (s.unfired & boundaries) != boundaries]
            exits = _strip(fired or exits, boundaries)
            fired_breaks = [s for s in result.breaks if (s.unfired & boundaries) != boundaries]
            result.breaks = _strip(fired_breaks or result.breaks, boundaries)
            result.returns = _strip(result.returns, boundaries)
        if stmt.orelse is not None and exits:
            exits = self.block(block(stmt.orelse.body), exits, later_frame).normal
        return Outcome(normal=self.budget.paths(exits + result.breaks), returns=result.returns)

    def _hand_step(self, stmt, frame: Frame) -> Optional[Event]:
        """The optimizer step of a loop that updates parameters from their gradients (see hand.py),
        where gradients are off: the guard sees the same update there, and nowhere else."""
        if not (frame.no_grad or runs_without_grad(frame.function)):
            return None
        update = self.evidence.hand_update(stmt, frame.function)
        return self.extractor.hand_step(update, frame) if update is not None else None

    def _tested_pass_counter(self, stmt) -> Optional[str]:
        """The loop's pass counter (``_pass_counter``) when its body tests it against 0: only then
        do its first and later passes run in frames of their own."""
        counter = _pass_counter(stmt)
        return counter if counter is not None and counter in self._zero_tested(stmt) else None

    def _zero_tested(self, stmt) -> FrozenSet[str]:
        """Names the ifs inside a loop compare with 0 (``if i == 0:``): of the pass counters a
        frame knows, the only ones the loop's exploration can depend on. A loop is run (and its
        run remembered) in a frame that knows no others: else every enclosing loop's first and
        later passes would explore it anew, 2^depth times."""
        names = self._zero_names.get(id(stmt))
        if names is None:
            names = self._zero_names[id(stmt)] = frozenset(
                found[0] for node in self.model.subtree(stmt) if isinstance(node, cst.If)
                for found in (_zero_test(node.test),) if found is not None)
        return names

    def _last_pass_test(self, test: cst.BaseExpression, frame: Frame) -> Optional[Tuple[int, bool]]:
        """(loop, truth value) when ``test`` tells the last pass of an enclosing ``for v in
        range(n)``: ``v < n - 1`` is False there, ``v == n - 1`` and ``v + 1 == n`` True."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        code = self.model.module.code_for_node
        left = "".join(code(test.left).split())
        right = "".join(code(test.comparisons[0].comparator).split())
        op = test.comparisons[0].operator
        for loop_id, var, bound in frame.counters:
            if (left, right) in ((var, bound + "-1"), (var + "+1", bound)):
                if isinstance(op, cst.LessThan):
                    return loop_id, False
                if isinstance(op, cst.Equal):
                    return loop_id, True
                if isinstance(op, cst.NotEqual):
                    return loop_id, False
            if (left, right) == (var, bound + "-1") and isinstance(op, cst.GreaterThanEqual):
                return loop_id, True
        return None

    def _boundaries_in(self, body: Sequence[cst.CSTNode], frame: Frame) -> FrozenSet[int]:
        """Accumulation boundaries of this loop's passes: ``if`` statements (not in nested loops)
        whose test is a boundary condition and whose branch steps an optimizer."""
        found: Set[int] = set()
        pending = list(body)
        while pending:
            stmt = pending.pop()
            if isinstance(stmt, cst.If):
                _, polarity = self._cond_key(stmt.test)
                negated = any(isinstance(c.operator, cst.NotEqual) for node in walk(stmt.test)
                              if isinstance(node, cst.Comparison) for c in node.comparisons)
                if polarity and not negated and (self._boundary(stmt.test, frame) is not None
                                                 or _counter_boundary(stmt, self.model) is not None) and (any(
                    kind in (EventKind.OPTIMIZER_STEP, EventKind.OPAQUE)
                    for call in self.calls(stmt.body) for kind in self.evidence.call_kinds(call, frame)
                ) or self.evidence.updates_by_hand(stmt.body, frame.function)):
                    found.add(id(stmt))
                pending.extend(block(stmt.body))
                if isinstance(stmt.orelse, cst.If):
                    pending.append(stmt.orelse)
                elif isinstance(stmt.orelse, cst.Else):
                    pending.extend(block(stmt.orelse.body))
            elif isinstance(stmt, (cst.With, cst.Try, cst.TryStar)):
                pending.extend(block(stmt.body))
        return frozenset(found)

    def _over_batches(self, iterable: cst.BaseExpression, frame: Frame) -> bool:
        """Does the loop iterate data (a loader, batches) rather than count epochs? Counting is
        ``range``/``trange``/``itertools.count``, also inside ``enumerate``/``tqdm``; anything else
        it iterates is data, whatever it is called."""
        inner = iterable
        while isinstance(inner, cst.Call) and inner.args and self._passes_through(inner.func):
            inner = inner.args[0].value
        if not isinstance(inner, cst.Call):
            return True
        qualified = self.model.imports.qualify(inner.func)
        if qualified is None and isinstance(inner.func, cst.Name) and inner.func.value == "range":
            return False  # the builtin, not shadowed by an import
        return qualified not in _COUNTERS

    def _passes_through(self, func: cst.BaseExpression) -> bool:
        """``enumerate(x)``, ``tqdm(x)``: iterates what its first argument iterates."""
        qualified = self.model.imports.qualify(func)
        if qualified is None and isinstance(func, cst.Name):
            return func.value == "enumerate"
        return qualified in PROGRESS_BARS

    def _built_in(self, loop) -> FrozenSet[str]:
        """Paths assigned a freshly constructed optimizer inside the loop body."""
        found = set()
        for node in self.model.subtree(loop.body):
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                role = self.model.role_of_value(node.value)
                if role is not None and role.kind == "optimizer":
                    found.update(dotted(t.target) for t in node.targets if dotted(t.target))
        return frozenset(found)

    def _constructed(self, method: Function, receiver: cst.BaseExpression, frame: Frame) -> Dict[str, str]:
        """``trainer = Trainer(model, loader, optimizer)`` then ``trainer.train()``: inside the
        method, ``self`` is ``trainer`` and each ``self.x = param`` of ``__init__`` is the object the
        constructor was given (``self.train_data`` is the caller's loader)."""
        if isinstance(receiver, cst.Call):
            # ``Trainer(model, optimizer).train()``: the object has no name, its fields have
            bound, values = {}, [receiver]
        else:
            path = frame.resolve(receiver)
            if path is None:
                return {}
            bound, values = {"self": path}, self.model.values_assigned(dotted(receiver) or "")
        if len(values) != 1 or not isinstance(values[0], cst.Call):
            return bound  # not built here by its constructor (a builder returned it): self.x is its field
        # Built from the method's class, or from a subclass that inherits the method (and then
        # maybe its ``__init__`` too).
        built = dotted(values[0].func) or ""
        if built.rsplit(".", 1)[-1] == method.cls:
            init = (method.owner or self.model).methods.get((method.cls, "__init__"))
        elif _same_method(self.model.method_of_class(built, method.name), method):
            init = self.model.method_of_class(built, "__init__")
        else:
            init = None
        if init is None:
            return bound
        given = _given_to(init, values[0].args, frame.resolve)
        for _ in range(_MAX_SUPER_INITS):
            for target, value in init.assigns:
                attribute = dotted(target)
                if attribute and attribute.startswith("self.") and isinstance(value, cst.Name) and value.value in given:
                    bound.setdefault(attribute, given[value.value])
            # ``super().__init__(model, optimizer)``: the fields the base class's constructor sets
            found = _super_init(init)
            if found is None:
                break
            init, args = found
            given = _given_to(init, args, lambda expr, known=given: known.get(expr.value) if isinstance(expr, cst.Name) else None)
        return bound

    def _method_of_object(self, call: cst.Call, frame: Frame) -> Optional[Function]:
        """``trainer.train()`` where ``trainer`` was built from a class of this module or the project."""
        found = self._object_method(call, frame)
        return found[0] if found is not None else None

    def _object_method(self, call: cst.Call, frame: Frame) -> Optional[Tuple[Function, Receiver]]:
        """The method ``_method_of_object`` finds, with the class of the object it runs on (a
        subclass whose ``train`` it inherits: ``self._train_epoch()`` in there is the subclass's)."""
        func = call.func
        if isinstance(func, cst.Attribute) and not (isinstance(func.value, cst.Name) and func.value.value == "self"):
            holder, method = func.value, func.attr.value
        elif isinstance(func, cst.Name):
            holder, method = func, "__call__"  # the object itself is called
        else:
            return None
        # the instances the receiver can be (``Runner(model).run()``, a parameter the callers fill)
        reached = self.objects(holder, frame)
        instances = {(o.class_module(), o.cls) for o in reached if o.cls is not None}
        if len(instances) == 1 and all(o.cls is not None for o in reached):
            owner, class_name = instances.pop()
            found = owner.method_of_class(class_name, method) if owner is not None else None
            if found is not None:
                return found, (owner, class_name)
        if not isinstance(holder, cst.Name):
            return None
        # Built here, or (a parameter of a function run for the checked file) built by the caller.
        places = [(self.model, holder.value)]
        resolved = frame.resolve(holder)
        if resolved is not None and (self._root is not self or resolved != holder.value):
            places.append((self._root.model, resolved))
        for model, name in places:
            values = model.values_assigned(name)
            if len(values) != 1 or not isinstance(values[0], cst.Call):
                continue
            class_name = dotted(values[0].func)
            if class_name and "." not in class_name:
                found = model.method_of_class(class_name, method)
                return (found, (model, class_name)) if found is not None else None
        return None

    def _receivers(self, callee: Function, call: cst.Call, frame: Frame) -> Tuple[Tuple[str, Receiver], ...]:
        """The classes of the objects ``callee``'s ``self`` and parameters hold when ``call`` runs
        it, where known (see Frame.receivers): the caller's own for ``self.method()``, the class
        constructed, the object's class; a parameter given an object whose class the caller knows
        (``loop_body(self, batch)``), that class."""
        known = dict(frame.receivers)
        found: Dict[str, Receiver] = {}
        func = call.func
        params = list(callee.params)
        if callee.cls is not None and params and params[0] == "self":
            params = params[1:]
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                own = known.get("self")
            elif callee.name == "__init__" and isinstance(func, cst.Name):
                own = self._defined_class(self.model, func.value)
            else:
                method = self._object_method(call, frame)
                own = self._defined_class(*method[1]) if method is not None and _same_method(method[0], callee) else None
            if own is not None:
                found["self"] = own
        if known:
            given = list(zip(params, [a.value for a in call.args if a.keyword is None and not a.star]))
            given += [(a.keyword.value, a.value) for a in call.args if a.keyword is not None and a.keyword.value in params]
            for param, value in given:
                if isinstance(value, cst.Name) and value.value in known:
                    found[param] = known[value.value]
        return tuple(sorted(found.items(), key=lambda item: item[0]))

    def _defined_class(self, model: ModuleModel, name: str) -> Optional[Receiver]:
        """Where the class ``name`` (as ``model`` names it) is defined: ``model`` itself, or the
        project module it is imported from."""
        if name in model.classes:
            return model, name
        project = self.project or model.project
        return project.class_of(model, name) if project is not None else None

    def objects(self, expr: cst.BaseExpression, frame: Frame):
        """The objects ``expr`` can be where ``frame`` runs. In a function of another module run
        for the checked file, first with what the caller gave its parameters (Frame.objects), read
        in the checked file's world; what that does not reach, as the module's own flow has it."""
        if frame.objects and frame.function is not None:
            flow = self._root.model.objects.flow_for(self.model)
            found = flow.eval(expr, frame.function, flow.locals_given(frame.function, frame.objects))
            if found:
                return found
        return self.model.objects.eval(expr, frame.function)

    def _objects_given(self, callee: Function, call: cst.Call, frame: Frame, owner: "Interpreter"):
        """What ``call`` gives the parameters of ``callee``, a function of another module than the
        checked file (see Frame.objects): the objects that hold a training object or an instance
        of a project class, the only ones its code is asked about."""
        if owner is self._root or callee.node is None:
            return ()
        method = callee.cls is not None and isinstance(call.func, cst.Attribute)
        found = []
        for param, argument in parameters_given(call, callee.params, method):
            objects = frozenset(o for o in self.objects(argument, frame) if _holds_something(o))
            if objects:
                found.append((param, objects))
        return tuple(sorted(found, key=lambda item: item[0]))

    def _locals_of(self, fn: Function) -> FrozenSet[str]:
        names = {p for p in fn.params if p not in ("self", "cls")}
        for target, _ in fn.assigns:
            names.update(_paths(target))
        return frozenset(names)

    def _only_scheduler_steps(self, stmt, frame: Frame) -> bool:
        calls = self.calls(stmt.body)
        if any(self._local_callee(call, frame) is not None for call in calls):
            return False
        kinds = {event.kind for call in calls for event in self.extractor.call_events(call, frame)}
        return kinds == {EventKind.SCHEDULER_STEP}

    def _assigned_in(self, stmt) -> FrozenSet[str]:
        """Access paths the loop assigns (``i``, ``self.global_step``, ``stats`` for ``stats[k] = v``)."""
        names = self._loop_names.get(id(stmt))
        if names is None:
            found: Set[str] = set()
            if isinstance(stmt, cst.For):
                found |= _paths(stmt.target)
            for node in self.model.subtree(stmt.body):
                if isinstance(node, cst.AssignTarget):
                    found |= _paths(node.target)
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
                    found |= _paths(node.target)
                elif isinstance(node, (cst.For, cst.CompFor)):
                    found |= _paths(node.target)
            names = self._loop_names[id(stmt)] = frozenset(found)
        return names

    def _varies(self, key: str, assigned: FrozenSet[str]) -> bool:
        """Does the condition ``key`` read a path that ``assigned`` changes (or a part of one)?
        Asked for every assumption of every path at every back edge: answered once per pair."""
        varies = self._varying.get((key, assigned))
        if varies is None:
            varies = self._varying[(key, assigned)] = any(
                _overlaps(path, a) for path in self._cond_names.get(key, frozenset()) for a in assigned)
        return varies

    def _forget(self, state: PathState, assigned: FrozenSet[str]) -> PathState:
        if not state.assume:
            return state
        kept = frozenset(a for a in state.assume
                         if a[0] in self._flags or a[0] in self._grad_mode_tests or not self._varies(a[0], assigned))
        return state if kept == state.assume else replace(state, assume=kept)

    # ----------------------------------------------------------------- calls
    def _local_callee(self, call: cst.Call, frame: Frame, parse: bool = True) -> Optional[Function]:
        """The function a call runs, when its body can be read: a function or method of this
        module, a method of an object built from a known class, or a project function (only
        with ``parse``; otherwise the question is answered without parsing other modules)."""
        func = call.func
        if isinstance(func, cst.Name):
            scope = frame.function
            while scope is not None:
                if func.value in scope.nested:
                    return scope.nested[func.value]
                scope = scope.parent
            local = self.model.functions.get(func.value)
            if local is not None:
                return local
            if func.value in self.model.classes:
                # ``Runner(model, optimizer)``: constructing a class of the module runs its __init__
                return self.model.methods.get((func.value, "__init__"))
            referenced = self._referenced(func, frame)
            if referenced is not None or not parse:
                return referenced[0] if referenced is not None else None
            # ``loss_scaler(loss, optimizer)``: an object of a known class, called: its __call__
            return self._method_of_object(call, frame) or self._project_function(call)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            if frame.cls is not None:
                method = self.model.methods.get((frame.cls, func.attr.value))
                if method is None:
                    referenced = self._referenced(func, frame)
                    method = referenced[0] if referenced is not None else None
                # the object's own class first: a subclass's override of what the base calls
                # (``BaseTrainer.train`` running ``self._train_epoch()``)
                override = self._method_of_receiver(func, frame, parse)
                if override is not None:
                    return override
                if method is None and frame.cls in self.model.classes:
                    # ``self._save_model(...)`` inherited from a base class (a mixin of this
                    # module, or of another project module when parsing is allowed): read there,
                    # not an unknown call that could reach every attribute of ``self``
                    method = self.model.method_of_class(frame.cls, func.attr.value, here_only=not parse)
                return method
            return None
        return self._method_of_receiver(func, frame, parse) or self._method_of_object(call, frame) or (
            self._project_function(call) if parse else None)

    def _method_of_receiver(self, func: cst.BaseExpression, frame: Frame, parse: bool) -> Optional[Function]:
        """``name.method`` where the class of the object ``name`` holds is known (Frame.receivers):
        that class's method, inherited or its own."""
        if not (frame.receivers and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        known = dict(frame.receivers).get(func.value.value)
        return known[0].method_of_class(known[1], func.attr.value, here_only=not parse) if known is not None else None

    def _referenced(self, func: cst.BaseExpression, frame: Frame, depth: int = 0) -> Optional[Tuple[Function, Optional[cst.Call]]]:
        """A name or ``self`` attribute that holds a function of this module: ``step_fn = update``,
        ``self.update_fn = self.update`` (a bound method kept for later), or
        ``functools.partial(update, optimizer)``. Returns the function and, for a partial, the
        call that fixed some of its arguments. Only a single assignment counts: a name given
        different functions on different paths is left unknown."""
        if isinstance(func, cst.Name):
            handed = next(((fn, fixed) for param, fn, fixed in frame.functions if param == func.value), None)
            if handed is not None:
                return handed  # a function or partial the caller passed for this parameter
            scope = frame.function
            values = _names_assigned(self.model, scope).get(func.value, []) if scope else []
            if not values and (scope is None or func.value not in scope.params):
                values = _names_assigned(self.model, None).get(func.value, [])
        elif frame.cls is not None:
            assigned = self.model.assignments_in_class(frame.cls, dotted(func) or "")
            values = [v for _, v in assigned]
            if len(assigned) == 1 and assigned[0][0].name != "__init__":
                values = [v for v in values if not (isinstance(v, cst.Name) and v.value in assigned[0][0].params)]
        else:
            return None
        if len(values) != 1:
            return None
        value, fixed = values[0], None
        if isinstance(value, cst.Call) and self.model.imports.qualify(value.func) == "functools.partial" and value.args:
            value, fixed = value.args[0].value, value
        if isinstance(value, cst.Name):
            target = self.model.functions.get(value.value)
            if target is None and fixed is None and depth < _MAX_ALIASES:
                # ``step_ = step`` of a partial or function, or ``self.step = step`` of what each
                # construction of the class passes its ``__init__``
                return self._referenced(value, frame, depth + 1) if isinstance(func, cst.Name) \
                    else self._passed_to_init(frame.cls, value.value, depth + 1)
        elif isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self" and frame.cls:
            target = self.model.methods.get((frame.cls, value.attr.value))
        else:
            target = None
        return (target, fixed) if target is not None else None

    def _passed_to_init(self, cls: Optional[str], param: str, depth: int) -> Optional[Tuple[Function, Optional[cst.Call]]]:
        """The one function or partial that every construction of ``cls`` in this module passes
        for its ``__init__``'s parameter ``param``."""
        init = self.model.methods.get((cls, "__init__")) if cls else None
        if init is None or param not in init.params:
            return None
        found = set()
        for site in self.model.sites().sites:
            if dotted(site.call.func) != cls:
                continue
            value = dict(parameters_given(site.call, init.params, True)).get(param)
            referenced = self._referenced(value, Frame(site.function), depth) if isinstance(value, cst.Name) else None
            if referenced is None:
                return None
            found.add((referenced[0], id(referenced[1]), referenced[1]))
        if len(found) != 1:
            return None
        target, _, fixed = found.pop()
        return target, fixed

    def _arguments(self, call: cst.Call, frame: Frame) -> cst.Call:
        """The call as the callee receives it: a partial's fixed arguments come first (its
        keywords are overridden by the call's own)."""
        referenced = self._referenced(call.func, frame) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if referenced is None or referenced[1] is None:
            return call
        fixed = referenced[1]
        given = {a.keyword.value for a in call.args if a.keyword is not None}
        positional = [a for a in fixed.args[1:] if a.keyword is None] + [a for a in call.args if a.keyword is None]
        keywords = [a for a in fixed.args[1:] if a.keyword is not None and a.keyword.value not in given]
        keywords += [a for a in call.args if a.keyword is not None]
        return call.with_changes(func=fixed.args[0].value, args=positional + keywords)

    def _project_function(self, call: cst.Call) -> Optional[Function]:
        """A function of another module of the user's project that this call names."""
        if self.project is None:
            return None
        name = dotted(call.func)
        if not name or not self.project.may_train(self.model, name):
            return None  # its module has no training text: nothing there to follow, never parsed
        found = self.project.function(self.model, name)
        if found is None:
            # ``Checkpointer(cfg, model, optimizer, scheduler)``: a class of another module, whose
            # construction runs its __init__ (inherited or its own), read like any function there
            made = self.project.class_of(self.model, name)
            found = made[0].method_of_class(made[1], "__init__") if made is not None else None
        return found

    def _may_train_elsewhere(self, call: cst.Call) -> bool:
        """A call into a project function that may produce an event: its module's text mentions
        training (checked without parsing), and then its summary, computed once, has an event."""
        known = self._trains_elsewhere.get(id(call))
        if known is not None:
            return known
        name = dotted(call.func) if self.project is not None else None
        if not name or not self.project.may_train(self.model, name):
            known = False
        else:
            callee = self.project.function(self.model, name)
            # a class, a re-export: not read, so it may
            known = callee is None or bool(self._foreign_summary(callee)) or self._owner(callee).calls_parameter(callee)
        self._trains_elsewhere[id(call)] = known
        return known

    def _owner(self, fn: Function) -> "Interpreter":
        """The interpreter of the module that defines ``fn``."""
        if fn.owner is None or fn.owner is self.model:
            return self
        root = self._root
        if fn.owner is root.model:
            return root
        child = root._children.get(id(fn.owner))
        if child is None:
            child = Interpreter(fn.owner, Extractor(fn.owner, caller_roles=root.model.roles, origin=fn.owner, project=root.project),
                                fn.owner.sites(), project=root.project, root=root)
            root._children[id(fn.owner)] = child
        return child

    def _foreign_summary(self, fn: Function):
        return self._owner(fn).evidence.summary(fn)

    def _inline(self, callee: Function, call: cst.Call, states: List[PathState], frame: Frame) -> List[PathState]:
        owner = self._owner(callee)
        if callee.hook or not owner.worth_inlining(callee):
            return states  # (a hook the object's class does not override: nothing runs)
        if owner is not self and not owner.calls_parameter(callee) and not owner.evidence.summary(callee) \
                and not self._hands_training_objects(call, frame):
            # Another module's function whose summary (computed once, through what it calls, with
            # no caller's objects) has no event and that is given no training object: its text
            # mentioned training, its code does nothing to these objects.
            return states
        if callee in self._stack or len(self._stack) > MAX_CALL_DEPTH:
            if callee not in self._stack:
                self.budget.calls_too_deep()  # a chain of helpers longer than the depth followed
            return self._feed(states, self.extractor.unknown(call))  # not followed: it may do anything
        self.reached.add(id(callee.node))
        if owner is not self and owner._sync_managed:
            # code of a module that sets DDP's sync itself (see _manages_sync), run from here
            states = self._feed(states, owner.extractor._event(owner.model.module, kind=EventKind.SYNC_MANAGED))
        entered = call  # the statement's own node (a partial's call is rebuilt below)
        call = self._arguments(call, frame)
        subst = self._bind(callee, call, frame)
        varying = None
        if frame.varying is not None:
            # The callee's own locals and parameters change from call to call.
            varying = frame.varying | self._locals_of(callee)
        foreign = owner is not self
        conditions = self._bind_conditions(callee, call, frame)
        # A parameter the caller itself got from nobody is bound (its path is the caller's, so the
        # statements of both name one object) but stays without a role in the callee too.
        unbound = frozenset(_head(actual) for _, actual in subst if self.extractor.unbound_parameter(actual, frame))
        # the losses and scalars the caller passes: ``backward_step(loss / k)`` backpropagates a divided loss
        given, instances = arguments_given(call, callee, frame.function, self.model, frame.given, frame.instances)
        callee_frame = Frame(callee, subst, depth=frame.depth + 1, cls=callee.cls if foreign else callee.cls or frame.cls,
                             accum=frame.accum, varying=varying, batches=frame.batches, conditions=conditions,
                             unbound=unbound, no_grad=frame.no_grad or runs_without_grad(callee), given=given,
                             instances=instances, caller_heads=self._caller_heads(subst, frame, owner),
                             objects=self._objects_given(callee, call, frame, owner),
                             receivers=self._receivers(callee, call, frame),
                             functions=self._functions_given(callee, call, frame) if owner is self else ())
        key = (id(callee.node), subst, frame.accum, callee_frame.cls, varying, conditions, unbound, callee_frame.no_grad,
               given, instances, callee_frame.caller_heads, callee_frame.objects, callee_frame.receivers,
               tuple((param, id(fn.node), id(fixed)) for param, fn, fixed in callee_frame.functions), tuple(states))
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        self._stack.append(callee)
        self._entered_by.append(entered)
        try:
            outcome = owner.block(callee.body, states, callee_frame)
        finally:
            self._stack.pop()
            self._entered_by.pop()
        result = self.budget.paths(outcome.normal + outcome.returns)
        self._memo[key] = result
        return result

    def _functions_given(self, callee: Function, call: cst.Call, frame: Frame) -> Tuple[Tuple[str, Function, Optional[cst.Call]], ...]:
        """The callee's parameters that this call gives a function or partial of this module (by a
        name the caller's frame resolves to one, see _referenced)."""
        found = []
        for param, value in parameters_given(call, callee.params, callee.cls is not None and isinstance(call.func, cst.Attribute)):
            if isinstance(value, cst.Name):
                referenced = self._referenced(value, frame)
                if referenced is not None:
                    found.append((param, referenced[0], referenced[1]))
        return tuple(found)

    def _caller_heads(self, subst: Tuple[Tuple[str, str], ...], frame: Frame, owner: "Interpreter") -> FrozenSet[str]:
        """Which substituted paths are the checked file's (see Frame.caller_heads): all of them
        when the checked file calls into another module; from inside another module, those the
        calling function itself had from the checked file."""
        if owner is self._root:
            return frozenset()  # the checked file's own function: every path is its own
        heads = frozenset(_head(actual) for _, actual in subst)
        return heads if self is self._root else heads & frame.caller_heads

    def _hands_training_objects(self, call: cst.Call, frame: Frame) -> bool:
        """Does the call give its callee an optimizer, scheduler, scaler, loader or sampler (whose
        methods the callee's summary, computed without them, could not know)?"""
        for argument in call.args:
            path = dotted(argument.value)
            role = self.extractor.role(path, frame=frame) if path else None
            if role is not None and role.kind in _HANDED_ROLES:
                return True
        return False

    def _bind_conditions(self, callee: Function, call: cst.Call, frame: Frame) -> Tuple[Tuple[str, str, bool], ...]:
        """Parameters given a condition (``update_grad=(i + 1) % k == 0``): inside the callee,
        ``if update_grad:`` tests the caller's condition, and the caller's later ``if`` on the same
        condition takes the same branch on the same path."""
        # Literal True/False/None arguments and defaults (``run_epoch(..., train=False)``: ``if
        # train:`` is not taken; ``opt=None``: ``if opt is not None:`` is not), only for the
        # parameters the callee tests: each distinct set of them is another summary of the callee,
        # which the rest would multiply for nothing.
        tested = _tested_names(callee)
        found = [(param, _CONSTANT_NONE, False) if literal == NONE_ARGUMENT else (param, _CONSTANT, literal)
                 for param, literal in literal_arguments(call, callee, callee.cls is not None).items() if param in tested]
        tested_here = self._repeated_conditions()
        for param, value in parameters_given(call, callee.params, callee.cls is not None):
            if isinstance(value, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)):
                key, polarity = self._cond_key(value)
                self._root._passed_conditions.add(key)
                found.append((param, key, polarity))
            elif isinstance(value, (cst.Name, cst.Attribute)) and param in tested and param not in (p for p, _, _ in found):
                # ``step(grad_scaler=self._grad_scaler)``: the callee's ``if grad_scaler is not
                # None:`` is the caller's ``if self._grad_scaler is not None:`` (only bound where the
                # caller tests it too: each binding is another summary of the callee)
                key, polarity = self._cond_key(value)
                if key in tested_here:
                    self._root._passed_conditions.add(key)
                    found.append((param, key, polarity))
        return tuple(found)

    def _bind(self, callee: Function, call: cst.Call, frame: Frame) -> Tuple[Tuple[str, str], ...]:
        params = list(callee.params)
        if callee.cls is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        bound: Dict[str, str] = {}
        func = call.func
        if callee.cls is not None and isinstance(func, cst.Attribute):
            if isinstance(func.value, cst.Name) and func.value.value == "self":
                # self.method(): the object is the same, and so is what its attributes stand for.
                bound.update((k, v) for k, v in frame.subst if k == "self" or k.startswith("self."))
            else:
                bound.update(self._constructed(callee, func.value, frame))
        elif callee.cls is not None and callee.name == "__call__" and isinstance(func, cst.Name):
            bound.update(self._constructed(callee, func, frame))  # ``scaler(loss, optimizer)``
        positional = [a for a in call.args if a.keyword is None and not a.star]
        given = list(zip(params, [a.value for a in positional]))
        given += [(a.keyword.value, a.value) for a in call.args if a.keyword is not None and a.keyword.value in params]
        for param, value in given:
            path = frame.resolve_keyed(value)
            if path is not None:
                bound[param] = path
            if isinstance(value, cst.Name):
                # ``loop_body(self, batch)``: what the caller's ``self.model`` stands for, the
                # callee's ``self.model`` does too (as for ``self.method()`` above)
                prefix = value.value + "."
                bound.update((param + "." + k[len(prefix):], v) for k, v in frame.subst if k.startswith(prefix))
        return tuple(sorted(bound.items()))


_MAX_ALIASES = 3  # names followed from a call back to the function or partial they hold


def _same_method(found: Optional[Function], method: Function) -> bool:
    """The same method of the same class (not by identity: its module may have been read again
    since, when the modules kept were evicted)."""
    return found is not None and (found is method or (
        found.cls == method.cls and found.name == method.name and found.node.deep_equals(method.node)))


def _given_to(function: Function, args: Sequence[cst.Arg], resolve) -> Dict[str, str]:
    """What a call's arguments (``args``) give ``function``'s parameters, as paths (``resolve``
    names each argument's object; unnamed ones are left out)."""
    params = [p for p in function.params if p not in ("self", "cls")]
    given: Dict[str, str] = {}
    for param, arg in zip(params, [a for a in args if a.keyword is None and not a.star]):
        actual = resolve(arg.value)
        if actual is not None:
            given[param] = actual
    for arg in args:
        if arg.keyword is not None and arg.keyword.value in params:
            actual = resolve(arg.value)
            if actual is not None:
                given[arg.keyword.value] = actual
    return given


def _super_init(init: Function) -> Optional[Tuple[Function, Sequence[cst.Arg]]]:
    """The base class constructor a constructor runs with ``super().__init__(...)`` (or
    ``Base.__init__(self, ...)``), and the arguments it gives it (``self`` left out)."""
    owner = init.owner
    if owner is None or init.cls not in owner.classes:
        return None
    bases = [dotted(b.value) for b in owner.classes[init.cls].bases if b.keyword is None]
    for node in walk(init.node):
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "__init__"):
            continue
        holder = node.func.value
        if isinstance(holder, cst.Call) and isinstance(holder.func, cst.Name) and holder.func.value == "super" and bases:
            base, args = bases[0], node.args
        elif dotted(holder) in bases and node.args and dotted(node.args[0].value) == "self":
            base, args = dotted(holder), node.args[1:]
        else:
            continue
        found = owner.method_of_class(base, "__init__") if base else None
        return (found, args) if found is not None else None
    return None


def _holds_something(obj) -> bool:
    """A training object, an instance of a project class, or a container holding one."""
    return obj.role is not None or obj.cls is not None or any(
        o.role is not None or o.cls is not None for held in obj.fields.values() for o in held)


def _head(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def _pass_counter(stmt) -> Optional[str]:
    """``i`` of ``for i, x in enumerate(...)`` (no start) or ``for i in range(n)``: 0 on the first
    pass only."""
    if not isinstance(stmt, cst.For) or not isinstance(stmt.iter, cst.Call):
        return None
    target = stmt.target
    called = _last_name(stmt.iter.func)
    if called == "enumerate" and isinstance(target, cst.Tuple) and target.elements and len(stmt.iter.args) == 1:
        target = target.elements[0].value
    elif called != "range" or len(stmt.iter.args) != 1:
        return None
    return target.value if isinstance(target, cst.Name) else None


def _zero_test(test: cst.BaseExpression) -> Optional[Tuple[str, bool]]:
    """(``i``, whether the test holds when ``i`` is 0) for ``i == 0``, ``i != 0`` and their
    negations, else None."""
    holds = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, holds = test.expression, not holds
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        target = test.comparisons[0]
        if isinstance(target.operator, (cst.Equal, cst.NotEqual)) and isinstance(target.comparator, cst.Integer) \
                and target.comparator.value == "0":
            return test.left.value, holds == isinstance(target.operator, cst.Equal)
    return None


def _taken_on_this_pass(test: cst.BaseExpression, frame: Frame) -> Optional[bool]:
    """Is ``if i == 0:`` (``i != 0``, ``not i == 0``) taken, where the frame knows whether ``i``,
    a pass counter, is 0? None for other tests."""
    found = _zero_test(test)
    if found is None or found[0] not in frame.first_pass | frame.later_pass:
        return None
    counter, holds_at_zero = found
    return holds_at_zero if counter in frame.first_pass else not holds_at_zero


def _requires_grad_of(test: cst.BaseExpression) -> Optional[str]:
    """``loss`` for ``if loss.requires_grad:`` (or its negation), else None."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad" and isinstance(test.value, cst.Name):
        return test.value.value
    return None


def _tests_grad_presence(test: cst.BaseExpression) -> bool:
    """``p.grad is not None`` (gradients exist: the branch a training path takes)."""
    return (
        isinstance(test, cst.Comparison) and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot) and _is_grad(test.left)
        and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None"
    )


def _pass_count(module: cst.Module, call: cst.Call) -> str:
    """How many passes ``range(...)`` makes, as the code would say it: ``range(k)`` and
    ``range(1, k + 1)`` make k, ``range(a, b)`` makes b - a (a step argument: left as is)."""
    code = lambda node: " ".join(module.code_for_node(node).split())  # noqa: E731
    args = [a.value for a in call.args]
    if len(args) == 1:
        return code(args[0])
    if len(args) == 2:
        start, stop = args
        if isinstance(start, cst.Integer) and start.value == "0":
            return code(stop)
        if isinstance(stop, cst.BinaryOperation) and isinstance(stop.operator, cst.Add) and code(stop.right) == code(start):
            return code(stop.left)  # range(1, k + 1)
        return f"{code(stop)} - {code(start)}"
    return "the number of micro-steps"


def _range_bound(loop: cst.For) -> Optional[Tuple[str, str]]:
    """(v, n) for ``for v in range(n)`` / ``range(0, n)``, as source text without spaces."""
    if not isinstance(loop.target, cst.Name) or not isinstance(loop.iter, cst.Call) or _last_name(loop.iter.func) != "range":
        return None
    args = loop.iter.args
    if len(args) == 2 and isinstance(args[0].value, cst.Integer) and args[0].value.value == "0":
        args = args[1:]
    if len(args) != 1 or args[0].keyword is not None:
        return None
    bound = cst.Module([]).code_for_node(args[0].value)
    return loop.target.value, "".join(bound.split())


def _strip(states: List[PathState], boundaries: FrozenSet[int]) -> List[PathState]:
    return [replace(s, unfired=s.unfired - boundaries) if s.unfired & boundaries else s for s in states]


def _names_assigned(model: ModuleModel, fn: Optional[Function]) -> Dict[str, List[cst.BaseExpression]]:
    """Plain name -> the values assigned to it in ``fn`` (or at module level), in order: indexed
    once per scope, since every call through a name asks."""

    def index() -> Dict[str, List[cst.BaseExpression]]:
        found: Dict[str, List[cst.BaseExpression]] = {}
        for target, value in (fn.assigns if fn is not None else model.module_assigns):
            if type(target) is cst.Name:  # exact types: see names.dotted
                found.setdefault(target.value, []).append(value)
        return found

    return model.memo(f"names_assigned.{id(fn.node) if fn is not None else 'module'}", index)


def _merge(a: Outcome, b: Outcome, normal: Optional[List[PathState]]) -> Outcome:
    return Outcome(
        normal=normal if normal is not None else a.normal + b.normal,
        breaks=a.breaks + b.breaks,
        continues=a.continues + b.continues,
        returns=a.returns + b.returns,
    )


def _paths(node: cst.CSTNode) -> Set[str]:
    """The maximal name/attribute chains in ``node`` (``self.step`` rather than ``self``, ``step``);
    a subscript target counts as its container."""
    found: Set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.Name, cst.Attribute)):
            path = dotted(current)
            if path is not None:
                found.add(path)
                continue
        stack.extend(children(current))
    return found


def _overlaps(path: str, other: str) -> bool:
    return path == other or path.startswith(other + ".") or other.startswith(path + ".")


def _names(node: cst.CSTNode) -> Iterable[str]:
    for child in walk(node):
        if isinstance(child, cst.Name):
            yield child.value


def _last_name(node: cst.BaseExpression) -> str:
    return (dotted(node) or "").rsplit(".", 1)[-1]


def _always_true(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "True") or (isinstance(test, cst.Integer) and test.value != "0")


def _clears_grad(assign: cst.Assign) -> bool:
    """``p.grad = None``: the manual form of zero_grad(set_to_none=True)."""
    return (
        isinstance(assign.value, cst.Name)
        and assign.value.value == "None"
        and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in assign.targets)
    )


def _holding(assume: FrozenSet[Tuple[str, bool]], facts) -> FrozenSet[Tuple[str, bool]]:
    """The path's assumptions once ``facts`` hold here: a condition decided again (``if step ==
    0:`` on a later pass, a caller's constant) holds its new value, never both (with both, which
    one a later test read would depend on the set's order, so on the hash seed)."""
    facts = frozenset(facts)
    return frozenset(a for a in assume if (a[0], not a[1]) not in facts) | facts


def _contradicts(assume: FrozenSet[Tuple[str, bool]], facts: Tuple[Tuple[str, bool], ...]) -> bool:
    """Does the path assume the opposite of one of these conditions?"""
    return any((key, not polarity) in assume for key, polarity in facts)


def _negated(test: cst.BaseExpression, polarity: bool) -> bool:
    """Does a boundary test hold on the micro-steps (``(i + 1) % k != 0``, ``not boundary``)?"""
    return not polarity or any(
        isinstance(c.operator, cst.NotEqual) for node in walk(test) if isinstance(node, cst.Comparison) for c in node.comparisons
    )


def _grad_edits_and_loops(model: ModuleModel) -> Tuple[Set[int], Set[int]]:
    """The functions (ids of their nodes) whose code sets or rescales gradients by hand, and those
    with a for loop (a pass over a loader, when loaders matter)."""
    edits: Set[int] = set()
    loops: Set[int] = set()
    grads = ".grad" in model.source
    for fn in model.all_functions:
        for node in model.subtree(fn.node):
            kind = type(node)  # exact types: see names.dotted
            if grads and kind in _GRAD_EDIT_TYPES and ((kind is cst.Assign and _clears_grad(node)) or _rescales_grad(node)):
                edits.add(id(fn.node))
            elif kind is cst.For:
                loops.add(id(fn.node))
            if id(fn.node) in edits and id(fn.node) in loops:
                break
    return edits, loops


def _partial_clears(model: ModuleModel) -> Set[int]:
    """``p.grad = None`` under a condition (``if "prototypes" in name:``): some gradients dropped
    on purpose (a module frozen for a while, non-finite ones skipped), not a zero_grad; it is
    handled as setting gradients by hand."""
    found: Set[int] = set()
    if ".grad" not in model.source:
        return found
    preorder = model.preorder
    open_ifs: List[int] = []  # where the enclosing ``if`` statements' subtrees end
    for at, node in enumerate(preorder.nodes):
        while open_ifs and open_ifs[-1] <= at:
            open_ifs.pop()
        if isinstance(node, cst.If):
            open_ifs.append(preorder.ends[at])
        elif open_ifs and isinstance(node, cst.Assign) and _clears_grad(node):
            found.add(id(node))
    return found


def _flag_assigned(assign: cst.Assign) -> Optional[str]:
    target = assign.targets[0].target if len(assign.targets) == 1 else None
    return target.value if isinstance(target, cst.Name) else None


# The condition keys of a parameter the caller passed a literal True or False for, and None.
_CONSTANT = "<constant>"
_CONSTANT_NONE = "<None>"


def _tested_names(fn: Function) -> FrozenSet[str]:
    """The names ``fn``'s own ``if``/``while``/conditional expressions test as a whole: ``if train:``,
    ``if not train:``, ``if opt is not None:``."""
    def find() -> FrozenSet[str]:
        names = set()
        for node in fn.owner.preorder.code(fn.node) if fn.owner is not None else ():
            test = node.test if type(node) in (cst.If, cst.While, cst.IfExp) else None
            while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test = test.expression
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
                test = test.left
            if isinstance(test, cst.Name):
                names.add(test.value)
        return frozenset(names)
    return fn.owner.memo(f"tested names {id(fn.node)}", find) if fn.owner is not None else frozenset()


def _compares_with_none(test: cst.BaseExpression) -> bool:
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    return isinstance(test, cst.Comparison) and any(
        isinstance(c.comparator, cst.Name) and c.comparator.value == "None" for c in test.comparisons)


def _counter_boundary(stmt: cst.If, model: ModuleModel) -> Optional[str]:
    """``k`` of ``if accumulated >= k: ...; accumulated = 0`` (also ``==``, ``>``, and or-ed with
    another condition such as the epoch's end): a counter the loop adds to, reset where the
    branch steps, is an accumulation boundary as much as ``(i + 1) % k == 0`` is."""
    reset = {dotted(t.target) for line in block(stmt.body) if isinstance(line, cst.SimpleStatementLine)
             for small in line.body if isinstance(small, cst.Assign) and isinstance(small.value, cst.Integer)
             and small.value.value == "0" for t in small.targets}
    reset.discard(None)
    if not reset:
        return None
    for node in walk(stmt.test):
        if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
            continue
        target = node.comparisons[0]
        if isinstance(target.operator, (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal)) and dotted(node.left) in reset:
            return " ".join(model.module.code_for_node(target.comparator).split())
        if isinstance(target.operator, (cst.LessThanEqual, cst.LessThan)) and dotted(target.comparator) in reset:
            return " ".join(model.module.code_for_node(node.left).split())
    return None


def _literal_flags(model: ModuleModel) -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """Local names only ever assigned True or False or another name (a loop's state machine,
    ``should_update``, ``zero_grad_next_step = perform_update_step``): a path knows their value
    exactly, also across passes; and the names they copy, whose tested value a path must keep to
    hand it on."""
    seen: Dict[str, bool] = {}
    literal: Set[str] = set()  # given True or False somewhere (``model_ = model`` is no flag)
    copies: List[Tuple[str, str]] = []  # (flag, the name it is given)
    for target, value in model.module_assigns + [a for fn in model.all_functions for a in fn.assigns]:
        if isinstance(target, cst.Name):
            given = literal_bool(value) is not None
            seen[target.value] = seen.get(target.value, True) and (given or type(value) is cst.Name)
            if given:
                literal.add(target.value)
            elif type(value) is cst.Name:
                copies.append((target.value, value.value))
    for fn in model.all_functions:
        for aug in fn.aug_assigns:
            if isinstance(aug.target, cst.Name):
                seen[aug.target.value] = False
    flags = frozenset(name for name, only in seen.items() if only and name in literal)
    return flags, frozenset(source for flag, source in copies if flag in flags)


def _rescales_grad(small: cst.BaseSmallStatement) -> bool:
    """``p.grad = expr``, ``p.grad /= k``, ``p.grad.div_(k)``, ``p.grad.data.mul_(s)``."""
    kind = type(small)  # exact types: see names.dotted
    if kind is cst.Assign:
        return any(_is_grad(t.target) for t in small.targets)  # includes a partial ``p.grad = None``
    if kind is cst.AugAssign:
        return _is_grad(small.target)
    if kind is cst.Expr and type(small.value) is cst.Call:
        func = small.value.func
        return isinstance(func, cst.Attribute) and func.attr.value in _GRAD_SCALERS and _is_grad(func.value)
    return False


_GRAD_SCALERS = frozenset({"div_", "mul_", "copy_", "set_"})


def _is_grad(node: cst.BaseExpression) -> bool:
    while type(node) is cst.Attribute and node.attr.value == "data":
        node = node.value
    return type(node) is cst.Attribute and node.attr.value == "grad"


def _manages_sync(model: ModuleModel) -> bool:
    """Code that sets DDP's sync flag itself (nanoGPT's ``require_backward_grad_sync``, a no_sync()
    context chosen by an expression, ``no_sync`` passed around) is trusted to handle accumulation:
    only a ``with model.no_sync():`` written out is modelled, and TL203 stays quiet otherwise."""
    source = model.source
    if "require_backward_grad_sync" not in source and "no_sync" not in source:
        return False
    with_items = set()
    for node in model.preorder.nodes:
        if isinstance(node, cst.With):
            with_items.update(id(item.item) for item in node.items)
    for node in model.preorder.nodes:
        if isinstance(node, cst.Attribute) and node.attr.value == "require_backward_grad_sync":
            return True
        if isinstance(node, cst.Attribute) and node.attr.value == "no_sync":
            continue
        if isinstance(node, cst.Call) and _last_name(node.func) == "no_sync" and id(node) not in with_items:
            return True
    return False


def _parameter(params: Sequence[str], where: "library.Argument") -> Optional[str]:
    """The parameter a library description points at (by name, else by position)."""
    if where.keyword is not None and where.keyword in params:
        return where.keyword
    return params[where.position] if where.position is not None and where.position < len(params) else None


def _exhaustion_handlers(stmt, calls) -> List[cst.ExceptHandler]:
    """Handlers of a ``try`` that draws the next batch (``next(it)``, ``it.next()``) and catches
    StopIteration (or anything): the data ran out."""
    if not any(
        (isinstance(call.func, cst.Name) and call.func.value == "next")
        or (isinstance(call.func, cst.Attribute) and call.func.attr.value in ("next", "__next__"))
        for call in calls(stmt.body)
    ):
        return []
    return [h for h in stmt.handlers if h.type is None or "StopIteration" in (dotted(h.type) or "")
            or (isinstance(h.type, cst.Name) and h.type.value in ("Exception", "BaseException"))]


# Calls that end the process: a path through one goes no further (``exit("unknown model")``).
_EXITS = frozenset({"exit", "quit", "sys.exit", "os._exit"})


def _ends_the_program(small: cst.BaseSmallStatement, model: ModuleModel) -> bool:
    """``assert False`` (a branch the program declares impossible) or a call of ``sys.exit``."""
    if isinstance(small, cst.Assert):
        return literal_bool(small.test) is False or (isinstance(small.test, cst.Integer) and small.test.value == "0")
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        name = model.imports.qualify(small.value.func) or dotted(small.value.func)
        return name in _EXITS and name not in model.functions
    return False
