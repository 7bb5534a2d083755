"""Distributed scripts: TL302 loader without sampler, TL303 save on every rank, TL304 wrapped state dict."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Set

import libcst as cst

from .. import library
from ..calls import kwarg, literal_number, parameters_given
from ..local_values import LocalValues
from ..values import UNKNOWN
from ..names import dotted
from ..roles import LOADER, WRAPPED
from ..walk import walk
from . import Context, Match
from .loops import loop_trains

if TYPE_CHECKING:
    from ..objects import Obj

_RANK_CHECK = re.compile(
    # ``world_size``: ``if get_world_size() != 1: raise`` before it leaves a single process.
    r"rank|main_process|master|is_main|is_master|process_index|local_process_index|is_local_main|is_rank_zero|primary"
    r"|global_zero|world_size|process_zero|master_ordinal",
    re.IGNORECASE,
)
_MULTI_PROCESS = re.compile(r"distributed|ddp|fsdp|multiprocessing|multi_gpu", re.IGNORECASE)
_COUNTER = re.compile(r"epoch|step|iter|batch|count|idx|index|len|size|loss", re.IGNORECASE)
_DISTRIBUTED_CALLS = {"init_process_group", "DistributedDataParallel", "FullyShardedDataParallel", "fully_shard", "DDP", "FSDP"}


def _is_distributed(ctx: Context) -> bool:
    """The script initialises a process group or wraps a model in DDP/FSDP (calls, not text), on a
    path the program can take: not under ``if distributed:`` in a function every caller gives
    ``distributed=False``."""
    return any(not _never_taken(ctx, site) for site in ctx.sites.named(*_DISTRIBUTED_CALLS))


def _never_taken(ctx: Context, site) -> bool:
    """A condition of the site is false as the program is written: ``if distributed:`` in a
    function every caller passes ``distributed=False`` (local_values.py). Not a command-line
    default: ``--local_rank`` defaults to -1 and every process a launcher starts gets its own."""
    if site.function is None or not site.tests:
        return False
    values = LocalValues(ctx.model, site.function, command_line=False)
    return any(_falsy(values.value(test, site.statement)) for test in site.tests)


def _falsy(value) -> bool:
    return value is not UNKNOWN and not value


def _wrapper_of(ctx: Context, model: cst.BaseExpression, save) -> Optional[str]:
    """"ddp", "dp" or "compile" for a model expression that is wrapped on a path to ``save``: a
    wrap under a condition (``if args.distributed:``) counts for a save that may run under it, not
    for one whose own conditions exclude it (``else:``, ``if not args.distributed:``)."""
    wraps = _wraps(ctx)
    fn = save.function
    path = dotted(model)
    assigned = ctx.model.values_in_scope(path, fn) if path else []
    values = [v for v in assigned if isinstance(v, cst.Call)]
    if assigned:
        # a path assigned here: the wrappers among its own values (``raw_model = model`` before
        # ``model = DDP(model)`` is the plain model, which objects, blind to order, would blur;
        # so is ``ema = deepcopy(model)`` before it)
        made = (o for v in values for o in _made_by(ctx, v, fn))
    else:
        # an entry or an attribute set elsewhere (a dict entry replaced by its wrapper, a model
        # handed to a trainer): the objects it can be
        made = ctx.model.objects.eval(model, fn)
    wrapped = [(o.node, o.role.wrapper) for o in made
               if o.role is not None and o.role.kind == WRAPPED and o.role.wrapper in ("ddp", "dp")]
    # torch.compile makes no object of its own kind: it is read off the values assigned
    wrapped += [(v, "compile") for v in values if (dotted(v.func) or "").rsplit(".", 1)[-1] == "compile"
                and (ctx.qualify(v.func).startswith("torch") or dotted(v.func) == "torch.compile")]
    for value, kind in wrapped:
        site = wraps.get(id(value))
        if site is not None and site.tests and _contradicts(ctx, save.tests, site.tests, _passed_names(ctx, site, save)):
            continue  # the save runs only where the model was not wrapped (the else of ``if distributed:``)
        if site is not None and site.tests and _never_taken(ctx, site):
            continue  # ``if distributed:`` where every call passes distributed=False
        return kind
    return None


def _made_by(ctx: Context, value: cst.Call, fn) -> Iterable:
    """The objects ``value`` makes; for a copy of a name of this scope (``deepcopy(model)``), copies
    of what the name's assignments before it made."""
    copied = _unmoved_call(value)
    qualified = ctx.qualify(copied.func) if isinstance(copied.func, (cst.Name, cst.Attribute)) else None
    if not library.current().copies(qualified, dotted(copied.func) or "") or len(copied.args) != 1 \
            or not isinstance(copied.args[0].value, cst.Name):
        return ctx.model.objects.eval(value, fn)
    name = copied.args[0].value.value
    preorder = ctx.model.preorder
    at = preorder.index(copied) or 0
    before = [v for t, v in (fn.assigns if fn is not None else ctx.model.module_assigns)
              if isinstance(t, cst.Name) and t.value == name and (preorder.index(t) or 0) < at]
    if not before:
        return ctx.model.objects.eval(value, fn)
    return [o for v in before if isinstance(v, cst.Call) for o in _made_by(ctx, v, fn)]


