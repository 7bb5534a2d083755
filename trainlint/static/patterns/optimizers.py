"""Optimizer and schedule construction: TL305, TL306, TL602, TL603, TL701, TL702."""
from __future__ import annotations

from typing import FrozenSet, Iterable, List, Optional

import libcst as cst

from ..calls import parameters_given, arg, kwarg, literal_bool, literal_number
from ..module import block
from ..names import dotted, plain_key
from ..roles import OPTIMIZER, params_owner
from . import Context, Match

_DECOUPLED = {"AdamW", "SGD"}


def optimizer_calls(ctx: Context) -> Iterable:
    """(site, class name) of each torch.optim optimizer (and transformers' AdamW) built here."""
    for site in ctx.sites.sites:
        qualified = ctx.qualify(site.call.func)
        last = qualified.rsplit(".", 1)[-1]
        if qualified.startswith("torch.optim.") and "lr_scheduler" not in qualified or (
            qualified.startswith("transformers") and last == "AdamW"
        ):
            yield site, last


def optimizers_over(ctx: Context) -> Iterable:
    """(site, owner) for each optimizer built here over one model's parameters: a constructor
    (``Adam(model.parameters())``), or a call of a function of this module that returns one
    (``build_optimizer(model)``), the model then named as the caller names it."""
    built = list(optimizer_calls(ctx))
    for site, _ in built:
        owner = params_owner(arg(site.call, 0, "params"))
        if owner is not None:
            yield site, owner
    for site in ctx.sites.sites:
        callee = ctx.sites.local_callee(site)
        if callee is None:
            continue
        for constructor, _ in built:
            if constructor.function is not callee or not _returned(callee, constructor.call):
                continue
            owner = params_owner(arg(constructor.call, 0, "params"))
            head, dot, rest = (owner or "").partition(".")
            given = dict((param, dotted(value)) for param, value in
                         parameters_given(site.call, callee.params, callee.cls is not None))
            if head in callee.params:
                owner = given.get(head) and given[head] + dot + rest
            if owner:
                yield site, owner


def _returned(fn, call: cst.Call) -> bool:
    """Does ``fn`` return the object this call builds (directly, or through one variable)?"""
    names = {dotted(target) for target, value in fn.assigns if value is call}
    return any(value is call or (dotted(value) is not None and dotted(value) in names) for value in fn.returns)


def _weight_decay(ctx: Context, call: cst.Call) -> Optional[float]:
    """The literal weight decay, or one named by a constant or a command-line default."""
    value = kwarg(call, "weight_decay")
    return ctx.model.values.number(value.value) if value is not None else None


def _group_decays(ctx: Context, params: Optional[cst.BaseExpression]) -> List[float]:
    """Literal ``weight_decay`` values of param-group dicts: ``Adam([{"params": ..., "weight_decay":
    0.01}, ...])``, also through a list variable assigned once in the module."""
    lists = [params] if params is not None else []
    if isinstance(params, cst.Name):
        assigned = ctx.model.values_assigned(params.value)
        lists = assigned if len(assigned) == 1 else []
    decays = []
    for group_list in lists:
        if not isinstance(group_list, (cst.List, cst.Tuple)):
            continue
        for element in group_list.elements:
            if not isinstance(element.value, cst.Dict):
                continue
            for entry in element.value.elements:
                if isinstance(entry, cst.DictElement) and plain_key(entry.key) == "weight_decay":
                    decay = ctx.model.values.number(entry.value)
                    if decay is not None:
                        decays.append(decay)
    return decays


