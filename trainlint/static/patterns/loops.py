"""Training and evaluation loops: TL202, TL502, TL503, TL901."""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from ..local_values import LocalValues
from ..module import Function, block
from ..names import DETACHING, PROGRESS_BARS, access_path, dotted, literal_key
from ...checker.checkpoints import not_resumable_message
from ...optimizers import OPTIMIZER_STATE
from ..calls import NONE_ARGUMENT, arg, kwarg, literal_arguments, literal_bool, literal_number, literal_str, parameters_given
from ..roles import LOADER, OPTIMIZER, SCALER, SCHEDULER, classify_constructor
from ..walk import children, walk
from . import Context, Match
from .optimizers import optimizer_calls

_NO_GRAD = ("no_grad", "inference_mode", "set_grad_enabled")


# --------------------------------------------------------------------------- TL202
def accumulation_remainder_dropped(ctx: Context) -> Iterable[Match]:
    for loop in ctx.sites.training_loops():
        if not isinstance(loop, cst.For) or not _iterates_loader(ctx, loop.iter):
            continue
        for stmt, helper, call in _pass_statements(ctx, loop):
            if not isinstance(stmt, cst.If) or not _modulo(stmt.test):
                continue
            if _another_way_in(stmt.test) or not _steps(ctx, stmt.body):
                continue
            if _backpropagates(stmt.body):
                continue  # ``if i % n_critic == 0:`` zero_grad, backward, step of its own: nothing accumulates
            if _counts_across_epochs(ctx, stmt.test, loop, helper, call) or _counter_runs_on(ctx, stmt.test, loop, helper, call):
                continue  # ``ni = i + nb * epoch``: the remainder is stepped with the next epoch's first batches
            if _steps_after(ctx, loop):
                continue
            yield _remainder_match(ctx, loop, stmt, [inner for inner, _, _ in _pass_statements(ctx, loop)])


def _remainder_match(ctx: Context, loop: cst.For, boundary: cst.If, statements: List[cst.BaseStatement]) -> Match:
    """TL202's finding, of the warning tier only where the dropped tail does harm: a next epoch
    runs (an epoch loop around the loader's, or around the call of its function), nothing zeroes the
    gradients between the epochs, so the tail is summed into the next epoch's first step, and each
    loss was divided by the same k as the boundary's, so that step is over-weighted. A single pass,
    a tail zeroed at the epoch's start, or a loss normalised otherwise (by token counts) is advice."""
    k = next(n.right for n in walk(boundary.test) if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo))
    test = ctx.code(boundary.test)
    epochs = _epoch_loops(ctx, loop)
    fn = ctx.sites.function_of_loop.get(id(loop))
    order = ctx.sites.statement_order
    # the loader's loop is the whole epoch of its function: the callers loop over epochs
    per_epoch_function = fn is not None and not any(any(m is loop for m in walk(n.body)) for n in walk(fn.node)
                                                    if isinstance(n, (cst.For, cst.While)) and n is not loop)
    zeroed = [site.call for site in ctx.sites.sites if site.name == "zero_grad" and not any(l is loop for l in site.loops) and (
        # directly in the epoch loop (not in another of its inner loops, such as a pipeline branch's)
        site.loops and any(site.loops[-1] is e for e in epochs)
        # before the loader's loop in a function run once per epoch, in no loop of its own
        or not site.loops and site.function is fn and per_epoch_function
        and order.get(id(site.statement), -1) < order.get(id(loop), -1))]
    divided = any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Divide) and ctx.code(n.right) == ctx.code(k)
                  for stmt in statements for n in walk(stmt))
    fn_callers = ctx.sites.calls_of(fn) if fn is not None else None
    # A function nothing here calls (``Trainer.train_epoch``) is called from elsewhere, maybe per epoch.
    runs_again = bool(epochs) or (fn is not None and not fn_callers)
    # ``--gradient-accumulation-steps`` defaulting to 1: as shipped, nothing accumulates.
    off_by_default = ctx.model.values.number(k) == 1 or (
        fn is not None and isinstance(k, cst.Name) and LocalValues(ctx.model, fn).value(k, boundary) == 1)
    if runs_again and not zeroed and divided and not off_by_default:
        return Match("TL202", boundary, lambda line_of: (
            f"the accumulation boundary `if {test}:` never fires for the last micro-batches of an "
            f"epoch whose length is not a multiple of {ctx.code(k)}: their gradients, each divided by "
            f"{ctx.code(k)}, are not stepped and leak into the next epoch's first step, which then sums "
            f"more than {ctx.code(k)} of them; also step when the batch is the last one "
            f"(`or step + 1 == len(loader)`)."
        ))
    if off_by_default:
        fate = (f"leak into the next epoch's first step when run with {ctx.code(k)} above its default of 1 "
                f"(as configured by default nothing accumulates)")
    elif not runs_again:
        fate = "are never stepped: this single pass ends with them unused"
    elif zeroed:
        fate = "are thrown away by the zero_grad() that starts the next epoch, so those samples never train"
    else:
        fate = ("carry into the next epoch's first step (the loss is not divided by the boundary's count "
                "here, so that step is larger, not mis-weighted)")
    return Match("TL202", boundary, lambda line_of: (
        f"the accumulation boundary `if {test}:` never fires for the last micro-batches of an epoch "
        f"whose length is not a multiple of {ctx.code(k)}: their gradients {fate}; also step when the "
        f"batch is the last one (`or step + 1 == len(loader)`)."
    ), advice=True)


def _epoch_loops(ctx: Context, loop: cst.For) -> List[cst.CSTNode]:
    """The loops that run the loader's loop again: those around it in its function, or around a
    call of that function (one level of callers)."""
    fn = ctx.sites.function_of_loop.get(id(loop))
    scope = fn.node if fn is not None else ctx.model.module
    around = [n for n in walk(scope) if isinstance(n, (cst.For, cst.While)) and n is not loop and any(m is loop for m in walk(n.body))]
    if not around and fn is not None:
        around = [l for site in ctx.sites.calls_of(fn) for l in site.loops]
    return around


def _pass_statements(ctx: Context, loop: cst.For) -> List[Tuple[cst.BaseStatement, Optional[Function], Optional[cst.Call]]]:
    """The statements one pass of the loop runs: its own, and those of a function of this module
    it calls as a statement (the loop body moved into a per-iteration helper), with that helper
    and the call."""
    statements: List[Tuple[cst.BaseStatement, Optional[Function], Optional[cst.Call]]] = []
    for stmt in block(loop.body):
        statements.append((stmt, None, None))
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            call = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
            site = ctx.sites.of_call(call) if isinstance(call, cst.Call) else None
            callee = ctx.sites.local_callee(site) if site is not None else None
            if callee is not None:
                statements.extend((inner, callee, call) for inner in callee.body)
    return statements


def _backpropagates(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "backward" for n in walk(node))


def _counts_across_epochs(ctx: Context, test: cst.BaseExpression, loop: cst.For,
                          helper: Optional[Function] = None, call: Optional[cst.Call] = None) -> bool:
    """The boundary counts a global iteration, computed from an enclosing (epoch) loop's variable
    (``ni = i + nb * epoch``), rather than the batch index: the count runs on across epochs. In a
    per-iteration helper, a parameter the call gives such a value counts as that value."""
    fn = ctx.sites.function_of_loop.get(id(loop))
    outer = _enclosing_loop_variables(fn.node if fn is not None else ctx.model.module, loop)
    if helper is not None and call is not None:
        outer = {param for param, value in parameters_given(call, helper.params, helper.cls is not None)
                 if any(isinstance(n, cst.Name) and n.value in outer for n in walk(value))}
        fn = helper
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns
    counters = {dotted(n.left) for n in walk(test) if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)}
    return any(
        isinstance(target, cst.Name) and target.value in counters
        and any(isinstance(n, cst.Name) and n.value in outer for n in walk(value))
        for target, value in assigns
    )


def _counter_runs_on(ctx: Context, test: cst.BaseExpression, loop: cst.For,
                     helper: Optional[Function] = None, call: Optional[cst.Call] = None) -> bool:
    """The boundary counts with a counter the pass increments (``global_step += 1``) that is
    started once, outside every loop around this one (or kept on an object): the count runs on
    across epochs, and an epoch's remainder is stepped with the next epoch's first batches."""
    fn = ctx.sites.function_of_loop.get(id(loop))
    scope = fn.node if fn is not None else ctx.model.module
    counted = {dotted(n) for op in walk(test) if isinstance(op, cst.BinaryOperation) and isinstance(op.operator, cst.Modulo)
               for n in walk(op.left) if isinstance(n, (cst.Name, cst.Attribute))}
    incremented = {dotted(n.target) for n in walk(loop.body) if isinstance(n, cst.AugAssign)}
    if helper is not None and call is not None:
        given = {param: dotted(value) for param, value in parameters_given(call, helper.params, helper.cls is not None)}
        counted = {given.get(name, name) for name in counted}
        incremented |= {given.get(dotted(n.target), dotted(n.target)) for n in walk(helper.node.body) if isinstance(n, cst.AugAssign)}
    outer = [n for n in walk(scope) if isinstance(n, (cst.For, cst.While)) and n is not loop and any(m is loop for m in walk(n.body))]
    for name in counted & incremented:
        if name is None:
            continue
        if "." in name:
            return True  # ``self.global_step``: the object keeps it from one epoch to the next
        # where it is started (``step = 0``), not where it is carried on (``step = helper(step)``)
        starts = [n for n in walk(scope) if isinstance(n, cst.Assign) and any(dotted(t.target) == name for t in n.targets)
                  and not any(dotted(v) == name for v in walk(n.value) if isinstance(v, (cst.Name, cst.Attribute)))]
        if not any(start is node for start in starts for around in outer for node in walk(around.body)):
            return True
    return False


def _enclosing_loop_variables(scope: cst.CSTNode, loop: cst.For) -> Set[str]:
    """Names bound by the for-loops of ``scope`` that enclose ``loop``."""
    names: Set[str] = set()
    for node in walk(scope):
        if isinstance(node, cst.For) and node is not loop and any(n is loop for n in walk(node.body)):
            names.update(n.value for n in walk(node.target) if isinstance(n, cst.Name))
    return names


def _iterates_loader(ctx: Context, iterable: cst.BaseExpression) -> bool:
    """Does the loop run over a finite sequence of batches: a loader, or an object the code does
    not build (a loader or list a caller hands in), rather than a count (``range(n)``)?"""
    while isinstance(iterable, cst.Call) and dotted(iterable.func) in _ITERATION_WRAPPERS and iterable.args:
        iterable = iterable.args[0].value
    if isinstance(iterable, cst.Call):
        return ctx.model.role_of_value(iterable) is not None and ctx.model.role_of_value(iterable).kind == LOADER
    path = dotted(iterable) if isinstance(iterable, (cst.Name, cst.Attribute)) else None
    if path is None:
        return False
    role = ctx.model.roles.get(path)
    return role is None or role.kind == LOADER


_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "iter"})


def _another_way_in(test: cst.BaseExpression) -> bool:
    """``if (i + 1) % k == 0 or i == len(loader) - 1:``: a disjunct besides the boundary's
    modulo also opens the step (the last batch, a flag): the tail is stepped, or the step is not
    the accumulation's alone. Judged by the test's form, whatever its names are."""
    return any(isinstance(n, cst.BooleanOperation) and isinstance(n.operator, cst.Or) for n in walk(test))


def _modulo(test: cst.BaseExpression) -> bool:
    return any(isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) for n in walk(test))