def _unmoved_call(value: cst.Call) -> cst.Call:
    """``deepcopy(model)`` of ``deepcopy(model).to(device)``."""
    while isinstance(value.func, cst.Attribute) and value.func.attr.value in ("to", "cuda", "cpu", "eval", "train", "float", "half") \
            and isinstance(value.func.value, cst.Call):
        value = value.func.value
    return value


def _contradicts(ctx: Context, tests, others, renamed: Optional[Dict[str, str]] = None) -> bool:
    """Does one of ``tests`` deny one of ``others`` (``not x`` against ``x``, either way round)?
    ``renamed``: what the names of ``others`` are called where ``tests`` run (a callee's
    parameter, the caller's argument)."""
    def plain(test, names=None):
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        code = ctx.code(test.expression) if negated else ctx.code(test)
        head, dot, rest = code.partition(".")
        return ((names[head] + dot + rest) if names and head in names else code), negated
    mine = {plain(t) for t in tests}
    return any((code, not negated) in mine for code, negated in (plain(t, renamed) for t in others))


def _passed_names(ctx: Context, wrap, save) -> Dict[str, str]:
    """The wrap's function's parameters named as the save's function passes them
    (``wrap_model(net, args)`` called where the save runs: ``model`` -> ``net``)."""
    callee = wrap.function
    if callee is None or callee is save.function:
        return {}
    for site in ctx.sites.sites:
        if site.function is save.function and ctx.sites.local_callee(site) is callee:
            method = callee.cls is not None and isinstance(site.call.func, cst.Attribute)
            return {param: code for param, value in parameters_given(site.call, callee.params, method)
                    for code in [dotted(value)] if code}
    return {}


def _wraps(ctx: Context):
    return {id(site.call): site for site in ctx.sites.named("DistributedDataParallel", "DDP", "DataParallel", "compile")}


def _rank_check(ctx: Context, test: cst.BaseExpression, fn=None) -> bool:
    """``rank == 0``, ``is_main_process``, ``self.gpu_id == 0``, ``local_rank in (-1, 0)``, a
    function of this module that returns such a test, a callable the caller passes in (its
    answer is the caller's, per rank), or a single-process path (``not args.distributed``)..."""
    if _tests_rank(ctx, test, 0):
        return True
    if fn is not None and any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in fn.params
                              for n in walk(test)):
        return True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and _MULTI_PROCESS.search(ctx.code(test.expression)):
        return True
    for node in walk(test):
        # A flag that folded a rank check in: ``args.save_logs = args.logs and is_master(args)``.
        path = dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if path and any(_tests_rank(ctx, value, 0) for value in ctx.model.values_assigned(path)):
            return True
    for node in walk(test):
        if isinstance(node, cst.Comparison) and isinstance(node.left, (cst.Name, cst.Attribute)):
            name = (dotted(node.left) or "").rsplit(".", 1)[-1].lower()
            if _COUNTER.search(name):
                continue
            for comparison in node.comparisons:
                if isinstance(comparison.operator, cst.Equal) and literal_number(comparison.comparator) == 0:
                    return True
    return False