def adam_weight_decay(ctx: Context) -> Iterable[Match]:
    for site, last in optimizer_calls(ctx):
        if last != "Adam":
            continue
        decay = _weight_decay(ctx, site.call)
        grouped = max(_group_decays(ctx, arg(site.call, 0, "params")), default=0.0)
        if decay is not None and decay > 0:
            shown = f"Adam(weight_decay={decay})"
        elif grouped > 0:
            shown = f"Adam with a param group of weight_decay={grouped}"
        else:
            continue
        yield Match("TL702", site.call, lambda line_of, shown=shown: (
            f"{shown} adds the decay to the gradient (coupled L2), so Adam's "
            f"per-parameter scaling shrinks it for parameters with large gradients and the "
            f"regularisation is much weaker and uneven; use torch.optim.AdamW for decoupled weight decay."
        ))


def decay_on_norm_and_bias(ctx: Context) -> Iterable[Match]:
    if _freezes_parameters(ctx):
        return  # which tensors still train (and so get decayed) is not known: frozen ones are skipped
    for site, last in optimizer_calls(ctx):
        decay = _weight_decay(ctx, site.call)
        params = arg(site.call, 0, "params")
        if last not in _DECOUPLED or decay is None or decay <= 0 or not _all_parameters(params):
            continue
        # Bound now: the message is rendered after the loop, when ``last`` names the last optimizer.
        yield Match("TL701", site.call, lambda line_of, d=decay, c=ctx.code(params), last=last: (
            f"{last}(weight_decay={d}) decays every tensor of {c}, biases and normalisation weights "
            f"included: LayerNorm/BatchNorm gains are pulled towards 0 and biases shrink, which "
            f"hurts accuracy for no regularisation benefit; pass two param groups, with "
            f"weight_decay=0.0 for biases and norm weights (e.g. p.ndim < 2)."
        ))


def _freezes_parameters(ctx: Context) -> bool:
    """Some parameters may be frozen: ``requires_grad`` set to anything but True (``False``, or
    ``"adapter" in name``) or ``requires_grad_(...)`` not True, in this module or in a function of
    the project it calls (``mark_only_adapter_as_trainable(model)``)."""
    if _sets_requires_grad(ctx.model.module_assigns + [a for fn in ctx.model.all_functions for a in fn.assigns]):
        return True
    if any(site.call.args and literal_bool(site.call.args[0].value) is not True for site in ctx.sites.named("requires_grad_")):
        return True
    project = ctx.model.project
    if project is None:
        return False
    for site in ctx.sites.sites:
        name = dotted(site.call.func)
        callee = project.function(ctx.model, name) if name and project.may_freeze(ctx.model, name) else None
        if callee is not None and _sets_requires_grad(callee.assigns):
            return True
    return False


def _sets_requires_grad(assigns) -> bool:
    return any(isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and literal_bool(value) is not True
               for target, value in assigns)


def _all_parameters(params: Optional[cst.BaseExpression]) -> bool:
    """``model.parameters()`` itself (not param groups, not a filtered list)."""
    return (
        isinstance(params, cst.Call)
        and isinstance(params.func, cst.Attribute)
        and params.func.attr.value == "parameters"
        and not params.args
    )


# --------------------------------------------------------------------------- TL306
def optimizer_updates_nothing(ctx: Context) -> Iterable[Match]:
    """An optimizer over ``X.parameters()`` whose ``X`` is then frozen (``requires_grad_(False)``, a
    loop setting ``p.requires_grad = False``) or replaced (``model.head = nn.Linear(...)``), and
    stepped afterwards: every step updates nothing."""
    order = ctx.sites.statement_order
    for site, owner in optimizers_over(ctx):
        stepped = _assigned_name(site)
        if owner is None or stepped is None:
            continue
        built = order.get(id(site.statement), -1)
        disabled = _disabled_after(ctx, site.function, owner, built)
        if disabled is None:
            continue
        after = order.get(id(disabled[0]), -1)
        steps = [s for s in ctx.sites.in_function(site.function) if order.get(id(s.statement), -1) > after
                 and _steps_object(ctx, s, stepped, 0)]
        if not steps or _built_twice(ctx, site.function, stepped):
            continue
        yield Match("TL306", site.call, lambda line_of, c=site.call, d=disabled, n=owner, s=steps[0].call: (
            f"{ctx.label(c)} collects the parameters of {n}, which {d[1]} ({line_of(d[0])}) before "
            f"{ctx.label(s)} ({line_of(s)}): " + (
                f"the optimizer still holds the old module's parameters, which the model no longer "
                f"uses, so every step updates nothing and the new {n} never trains; build the "
                f"optimizer after replacing the module, over the new one's parameters."
                if d[1].endswith("replaces") else
                "none of them receives a gradient, so every step updates nothing, silently, and the "
                "parameters that do still train are in no step of this optimizer; build the optimizer "
                "after freezing, over the parameters that still train (those with p.requires_grad).")
        ))