def _steps(ctx: Context, node: cst.CSTNode) -> bool:
    """An optimizer step under ``node``: ``optimizer.step()`` or ``scaler.step(optimizer)``."""
    for n in walk(node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "step":
            role = ctx.model.roles.get(dotted(n.func.value))
            if role is not None and role.kind in (OPTIMIZER, SCALER):
                return True
    return False


def _steps_after(ctx: Context, loop: cst.For) -> bool:
    """An optimizer step right after the loop (flushing the remainder)."""
    for site in ctx.sites.sites:
        if any(l is loop for l in site.loops):
            continue
        if ctx.sites.statement_order.get(id(site.statement), -1) > ctx.sites.statement_order.get(id(loop), -1):
            if site.name == "step" and _steps(ctx, site.call):
                same_fn = ctx.sites.function_of_loop.get(id(loop))
                if site.function is same_fn:
                    return True
    return False


# --------------------------------------------------------------------------- TL502
def _sets_mode(site, training: bool) -> bool:
    """``model.eval()`` / ``model.train(False)`` (evaluation), ``model.train()`` / ``train(True)``."""
    if not isinstance(site.call.func, cst.Attribute):
        return False
    args = site.call.args
    if site.name == "eval":
        return not training and not args
    if site.name != "train" or len(args) > 1:
        return False
    if args and args[0].keyword is not None and args[0].keyword.value != "mode":
        return False
    flag = literal_bool(args[0].value) if args else True
    return flag is training


def eval_forwards(ctx: Context) -> Iterable[Tuple[object, object]]:
    """(eval site, forward site) for each forward of the evaluated model in a loop that runs after
    ``model.eval()`` (or ``train(False)``) without no_grad: in a function that only evaluates, or,
    inline in a training function, in a loop that does not train and comes before the model is put
    back in training mode."""
    training_loops = {id(loop) for loop in ctx.sites.training_loops()}
    order = ctx.sites.statement_order
    for site in ctx.sites.sites:
        if site.receiver is None or not _sets_mode(site, training=False):
            continue
        fn = site.function
        if fn is None or no_grad_function(ctx, fn):
            continue
        inline = ctx.sites.trains(fn)
        model = site.receiver
        start = order.get(id(site.statement), -1)
        # where the model trains again: the first train() of the same model after the eval
        end = min((order.get(id(s.statement), -1) for s in ctx.sites.in_function(fn)
                   if s.receiver == model and _sets_mode(s, training=True) and order.get(id(s.statement), -1) > start),
                  default=None)
        called = any(_runs(s.call, model) for s in ctx.sites.in_function(fn))
        for forward in ctx.sites.in_function(fn):
            if not _runs_site(forward, model, called):
                continue
            loop = _comprehension_around(forward) or (forward.loops[-1] if forward.loops else None)
            if loop is None or any(is_no_grad(ctx, w) for w in forward.withs):
                continue
            at = order.get(id(forward.statement), -1)
            if at < start or _grad_switched_off(ctx, fn, model, at):
                continue
            if inline and (end is not None and at > end or id(loop) in training_loops
                           or order.get(id(loop), at) < start):
                continue  # the training loop's own forward, or one after train() again
            yield site, forward


def _comprehension_around(site) -> Optional[cst.CSTNode]:
    """The comprehension of the site's statement whose elements the call computes
    (``[criterion(model(x), y).item() for x, y in loader]``): a loop over batches as much as a
    ``for`` statement is."""
    for node in walk(site.statement):
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            element = node.value if isinstance(node, cst.DictComp) else node.elt
            if any(inner is site.call for inner in walk(element)):
                return node
    return None


def _module_path(node: cst.BaseExpression) -> Optional[str]:
    """``self.model`` for a name or attribute chain; ``models['g']`` for an entry by a literal key,
    ``models[*]`` for an entry by any other key (the entries a loop over the container visits)."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        container = dotted(node.value)
        if container is None:
            return None
        keyed_by = literal_key(node)
        return f"{container}[{keyed_by[1]!r}]" if keyed_by else f"{container}[*]"
    return dotted(node)


def _runs_site(site, model: str, called: bool = False) -> bool:
    """A forward of the module at ``model`` (see ``_runs``), or, where the function never calls the
    module itself (``called``), a method of its own class whose result is used (``_, moves =
    model.predict(batch)``): a method that the module's class adds to torch's computes with its
    parameters. A bare call (``model.reset_state()``) is a setter, torch's own methods
    (``state_dict``, ``to``) are not forwards, and beside ``model(x)`` a method is more likely a
    metric of its output (``model.test(log_probs, y)``). A module's own code (``self``) calling its
    parts leaves gradients to its caller."""
    if _runs(site.call, model):
        return True
    if called or model == "self":
        return False
    func = site.call.func
    if not isinstance(func, cst.Attribute) or func.attr.value in _MODULE_API or func.attr.value.startswith("_"):
        return False
    if isinstance(site.statement, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Expr) and small.value is site.call for small in site.statement.body):
        return False
    return _module_path(func.value) == model


# torch.nn.Module's own methods: none of them runs the module's computation.
_MODULE_API = frozenset({
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda", "double", "eval",
    "extra_repr", "float", "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu",
    "load_state_dict", "modules", "mtia", "named_buffers", "named_children", "named_modules",
    "named_parameters", "parameters", "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_full_backward_pre_hook",
    "register_load_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_module",
    "register_parameter", "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_",
    "set_extra_state", "set_submodule", "share_memory", "state_dict", "to", "to_empty", "train", "type", "xpu",
    "zero_grad",
})


def _runs(call: cst.Call, model: str) -> bool:
    """Is ``call`` a forward of the module at ``model``: ``model(x)``, ``model.forward(x)``; for
    ``models[*]`` (every entry, put in eval by a loop over the container) a call of any entry."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    name = _module_path(func)
    if name is None:
        return False
    if name == model:
        return True
    return model.endswith("[*]") and name.startswith(model[:-2])


def eval_calls(ctx: Context) -> Iterable[Tuple[object, object, object, bool, object]]:
    """(eval site, call, forward, shared, the forward's module if another) for each call that runs a forward of the evaluated model
    in a project function (through at most two calls), after ``model.eval()`` and before the model
    trains again, with gradients on along the whole way: ``model.eval()`` then ``evaluate(model,
    loader)`` whose loop forwards it. ``shared``: the function with the forward also trains on other
    calls (a train/eval epoch runner), so no_grad belongs around the call, not inside it."""
    order = ctx.sites.statement_order
    training = {id(loop) for loop in ctx.sites.training_loops()}
    for site in ctx.sites.sites:
        func = site.call.func
        model = _module_path(func.value) if isinstance(func, cst.Attribute) else None
        if model is None or not (_sets_mode(site, training=False) or _own_eval(ctx, site, model)):
            continue
        fn = site.function  # None: the module's own code (``if __name__ == "__main__":``)
        if fn is not None and no_grad_function(ctx, fn):
            continue
        start = order.get(id(site.statement), -1)
        end = min((order.get(id(s.statement), -1) for s in ctx.sites.in_function(fn)
                   if isinstance(s.call.func, cst.Attribute) and _module_path(s.call.func.value) == model and _sets_mode(s, training=True) and order.get(id(s.statement), -1) > start),
                  default=None)
        for call in ctx.sites.in_function(fn):
            at = order.get(id(call.statement), -1)
            if at <= start or (end is not None and at > end) or any(is_no_grad(ctx, w) for w in call.withs):
                continue
            if any(id(loop) in training and loop not in site.loops for loop in call.loops):
                continue  # a model held in eval through training (a frozen loss network): part of the step
            if _grad_switched_off(ctx, fn, model, at):
                continue
            seen = {id(fn.node)} if fn is not None else set()
            for forward, shared, inside in _forwards_through(ctx, call, model, bool(call.loops), 0, seen):
                foreign = inside.model if inside.model is not ctx.model else None
                yield site, call, forward, shared or _also_trains_with(ctx, call, model, start), foreign


def _own_eval(ctx: Context, site, model: str) -> bool:
    """``model.eval(Stage.EVAL)``: a class's own ``eval`` that takes an argument, on an object the
    same function switches back with torch's ``model.train()``: a module's mode switch."""
    return site.name == "eval" and bool(site.call.args) and any(
        s.name == "train" and not s.call.args and isinstance(s.call.func, cst.Attribute)
        and _module_path(s.call.func.value) == model for s in ctx.sites.in_function(site.function))


def evaluations_by_parameter(ctx: Context) -> Iterable[Tuple[object, object, object]]:
    """(mode site, call, forward) for a function whose mode follows a parameter
    (``self.net.train(mode=train_model)``, or ``model.eval()`` in the else of ``if is_train:``),
    called with that parameter False outside no_grad: its forwards after the mode site then run in
    eval mode with gradients on. Its training steps must all be conditional (``if train_model:
    loss.backward()``), so that call only evaluates."""
    order = ctx.sites.statement_order
    for site in ctx.sites.sites:
        fn, func = site.function, site.call.func
        if fn is None or not isinstance(func, cst.Attribute) or site.name not in ("train", "eval"):
            continue
        evaluates = _evaluates_when(site, fn)
        model = _module_path(func.value)
        if evaluates is None or model is None or _no_grad_decorated(ctx, fn):
            continue
        sites = ctx.sites.in_function(fn)
        if any(ctx.sites.is_training_step(s) and not s.tests for s in sites):
            continue
        for call in ctx.sites.calls_of(fn):
            if any(is_no_grad(ctx, w) for w in call.withs) or (
                    call.function is not None and no_grad_function(ctx, call.function)):
                continue
            given = _given(call, fn)
            if not evaluates(given):
                continue
            start = order.get(id(site.statement), -1)
            forward = next((f for f in sites if f.loops and _runs(f.call, model) and order.get(id(f.statement), -1) > start
                            and not any(is_no_grad(ctx, w) for w in f.withs)
                            and all(_test_value(t, given) is not False for t in f.tests)
                            and not _grad_switched_off(ctx, fn, model, order.get(id(f.statement), -1))), None)
            if forward is not None:
                yield site, call, forward
                break


def _evaluates_when(site, fn: Function):
    """For a mode call that depends on ``fn``'s parameters: given the literal arguments of a call
    of ``fn``, does it put the model in eval mode? None when it does not depend on them."""
    args = site.call.args
    if site.name == "train" and len(args) == 1 and isinstance(args[0].value, cst.Name) \
            and args[0].value.value in fn.params and (args[0].keyword is None or args[0].keyword.value == "mode"):
        flag = args[0].value.value
        return lambda given: given.get(flag) is False
    if _sets_mode(site, training=False) and site.tests and all(_test_value(t, {}) is None for t in site.tests) \
            and all(_tested_parameter(t, fn) for t in site.tests):
        return lambda given: all(_test_value(t, given) is True for t in site.tests)
    return None


def _tested_parameter(test: cst.BaseExpression, fn: Function) -> bool:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    return isinstance(test, cst.Name) and test.value in fn.params


def _test_value(test: cst.BaseExpression, given) -> Optional[bool]:
    """``is_train`` / ``not is_train`` / ``opt is not None`` with the parameter's literal
    argument, else None."""
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    inner = test.expression if negated else test
    if isinstance(inner, cst.Comparison) and len(inner.comparisons) == 1 and isinstance(inner.left, cst.Name) \
            and isinstance(inner.comparisons[0].comparator, cst.Name) and inner.comparisons[0].comparator.value == "None":
        operator = inner.comparisons[0].operator
        value = given.get(inner.left.value)
        if value is None or not isinstance(operator, (cst.Is, cst.IsNot)):
            return None
        return ((value == NONE_ARGUMENT) == isinstance(operator, cst.Is)) != negated
    value = given.get(inner.value) if isinstance(inner, cst.Name) else None
    if value is None:
        return None
    return (value is True) != negated


def _given(call, callee: Function):
    """Parameter -> True, False or NONE_ARGUMENT for the literals the call site passes (and the
    literal defaults of the parameters it leaves out)."""
    return literal_arguments(call.call, callee, callee.cls is not None and isinstance(call.call.func, cst.Attribute))


def _may_compute_gradients(ctx: Context, fn: Function, given, depth: int = 0) -> bool:
    """Can a call of ``fn`` with these arguments run a backward or ``autograd.grad`` (itself or
    in a function of this module it calls)? Then its forwards need their graphs (a saliency map,
    a perturbation optimised through a frozen model), unless a test the arguments decide turns
    that part off (``if opt is not None: loss.backward()`` called without ``opt``)."""
    for site in ctx.sites.in_function(fn):
        if any(_test_value(t, given) is False for t in site.tests):
            continue
        name = dotted(site.call.func) or ""
        if ctx.sites.is_step_itself(site) or name.endswith("autograd.grad"):
            return True
        callee = ctx.sites.local_callee(site) if depth < 3 else None
        if callee is not None and callee is not fn and _may_compute_gradients(ctx, callee, {}, depth + 1):
            return True
    return False


def _also_trains_with(ctx: Context, call, model: str, start: int) -> bool:
    """Is the function ``call`` calls also called, before the eval at ``start``, on the model put
    back in train mode (``model.train(); run_epoch(model, ...)``, then ``model.eval(); run_epoch(
    model, ...)``)? Then it serves both, and no_grad belongs around the evaluation's call."""
    order = ctx.sites.statement_order
    callee = _callee(ctx, call)[0]
    sites = ctx.sites.in_function(call.function)
    modes = sorted((order.get(id(s.statement), -1), _sets_mode(s, training=True)) for s in sites
                   if (_sets_mode(s, training=True) or _sets_mode(s, training=False))
                   and isinstance(s.call.func, cst.Attribute) and _module_path(s.call.func.value) == model)

    def in_train_mode(at: int) -> bool:  # the last mode set before ``at`` is train()
        before = [training for when, training in modes if when < at]
        return bool(before) and before[-1]

    return callee is not None and any(
        other is not call and other.name == call.name and _callee(ctx, other)[0] is callee
        and order.get(id(other.statement), -1) < start and in_train_mode(order.get(id(other.statement), -1))
        for other in sites)


def _callee(ctx: Context, call) -> Tuple[Optional[Function], Context]:
    """The project function ``call`` runs, and the context to read it in: this module's for a
    function or method here, its own module's for one imported from another module of the project."""
    callee = ctx.sites.local_callee(call)
    if callee is not None:
        return callee, ctx
    project, name = ctx.model.project, dotted(call.call.func)
    found = project.function(ctx.model, name) if project is not None and name is not None else None
    if found is None or found.owner is None or found.owner is ctx.model:
        return None, ctx
    return found, Context(found.owner, found.owner.sites())


def loop_trains(ctx: Context, loop: cst.CSTNode) -> bool:
    """Is ``loop`` proven to train: a backward or an optimizer step in it, or in a function of the
    project it calls (parsed, up to three calls deep)? The text of an imported module that merely
    mentions a backward (what ``is_training_step`` accepts for a may-question) is no proof."""
    seen: Set[int] = set()
    return any(_proves_training(ctx, site, 0, seen) for site in ctx.sites.sites if any(l is loop for l in site.loops))


def _proves_training(ctx: Context, site, depth: int, seen: Set[int]) -> bool:
    if ctx.sites.is_step_itself(site):
        return True
    if depth >= 3:
        return False
    callee, inside = _callee(ctx, site)
    if callee is None or id(callee.node) in seen:
        return False
    seen.add(id(callee.node))
    return any(_proves_training(inside, inner, depth + 1, seen) for inner in inside.sites.in_function(callee))


def _forwards_through(ctx: Context, call, model: str, looping: bool, depth: int, seen: Set[int]):
    """(forward, shared, context of the forward's module) of ``model`` that ``call`` runs in the
    project function it calls."""
    callee, inside = _callee(ctx, call)
    if callee is None or id(callee.node) in seen or _no_grad_decorated(inside, callee):
        return
    inner = _bound_in(callee, call, model)
    if inner is None or _may_compute_gradients(inside, callee, _given(call, callee)):
        return  # it trains (eval() before it is TL501's concern), or needs the gradients it computes
    steps = [s for s in inside.sites.in_function(callee) if inside.sites.is_training_step(s)]
    order = inside.sites.statement_order
    called = any(_runs(s.call, inner) for s in inside.sites.in_function(callee))
    for site in inside.sites.in_function(callee):
        if site.call is call or any(is_no_grad(inside, w) for w in site.withs):
            continue
        if _grad_switched_off(inside, callee, inner, order.get(id(site.statement), -1)):
            continue
        if _runs_site(site, inner, called) and (looping or site.loops or _comprehension_around(site) is not None):
            yield site, bool(steps), inside
        elif depth < 1 and not _runs(site.call, inner):
            yield from _forwards_through(inside, site, inner, looping or bool(site.loops), depth + 1, seen | {id(callee.node)})


def _bound_in(callee: Function, call, model: str) -> Optional[str]:
    """What ``model`` is called inside ``callee``: the same ``self.x`` in a method of the same
    class called on ``self``, or the parameter the call passes it to."""
    caller = call.function
    func = call.call.func
    if (model == "self" or model.startswith(("self.", "self["))) and isinstance(func, cst.Attribute) \
            and dotted(func.value) == "self" and caller is not None and callee.cls == caller.cls:
        return model
    params = list(callee.node.params.params)
    if callee.cls is not None and params and isinstance(func, cst.Attribute):
        params = params[1:]  # bound: the instance is not an argument of the call
    for index, argument in enumerate(call.call.args):
        if argument.star or dotted(argument.value) != model:
            continue
        if argument.keyword is not None:
            return argument.keyword.value if any(p.name.value == argument.keyword.value for p in params) else None
        return params[index].name.value if index < len(params) else None
    return None


def _grad_switched_off(ctx: Context, fn: Function, model: str, at: int) -> bool:
    """The statement forms of no_grad before the forward at ``at``: ``torch.set_grad_enabled(False)``
    not switched back on in between, or ``model.requires_grad_(False)`` on the evaluated model."""
    order = ctx.sites.statement_order
    switches = sorted(
        (order.get(id(site.statement), -1), literal_bool(site.call.args[0].value) if site.call.args else None)
        for site in ctx.sites.in_function(fn)
        if site.name == "set_grad_enabled" and isinstance(site.statement, cst.SimpleStatementLine)
        and order.get(id(site.statement), -1) < at)
    if switches and switches[-1][1] is False:
        return True
    return any(site.name == "requires_grad_" and site.receiver == model and site.call.args
               and literal_bool(site.call.args[0].value) is False and order.get(id(site.statement), -1) < at
               for site in ctx.sites.in_function(fn))


def eval_without_no_grad(ctx: Context) -> Iterable[Match]:
    reported: Set[int] = set()
    done: Set[int] = set()  # one finding per evaluation: its first forward
    yield from _evaluations_through_calls(ctx, reported, done)
    yield from _evaluations_by_parameter(ctx, reported)
    for site, forward in eval_forwards(ctx):
        if id(forward.call) in reported or id(site.call) in done:
            continue
        reported.add(id(forward.call))
        done.add(id(site.call))
        kept = _output_kept(ctx, forward)
        if kept is not None:
            yield Match("TL502", forward.call, lambda line_of, f=forward.call, e=site.call, k=kept: (
                f"{ctx.label(f)} runs in an evaluation loop (after {ctx.label(e)}, {line_of(e)}) that "
                f"builds autograd graphs, and `{ctx.code(k)}` ({line_of(k)}) keeps its output past the "
                f"batch: eval() does not disable gradients, so each batch's graph and activations stay "
                f"alive and memory grows with every batch of the evaluation; wrap the loop in "
                f"torch.no_grad() or torch.inference_mode()."
            ))
            continue
        # The graph of a dropped output is freed with it: no leak, but every batch holds a training
        # forward's activations and autograd bookkeeping. Reviewers ask for no_grad there too: on the
        # harness these findings were 19 true, 2 debatable, 0 false, and real projects fix them.
        yield Match("TL502", forward.call, lambda line_of, f=forward.call, e=site.call: (
            f"{ctx.label(f)} runs in an evaluation loop (after {ctx.label(e)}, "
            f"{line_of(e)}) that builds autograd graphs: eval() does not disable gradients, so "
            f"each batch holds the activations a training forward saves for backward, until its "
            f"output is dropped: several times the memory and time of inference, which caps the "
            f"evaluation batch size; wrap the loop in torch.no_grad() or torch.inference_mode()."
        ))


def _evaluations_through_calls(ctx: Context, reported: Set[int], done: Set[int]) -> Iterable[Match]:
    """``model.eval()`` then a call whose callee forwards the model with gradients on: reported at
    the forward when the callee only evaluates, at the call when it also trains on other calls (a
    train/eval epoch runner: no_grad goes around this call)."""
    found = list(eval_calls(ctx))
    # A function that serves training on one call serves it whichever evaluation calls it.
    serving = {id(forward.call) for _, _, forward, shared, _ in found if shared}
    for site, call, forward, shared, foreign in found:
        shared = shared or id(forward.call) in serving
        # Reported in the evaluation's loop: at the call when it runs per batch a step function with
        # no loop of its own, or serves training too; at the forward when the callee loops itself.
        # A forward in another module is reported at this module's call (where this check reports).
        at_call = shared or not (forward.loops or _comprehension_around(forward)) or foreign is not None
        at = call.call if at_call else forward.call
        if not at_call and id(forward.call) in reported:
            done.add(id(site.call))  # this evaluation runs a forward already reported: the same fix covers it
            continue
        if id(at) in reported or id(site.call) in done:
            continue  # one finding per evaluation call of a shared function, one per forward otherwise
        reported.update((id(at), id(forward.call)))
        done.add(id(site.call))
        if at_call:
            yield Match("TL502", at, lambda line_of, c=call.call, f=forward.call, e=site.call, sh=shared, o=foreign: (
                f"{ctx.label(c)} runs {ctx.label(f)} ("
                + ((line_of(f) or f"in {o.path.name if o.path is not None else 'another module'}") if o is not None else line_of(f))
                + f") after {ctx.label(e)} ({line_of(e)}) "
                f"with gradients on: eval() does not disable autograd, so each evaluation batch "
                f"builds a graph and holds the activations a training forward saves for backward: "
                f"several times the memory and time of inference; "
                + ("the function serves training too, so " if sh else "")
                + "wrap this call in torch.no_grad() (or torch.inference_mode())."
            ), mentions=((forward.call, foreign),) if foreign is not None else ())
            continue
        yield Match("TL502", at, lambda line_of, c=call.call, f=forward.call, e=site.call: (
            f"{ctx.label(f)} runs in an evaluation (after {ctx.label(e)}, {line_of(e)}, then "
            f"{ctx.label(c)}, {line_of(c)}) that builds autograd graphs: eval() does not disable "
            f"gradients, so each batch holds the activations a training forward saves for "
            f"backward: several times the memory and time of inference; wrap the evaluation in "
            f"torch.no_grad() or torch.inference_mode()."
        ))


def _evaluations_by_parameter(ctx: Context, reported: Set[int]) -> Iterable[Match]:
    for site, call, forward in evaluations_by_parameter(ctx):
        if id(forward.call) in reported:
            continue
        reported.add(id(forward.call))
        yield Match("TL502", forward.call, lambda line_of, f=forward.call, e=site.call, c=call.call: (
            f"{ctx.label(f)} runs with gradients on when {ctx.label(c)} ({line_of(c)}) evaluates: "
            f"{ctx.label(e)} ({line_of(e)}) puts the model in eval mode there, which does not disable "
            f"autograd, so each evaluation batch builds a graph and holds the activations a training "
            f"forward saves for backward: several times the memory and time of inference; switch "
            f"gradients with the same flag (torch.set_grad_enabled(...)) around the forward."
        ))


def _reads(value: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in walk(value))


# Calls whose result holds no graph: a Python number, a detached copy, integer indices.
_GRAPH_FREE = frozenset({"item", "detach", "tolist", "numpy", "argmax", "argmin", "eq", "ne", "long", "int", "bool"})


def _output_kept(ctx: Context, forward) -> Optional[cst.CSTNode]:
    """The statement that keeps the forward's output (or a value computed from it with its graph)
    beyond the batch, in the evaluation loop: appended to a list, summed into a total that is not
    started again in the loop, concatenated onto itself, or stored into a container or attribute."""
    if not forward.loops or _comprehension_around(forward) is not None:
        return None  # a comprehension's elements: what keeps them is the statement around it
    fn, loop = forward.function, forward.loops[-1]
    inside = {id(node) for node in ctx.model.subtree(loop)}
    derived: Set[str] = set()

    def carries(value: cst.CSTNode) -> bool:
        """Does the value hold the output's graph? Not through a graph-free call or a comparison."""
        if value is forward.call or isinstance(value, cst.Name) and value.value in derived:
            return True
        if isinstance(value, cst.Comparison):
            return False
        if isinstance(value, cst.Call) and (isinstance(value.func, cst.Attribute) and value.func.attr.value in _GRAPH_FREE
                                            or dotted(value.func) in ("float", "int", "bool", "len")):
            return False
        return any(carries(child) for child in children(value))

    assigns = [(t, v) for t, v in fn.assigns if id(v) in inside]
    changed = True
    while changed:
        changed = False
        for target, value in assigns:
            names = {n.value for n in walk(target) if isinstance(n, cst.Name)} if isinstance(target, (cst.Name, cst.Tuple, cst.List)) else set()
            if names - derived and carries(value):
                derived |= names
                changed = True
    for target, value in assigns:
        if isinstance(target, (cst.Subscript, cst.Attribute)) and carries(value):
            return target  # ``outputs[i] = logits``, ``self.last = logits``
        if isinstance(target, cst.Name) and carries(value) and _reads(value, target.value) and not any(
                t is not target and isinstance(t, cst.Name) and t.value == target.value and not _reads(v, t.value)
                for t, v in assigns):
            return value  # ``all_logits = torch.cat([all_logits, logits])``, never started again in the loop
    for aug in fn.aug_assigns:
        if id(aug) in inside and isinstance(aug.operator, cst.AddAssign) and carries(aug.value) and not _reset_in_loop(aug.target, loop):
            return aug
    for site in ctx.sites.in_function(fn):
        if site.name in ("append", "extend") and id(site.call) in inside and len(site.call.args) == 1 and carries(site.call.args[0].value):
            return site.call
    return None


def is_no_grad(ctx: Context, item: cst.BaseExpression) -> bool:
    call = item if isinstance(item, cst.Call) else None
    name = (dotted(call.func if call else item) or "").rsplit(".", 1)[-1]
    return name in _NO_GRAD


def _no_grad_factory(ctx: Context, name: str) -> bool:
    """A project decorator (or decorator factory) whose body wraps the function in no_grad() /
    inference_mode(): ``return torch.inference_mode()(fn)``, or a nested ``@torch.no_grad()`` def."""
    helper = ctx.model.functions.get(name)
    if helper is None and ctx.model.project is not None:
        helper = ctx.model.project.function(ctx.model, name)  # ``from .utils import no_grad_eval``
    if helper is None:
        return False
    for node in walk(helper.node):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Call) and is_no_grad(ctx, node.func):
            return True
        if isinstance(node, cst.FunctionDef) and node is not helper.node and any(
            is_no_grad(ctx, d.decorator) for d in node.decorators
        ):
            return True
    return False