def _tests_rank(ctx: Context, expr: cst.BaseExpression, depth: int) -> bool:
    """Does the expression test the rank: in its text, or through what a function of this module
    it calls returns (``is_primary(args)`` with ``return args.rank == 0``)?"""
    if _RANK_CHECK.search(ctx.code(expr)):
        return True
    if depth >= 2:
        return False
    for node in walk(expr):
        site = ctx.sites.of_call(node) if isinstance(node, cst.Call) else None
        callee = ctx.sites.local_callee(site) if site is not None else None
        if callee is not None and any(_tests_rank(ctx, value, depth + 1) for value in callee.returns):
            return True
    return False


def _guarded(ctx: Context, site, depth: int = 0) -> bool:
    """Under a rank-0 check, here or at every local call site of the enclosing function (call
    sites in except handlers do not count: exception paths are not training paths), or in a
    function decorated to run on one rank."""
    if id(site.call) in ctx.sites.exceptional:
        return True
    if any(_rank_check(ctx, test, site.function) for test in site.tests):
        return True
    if site.function is not None and any(_one_rank_decorator(ctx, d.decorator) for d in site.function.node.decorators):
        return True
    if site.function is None or depth > 3:
        return False
    callers = ctx.sites.calls_of(site.function)
    if not callers:
        # Called from outside this module (or a framework hook): the guard may be there, unless
        # the function trains or starts the process group and wraps the model itself (the entry).
        sets_up = any(s.function is site.function for s in ctx.sites.named(*_DISTRIBUTED_CALLS))
        return not ctx.sites.trains(site.function) and not sets_up and not site.loops
    return all(_guarded(ctx, caller, depth + 1) for caller in callers)


def _one_rank_decorator(ctx: Context, decorator: cst.BaseExpression) -> bool:
    """``@rank_zero_only``, ``@accelerator.on_main_process`` (a library's, described as data in
    trainlint/libraries/), or a decorator of the project (of this module or imported from
    another) whose wrapper calls the function it wraps only under a rank check
    (``if dist.get_rank() == 0: return fn(*args)``)."""
    target = decorator.func if isinstance(decorator, cst.Call) else decorator
    described = library.current()
    if isinstance(target, cst.Attribute):
        role = ctx.model.roles.get(dotted(target.value) or "")
        if described.runs_on_one_rank(None, target.attr.value, role.kind if role is not None else None, method=True):
            return True
    name = dotted(target) or ""
    if described.runs_on_one_rank(ctx.qualify(target) or None, name.rsplit(".", 1)[-1]):
        return True
    own = ctx.model.functions.get(name)
    project = ctx.model.project
    if own is None and project is not None and name.split(".", 1)[0] in ctx.model.imports.names:
        own = project.function(ctx.model, name)
    home = ctx if own is None or own.owner in (None, ctx.model) else Context(own.owner, own.owner.sites())
    if own is None or not own.params:
        return False
    wrapped = own.params[0]
    for node in home.model.subtree(own.node):
        if isinstance(node, cst.If) and _rank_check(home, node.test) and any(
                isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == wrapped for n in walk(node.body)):
            return True
    return False


_PER_CALL_NAME = re.compile(r"rank|uuid|getpid|pid\b|time\(|datetime|process_index|local_process", re.IGNORECASE)
# A temporary file or an in-memory buffer is each process's own (tempfile names are unique).
_PRIVATE_FILE = re.compile(r"\btempfile\.|mkstemp|mkdtemp|NamedTemporaryFile|TemporaryFile|TemporaryDirectory|BytesIO")


def _per_rank_file(ctx: Context, site) -> bool:
    """The file name differs per rank or per call: the rank, a pid, a uuid or the time in it
    (``f"queue{rank}.pth"``, ``batch-{uuid4()}.pt``), also through the variable holding the path.
    (An epoch number is the same on every rank: ``checkpoint{epoch}.pth`` is shared.)"""
    path = site.call.args[1].value if len(site.call.args) > 1 else None
    return path is not None and (_varies(ctx, path, site.function, 0) or _private_file(ctx, path, site.function))