def _steps_object(ctx: Context, site, name: str, depth: int) -> bool:
    """Does this call step the optimizer ``name`` (``name.step()``, ``scaler.step(name)``), or hand
    it to a function of this module that does (the loop body moved into a helper)?"""
    if site.name == "step" and (site.receiver == name or any(dotted(a.value) == name for a in site.call.args)):
        return True
    callee = ctx.sites.local_callee(site) if depth < 3 else None
    if callee is None:
        return False
    received = [param for param, value in parameters_given(site.call, callee.params, callee.cls is not None)
                if dotted(value) == name]
    return any(_steps_object(ctx, inner, param, depth + 1) for param in received for inner in ctx.sites.in_function(callee))


def _assigned_name(site) -> Optional[str]:
    """``opt`` in ``opt = Adam(...)`` or ``opt: T = Adam(...)`` (a call in a compound statement's
    header is not assigned)."""
    if not isinstance(site.statement, cst.SimpleStatementLine):
        return None
    for small in site.statement.body:
        if isinstance(small, cst.Assign) and small.value is site.call and len(small.targets) == 1:
            return dotted(small.targets[0].target)
        if isinstance(small, cst.AnnAssign) and small.value is site.call:
            return dotted(small.target)  # ``optimizer: Optimizer = Adam(...)``
    return None


def _built_twice(ctx: Context, fn, name: str) -> bool:
    """The optimizer variable is assigned more than once (the first one may not be the one stepped)."""
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns
    return sum(1 for target, _ in assigns if dotted(target) == name) > 1


def _disabled_after(ctx: Context, fn, owner: str, built: int):
    """(statement, what happened) for the first freeze or replacement of ``owner`` (or a module
    holding it) after position ``built`` in the same function; None if none, or if the function
    sets ``requires_grad`` to anything but False on it or a part of it (a warm-up freeze undone,
    the classifier unfrozen again after freezing the whole model: then something still trains)."""
    order = ctx.sites.statement_order
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns

    def holds(path: Optional[str]) -> bool:  # ``path`` is the owner or a module holding it
        return path is not None and (owner == path or owner.startswith(path + "."))

    def overlaps(path: Optional[str]) -> bool:  # ...or a part of the owner
        return holds(path) or (path is not None and path.startswith(owner + "."))

    if any(isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and literal_bool(value) is not False
           for target, value in assigns):
        return None
    found = None
    for other in ctx.sites.in_function(fn):
        at = order.get(id(other.statement), -1)
        if at <= built or other.name != "requires_grad_" or not overlaps(other.receiver):
            continue
        flag = literal_bool(other.call.args[0].value) if other.call.args else True
        if flag is not False:
            return None
        if holds(other.receiver) and found is None:
            found = (other.statement, f"{ctx.label(other.call)} freezes")
    scope = fn.node if fn is not None else ctx.model.module
    for node in ctx.model.subtree(scope):
        if isinstance(node, cst.For) and order.get(id(node), -1) > built and _freezes_loop(node, holds):
            if found is None or order.get(id(node), -1) < order.get(id(found[0]), -1):
                found = (node, "a loop setting requires_grad = False freezes")
    for target, value in assigns:
        path = dotted(target)
        if path == owner and "." in owner and isinstance(value, cst.Call) and owner not in ctx.code(value):
            statement = ctx.sites.of_call(value)
            at = order.get(id(statement.statement), -1) if statement is not None else -1
            if at > built and found is None:
                found = (statement.statement, f"assigning a new module to {owner} replaces")
    return found