def _no_grad_decorated(ctx: Context, fn: Function) -> bool:
    """Decorated with @torch.no_grad()/@inference_mode() (or a project decorator that wraps in it)."""
    for decorator in fn.node.decorators:
        target = decorator.decorator
        name = (dotted(target.func if isinstance(target, cst.Call) else target) or "").rsplit(".", 1)[-1]
        if name in _NO_GRAD or _no_grad_factory(ctx, name):
            return True
    return False


def no_grad_function(ctx: Context, fn: Function, depth: int = 0) -> bool:
    """Decorated with @torch.no_grad()/@inference_mode(), or only called under such a context."""
    if _no_grad_decorated(ctx, fn):
        return True
    callers = ctx.sites.calls_of(fn)
    if not callers or depth > 3:
        return False
    return all(
        any(is_no_grad(ctx, w) for w in caller.withs)
        or (caller.function is not None and no_grad_function(ctx, caller.function, depth + 1))
        for caller in callers
    )


# --------------------------------------------------------------------------- TL503
def loss_graph_retained(ctx: Context) -> Iterable[Match]:
    training = {id(loop) for loop in ctx.sites.training_loops()}
    for fn in [None] + list(ctx.model.all_functions):
        backpropagated = _backpropagated_names(ctx, fn)
        returned = (_returned_with_graph(ctx, fn) | _summands_returned_beside(ctx, fn, backpropagated)
                    | _summed_into(fn, backpropagated))
        steps = _steps_returning_their_loss(ctx, fn)
        returned |= set(steps.values())
        losses = backpropagated | returned
        if not losses:
            continue
        aliases = _read_from(fn, losses)
        for aug in (fn.aug_assigns if fn is not None else ctx.model.module_aug_assigns):
            carried = (_carried(aug.value, losses) or _step_carried(aug.value, steps) or _alias_carried(aug.value, aliases)
                       if isinstance(aug.operator, cst.AddAssign) else None)
            if carried is not None:
                yield from _retained(ctx, aug, carried, training, fn, returned=returned)
        for site in ctx.sites.in_function(fn):
            if site.name == "append" and len(site.call.args) == 1 and not _built_as_other_than_container(ctx, site.call.func.value, fn):
                carried = (_carried(site.call.args[0].value, losses) or _step_carried(site.call.args[0].value, steps)
                           or _alias_carried(site.call.args[0].value, aliases))
                element = f"{dotted(site.call.func.value)}[]"
                if carried is None and element in losses:
                    carried = element  # ``losses.append(total)`` then ``losses[-1].backward()``
                if carried is not None:
                    yield from _retained(ctx, site.call, carried, training, fn, site, returned=returned)
        for store, name in _keyed_stores(ctx, fn, losses):
            yield from _retained(ctx, store, name, training, fn, returned=returned)
        yield from _handed_to_a_keeper(ctx, fn, losses, training)
        yield from _stored_into_a_keeper(ctx, fn, losses, training)
    yield from _evaluation_losses_kept(ctx)