def _private_file(ctx: Context, path: cst.BaseExpression, fn) -> bool:
    """``with tempfile.NamedTemporaryFile() as tmp: torch.save(obj, tmp.name)``, ``buffer =
    io.BytesIO()``: a file no other rank writes."""
    root = (dotted(path) or "").split(".", 1)[0]
    if not root:
        return False
    scope = fn.node if fn is not None else ctx.model.module
    for node in ctx.model.subtree(scope):
        if isinstance(node, cst.With):
            for item in node.items:
                if isinstance(item.asname, cst.AsName) and isinstance(item.asname.name, cst.Name) \
                        and item.asname.name.value == root and _PRIVATE_FILE.search(ctx.code(item.item)):
                    return True
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns
    return any(isinstance(target, cst.Name) and target.value == root and _PRIVATE_FILE.search(ctx.code(value))
               for target, value in assigns)


def _varies(ctx: Context, expr: cst.BaseExpression, fn, depth: int) -> bool:
    if _PER_CALL_NAME.search(ctx.code(expr)):
        return True
    if depth > 2:
        return False
    names = {n.value for n in walk(expr) if isinstance(n, cst.Name)}
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns
    return any(
        isinstance(target, cst.Name) and target.value in names and _varies(ctx, value, fn, depth + 1)
        for target, value in assigns
    )


def _torch_saves(ctx: Context):
    for site in ctx.sites.sites:
        if ctx.qualify(site.call.func) in ("torch.save",) or dotted(site.call.func) == "torch.save":
            yield site


def _runs_on_several_ranks(ctx: Context, fn) -> bool:
    """A save in ``fn`` runs in a distributed job: the module starts one (``_is_distributed``), or
    ``fn`` trains and guards another statement of its own by the rank (``if comm.is_main_process():
    self.save_checkpoint(epoch)``), as a trainer whose base class or launcher sets up the process
    group does: the training function is written for several ranks. (A library's save function
    that takes ``is_main_process`` leaves the guard to its callers.)"""
    if _is_distributed(ctx):
        return True
    return fn is not None and ctx.sites.trains(fn) and any(
        _RANK_CHECK.search(ctx.code(test)) for site in ctx.sites.in_function(fn) for test in site.tests)


def save_on_every_rank(ctx: Context) -> Iterable[Match]:
    yield from _saves_through_project(ctx)
    for site in _torch_saves(ctx):
        if not _runs_on_several_ranks(ctx, site.function):
            continue
        saved = site.call.args[0].value if site.call.args else None
        if isinstance(saved, cst.Name) and ctx.model.values.holds_arguments(saved.value):
            continue  # the parsed command line, the same on every rank: not a checkpoint
        if not _guarded(ctx, site) and not _per_rank_file(ctx, site):
            yield Match("TL303", site.call, lambda line_of, c=site.call: (
                f"{ctx.label(c)} runs on every rank of this distributed job: all ranks write the "
                f"same file at once, which corrupts or truncates checkpoints on shared storage and "
                f"multiplies I/O; save only on rank 0 (if dist.get_rank() == 0:)."
            ))


def wrapped_state_dict(ctx: Context) -> Iterable[Match]:
    for site in _torch_saves(ctx):
        if not site.call.args:
            continue
        saved = site.call.args[0].value
        # the checkpoint dict built on the lines before (``state = {"model": m.state_dict()}``)
        built = ctx.model.values_in_scope(saved.value, site.function) if isinstance(saved, cst.Name) else []
        built_nodes = {id(n) for value in built for n in walk(value)}
        for node in (n for value in [saved, *built] for n in walk(value)):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "state_dict"):
                continue
            owner = dotted(node.func.value)
            if owner and _loaded_through_the_wrapper(ctx, owner, node.func.value, site):
                continue  # saved and loaded through the same wrapper: the keys round-trip
            wrapper = _wrapper_of(ctx, node.func.value, site)
            owner = owner or ctx.code(node.func.value)
            if wrapper in ("ddp", "dp") and _prefix_handled(ctx):
                continue  # the program reads such checkpoints by stripping the prefix
            if wrapper in ("ddp", "dp", "compile"):
                prefix = "_orig_mod." if wrapper == "compile" else "module."
                fix = f"{owner}._orig_mod.state_dict()" if wrapper == "compile" else f"{owner}.module.state_dict()"
                inline = id(node) in built_nodes
                # reported where the fix goes: the state_dict() call, also when the checkpoint
                # dict was built on an earlier line
                yield Match("TL304", site.call if not inline else node,
                            lambda line_of, c=site.call, p=prefix, f=fix, o=owner, i=inline: (
                    f"{ctx.label(c)}{f' ({line_of(c)})' if i else ''} saves {o}.state_dict() of a wrapped "
                    f"model: every key gets a '{p}' prefix, so loading it into the plain model fails (or, "
                    f"with strict=False, silently loads nothing); save {f} instead."
                ))
                break