def _freezes_loop(loop: cst.For, holds) -> bool:
    """``for p in X.parameters(): p.requires_grad = False`` directly in the loop's body."""
    iterated = loop.iter
    if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute)
            and iterated.func.attr.value == "parameters" and holds(dotted(iterated.func.value))):
        return False
    for stmt in block(loop.body):
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if (isinstance(small, cst.Assign) and literal_bool(small.value) is False
                    and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                            for t in small.targets)):
                return True
    return False


def optimizer_before_wrap(ctx: Context) -> Iterable[Match]:
    """An optimizer over ``model``'s parameters constructed before ``model`` is sharded by FSDP."""
    order = ctx.sites.statement_order
    for site, owner in optimizers_over(ctx):
        for other in ctx.sites.in_function(site.function):
            qualified = ctx.qualify(other.call.func)
            last = (dotted(other.call.func) or "").rsplit(".", 1)[-1]
            if last not in ("fully_shard", "FullyShardedDataParallel", "FSDP") or not (
                qualified.startswith("torch") or not qualified
            ):
                continue
            wrapped = dotted(arg(other.call, 0, "module") or cst.Name("_"))
            if wrapped == owner and order.get(id(other.statement), -1) > order.get(id(site.statement), -1):
                yield Match("TL305", site.call, lambda line_of, o=other.call, n=owner, c=site.call: (
                    f"{ctx.label(c)} collects the parameters of {n} before "
                    f"{ctx.label(o)} ({line_of(o)}) shards it: FSDP replaces those parameters, "
                    f"so the optimizer updates tensors the model no longer uses and training does "
                    f"nothing; build the optimizer after wrapping."
                ))
                break


def warmup_from_zero(ctx: Context) -> Iterable[Match]:
    for site in ctx.sites.sites:
        last = (dotted(site.call.func) or "").rsplit(".", 1)[-1]
        zero = False
        if last == "LambdaLR":
            zero = _starts_at_zero(ctx, arg(site.call, 1, "lr_lambda"))
        elif last == "LinearLR":
            start = arg(site.call, 1, "start_factor")
            zero = start is not None and literal_number(start) == 0
        elif last in ("get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
                      "get_polynomial_decay_schedule_with_warmup", "get_constant_schedule_with_warmup"):
            warmup = arg(site.call, 1, "num_warmup_steps")
            # no warmup as configured (``--warmup_steps`` defaults to 0): the schedule starts at 1
            zero = warmup is not None and literal_number(warmup) != 0 and ctx.model.values.number(warmup) != 0
        if zero:
            yield Match("TL602", site.call, lambda line_of, c=site.call: (
                f"{ctx.label(c)} starts its warmup at a factor of 0, so the first optimizer step "
                f"uses a learning rate of exactly 0 and is wasted (an optimizer with moment estimates "
                f"still updates them); start the warmup at (step + 1) / warmup_steps."
            ))


def _starts_at_zero(ctx: Context, fn: Optional[cst.BaseExpression]) -> bool:
    """Does the lambda (or a local ``def``) return 0 for step 0?"""
    if isinstance(fn, cst.Lambda) and fn.params.params:
        return _zero_at(fn.body, fn.params.params[0].name.value)
    if isinstance(fn, cst.Name) and fn.value in ctx.model.functions:
        local = ctx.model.functions[fn.value]
        return bool(local.params) and bool(local.returns) and all(
            _zero_at(ret, local.params[0]) for ret in local.returns
        )
    return False