def _keyed_stores(ctx: Context, fn: Optional[Function], losses: Set[str]) -> Iterable[Tuple[cst.Assign, str]]:
    """``history[step] = loss``: the loss stored under a key that is not a constant (a step count,
    a loop variable), so every iteration adds an entry, each holding its graph."""
    stores = {id(target): name for target, value in (fn.assigns if fn is not None else ctx.model.module_assigns)
              for name in [_carried(value, losses)]
              if name in losses and isinstance(target, cst.Subscript) and len(target.slice) == 1
              and isinstance(target.slice[0].slice, cst.Index) and _varying_key(target.slice[0].slice.value)}
    if not stores:
        return
    for node in walk(fn.node if fn is not None else ctx.model.module):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and id(node.targets[0].target) in stores:
            if not (_built_as_other_than_container(ctx, node.targets[0].target.value, fn) and _under_no_grad(ctx, fn, node)):
                yield node, stores[id(node.targets[0].target)]


def _under_no_grad(ctx: Context, fn: Optional[Function], node: cst.CSTNode) -> bool:
    """Inside a ``with torch.no_grad():`` block of ``fn``."""
    return any(isinstance(block, cst.With) and any(is_no_grad(ctx, item.item) for item in block.items)
               and any(inner is node for inner in walk(block.body))
               for block in walk(fn.node if fn is not None else ctx.model.module))


def _varying_key(key: cst.BaseExpression) -> bool:
    """A key that names a value (``step``, ``len(history)``, ``f"{epoch}/{i}"``), not a literal."""
    return not isinstance(key, (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString)) and not (
        isinstance(key, cst.Name) and key.value in ("True", "False", "None"))


def _accumulator(node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """What keeps the loss: ``total`` of ``total += loss``, ``losses`` of ``losses.append(loss)``,
    ``history`` of ``history[step] = loss``."""
    if isinstance(node, cst.AugAssign):
        return node.target
    if isinstance(node, cst.Call):
        return node.func.value
    if isinstance(node, cst.Assign) and isinstance(node.targets[0].target, cst.Subscript):
        return node.targets[0].target.value
    return None


_CONTAINER_BUILDERS = frozenset({"list", "dict", "collections.deque", "deque", "collections.defaultdict", "defaultdict",
                                 "collections.OrderedDict", "OrderedDict"})


def _built_as_other_than_container(ctx: Context, receiver: cst.BaseExpression, fn: Optional[Function]) -> bool:
    """The receiver of ``.append(loss)`` or ``[key] = loss`` is built here as something other than
    a list or dict: a metric or meter of a library (``torchmetrics.MeanMetric()``, a logger's
    buffer), which keeps a detached number, or a preallocated tensor, which copies the value in.
    A list or dict literal, ``list()``/``dict()``, or a receiver built elsewhere keeps the tensor."""
    path = dotted(receiver)
    if not path:
        return False
    objects = ctx.model.objects.eval(receiver, fn)  # also what a caller hands a helper's parameter
    if objects and all(o.cls is not None or o.role is not None for o in objects):
        return True
    values = ctx.model.values_in_scope(path, fn)
    if not values and objects and all(_built_by_a_call_other_than_container(o) for o in objects) \
            and not _callers_may_pass_a_container(ctx, fn, path):
        return True  # a parameter given a tensor buffer (``torch.zeros(n)``) by every caller
    builds_container = any(isinstance(value, (cst.List, cst.ListComp, cst.Dict, cst.DictComp)) or isinstance(value, cst.Call)
                           and (dotted(value.func) or "") in _CONTAINER_BUILDERS for value in values)
    return not builds_container and any(isinstance(value, cst.Call) for value in values)


def _callers_may_pass_a_container(ctx: Context, fn: Optional[Function], param: str) -> bool:
    """Does a call of ``fn`` pass, for ``param``, a variable its scope binds to a list or dict
    literal or builder (an empty ``[]`` is no object of the objects layer, so it is read here)?"""
    if fn is None or param not in fn.params:
        return False
    for call in ctx.sites.calls_of(fn):
        for given, value in parameters_given(call.call, fn.params, fn.cls is not None):
            name = dotted(value) if given == param else None
            if name and any(isinstance(v, (cst.List, cst.ListComp, cst.Dict, cst.DictComp)) or isinstance(v, cst.Call)
                            and (dotted(v.func) or "") in _CONTAINER_BUILDERS
                            for v in ctx.model.values_in_scope(name, call.function)):
                return True
    return False


def _built_by_a_call_other_than_container(obj) -> bool:
    """An object a call allocated (``torch.zeros(n)`` handed to a helper), not a list or dict."""
    return isinstance(obj.node, cst.Call) and (dotted(obj.node.func) or "") not in _CONTAINER_BUILDERS


def _evaluation_losses_kept(ctx: Context) -> Iterable[Match]:
    """``running_vloss += vloss`` in an evaluation loop that runs without no_grad (TL502's loop),
    ``vloss`` computed from the model's output there: each batch's graph stays alive in the sum."""
    reported: Set[int] = set()
    # the evaluation's forward in this function, or in a function of this module that an
    # evaluation (``model.eval(); evaluate(model, loader)``) calls
    forwards = [forward for _, forward in eval_forwards(ctx)]
    forwards += [forward for _, _, forward, _, foreign in eval_calls(ctx)
                 if foreign is None and forward.loops and forward.function is not None]
    for forward in forwards:
        fn, loop = forward.function, forward.loops[-1]
        inside = {id(node) for node in ctx.model.subtree(loop)}
        outputs = {dotted(target) for target, value in fn.assigns if value is forward.call}
        losses = {
            target.value for target, value in fn.assigns
            if isinstance(target, cst.Name) and isinstance(value, cst.Call) and id(value) in inside
            and value is not forward.call and any(
                a.value is forward.call or any(dotted(n) in outputs for n in walk(a.value)
                                               if isinstance(n, (cst.Name, cst.Attribute))) for a in value.args)
        }
        for aug in fn.aug_assigns:
            name = _carried(aug.value, losses) if isinstance(aug.value, (cst.Name, cst.Call)) else None
            if (name not in losses or not isinstance(aug.operator, cst.AddAssign) or id(aug) not in inside
                    or id(aug) in reported or _rebound_detached(ctx, fn, name) or _reset_in_loop(aug.target, loop)):
                continue
            reported.add(id(aug))
            kept = f"the tensor `{name}` itself" if isinstance(aug.value, cst.Name) else f"a tensor computed from `{name}`"
            yield Match("TL503", aug, lambda line_of, n=name, c=ctx.code(aug), f=forward.call, k=kept: (
                f"`{c}` keeps {k}, and with it the autograd graph of every "
                f"evaluation batch ({ctx.label(f)}, {line_of(f)}, runs without no_grad): memory grows "
                f"with each batch until the evaluation is out of memory; accumulate {n}.item(), or "
                f"evaluate under torch.no_grad()."
            ))


def _handed_to_a_keeper(ctx: Context, fn: Optional[Function], losses: Set[str], training) -> Iterable[Match]:
    """``self.metrics.add_losses(loss_g.item(), loss_d)`` in a training loop, where the project
    method appends its parameter to a list of its object (``self.d_losses.append(l_d)``) or adds it
    to a running total: the object outlives the step, and keeps every step's graph."""
    step_function = fn is not None and _is_one_step(ctx, fn)
    for site in ctx.sites.in_function(fn):
        if not site.call.args or not (ctx.sites.in_training_loop(site) or (step_function and not site.loops)):
            continue
        carried = [(given, element, name) for given in site.call.args if not given.star
                   for element, name in [_carried_in(given.value, losses)] if name is not None]
        if not carried or not isinstance(site.call.func, cst.Attribute) \
                or _made_each_iteration(site.call.func.value, site.loops, training):
            continue
        callee = ctx.sites.project_callee(site)
        if callee is None or callee.cls is None or callee.owner is None:
            continue
        positional = [a for a in site.call.args if a.keyword is None and not a.star]
        for given, element, name in carried:
            param = given.keyword.value if given.keyword is not None else (
                callee.params[positional.index(given) + 1] if positional.index(given) + 1 < len(callee.params) else None)
            store = _kept_by_the_object(callee, param) if param else None
            if store is None:
                continue
            inside = "" if element is given.value else "a list holding "
            yield Match("TL503", site.call, lambda line_of, c=ctx.code(site.call), a=ctx.code(element), n=name, i=inside,
                        k=callee.owner.module.code_for_node(store).strip(), m=f"{callee.cls}.{callee.name}": (
                f"`{c}` hands {i}`{a}`, a tensor that still holds the graph of `{n}`, to {m}, which keeps it "
                f"on its object (`{k}`): every iteration's autograd graph stays alive with it, so memory "
                f"grows with every step until the run is out of memory (or slows down); pass {_operand(a)}.item() "
                f"(or {_operand(a)}.detach())."))
            break


def _stored_into_a_keeper(ctx: Context, fn: Optional[Function], losses: Set[str], training) -> Iterable[Match]:
    """``stats["loss"] = loss`` in a training loop, where ``stats`` is an instance of a project
    class whose ``__setitem__`` keeps the value on its object (``self.values[key].append(value)``):
    as for any method that keeps what it is handed, every step's graph stays alive with it."""
    step_function = fn is not None and _is_one_step(ctx, fn)
    for node in walk(fn.node if fn is not None else ctx.model.module):
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Subscript)):
            continue
        target = node.targets[0].target
        element, name = _carried_in(node.value, losses)
        loops = ctx.sites.loops_of.get(id(node), ())
        if name is None or not (any(id(loop) in training for loop in loops) or (step_function and not loops)) \
                or _made_each_iteration(target.value, loops, training) or _rebound_detached(ctx, fn, name):
            continue
        for obj in ctx.model.objects.eval(target.value, fn):
            owner = obj.class_module() if obj.cls is not None and not obj.unknown else None
            setter = owner.method_of_class(obj.cls, "__setitem__") if owner is not None else None
            store = _kept_by_the_object(setter, setter.params[2]) if setter is not None and len(setter.params) > 2 else None
            if store is None:
                continue
            yield Match("TL503", node, lambda line_of, c=ctx.code(target), a=ctx.code(element), n=name,
                        k=setter.owner.module.code_for_node(store).strip(), m=f"{setter.cls}.__setitem__": (
                f"`{c} = {a}` hands " + (f"the loss `{a}`" if a == n else f"`{a}`, a tensor that still holds the graph of `{n}`,")
                + f" to {m}, which keeps it "
                f"on its object (`{k}`): every iteration's autograd graph stays alive with it, so memory "
                f"grows with every step until the run is out of memory (or slows down); store {_operand(a)}.item() "
                f"(or {_operand(a)}.detach())."))
            break