def _loaded_through_the_wrapper(ctx: Context, owner: str, model: cst.BaseExpression, save) -> bool:
    """Is a state dict loaded into the saved model once it is wrapped? The load's receiver must be
    able to be the same wrapper object (a load into another function's ``net`` is another model,
    whatever its name); a load earlier in the function that wraps it (``model.load_state_dict(...)``
    to restart, then ``model = DDP(model)``), or in a helper called there before the wrap, goes into
    the plain model, which the wrapper's ``module.`` keys do not fit."""
    order = ctx.sites.statement_order
    wraps = [site for site in _wraps(ctx).values() if isinstance(site.statement, cst.SimpleStatementLine)
             and any(owner in _assigned_paths(small) for small in site.statement.body)]
    wrapped = {o for o in ctx.model.objects.eval(model, save.function) if o.role is not None and o.role.kind == WRAPPED}
    for load in ctx.sites.named("load_state_dict"):
        receiver = load.call.func.value if isinstance(load.call.func, cst.Attribute) else None
        if wrapped and receiver is not None:
            if not wrapped & set(ctx.model.objects.eval(receiver, load.function)):
                continue
        elif load.receiver != owner:
            continue
        before = [load.statement] + [call.statement for call in ctx.sites.sites if load.function is not None
                                     and ctx.sites.local_callee(call) is load.function]
        if any(order.get(id(statement), -1) < order.get(id(w.statement), -1) and (
                statement is not load.statement or w.function is load.function) for w in wraps for statement in before):
            continue  # into the model before it was wrapped
        return True
    return _handed_to_a_loader(ctx, owner, wrapped, save, [w for w in wraps if w.function is save.function])


# A string starting with the wrapper's prefix given as an argument or assigned
# (``k.replace("module.", "")``, ``key.startswith('module.')``, ``prefix = "module."``), not prose.
_MODULE_PREFIX = re.compile(r"""[(\[,=]\s*[rbu]?["']module\.""")


# ``name = k[7:]``: a key cut by the length of ``module.``.
_PREFIX_CUT = re.compile(r"\w\[\s*7\s*:\s*\]")


def _prefix_handled(ctx: Context) -> bool:
    """Does this file, or a project module it imports from, handle the ``module.`` prefix in its
    code? Then the program loads the wrapper's keys knowingly."""
    if _MODULE_PREFIX.search(ctx.model.source) and any(
            isinstance(node, cst.SimpleString) and str(node.evaluated_value).startswith("module.")
            for node in walk(ctx.model.module)):
        return True  # (a docstring's "('module.' keys)" is prose, not such a string)
    if _PREFIX_CUT.search(ctx.model.source):
        return True
    project = ctx.model.project
    return project is not None and any(
        project.defined_where_text_matches(ctx.model, name, _MODULE_PREFIX) for name in ctx.model.imports.names)