def _zero_at(expr: cst.BaseExpression, param: str) -> bool:
    """Symbolically: is ``expr`` 0 when ``param`` is 0? Unknown names count as non-zero."""
    if isinstance(expr, cst.Name):
        return expr.value == param
    number = literal_number(expr)
    if number is not None:
        return number == 0
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, (cst.Multiply,)):
            return _zero_at(expr.left, param) or _zero_at(expr.right, param)
        if isinstance(expr.operator, (cst.Divide, cst.FloorDivide)):
            return _zero_at(expr.left, param)
        return False
    if isinstance(expr, cst.Call):
        name = (dotted(expr.func) or "").rsplit(".", 1)[-1]
        values = [a.value for a in expr.args]
        if name in ("float", "int") and len(values) == 1:
            return _zero_at(values[0], param)
        if name == "min":
            return any(_zero_at(v, param) for v in values)
    return False


# --------------------------------------------------------------------------- TL603
def scheduler_factor_is_learning_rate(ctx: Context) -> Iterable[Match]:
    for site in ctx.sites.sites:
        last = (ctx.qualify(site.call.func) or dotted(site.call.func) or "").rsplit(".", 1)[-1]
        factors = []
        if last == "ConstantLR":
            factors = [("factor", arg(site.call, 1, "factor"))]
        elif last == "LinearLR":
            factors = [("start_factor", arg(site.call, 1, "start_factor")), ("end_factor", arg(site.call, 2, "end_factor"))]
        elif last in ("LambdaLR", "MultiplicativeLR"):
            factors = [("lr_lambda", returned) for returned in _lambda_returns(ctx, arg(site.call, 1, "lr_lambda"), site.function)]
        built = _optimizer_built(ctx, site) if factors else None
        rates = frozenset({_value_of(ctx, built[2], built[3])}) if built is not None and built[2] is not None else frozenset()
        for what, factor in factors:
            rate = _learning_rate_in(ctx, factor, rates, site.function) if factor is not None else None
            if rate is None:
                continue
            yield Match("TL603", site.call, lambda line_of, c=site.call, k=last, w=what, r=ctx.code(rate), n=rate, o=built: (
                f"{ctx.label(c)} takes a learning rate ({r}"
                + (f", {line_of(n)}" if line_of(n) and line_of(n) != line_of(c) else "")
                + f") as its {w}, but a scheduler's factor "
                f"multiplies the learning rate its optimizer already holds ("
                + (f"{ctx.label(o[0])} at {line_of(o[0])}" + (
                    f", with {r} as its lr too" if o[1] == r else f", lr={o[1]}" if o[1] else "")
                   if o is not None else f"the lr {ctx.code(arg(c, 0, 'optimizer') or c.func)} was built with elsewhere")
                + f"): {_lr_squared_consequence(k, w, r)}; pass a factor (1.0, 0.1, step / warmup) "
                f"and keep the learning rate on the optimizer."
            ))
            break


def _lr_squared_consequence(scheduler: str, what: str, rate: str) -> str:
    """What lr x lr does, for the scheduler and the argument that took the learning rate."""
    squared = f"lr x {rate}, about lr^2 (1e-3 becomes 1e-6)"
    if scheduler == "ConstantLR":
        return f"for its first total_iters steps the rate is {squared}, and those steps barely train"
    if what == "start_factor":
        return (f"the warmup starts at {squared}, far below the fraction of the rate meant, and its "
                f"first steps barely train")
    if what == "end_factor":
        return f"the rate ends at {squared} and stays there after total_iters: the rest of training barely moves"
    if scheduler == "MultiplicativeLR":
        return f"every step multiplies the rate by {rate} again, so it falls to about 0 within a few steps and training stops"
    return f"the whole schedule runs at {squared}, and the model barely trains"