def _operand(code: str) -> str:
    """``code`` as the receiver of a method: ``(loss * 1000)`` for an operation."""
    return code if code.replace(".", "").replace("_", "").isalnum() else f"({code})"


def _is_one_step(ctx: Context, fn: Function) -> bool:
    """Is ``fn`` one training iteration by itself (a ``train_step`` a base class's loop or a
    framework calls): it runs a backward and an optimizer step? What it hands an object that
    outlives the call is handed once per step."""
    sites = ctx.sites.in_function(fn)
    return any(site.name == "backward" for site in sites) and any(
        site.name == "step" and ctx.sites.is_step_itself(site) for site in sites)


def _carried_in(value: cst.BaseExpression, losses: Set[str]) -> Tuple[cst.BaseExpression, Optional[str]]:
    """(the expression, the loss whose graph it holds) of a handed value: ``loss``, ``loss_d[0]``,
    or an element of a list or tuple literal (``meter.update([coarse * 1000, fine * 1000])``)."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return next(((e.value, name) for e in value.elements if not isinstance(e, cst.StarredElement)
                     for name in [_carried(_unindexed(e.value), losses)] if name is not None), (value, None))
    return value, _carried(_unindexed(value), losses)


def _summands_returned_beside(ctx: Context, fn: Optional[Function], backpropagated: Set[str]) -> Set[str]:
    """Names unpacked from a project function's tuple beside the loss backpropagated here, where
    the function builds that loss from them (``total, coarse, fine = self.losses(batch)`` with
    ``total = coarse + fine`` there): they are parts of its graph and hold it too."""
    if not backpropagated:
        return set()
    found: Set[str] = set()
    calls = {id(site.call): site for site in ctx.sites.in_function(fn)}
    for target, value in (fn.assigns if fn is not None else ctx.model.module_assigns):
        site = calls.get(id(value)) if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call) else None
        if site is None or backpropagated.isdisjoint(_unpacked_names(target, None)):
            continue
        callee = ctx.sites.project_callee(site)
        if callee is None or callee.owner is None:
            continue
        for returned in callee.returns:
            if not isinstance(returned, cst.Tuple) or len(returned.elements) != len(target.elements):
                continue
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in returned.elements]
            totals = {names[i] for i, e in enumerate(target.elements)
                      if isinstance(e.value, cst.Name) and e.value.value in backpropagated and names[i]}
            parts = _summands_of(callee, totals)
            found.update(e.value.value for i, e in enumerate(target.elements)
                         if isinstance(e.value, cst.Name) and e.value.value != "_" and names[i] in parts)
    return found


def _summed_into(fn: Optional[Function], backpropagated: Set[str]) -> Set[str]:
    """The names ``fn`` adds into a loss it backpropagates (``loss = rec + kl`` then
    ``loss.backward()``): parts of its graph, which hold it too. Only the terms of a sum, each a
    name or a name scaled by a number (``0.1 * kl``): a name that scales the sum may be a plain
    number (``weight * ce``)."""
    if fn is None or not backpropagated:
        return set()
    parts: Set[str] = set()
    for target, value in fn.assigns:
        if isinstance(target, cst.Name) and target.value in backpropagated:
            parts |= _terms(value)
    for aug in fn.aug_assigns:
        if isinstance(aug.target, cst.Name) and aug.target.value in backpropagated and isinstance(aug.operator, cst.AddAssign):
            parts |= _terms(aug.value)
    return parts - backpropagated


def _terms(value: cst.BaseExpression) -> Set[str]:
    """The names summed by ``value``: ``a + b - 0.5 * c`` -> {a, b, c}; none of ``a * b``."""
    value = _unmoved(value)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)):
        return _term(value.left) | _term(value.right)
    return set()


def _term(value: cst.BaseExpression) -> Set[str]:
    value = _unmoved(value)
    if isinstance(value, cst.Name):
        return {value.value}
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)):
        return _terms(value)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Multiply, cst.Divide)):
        named, number = (value.left, value.right) if isinstance(value.right, (cst.Integer, cst.Float)) else (value.right, value.left)
        if isinstance(number, (cst.Integer, cst.Float)) and isinstance(_unmoved(named), cst.Name):
            return {_unmoved(named).value}
    return set()


def _steps_returning_their_loss(ctx: Context, fn: Optional[Function]) -> Dict[int, str]:
    """The calls of ``fn`` whose value is kept as it is (appended, added into a total) and that
    run a project function returning the loss it backpropagated (``losses.append(step(batch))``):
    id(call) -> how messages name it (``step()``)."""
    kept = [site.call.args[0].value for site in ctx.sites.in_function(fn) if site.name == "append" and len(site.call.args) == 1]
    kept += [a.value for a in (fn.aug_assigns if fn is not None else ctx.model.module_aug_assigns)
             if isinstance(a.operator, cst.AddAssign)]
    found: Dict[int, str] = {}
    for value in kept:
        call = _reduced(value)
        if not isinstance(call, cst.Call) or isinstance(call.func, cst.Attribute) and call.func.attr.value in DETACHING:
            continue  # ``loss.item()``: a number, whatever computed it
        site = ctx.sites.of_call(call)
        callee = ctx.sites.project_callee(site) if site is not None else None
        if callee is not None and callee.owner is not None and _returned_backpropagated(callee) == _WHOLE:
            found[id(call)] = f"{callee.name}()"
    return found


def _read_from(fn: Optional[Function], losses: Set[str]) -> Dict[str, str]:
    """Where a loss was read from (``loss = outputs.loss``): that path -> the loss's name. Kept
    again through the path (``epoch_loss += outputs.loss``), it is the same tensor."""
    if fn is None:
        return {}
    found: Dict[str, str] = {}
    for target, value in fn.assigns:
        if isinstance(target, cst.Name) and target.value in losses and isinstance(value, (cst.Attribute, cst.Subscript)):
            path = access_path(value)
            if path is not None:
                found.setdefault(path, target.value)
    return found


def _alias_carried(value: cst.BaseExpression, aliases: Dict[str, str]) -> Optional[str]:
    if not aliases:
        return None
    value = _reduced(value)
    return aliases.get(access_path(value) or "") if isinstance(value, (cst.Attribute, cst.Subscript)) else None


def _step_carried(value: cst.BaseExpression, steps: Dict[int, str]) -> Optional[str]:
    return steps.get(id(_reduced(value))) if steps else None


def _reduced(value: cst.BaseExpression) -> cst.BaseExpression:
    """What ``value`` moves or reduces (``step(b).mean().cpu()``): the tensor whose graph it keeps."""
    value = _unmoved(value)
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _REDUCTIONS:
        value = _unmoved(value.func.value)
    return value


def _summands_of(fn: Function, totals: Set[str]) -> Set[str]:
    """The names ``fn`` adds (or scales) into ``totals``: ``total = a + b * 0.1``, ``total += c``,
    ``scaled = loss / steps`` (a divisor is a count, not a part)."""
    parts: Set[str] = set()
    for target, value in fn.assigns:
        if isinstance(target, cst.Name) and target.value in totals:
            parts |= _arithmetic_names(value)
    for aug in fn.aug_assigns:
        if isinstance(aug.target, cst.Name) and aug.target.value in totals:
            parts |= _arithmetic_names(aug.value)
    return parts - totals


def _arithmetic_names(value: cst.BaseExpression) -> Set[str]:
    value = _unmoved(value)
    if isinstance(value, cst.Name):
        return {value.value}
    if isinstance(value, cst.UnaryOperation):
        return _arithmetic_names(value.expression)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide):
        return _arithmetic_names(value.left)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, _ARITHMETIC):
        return _arithmetic_names(value.left) | _arithmetic_names(value.right)
    return set()


def _unindexed(value: cst.BaseExpression) -> cst.BaseExpression:
    """``loss_d[0]``: an element of a tensor is a view that keeps its graph."""
    while isinstance(value, cst.Subscript):
        value = value.value
    return value


def _kept_by_the_object(method: Function, param: str) -> Optional[cst.CSTNode]:
    """The statement of ``method`` that keeps (a tensor computed from) ``param`` on ``self`` past
    the call: ``self.history.append(param)``, ``self.total += param``."""
    if not method.params or param not in method.params[1:]:
        return None
    me = method.params[0]
    given = {param} | _elements_of(method, param)
    # ``v = v.data.sum()`` first: the value kept is a new tensor without the graph
    given -= {target.value for target, value in method.assigns
              if isinstance(target, cst.Name) and target.value in given and _carried(value, given) is None}
    for node in walk(method.node):
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) \
                and _held_by(node.target, me) and _carried(node.value, given):
            return node  # ``self.total += value``, ``self.sums[i] += value``
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append" \
                and _held_by(node.func.value, me) and len(node.args) == 1 and _carried(node.args[0].value, given):
            return node  # ``self.history.append(value)``, ``self.values.setdefault(key, []).append(value)``
    return None


def _held_by(container: cst.BaseExpression, me: str) -> bool:
    """Is ``container`` reached from the object ``me`` through an attribute (``self.values``,
    ``self.sums[i]``, ``self.values.setdefault(key, [])``, ``self.log[key]``)?"""
    through_attribute = False
    while True:
        if isinstance(container, cst.Attribute):
            through_attribute = True
            container = container.value
        elif isinstance(container, cst.Subscript):
            container = container.value
        elif isinstance(container, cst.Call):
            container = container.func
        else:
            return through_attribute and isinstance(container, cst.Name) and container.value == me


_SAME_ELEMENTS = frozenset({"sorted", "reversed", "list", "tuple", "iter"}) | PROGRESS_BARS


def _same_elements(method: Function, source: cst.BaseExpression) -> cst.BaseExpression:
    """``values`` of ``tqdm(values)``, ``sorted(values)``: what a loop over it visits."""
    while isinstance(source, cst.Call) and source.args and source.args[0].keyword is None and (
            (method.owner.imports.qualify(source.func) or dotted(source.func)) in _SAME_ELEMENTS):
        source = source.args[0].value
    return source


def _elements_of(method: Function, param: str) -> Set[str]:
    """Names a loop of ``method`` binds to the elements of ``param``: ``for v in values``,
    ``for i, v in enumerate(values)``."""
    names: Set[str] = set()
    for node in walk(method.node):
        if not isinstance(node, cst.For):
            continue
        source, target = _same_elements(method, node.iter), node.target
        if isinstance(source, cst.Call) and dotted(source.func) == "enumerate" and source.args \
                and isinstance(target, cst.Tuple) and len(target.elements) == 2:
            source, target = _same_elements(method, source.args[0].value), target.elements[1].value
        if isinstance(source, cst.Name) and source.value == param and isinstance(target, cst.Name):
            names.add(target.value)
    return names


def _returned_with_graph(ctx: Context, fn: Optional[Function]) -> Set[str]:
    """Names of ``fn`` bound to what a project function returns after running backward on it
    (``losses = trainer.train_step(batch)`` returning the losses it backpropagated), and the names
    unpacked from it (``*parts, total = losses``; of ``loss, seconds = step(batch)`` only ``loss``):
    tensors that still hold their graphs."""
    sites = ctx.sites.in_function(fn)
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns
    # only names that are accumulated (``total += x``, ``xs.append(x)``, handed to a method, or
    # unpacked into such a name) are worth resolving a callee for
    kept = [a.value for a in (fn.aug_assigns if fn is not None else ctx.model.module_aug_assigns)
            if isinstance(a.operator, cst.AddAssign)]
    kept += [site.call.args[0].value for site in sites if site.name == "append" and len(site.call.args) == 1]
    # or handed to a method that may keep it (``self.metrics.add(loss_d[0])``)
    kept += [a.value for site in sites if isinstance(site.call.func, cst.Attribute) and site.name != "append"
             for a in site.call.args if isinstance(_unindexed(a.value), cst.Name)]
    wanted = {n.value for value in kept for n in walk(value) if isinstance(n, cst.Name)}
    if not wanted:
        return set()
    wanted |= {value.value for target, value in assigns if isinstance(target, (cst.Tuple, cst.List))
               and isinstance(value, cst.Name) and not wanted.isdisjoint(_unpacked_names(target, None))}
    calls = {id(site.call): site for site in sites}
    found: Set[str] = set()
    graphs = set()  # the assignments binding such a return whole
    for target, value in assigns:
        value = _unmoved(value) if value is not None else None
        site = calls.get(id(value)) if isinstance(value, cst.Call) else None
        if site is None or not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            continue
        if wanted.isdisjoint({target.value} if isinstance(target, cst.Name) else _unpacked_names(target, None)):
            continue
        callee = ctx.sites.project_callee(site)
        carried = _returned_backpropagated(callee) if callee is not None and callee.owner is not None else None
        if carried is None:
            continue
        if isinstance(target, cst.Name):
            if carried == _WHOLE:
                found.add(target.value)
                graphs.add(id(target))
        else:  # ``box, _, total = trainer.train_step(batch)``
            found.update(_unpacked_names(target, None if carried == _WHOLE else carried))
    preorder = ctx.model.preorder
    for target, value in assigns:  # ``a, b, total = losses``, losses last bound to such a return
        if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, cst.Name) or value.value not in found:
            continue
        at = preorder.index(target) or 0
        bound = [(preorder.index(t) or 0, t) for t, _ in assigns
                 if isinstance(t, cst.Name) and t.value == value.value and (preorder.index(t) or 0) < at]
        if bound and id(max(bound, key=lambda b: b[0])[1]) in graphs:
            found.update(_unpacked_names(target, None))
    return found


def _unpacked_names(target, positions: Optional[Set[int]]) -> Set[str]:
    """The names a tuple target binds (only at ``positions``, when given)."""
    names = set()
    for index, element in enumerate(target.elements):
        if isinstance(element.value, cst.StarredElement):
            if positions is not None:
                break  # the positions after a starred target are not known
            named = element.value.value
        else:
            named = element.value
        if (positions is None or index in positions) and isinstance(named, cst.Name) and named.value != "_":
            names.add(named.value)
    return names


_WHOLE = -1  # the returned value itself holds a backpropagated tensor (not one element of a tuple)


def _returned_backpropagated(fn: Function):
    """What ``fn`` returns that it ran backward on: ``_WHOLE`` (``return loss``, or ``return
    losses`` after ``losses.total.backward()``), the positions of such elements of a returned tuple
    (``return loss, seconds``), or None."""
    if not fn.returns or "backward" not in fn.owner.source:
        return None
    backpropagated = set()
    for site in fn.owner.sites().in_function(fn):
        if site.name == "backward" and isinstance(site.call.func, cst.Attribute):
            receiver = site.call.func.value
            if isinstance(receiver, cst.Call) and receiver.args:  # scaler.scale(loss).backward()
                receiver = receiver.args[0].value
            root = (dotted(receiver) or "").split(".", 1)[0]
            if root:
                backpropagated.add(root)
    # and what they were computed from (``scaled = loss / accumulation`` backpropagated, ``loss``
    # returned): the same graph
    while True:
        more = _summands_of(fn, backpropagated)
        if more <= backpropagated:
            break
        backpropagated |= more
    positions: Set[int] = set()
    for value in fn.returns:
        if isinstance(value, cst.Name) and value.value in backpropagated:
            return _WHOLE
        if isinstance(value, cst.Tuple):
            positions |= {i for i, e in enumerate(value.elements) if isinstance(e.value, cst.Name) and e.value.value in backpropagated}
    return positions or None


def _retained(ctx, node, name, training, fn, site=None, returned=frozenset()) -> Iterable[Match]:
    loops = site.loops if site is not None else ctx.sites.loops_of.get(id(node), ())
    if not any(id(loop) in training for loop in loops) and not (
            not loops and _outlives_call(node, fn)
            and (_is_one_step(ctx, fn) or any(ctx.sites.in_training_loop(c) for c in ctx.sites.calls_of(fn)))):
        return
    if _rebound_detached(ctx, fn, name):
        return  # ``loss = loss.item()`` somewhere before: which value is accumulated is not proven
    if name not in returned and not _kept_value_backpropagated(ctx, fn, name, node):
        return  # ``loss = outputs.loss`` of an evaluation after the training loop: another value
    if isinstance(node, cst.AugAssign) and loops and _reset_in_loop(node.target, loops[-1]):
        return  # the accumulator starts again every pass (every optimizer step): memory is bounded
    if isinstance(node, cst.Call) and _made_each_iteration(node.func.value, loops, training):
        return  # ``terms = []`` in every training iteration: the list dies with its step
    kept = node.value if isinstance(node, (cst.AugAssign, cst.Assign)) else node.args[0].value
    if (isinstance(node, cst.AugAssign) or not isinstance(kept, cst.Name)) and _under_no_grad(ctx, fn, node):
        return  # a sum or product made under no_grad is a new tensor without a graph (the loss itself kept is not)
    restart = _restart_outside(node, loops)
    what = (f"each value that `{name[:-2]}[...].backward()` runs on" if name.endswith("[]")
            else f"the loss that {name} returns after running backward on it" if name.endswith("()")
            else f"the tensor `{name}` itself" if isinstance(_unmoved(kept), cst.Name) else f"a tensor computed from `{name}`")
    fix = (f"keep {ctx.code(kept)}.detach() (or .item()) in {name[:-2]} and backpropagate the live value"
           if name.endswith("[]") else f"keep {ctx.code(kept) if isinstance(kept, cst.Call) else _operand(ctx.code(kept))}.item() (or have {name} return loss.item())"
           if name.endswith("()") else f"accumulate {name}.item() (or {name}.detach())")
    yield Match("TL503", node, lambda line_of, c=ctx.code(node), r=restart, w=what, f=fix: (
        f"`{c}` keeps {w}, and with it the whole autograd graph of every "
        f"iteration: " + (
            f"memory grows with each batch of the epoch, until `{ctx.code(r)}` ({line_of(r)}) starts the "
            f"total again at the next epoch (an epoch of graphs at once: out of memory on a long epoch)"
            if r is not None else "memory grows with every step, without bound, until the run is out of memory "
            "(or slows down)") +
        f"; {f}."
    ))


def _kept_value_backpropagated(ctx: Context, fn: Optional[Function], name: str, node: cst.CSTNode) -> bool:
    """Is the value of ``name`` that ``node`` keeps one that a backward runs on? The assignment to
    ``name`` that comes last before ``node`` must come before a backward of ``name`` (in the same
    pass, before or after ``node``); one made after every backward binds another value (a loss
    the evaluation after the training loop computes under no_grad)."""
    preorder = ctx.model.preorder
    at = preorder.index(node)
    if at is None:
        return True
    assigned = [i for target, _ in (fn.assigns if fn is not None else ctx.model.module_assigns)
                if isinstance(target, cst.Name) and target.value == name
                for i in [preorder.index(target)] if i is not None and i < at]
    if not assigned:
        return True  # a parameter, or bound by a loop or a with: the backward's own value
    last = max(assigned)
    return any(i is not None and i > last for i in (preorder.index(site.call) for site in _backward_sites(ctx, fn, name)))


def _made_each_iteration(container: cst.BaseExpression, loops, training) -> bool:
    """Is the list appended to made again in every pass of the innermost training loop around the
    append (``running = []`` in the step, appended to in a loop over the step's terms)?"""
    inner = [i for i, loop in enumerate(loops) if id(loop) in training]
    return bool(inner) and _reset_in_loop(container, loops[inner[-1]])


def _restart_outside(node: cst.CSTNode, loops) -> Optional[cst.CSTNode]:
    """The assignment that starts the accumulator again in a loop around the one it grows in
    (``epoch_loss = 0`` at each epoch's start): then its graphs are freed once per epoch."""
    target = _accumulator(node)
    wanted = dotted(target) if target is not None else None
    if wanted is None:
        return None
    for outer in reversed(loops[:-1]):
        for n in walk(outer):
            if isinstance(n, cst.Assign) and any(dotted(t.target) == wanted for t in n.targets):
                return n
    return None


def _outlives_call(node: cst.CSTNode, fn: Optional[Function]) -> bool:
    """In a function run once per training iteration (the loop body moved into a helper): does
    the accumulator outlive the call? An attribute does, a list the caller passed in does, and a
    total passed in does when the function hands it back."""
    if fn is None:
        return False
    target = _accumulator(node)
    while isinstance(target, cst.Subscript):
        target = target.value  # ``self.stats["loss"].append(loss)``: an entry of what ``self`` holds
    path = dotted(target) if target is not None else None
    if path is None:
        return False
    head = path.split(".", 1)[0]
    if head == "self":
        return True
    if head not in fn.params:
        return False
    if not isinstance(node, cst.AugAssign):
        return True  # a list or dict the caller passed in: it keeps what is put into it
    # a total handed back (alone or in a tuple), and never started again here (``running = 0`` at
    # a step: bounded)
    handed_back = {dotted(part) for value in fn.returns
                   for part in ([e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value])}
    return path in handed_back and not any(dotted(t) == path for t, _ in fn.assigns)


# ``.cpu()`` and ``.to(...)`` are differentiable copies: the graph comes along (``.numpy()`` raises
# on a tensor that requires grad, so it is not a silent leak either way; what does detach is
# names.DETACHING).
_MOVES = frozenset({"cpu", "to", "cuda"})


def _carried(value: cst.BaseExpression, losses: Set[str]) -> Optional[str]:
    """The loss whose graph ``value`` still holds: ``loss``, ``loss.cpu()``, ``loss.to("cpu")``,
    a reduction or reshape of it (``loss.sum()``, ``loss.mean()``), and arithmetic on it
    (``loss / len(loader)``, ``weight * loss``, ``-loss``), which makes a new tensor whose graph
    includes the loss's."""
    value = _unmoved(value)
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _REDUCTIONS:
        value = _unmoved(value.func.value)
    if isinstance(value, cst.Name):
        return value.value if value.value in losses else None
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        return _carried(value.expression, losses)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, _ARITHMETIC):
        return _carried(value.left, losses) or _carried(value.right, losses)
    return None