def _handed_to_a_loader(ctx: Context, owner: str, wrapped, save, wraps) -> bool:
    """Is the model handed to a project function that loads state dicts into what it is given
    (``restart_from_checkpoint(path, state_dict=model, optimizer=optimizer)``)? A resume through
    the same wrapper: its keys round-trip. An argument is the model when it can be the same
    wrapper object (``wrapped``); with no wrapper object known, when it is the same path in the
    saving function."""
    project = ctx.model.project
    for site in ctx.sites.sites:
        name = dotted(site.call.func)
        if not name or not any(
                wrapped & set(ctx.model.objects.eval(a.value, site.function)) if wrapped
                else site.function is save.function and dotted(a.value) == owner
                for a in site.call.args):
            continue
        if any(w.function is site.function and ctx.sites.statement_order.get(id(site.statement), -1)
               < ctx.sites.statement_order.get(id(w.statement), -1) for w in wraps):
            continue  # handed over before it was wrapped: the plain model
        helper = ctx.model.functions.get(name)
        if helper is None and project is not None and project.may_mention(ctx.model, name, "load_state_dict"):
            helper = project.function(ctx.model, name)  # read only where its module loads state at all
        # the helper's own text, not its module's (a utils module that saves and loads)
        if helper is not None and helper.owner is not None and \
                "load_state_dict" in helper.owner.module.code_for_node(helper.node):
            return True
    return False


def _assigned_paths(small: cst.BaseSmallStatement) -> Set[str]:
    """The paths a statement assigns (``model = DDP(model)``, ``model: nn.Module = DDP(model)``)."""
    if isinstance(small, cst.Assign):
        return {p for t in small.targets for p in [dotted(t.target)] if p}
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return {p for p in [dotted(small.target)] if p}
    return set()


def distributed_without_sampler(ctx: Context) -> Iterable[Match]:
    """A torch DataLoader without a sampler that a training loop of a DDP/FSDP script iterates
    (directly, or handed to the function that does), followed as an object."""
    if not _is_distributed(ctx) or ctx.sites.named("DistributedSampler"):
        return
    flow = ctx.model.objects
    # ``accelerator.prepare(loader)`` shards it; a function of the project named prepare does not
    prepared = {o for s in ctx.sites.named("prepare") if isinstance(s.call.func, cst.Attribute)
                and ctx.sites.local_callee(s) is None and not any(h.cls for h in flow.eval(s.call.func.value, s.function))
                for a in s.call.args for o in flow.eval(a.value, s.function)}
    reported: Set[int] = set()
    for obj in _training_loaders(ctx):
        value = obj.node
        if obj in prepared or not isinstance(value, cst.Call) or not flow.allocated_here(obj) or id(value) in reported:
            continue
        if (dotted(value.func) or "").rsplit(".", 1)[-1] != "DataLoader":
            continue
        qualified = ctx.qualify(value.func)
        if qualified and not qualified.startswith("torch"):
            continue  # DGL's / PyG's loaders shard by rank themselves (``use_ddp=True``)
        if kwarg(value, "sampler") or kwarg(value, "batch_sampler"):
            continue
        if _split_by_rank(ctx, value, 0):
            continue  # the data is split by rank by hand (``train_idx.split(...)[rank]``)
        reported.add(id(value))
        path = ctx.model.roles.holders.get(obj, obj.name)
        yield Match("TL302", value, lambda line_of, c=value, p=path: (
            f"{ctx.label(c)} ({p}) feeds the training loop of a DDP/FSDP script without a "
            f"DistributedSampler: every rank iterates the same batches, so an epoch trains on the "
            f"same data world_size times and the effective batch is duplicated; pass "
            f"sampler=DistributedSampler(dataset) (and call set_epoch each epoch)."
        ))


def _split_by_rank(ctx: Context, expr: cst.BaseExpression, depth: int) -> bool:
    """Is the expression computed from the rank, through up to three assignments (``train_idx =
    idx.split(n)[rank]``, then ``dataset[train_idx]``, then the loader over it)?"""
    names = {dotted(n) for n in walk(expr) if isinstance(n, (cst.Name, cst.Attribute))}
    if _RANK_CHECK.search(ctx.code(expr)) or names & _rank_holders(ctx):
        return True
    if depth >= 3:
        return False
    return any(_split_by_rank(ctx, v, depth + 1) for name in names if name for v in ctx.model.values_assigned(name)
               if v is not expr)