def _optimizer_built(ctx: Context, site) -> Optional[tuple]:
    """(the call that built the scheduler's optimizer, the code of its lr or "", the lr, the
    function that built it) when the objects its optimizer argument can be are one optimizer built
    in this module, wherever it was built (a builder function, another method)."""
    given = arg(site.call, 0, "optimizer")
    if given is None:
        return None
    built = {id(o.node): o.node for o in ctx.model.objects.eval(given, site.function)
             if o.role is not None and o.role.kind == OPTIMIZER and isinstance(o.node, cst.Call)}
    where = ctx.sites.of_call(next(iter(built.values()))) if len(built) == 1 else None
    if where is None:
        return None  # not known, several, or built in another module
    lr = arg(where.call, 1, "lr")
    return where.call, ctx.code(lr) if lr is not None else "", lr, where.function


def _lambda_returns(ctx: Context, fn: Optional[cst.BaseExpression], scope) -> List[cst.BaseExpression]:
    """What the schedule's function returns: a lambda's body, a local or module ``def``'s returns."""
    if isinstance(fn, cst.Lambda):
        return [fn.body]
    if isinstance(fn, cst.Name):
        defined = (scope.nested.get(fn.value) if scope is not None else None) or ctx.model.functions.get(fn.value)
        return list(defined.returns) if defined is not None else []
    return []


def _learning_rate_in(ctx: Context, expr: cst.BaseExpression, rates: FrozenSet[str], scope) -> Optional[cst.BaseExpression]:
    """A learning rate the factor is made of: the expression itself, or a term of a product
    (``args.lr * min(1, step / warmup)``), that is the value the scheduler's optimizer was given
    as its lr (``rates``) or the lr the optimizer holds (``optimizer.param_groups[0]["lr"]``);
    never a divisor, which turns a rate into a factor (``schedule[step] / base_lr``). What the
    value is called says nothing: ``lr=1.0`` with ``lambda s: args.lr * warmup(s)`` is a factor."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _learning_rate_in(ctx, expr.left, rates, scope) or _learning_rate_in(ctx, expr.right, rates, scope)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _learning_rate_in(ctx, expr.left, rates, scope) if _learning_rate_in(ctx, expr.right, rates, scope) is None else None
    if _reads_optimizer_rate(expr):
        return expr
    if isinstance(expr, (cst.Integer, cst.Float)):
        return None  # a literal equal to the lr is a factor chosen by number
    return expr if _value_of(ctx, expr, scope) in rates else None


def _reads_optimizer_rate(expr: cst.BaseExpression) -> bool:
    """``optimizer.param_groups[i]["lr"]``, ``optimizer.defaults["lr"]``: the rate an optimizer holds."""
    if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)):
        return False
    if plain_key(expr.slice[0].slice.value) not in ("lr", "initial_lr"):
        return False
    holder = expr.value.value if isinstance(expr.value, cst.Subscript) else expr.value
    return isinstance(holder, cst.Attribute) and holder.attr.value in ("param_groups", "defaults")


def _value_of(ctx: Context, expr: cst.BaseExpression, scope) -> object:
    """What ``expr`` holds, comparable across functions: a local name assigned once stands for its
    value (``lr = args.lr`` then ``lr=lr``); an attribute chain is the objects its root can be with
    the attributes read (``args.lr`` in a builder handed the caller's ``args`` is that ``args.lr``);
    anything else is its code."""
    if isinstance(expr, cst.Name) and scope is not None:
        assigned = [value for target, value in scope.assigns if isinstance(target, cst.Name) and target.value == expr.value]
        if len(assigned) == 1:
            expr = assigned[0]
    root, attributes = expr, []
    while isinstance(root, cst.Attribute):
        attributes.append(root.attr.value)
        root = root.value
    objects = ctx.model.objects.eval(root, scope) if isinstance(root, cst.Name) else None
    if objects:
        return frozenset(id(o) for o in objects), tuple(reversed(attributes))
    return " ".join(ctx.code(expr).split())


RULES = {
    "TL305": optimizer_before_wrap,
    "TL306": optimizer_updates_nothing,
    "TL602": warmup_from_zero,
    "TL603": scheduler_factor_is_learning_rate,
    "TL701": decay_on_norm_and_bias,
    "TL702": adam_weight_decay,
}