_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
# Tensor methods whose result is computed from the tensor by autograd: the graph comes along.
_REDUCTIONS = frozenset({"sum", "mean", "squeeze", "unsqueeze", "view", "reshape", "flatten", "float", "double",
                         "abs", "clone"})


def _unmoved(value: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES:
        value = value.func.value
    return value


def _rebound_detached(ctx: Context, fn: Optional[Function], name: str) -> bool:
    assigns = fn.assigns if fn is not None else ctx.model.module_assigns
    for target, value in assigns:
        if isinstance(target, cst.Name) and target.value == name and isinstance(value, cst.Call):
            func = value.func
            if (isinstance(func, cst.Attribute) and func.attr.value in DETACHING) or dotted(func) == "float":
                return True
    return False


def _reset_in_loop(target: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """``total = 0`` (or any plain assignment) to the accumulator inside the loop it grows in."""
    wanted = dotted(target)
    for node in walk(loop):
        if isinstance(node, cst.Assign) and any(dotted(t.target) == wanted for t in node.targets):
            return True
    return False


def _backpropagated_names(ctx: Context, fn: Optional[Function]) -> Set[str]:
    return {name for site in ctx.sites.in_function(fn) for name in _backpropagated_by(site)}


def _backward_sites(ctx: Context, fn: Optional[Function], name: str) -> List[object]:
    return [site for site in ctx.sites.in_function(fn) if name in _backpropagated_by(site)]


def _backpropagated_by(site) -> Set[str]:
    """The names a backward call runs on: ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``."""
    if site.name != "backward":
        return set()
    names = set()
    receiver = site.call.func.value if isinstance(site.call.func, cst.Attribute) else None
    if isinstance(receiver, cst.Call) and receiver.args:  # scaler.scale(loss).backward()
        receiver = receiver.args[0].value
    if isinstance(receiver, cst.Name):
        names.add(receiver.value)
    elif isinstance(receiver, cst.Subscript) and dotted(receiver.value):
        names.add(f"{dotted(receiver.value)}[]")  # ``losses[-1].backward()``: an element of ``losses``
    positional = [a for a in site.call.args if a.keyword is None and not a.star]
    if positional and isinstance(positional[0].value, cst.Name):  # accelerator.backward(loss)
        names.add(positional[0].value.value)
    return names


# --------------------------------------------------------------------------- TL901
def checkpoint_not_resumable(ctx: Context) -> Iterable[Match]:
    # Something is trained here: an optimizer is built or named, or a loop trains (through
    # the project's own methods that step optimizers built elsewhere).
    has_optimizer = any(r.kind == OPTIMIZER for r in ctx.model.roles.roles.values()) or "optim" in ctx.model.source
    if not has_optimizer and not ctx.sites.training_loops():
        return
    stateful, scheduled = _state_lost_on_resume(ctx)
    if not stateful and not scheduled:
        return  # a stateless optimizer (SGD without momentum) and no schedule: nothing to restore
    # A schedule built from the epoch the run resumes at (LambdaLR(opt, Decay(epochs, start_epoch,
    # ...)), last_epoch=start_epoch - 1) gets its position back on resume: not claimed lost.
    restored = _schedule_restored(ctx) if scheduled else None
    for save in ctx.sites.sites:
        if dotted(save.call.func) != "torch.save" or not save.call.args:
            continue
        # ``site``: where the saved value is made, the torch.save itself or a call of the helper
        # that saves its parameter (``self.save_checkpoint({"epoch": ..., ...}, is_best)``)
        for site, saved in _saved_values(ctx, save):
            # A checkpoint dict (weights plus epoch/step/...) is meant for resuming; so is a bare
            # model.state_dict() saved every N steps while a stateful optimizer and a schedule run.
            # Other bare weights are an export ("best.pt", the final model), fine mid-training.
            if not _is_checkpoint_dict(saved) and not (_periodic_weights(ctx, site, saved) and stateful and scheduled) \
                    and not (_is_state_dict(saved) and _reloaded_before_training(ctx, save)):
                continue
            state_dicts = [n for n in walk(saved) if _is_state_dict(n)]
            if not state_dicts or any(_is_optimizer_state(ctx, n) for n in state_dicts) or _has_optimizer_entry(saved):
                continue
            exported = _best_model_export(ctx, save) or (site is not save and any(_BEST.search(ctx.code(t)) for t in site.tests))
            if not ctx.sites.in_training_loop(site) or (exported and not _resumed_from(ctx, save)):
                continue
            yield from _not_resumable(ctx, site, saved, state_dicts, stateful, scheduled, restored)


def _saved_values(ctx: Context, save) -> Iterable[Tuple[object, Optional[cst.BaseExpression]]]:
    """(where the value is made, the value) of what a torch.save writes: its argument, or, for a
    helper's parameter (``def save_checkpoint(state, is_best): torch.save(state, path)``), the
    argument each call of the helper in this module passes."""
    value = save.call.args[0].value
    fn = save.function
    if not isinstance(value, cst.Name) or fn is None or value.value not in fn.params or any(
            isinstance(t, cst.Name) and t.value == value.value for t, _ in fn.assigns):
        yield save, _saved_expression(ctx, save)
        return
    for caller in ctx.sites.calls_of(fn):
        method = fn.cls is not None and isinstance(caller.call.func, cst.Attribute)
        given = dict(parameters_given(caller.call, fn.params, method)).get(value.value)
        if given is not None:
            yield caller, _value_of(ctx, caller, given, 0)


def _not_resumable(ctx: Context, site, saved, state_dicts, stateful, scheduled, restored) -> Iterable[Match]:
    """TL901 at ``site`` for a checkpoint ``saved`` without the optimizer's state, unless what a
    resume restarts (``stateful`` optimizers, a ``scheduled`` position not ``restored``) is kept."""
    schedule_lost = scheduled and restored is None and not _saves_scheduler(ctx, saved)
    if not stateful and not schedule_lost:
        return  # the schedule is saved or restored and the optimizer keeps nothing
    # A warning where a resume of this program loses what it relies on: it loads weights back
    # into a model to go on training, and the schedule starts over (the learning rate jumps
    # back). Optimizer moments alone, or an export nothing resumes from, are advice.
    resume = _resume_load(ctx, [n for n in state_dicts if isinstance(n.func, cst.Attribute)], site.function)
    yield Match("TL901", site.call, lambda line_of, c=site.call, lost=schedule_lost, r=resume: not_resumable_message(
        ctx.label(c),
        [what + _built_at(line_of, calls) for what, calls in stateful],
        lost,
        None if lost or restored is None else
        f"{ctx.label(restored[0])} ({line_of(restored[0])}) {restored[1]}",
        None if r is None else f"{ctx.label(r)} ({line_of(r)})",
    ), advice=resume is None or not schedule_lost)


def _resume_load(ctx: Context, saved: List[cst.Call], saving: Optional[Function]) -> Optional[cst.Call]:
    """Where the program puts saved weights back into a model it trains (``model.load_state_dict(
    torch.load(path))``): a resume path, the load into a model the checkpoint saves (``saved``, its
    ``state_dict()`` calls in ``saving``) first. A load into an optimizer or scheduler alone is not
    one."""
    objects = ctx.model.objects
    models = {o for call in saved for o in objects.eval(call.func.value, saving)}
    found = None
    for site in ctx.sites.named("load_state_dict"):
        role = ctx.model.roles.get(site.receiver) if site.receiver else None
        if role is not None and role.kind in (OPTIMIZER, SCHEDULER):
            continue
        if _before_training(ctx, site):
            if not isinstance(site.call.func, cst.Attribute) or models.isdisjoint(objects.eval(site.call.func.value, site.function)):
                found = found or site.call
                continue
            return site.call
    return found


_HELPER_DEPTH = 3  # callers followed from a helper's statement to the training it comes before


def _before_training(ctx: Context, site, depth: int = 0) -> bool:
    """Training runs after this statement in its function: a training loop there, or a call of a
    function of this module that runs a backward or an optimizer step (a load after training is a
    final evaluation's, and an evaluation helper called after it does not train, whatever it calls
    elsewhere)."""
    order = ctx.sites.statement_order
    at = order.get(id(site.statement), -1)
    for loop in ctx.sites.training_loops():
        if ctx.sites.function_of_loop.get(id(loop)) is site.function and order.get(id(loop), -1) > at:
            return True
    for later in ctx.sites.in_function(site.function):
        callee = ctx.sites.local_callee(later) if order.get(id(later.statement), -1) > at else None
        if callee is not None and ctx.sites.runs_a_step(callee):
            return True
    # a helper of this module called before training (``self.load_checkpoint()`` before the epochs)
    return depth < _HELPER_DEPTH and site.function is not None and any(
        _before_training(ctx, caller, depth + 1) for caller in ctx.sites.calls_of(site.function))


def _built_at(line_of, calls) -> str:
    """`` (the optimizer built at line 12)``, `` (the optimizers built at lines 12, 15 and 16)``."""
    lines = [line for line in (line_of(c) for c in calls) if line]
    if len(lines) > 1 and all(line.startswith("line ") for line in lines):
        numbers = [line[len("line "):] for line in lines]
        return f" (the optimizers built at lines {', '.join(numbers[:-1])} and {numbers[-1]})"
    return f" (the optimizer built at {' and '.join(lines)})" if lines else ""


def _state_lost_on_resume(ctx: Context) -> Tuple[List[Tuple[str, List[cst.Call]]], bool]:
    """What a weights-only checkpoint cannot restore: the state of each stateful optimizer built
    here (SGD with momentum 0 has none; one built elsewhere counts as stateful), with the calls that
    built them, and whether a learning-rate schedule runs (its position)."""
    lost: List[Tuple[str, List[cst.Call]]] = []
    built = False
    for site, name in optimizer_calls(ctx):
        built = True
        if name == "SGD":
            momentum = arg(site.call, 2, "momentum")
            value = ctx.model.values.number(momentum) if momentum is not None else 0
            if value == 0:
                continue
        what = f"{name}'s {OPTIMIZER_STATE.get(name, 'state')}"
        calls = next((c for w, c in lost if w == what), None)
        if calls is None:
            lost.append((what, [site.call]))
        else:
            calls.append(site.call)
    if not built:
        lost.append(("the optimizer's state", []))
    return lost, any(r.kind == SCHEDULER for r in ctx.model.roles.roles.values())


# A name for the epoch or step a run starts (resumes) at: start_epoch, resume_step, epoch_offset,
# first_epoch, initial_epoch.
_RESUME_TOKENS = {"start", "offset", "shift", "resume", "resumed", "begin"}
_FIRST = re.compile(r"(?:^|_)(?:first|initial|init)_(?:epoch|step|iter|iteration)s?$", re.IGNORECASE)


def _schedule_restored(ctx: Context) -> Optional[Tuple[cst.Call, str]]:
    """(construction, what it is built with) when every scheduler built here takes the epoch
    the run resumes at, so a resumed run rebuilds the schedule at its position: ``last_epoch=`` of
    anything but -1, or a LambdaLR/MultiplicativeLR function built from (or reading) a resume
    value, that is the start of a ``range(start, ...)`` loop, a value tested where weights are
    loaded (``if opt.epoch != 0: model.load_state_dict(...)``), or a name like ``start_epoch``.
    None if a scheduler built here takes none, or none is built here (nothing shows it restored)."""
    schedulers = []
    for site in ctx.sites.sites:
        role = classify_constructor(site.call, ctx.model.imports)
        if role is not None and role.kind == SCHEDULER:
            schedulers.append(site.call)
    if not schedulers:
        return None
    starts = _resume_values(ctx)
    found = None
    for call in schedulers:
        evidence = _resume_offset(ctx, call, starts)
        if evidence is None:
            return None
        found = found or (call, evidence)
    return found


def _resume_values(ctx: Context) -> Set[str]:
    starts: Set[str] = set()
    for site in ctx.sites.sites:
        statement = site.statement
        if (site.name == "range" and isinstance(statement, cst.For) and statement.iter is site.call
                and len(site.call.args) >= 2 and literal_number(site.call.args[0].value) is None):
            path = dotted(site.call.args[0].value)
            if path:
                starts.add(path)  # ``for epoch in range(start_epoch, epochs):``
        if site.name == "load_state_dict" or dotted(site.call.func) == "torch.load":
            for test in site.tests:  # ``if opt.epoch != 0:`` load the weights
                starts.update(path for path, _ in _paths(test))
    return starts


def _paths(node: cst.CSTNode) -> Iterable[Tuple[str, cst.BaseExpression]]:
    """The access paths an expression reads, whole (``opt.epoch``, not ``opt`` as well)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        path = dotted(node)
        if path:
            yield path, node
            return
    for child in children(node):
        yield from _paths(child)


def _resume_offset(ctx: Context, call: cst.Call, starts: Set[str]) -> Optional[str]:
    last_epoch = kwarg(call, "last_epoch")
    if last_epoch is not None and literal_number(last_epoch.value) != -1:
        return f"takes last_epoch={ctx.code(last_epoch.value)}"
    last = (dotted(call.func) or "").rsplit(".", 1)[-1]
    function = arg(call, 1, "lr_lambda") if last in ("LambdaLR", "MultiplicativeLR") else None
    if function is None:
        return None
    scopes = [function]
    if isinstance(function, cst.Name) and function.value in ctx.model.functions:
        scopes.append(ctx.model.functions[function.value].node)  # ``lr_lambda=decay``, a def of the module
    for scope in scopes:
        for path, node in _paths(scope):
            if path in starts or _names_resume(path.rsplit(".", 1)[-1]):
                return f"is built with {ctx.code(node)}, the epoch the run resumes at"
    return None


def _names_resume(name: str) -> bool:
    return bool(_RESUME_TOKENS & set(name.lower().split("_"))) or bool(_FIRST.search(name))


def _saves_scheduler(ctx: Context, saved: cst.BaseExpression) -> bool:
    """The checkpoint holds a scheduler's state (``"scheduler": scheduler.state_dict()``)."""
    for node in walk(saved):
        if _is_state_dict(node):
            owner = dotted(node.func.value)
            role = ctx.model.roles.get(owner)
            if role is not None and role.kind == SCHEDULER:
                return True
        if isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString):
            if "sched" in str(node.key.evaluated_value).lower():
                return True
    return False


def _saved_expression(ctx: Context, site) -> Optional[cst.BaseExpression]:
    return _value_of(ctx, site, site.call.args[0].value, 0)


def _value_of(ctx: Context, site, value: cst.BaseExpression, depth: int) -> Optional[cst.BaseExpression]:
    """What a name saved at ``site`` holds: its value where it is assigned once in the function
    (through a copy of another name, ``state_ = state``), or the dicts it is built from."""
    if isinstance(value, cst.Name):
        assigns = site.function.assigns if site.function is not None else ctx.model.module_assigns
        sources = [v for t, v in assigns if isinstance(t, cst.Name) and t.value == value.value]
        extra = [v for t, v in assigns if isinstance(t, cst.Subscript) and dotted(t.value) == value.value]
        if len(sources) > 1 and all(_is_dict_literal(v) for v in sources):
            # ``state = {...}`` then ``state = {**state, "weights": ...}`` (or one dict per branch):
            # the entries of all of those written before the save
            at = ctx.model.preorder.index(site.call) or 0
            before = [v for v in sources + extra if (ctx.model.preorder.index(v) or 0) < at]
            return cst.List([cst.Element(v) for v in before]) if before else None
        if len(sources) != 1:
            return None
        if extra:
            return cst.List([cst.Element(v) for v in sources + extra])
        if isinstance(sources[0], cst.Name) and depth < 3:
            return _value_of(ctx, site, sources[0], depth + 1)
        return sources[0]
    return value


_BEST = re.compile(r"best|min_|max_|improv", re.IGNORECASE)


def _periodic_weights(ctx: Context, site, saved: Optional[cst.BaseExpression]) -> bool:
    """A model's bare state dict saved every N steps or epochs (``if step % save_every == 0:``),
    not at an improvement, in a function that saves no optimizer state beside it (HF scripts save
    ``optimizer.pt`` and ``scheduler.pt`` with separate calls)."""
    if not _is_state_dict(saved) or not any(_modulo(test) for test in site.tests) or _best_model_export(ctx, site):
        return False
    owner = ctx.model.roles.get(dotted(saved.func.value))
    if _is_optimizer_state(ctx, saved) or (owner is not None and owner.kind == SCHEDULER):
        return False  # the optimizer's or scheduler's own state saved on its own
    for other in ctx.sites.in_function(site.function):
        if other is not site and dotted(other.call.func) == "torch.save" and other.call.args:
            if any(_is_state_dict(n) and _is_optimizer_state(ctx, n) for n in walk(other.call.args[0].value)):
                return False
    return True


def _best_model_export(ctx: Context, site) -> bool:
    """A snapshot of the best model so far (``if val_loss < best:``, ``best.pt``) is an export for
    evaluation, not a resume point; and with Accelerate the resumable state is save_state()'s."""
    if any(_BEST.search(ctx.code(test)) for test in site.tests):
        return True
    if len(site.call.args) > 1 and _BEST.search(ctx.code(site.call.args[1].value)):
        return True
    return _saves_library_state(ctx)


def _saves_library_state(ctx: Context) -> bool:
    """The program saves its resumable state with Accelerate's ``save_state``: here, or in a project
    function it calls (``train_util.save_state_on_epoch_end(args, accelerator)``)."""
    if ctx.sites.named("save_state"):
        return True
    project = ctx.model.project
    if project is None:
        return False
    for site in ctx.sites.sites:
        name = dotted(site.call.func)
        if name and project.may_mention(ctx.model, name, "save_state"):
            callee = project.function(ctx.model, name)
            if callee is not None and any(method == "save_state" for _, method, _ in callee.method_calls):
                return True
    return False


def _resumed_from(ctx: Context, site) -> bool:
    """Does the program resume training from the file this call saves? It loads (``torch.load``) the
    same path and takes the epoch or step to start at out of it (``start_epoch =
    checkpoint["epoch"]``): then even a best-so-far snapshot is the run's resume point."""
    target = literal_str(site.call.args[1].value) if len(site.call.args) > 1 else None
    if target is None:
        return False
    holders = set()
    for load in ctx.sites.named("load"):
        if dotted(load.call.func) != "torch.load" or not load.call.args or literal_str(load.call.args[0].value) != target:
            continue
        smalls = load.statement.body if isinstance(load.statement, cst.SimpleStatementLine) else ()
        for small in smalls:  # checkpoint = torch.load("./checkpoint/ckpt.pth")
            if isinstance(small, cst.Assign) and small.value is load.call and len(small.targets) == 1:
                if isinstance(small.targets[0].target, cst.Name):
                    holders.add(small.targets[0].target.value)
    assigns = ctx.model.module_assigns + [a for fn in ctx.model.all_functions for a in fn.assigns]
    return bool(holders) and any(
        isinstance(name, cst.Name) and _RESUME_COUNTER.search(name.value) and isinstance(value, cst.Subscript)
        and isinstance(value.value, cst.Name) and value.value.value in holders
        for name, value in assigns)


def _reloaded_before_training(ctx: Context, site) -> bool:
    """Does the program load what this call saves (the same path, written the same way) back into
    a model before it trains (``if (logdir / "latest.pt").exists(): agent.load_state_dict(
    torch.load(logdir / "latest.pt"))``)? Then the bare weights saved are the run's resume point."""
    if len(site.call.args) < 2:
        return False
    path = ctx.code(site.call.args[1].value)
    for load in ctx.sites.named("load_state_dict"):
        if not load.call.args or not _before_training(ctx, load):
            continue
        given = load.call.args[0].value
        if isinstance(given, cst.Name):  # ``weights = torch.load(path)`` first
            scope = load.function.assigns if load.function is not None else ctx.model.module_assigns
            values = [v for t, v in scope if isinstance(t, cst.Name) and t.value == given.value]
            given = values[0] if len(values) == 1 else given
        if isinstance(given, cst.Call) and dotted(given.func) == "torch.load" and given.args \
                and ctx.code(given.args[0].value) == path:
            return True
    return False


_RESUME_COUNTER = re.compile(r"epoch|step", re.IGNORECASE)


def _has_optimizer_entry(saved: cst.BaseExpression) -> bool:
    """A dict entry named for the optimizer (``"optimizer": manager.get_state()``), whatever
    produces its value: the optimizer state is saved by a call the rule cannot read."""
    for node in walk(saved):
        if isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString):
            if "optim" in str(node.key.evaluated_value).lower():
                return True
        if isinstance(node, cst.Arg) and node.keyword is not None and "optim" in node.keyword.value.lower():
            return True
    return False