def _rank_holders(ctx: Context) -> Set[str]:
    """Names that hold this process's rank by what the code does with them, whatever they are
    called: given as ``rank=`` to ``init_process_group``, or assigned ``dist.get_rank()``."""
    holders: Set[str] = set()
    for site in ctx.sites.named("init_process_group"):
        given = kwarg(site.call, "rank")
        if given is not None and dotted(given.value):
            holders.add(dotted(given.value))
    for site in ctx.sites.named("get_rank"):
        if ctx.qualify(site.call.func).startswith("torch.distributed"):
            for target, value in (site.function.assigns if site.function is not None else ctx.model.module_assigns):
                if value is site.call and dotted(target):
                    holders.add(dotted(target))
    return holders


def _training_loaders(ctx: Context) -> List["Obj"]:
    """The loader objects training loops iterate, a parameter followed back to what this
    module's callers pass for it."""
    flow = ctx.model.objects

    def callers(fn):
        return [(site.call, site.function) for site in ctx.sites.calls_of(fn)]

    found: Dict[int, "Obj"] = {}
    for loop in ctx.sites.training_loops():
        if not isinstance(loop, cst.For) or not loop_trains(ctx, loop):
            continue  # a loop of an inference script that calls into a module that can also train
        fn = ctx.sites.function_of_loop.get(id(loop))
        for node in walk(loop.iter):
            if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
                reached = flow.reaching(node, fn, callers)
                if any(obj.unknown for obj in reached):
                    continue  # it may also be what a call nothing describes returned (``make_private``)
                for obj in reached:
                    if obj.role is not None and obj.role.kind == LOADER:
                        found.setdefault(id(obj), obj)
    return list(found.values())


def _saves_through_project(ctx: Context) -> Iterable[Match]:
    """A call of another module's function or an inherited method (``self.save_best_checkpoint()``)
    that reaches a torch.save with no rank check on the way, made on every rank here: reported at
    the call, where the guard goes (the helper is right for callers that guard it)."""
    if ctx.model.project is None:
        return
    several: Dict[int, bool] = {}  # per function: is it written for several ranks?
    for site in ctx.sites.sites:
        key = id(site.function.node) if site.function is not None else 0
        if key not in several:
            several[key] = _runs_on_several_ranks(ctx, site.function)
        if not several[key] or not isinstance(site.call.func, (cst.Name, cst.Attribute)):
            continue
        # what the call runs decides, not what it is called (``self.persist()`` saves too)
        callee = ctx.sites.project_callee(site)
        if callee is None or callee.owner is None or callee.owner is ctx.model or "torch.save" not in callee.owner.source:
            continue
        home = Context(callee.owner, callee.owner.sites())
        save = _unguarded_save(home, callee, 0)
        if save is None or _guarded(ctx, site):
            continue
        where = callee.owner.path.name if callee.owner.path is not None else "another module"
        yield Match("TL303", site.call, lambda line_of, c=site.call, v=save.call, w=where: (
            f"{ctx.label(c)} runs {home.label(v)} ({line_of(v) or w}) on every rank of this distributed "
            f"job: all ranks write the same file at once, which corrupts or truncates checkpoints on shared "
            f"storage and multiplies I/O; call it only on rank 0 (if dist.get_rank() == 0:)."
        ), mentions=((save.call, callee.owner),))


def _unguarded_save(home: Context, fn, depth: int):
    """The torch.save that ``fn`` runs with no rank check on the way (in its module, through its
    own helpers), to a file every rank shares; None if each is guarded or none is reached."""
    if any(_one_rank_decorator(home, d.decorator) for d in fn.node.decorators):
        return None
    for site in home.sites.in_function(fn):
        if id(site.call) in home.sites.exceptional or any(_rank_check(home, test, fn) for test in site.tests):
            continue
        if dotted(site.call.func) == "torch.save" or home.qualify(site.call.func) == "torch.save":
            if not _per_rank_file(home, site):
                return site
            continue
        callee = home.sites.local_callee(site)
        if callee is not None and callee is not fn and depth < 3:
            found = _unguarded_save(home, callee, depth + 1)
            if found is not None:
                return found
    return None


# The parts that look into other modules of the project (see patterns.through_project_registry).
THROUGH_PROJECT = {"TL303": _saves_through_project}

RULES = {
    "TL302": distributed_without_sampler,
    "TL303": save_on_every_rank,
    "TL304": wrapped_state_dict,
}