def _is_checkpoint_dict(saved: Optional[cst.BaseExpression]) -> bool:
    if isinstance(saved, cst.List):  # a dict plus the entries assigned into it later
        return any(_is_checkpoint_dict(e.value) for e in saved.elements) or len(saved.elements) > 1
    if isinstance(saved, cst.Dict):
        return len(saved.elements) >= 2
    return isinstance(saved, cst.Call) and dotted(saved.func) == "dict" and len(saved.args) >= 2


def _is_dict_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Dict) or (isinstance(node, cst.Call) and dotted(node.func) == "dict")


def _is_state_dict(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "state_dict"


def _is_optimizer_state(ctx: Context, call: cst.Call) -> bool:
    owner = dotted(call.func.value)
    role = ctx.model.roles.get(owner)
    return role is not None and role.kind == OPTIMIZER


def _losses_from_project_kept(ctx: Context) -> Iterable[Match]:
    """TL503 in a file that runs no backward itself: the losses a project function backpropagated
    and returned (``losses = trainer.train_step(batch)``), kept by ``total += losses.total``."""
    if "+=" in ctx.model.source or "append(" in ctx.model.source:
        yield from loss_graph_retained(ctx)


THROUGH_PROJECT = {"TL503": _losses_from_project_kept}

RULES = {
    "TL202": accumulation_remainder_dropped,
    "TL502": eval_without_no_grad,
    "TL503": loss_graph_retained,
    "TL901": checkpoint_not_resumable,
}
