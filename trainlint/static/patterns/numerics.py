"""Losses on probabilities and attention arguments: TL801, TL802, TL803, TL804, TL805."""
from __future__ import annotations

import re
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from .. import library
from ..calls import arg, is_none, literal_bool, literal_number
from ..module import Function, ModuleModel
from ..names import PROGRESS_BARS, dotted, plain_key
from ..project import names_an_import
from ...wording import normalised_twice
from ..roles import LOSS_FN
from ..walk import children, walk
from . import Context, Match

_CE_FUNCTIONS = {"cross_entropy"}
_CE_MODULES = {"CrossEntropyLoss"}
_NLL_FUNCTIONS = {"nll_loss"}
_NLL_MODULES = {"NLLLoss"}
_BCE_FUNCTIONS = {"binary_cross_entropy"}
_BCE_MODULES = {"BCELoss"}
_BCE_LOGITS_FUNCTIONS = {"binary_cross_entropy_with_logits"}
_BCE_LOGITS_MODULES = {"BCEWithLogitsLoss"}
_SIGMOIDS = frozenset({"sigmoid", "Sigmoid"})
_LOSS_KINDS = (("ce", _CE_FUNCTIONS, _CE_MODULES), ("nll", _NLL_FUNCTIONS, _NLL_MODULES),
               ("bce", _BCE_FUNCTIONS, _BCE_MODULES), ("bce_logits", _BCE_LOGITS_FUNCTIONS, _BCE_LOGITS_MODULES))


def _last(node: cst.BaseExpression) -> str:
    """The called name: ``view`` of ``output[1:].view``, ``softmax`` of ``F.softmax``."""
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return (dotted(node) or "").rsplit(".", 1)[-1]


class _Op(str):
    """What produced a value (``softmax returned by Net.forward``), and where: the call or layer
    that applies the op, with its module. A finding about a value computed in another file may
    belong at that statement, where the fix goes."""
    site: Optional[Tuple[cst.CSTNode, ModuleModel]] = None


def _op(text: str, node: cst.CSTNode, model: ModuleModel, found: Optional[str] = None) -> _Op:
    """``text`` applied at ``node`` (or, renaming an inner result ``found``, where that was)."""
    op = _Op(text)
    op.site = found.site if isinstance(found, _Op) else (node, model)
    return op


def _torch_api(model: ModuleModel, func: cst.BaseExpression) -> Optional[str]:
    """The torch function, class or Tensor method a call's ``func`` is, by what it refers to:
    through the imports (``F.softmax``, ``nn.CrossEntropyLoss``, ``torch.sigmoid``), or a method
    called on a tensor (``logits.softmax(1)``). None for what the project defines (a local ``def
    softmax``, ``self.criterion``) or another library's, whatever it is called."""
    qualified = model.imports.qualify(func)
    if qualified is not None:
        return qualified.rsplit(".", 1)[-1] if qualified.split(".", 1)[0] == "torch" else None
    if isinstance(func, cst.Attribute) and (dotted(func.value) or "").split(".", 1)[0] not in ("self", "cls"):
        return func.attr.value
    return None


def _loss_kind(ctx: Context, call: cst.Call, fn: Optional[Function], depth: int = 0,
               cls: Optional[str] = None) -> Optional[str]:
    """"ce", "nll", "bce" or "bce_logits" for a call of such a loss function or loss module (or of
    an attribute holding the function: ``self.loss_func = F.binary_cross_entropy_with_logits``).
    ``cls``: a class of ``ctx``'s module that runs ``fn`` (a method it inherits), whose own
    assignments say what ``self.x`` holds; None when it assigns no loss there."""
    if cls is not None:
        path = dotted(_called_object(call.func))
        if not path or not fn or not fn.params or not path.startswith(fn.params[0] + "."):
            return None
        module_class = _loss_class(ctx, "self" + path[len(fn.params[0]):], fn, cls)
        return next((kind for kind, functions, modules in _LOSS_KINDS
                     if module_class in modules or module_class in functions), None)
    func = _called_object(call.func)
    name = _torch_api(ctx.model, func)
    role = ctx.model.roles.get(dotted(func))
    module_class = None
    if isinstance(func, cst.Call):
        module_class = _torch_api(ctx.model, func.func)  # ``nn.CrossEntropyLoss()(logits, y)``
    elif role is None or role.kind == LOSS_FN:
        module_class = _loss_class(ctx, dotted(func), fn) or _loss_class_of_objects(ctx, func, fn)
    for kind, functions, modules in _LOSS_KINDS:
        # a module class, or the function an attribute holds (``self.loss_func = F.cross_entropy``)
        if name in functions or module_class in modules or module_class in functions:
            return kind
    return _wrapped_loss_kind(ctx, func, fn, depth) if depth < _WRAPPED_LOSS_DEPTH else None


_LOSS_TEXT = re.compile(r"cross_entropy|CrossEntropyLoss|nll_loss|NLLLoss|BCELoss|BCEWithLogitsLoss")
_WRAPPED_LOSS_DEPTH = 2  # a project loss built on a project loss built on torch's: followed


def _wrapped_loss_kind(ctx: Context, func: cst.BaseExpression, fn: Optional[Function], depth: int) -> Optional[str]:
    """The loss a project's own loss applies to its first argument as it is: a loss module whose
    ``forward(inputs, targets)`` hands ``inputs`` to torch's loss (a focal loss built on
    ``binary_cross_entropy_with_logits``), or such a function. Every object the call can be must
    agree."""
    name = dotted(func)
    if name is None or ctx.model.imports.qualify(func) is not None and not names_an_import(ctx.model, name):
        return None  # a library's call (``torch.cat``): never a project's loss
    objects = ctx.model.objects.eval(func, fn)
    if objects and all(o.cls is not None and not o.unknown for o in objects):
        kinds = set()
        for obj in objects:
            owner = obj.class_module()
            forward = owner.method_of_class(obj.cls, "forward") if owner is not None else None
            kinds.add(_applied_to_parameter(owner, forward, 1, depth) if forward is not None else None)
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(func, cst.Attribute) and name.split(".", 1)[0] in ("self", "cls"):
        return None
    # a function of another module (one of this module is read with this module's calls bound to
    # its parameters: its own loss call is the finding)
    callee = ctx.model.project.function(ctx.model, name) if ctx.model.project is not None and name not in ctx.model.functions else None
    owner = callee.owner if callee is not None else None
    return _applied_to_parameter(owner, callee, 0, depth) if callee is not None and owner is not None and owner is not ctx.model else None


def _applied_to_parameter(owner: Optional[ModuleModel], fn: Function, index: int, depth: int) -> Optional[str]:
    """The kind of torch loss ``fn`` applies to its parameter number ``index``, unchanged."""
    if owner is None or len(fn.params) <= index or _LOSS_TEXT.search(owner.source) is None:
        return None  # its module never names a torch loss: nothing to read
    param = fn.params[index]
    inner = Context(owner, owner.sites())
    kinds = {_loss_kind(inner, site.call, fn, depth + 1) for site in inner.sites.in_function(fn)
             if isinstance(arg(site.call, 0, "input"), cst.Name) and arg(site.call, 0, "input").value == param}
    kinds.discard(None)
    return kinds.pop() if len(kinds) == 1 else None


def _called_object(func: cst.BaseExpression) -> cst.BaseExpression:
    """``loss.forward`` called is ``loss`` called (the hooks aside, the same computation)."""
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        return func.value
    return func


def _loss_class(ctx: Context, path: Optional[str], fn: Optional[Function], cls: Optional[str] = None) -> Optional[str]:
    """The loss module class assigned to ``path``; None when it is assigned anything else too
    (``self.loss_fn`` chosen by a branch: which one a call uses is not known). A parameter stored
    there (``self.loss = loss``) is its default: the loss the code is written for; a function's
    parameter is what every caller in the module passes."""
    if path and fn is not None and path in fn.params and fn.cls is None:
        values = [v for v, _ in _through_names(ctx.model, _passed(ctx.model, fn, path))]
    else:
        values = _assigned_following_defaults(ctx.model, path, fn, cls) if path else []
    values = [_unmoved(v) if v is not None else None for v in values]  # ``nn.CrossEntropyLoss().cuda()``
    classes = {_torch_api(ctx.model, v.func) if isinstance(v, cst.Call) else _function_held(ctx, v) for v in values}
    return classes.pop() if len(classes) == 1 else None


def _loss_class_of_objects(ctx: Context, func: cst.BaseExpression, fn: Optional[Function]) -> Optional[str]:
    """The torch class of the objects ``func`` can be, when every assignment to it aliases another
    variable and all its objects were built by one torch class in this module
    (``criterion_ = criterion`` after ``criterion = nn.CrossEntropyLoss()``)."""
    path = dotted(func)
    values = _assigned_following_defaults(ctx.model, path, fn) if path else []
    # (None: a parameter with no default stored there, ``self.criterion = criterion``: what its
    # callers here pass, read from the objects; one that came from elsewhere is not allocated here)
    if not path or not all(v is None or isinstance(v, cst.Name) and v.value not in ctx.model.functions
                           and _function_held(ctx, v) is None for v in values):
        return None  # only a name every plain assignment aliases to another variable: a function held is no object
    flow = ctx.model.objects
    objects = flow.eval(func, fn)
    if not objects or not all(isinstance(o.node, cst.Call) and flow.allocated_here(o) for o in objects):
        return None
    classes = {_torch_api(ctx.model, o.node.func) for o in objects}
    return classes.pop() if len(classes) == 1 else None


def _function_held(ctx: Context, value: Optional[cst.BaseExpression]) -> Optional[str]:
    """``F.binary_cross_entropy_with_logits`` stored as a value: the torch function it is, by the
    imports (a project's own function of that name is not torch's)."""
    qualified = ctx.qualify(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    return qualified.rsplit(".", 1)[-1] if qualified and qualified.startswith("torch.nn.functional.") else None


def _assigned_following_defaults(model: ModuleModel, path: str, fn: Optional[Function],
                                 cls: Optional[str] = None) -> List[Optional[cst.BaseExpression]]:
    """Every value assigned to ``path``, with a parameter of the assigning method replaced by its
    default value (None when it has none: the value is then not known). ``self.loss`` used in a
    method is the attribute of that method's class (``cls``, when a subclass of ``model`` runs
    it): other classes' ``self.loss`` are other objects."""
    cls = cls or (fn.cls if fn is not None else None)
    if cls is None or not path.startswith("self."):
        return list(model.values_assigned(path))
    return [
        assigner.default(value.value) if isinstance(value, cst.Name) and value.value in assigner.params else value
        for assigner, value in model.assignments_in_class(cls, path)
    ]


def _producer(ctx: Context, expr: cst.BaseExpression, fn: Optional[Function]) -> Optional[cst.Call]:
    """The call that produced a value: the expression itself, or the name's assignment in ``fn``."""
    if isinstance(expr, cst.Call):
        return expr
    if isinstance(expr, cst.Name):
        assigns = fn.assigns if fn is not None else ctx.model.module_assigns
        producers = [v for t, v in assigns if isinstance(t, cst.Name) and t.value == expr.value]
        if len(producers) == 1 and isinstance(producers[0], cst.Call):
            return producers[0]
    return None


def _is_call_named(model: ModuleModel, call: Optional[cst.Call], names) -> bool:
    return call is not None and _torch_api(model, call.func) in names


def softmax_before_cross_entropy(ctx: Context) -> Iterable[Match]:
    yield from _probabilities_handed_elsewhere(ctx)
    yield from _probabilities_into_an_inherited_loss(ctx)
    for site in ctx.sites.sites:
        kind = _loss_kind(ctx, site.call, site.function)
        if kind not in ("ce", "nll") or not site.call.args:
            continue
        logits = site.call.args[0].value
        if kind == "ce":
            what = _output_of(ctx.model, logits, site.function, _PROBABILITIES)
        elif _is_log_of_softmax(ctx, _producer(ctx, logits, site.function), site.function):
            what = "log(softmax(...))"
        else:
            what = None
        if what is None:
            continue
        yield Match("TL801", site.call, lambda line_of, c=site.call, w=what: (
            f"{ctx.label(c)} receives the output of {w}{_made_at(w, c, line_of)}, but cross-entropy applies "
            f"log_softmax itself: {normalised_twice(w)}; pass the raw logits (or log_softmax + NLLLoss)."
        ), mentions=_made_in_other_module(what, ctx.model))


def _probabilities_handed_elsewhere(ctx: Context) -> Iterable[Match]:
    """A call of a function of another project module (``train(model, loader, ...)``) that hands
    it a model whose output is probabilities, where that function passes the model's output to
    cross-entropy. Reported at the call: the callee is right for callers that pass a model
    returning logits, and its module alone cannot tell what its callers pass."""
    project = ctx.model.project
    if project is None:
        return
    for site in ctx.sites.sites:
        name = dotted(site.call.func)
        if not site.call.args or ctx.sites.local_callee(site) is not None:
            continue
        imported = bool(name) and name.split(".", 1)[0] in ctx.model.imports.names
        if imported and not project.defined_where_text_matches(ctx.model, name, _CROSS_ENTROPY_TEXT):
            continue
        if not imported and not isinstance(site.call.func, cst.Attribute):
            continue
        # an imported function, or a method of another module's class (``client.train(net=...)``)
        callee = ctx.sites.project_callee(site)
        if callee is None or callee.owner is None or callee.owner is ctx.model or (imported and callee.cls is not None) \
                or not _mentions_cross_entropy(callee.owner):
            continue
        bound = _bind(None, callee, site.call, site.function, ctx.model, method=callee.cls is not None)
        if not bound:
            continue
        inside = Context(callee.owner, callee.owner.sites())
        for loss in (s for fn in _with_local_callees(inside, callee) for s in inside.sites.in_function(fn)):
            if _loss_kind(inside, loss.call, loss.function) != "ce" or not loss.call.args:
                continue
            logits = loss.call.args[0].value
            if _output_of(callee.owner, logits, loss.function, _PROBABILITIES) is not None:
                continue  # its own module reports it, whoever calls
            what = _output_of(callee.owner, logits, loss.function, _PROBABILITIES, 0, bound)
            if what is None:
                continue
            where = callee.owner.path.name if callee.owner.path is not None else "another module"
            node, origin = what.site if isinstance(what, _Op) and what.site is not None else (site.call, ctx.model)
            if origin is callee.owner:
                node, origin = site.call, ctx.model  # the training function's own module makes them
            # Reported where the probabilities are made (the model's softmax, here or in its own
            # file): the fix goes there, and the training function is right for models returning logits.
            at = "" if node is site.call else _shown_in(origin, node)
            here = "" if origin is ctx.model or ctx.model.path is None else f"{ctx.model.path.name} "
            yield Match("TL801", node, lambda line_of, c=site.call, w=what, l=inside.label(loss.call), f=callee.name, p=where,
                        at=at, h=here, n=loss.call: (
                f"{at}{ctx.label(c)}{f' ({h}{line_of(c)})' if at else ''} hands {f}() a model whose output is {w}, and {f}() passes it "
                f"to {l} ({line_of(n) or p}), but cross-entropy applies log_softmax itself: {normalised_twice(w)}; have the model "
                f"return raw logits (or use log_softmax + NLLLoss)."
            ), origin=origin if origin is not ctx.model else None, mentions=((loss.call, callee.owner),))
            break


def _probabilities_into_an_inherited_loss(ctx: Context) -> Iterable[Match]:
    """A model class of this module that inherits the method computing its loss from a base
    class of the project (``loss = self.criterion(self.forward(x), y)`` in a shared ``step``),
    where this class's forward returns probabilities and the loss is cross-entropy (this class's
    own criterion, or the base's). The base alone cannot tell (its forward is abstract, or each
    subclass sets its criterion): the finding is the class's, at the op that makes probabilities."""
    for class_name, class_node in ctx.model.classes.items():
        if not class_node.bases or (class_name, "forward") not in ctx.model.methods \
                or _forward_output(ctx.model, class_name, class_name, _PROBABILITIES, 0, None, None, None, None) is None:
            continue  # only a forward of its own that makes probabilities is worth reading its bases for
        for fn in ctx.model.inherited_methods(class_name):
            owner = fn.owner
            if owner is None or not fn.params or _static(fn) or not (
                    _mentions_cross_entropy(owner) or _mentions_cross_entropy(ctx.model)):
                continue
            # ``self`` in the inherited method is an instance of this class, made here
            instance = {(id(fn), fn.params[0]): (cst.parse_expression(f"{class_name}()"), None, ctx.model)}
            inside = Context(owner, owner.sites())
            for loss in inside.sites.in_function(fn):
                kind = _loss_kind(ctx, loss.call, fn, cls=class_name) or _loss_kind(inside, loss.call, fn)
                if kind != "ce" or not loss.call.args:
                    continue
                logits = loss.call.args[0].value
                if _output_of(owner, logits, fn, _PROBABILITIES) is not None:
                    continue  # the base's own forward makes them: its module reports it
                what = _output_of(owner, logits, fn, _PROBABILITIES, 0, instance)
                if what is None:
                    continue
                node, origin = what.site if isinstance(what, _Op) and what.site is not None else (class_node, ctx.model)
                if origin is not ctx.model:
                    node = class_node  # the op is a layer of another module: the class is what to fix here
                where = owner.path.name if owner is not ctx.model and owner.path is not None else "another module"
                yield Match("TL801", node, lambda line_of, w=what, c=class_name, f=fn, l=inside.label(loss.call), at=where: (
                    f"{c} inherits {f.cls}.{f.name} ({line_of(f.node) or at}), which passes its forward's output, "
                    f"{w}, to {l}, but cross-entropy applies log_softmax itself: {normalised_twice(w)}; have "
                    f"{c}.forward return raw logits (or use log_softmax + NLLLoss)."
                ), origin=None, mentions=((fn.node, owner),))
                break


def _made_at(what: str, loss: cst.Call, line_of) -> str:
    """Where the op the loss receives is applied, as the message places it (`` (applied at line
    12)``, `` (applied at models/net.py line 30)``): nothing when it is on the loss's own line."""
    site = what.site if isinstance(what, _Op) else None
    where = line_of(site[0]) if site is not None else None
    return f" (applied at {where})" if where is not None and where != line_of(loss) else ""


def _made_in_other_module(what: str, model: ModuleModel) -> Tuple[Tuple[cst.CSTNode, ModuleModel], ...]:
    """The op of another module that a message names (see Match.mentions)."""
    site = what.site if isinstance(what, _Op) else None
    return (site,) if site is not None and site[1] is not model else ()


def _shown_in(origin: ModuleModel, node: cst.CSTNode) -> str:
    """How the message opens when reported at the op: the op's code (the call is named after it)."""
    code = " ".join(origin.module.code_for_node(node).split())
    return f"{code if len(code) <= 48 else code.split('(', 1)[0] + '(...)'} makes probabilities, and "


# Ops (functions, tensor methods, module classes) whose output is probabilities, not logits.
_PROBABILITIES = frozenset({"softmax", "log_softmax", "Softmax", "LogSoftmax"})
# Tensor methods that reshape, move or copy a tensor: probabilities stay probabilities.
_SAME_VALUES = frozenset({
    "view", "reshape", "resize", "squeeze", "unsqueeze", "transpose", "permute", "contiguous", "flatten",
    "float", "double", "half", "to", "cpu", "cuda", "clone", "type",
})
_MAX_DEPTH = 16  # calls, names and elements followed from a loss argument to what computed it


def _output_of(model: ModuleModel, expr: cst.BaseExpression, fn: Optional[Function], ops, depth: int = 0,
               bound: Bindings = None, element: Optional[int] = None) -> Optional[str]:
    """Which of ``ops`` produced the value of ``expr``, when every way it is computed agrees; None
    when that is not known. Followed: shape-only methods and indexing, local names and loops over
    them, modules built as one of ``ops`` (``self.softmax = nn.Softmax(1)``, a Sequential ending in
    one), and models whose forward returns such a value (the class defined here or in the project),
    with the forward's parameters bound to what the call passes (``bound``). ``element``: the
    value is a tuple and this element of it is meant (``_, labels = disc(x)``; ``disc(x)[1]``)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Tuple) and element is not None:
        parts = expr.elements
        if element >= len(parts) or any(isinstance(p, cst.StarredElement) for p in parts[:element + 1]):
            return None
        return _output_of(model, parts[element].value, fn, ops, depth + 1, bound)
    if isinstance(expr, cst.Subscript):
        # an element of a tuple (a forward's ``return out, labels``), else an index into a tensor
        # of the same values
        index = _integer_index(expr)
        return _output_of(model, expr.value, fn, ops, depth + 1, bound, index if index is not None else element)
    if isinstance(expr, cst.Name):
        return _output_of_name(model, expr.value, fn, ops, depth + 1, bound, element)
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    name = _torch_api(model, func)
    if name in ops:
        return _op(name, expr, model)
    if name == "exp" and "log_softmax" in ops:
        inner = expr.args[0].value if expr.args else func.value if isinstance(func, cst.Attribute) else None
        if inner is not None and _output_of(model, inner, fn, ops, depth + 1, bound) in ("log_softmax", "LogSoftmax"):
            return _op("exp(log_softmax(...))", expr, model)  # softmax probabilities, spelled the long way
        return None
    if isinstance(func, cst.Attribute) and name in _SAME_VALUES:
        if model.imports.qualify(func) is None:
            return _output_of(model, func.value, fn, ops, depth + 1, bound)  # ``probs.view(-1)``
        if expr.args:
            return _output_of(model, expr.args[0].value, fn, ops, depth + 1, bound)  # ``torch.squeeze(probs)``
    return _called_module_output(model, _called_object(func), fn, ops, depth + 1, bound, expr, element)


def _integer_index(expr: cst.Subscript) -> Optional[int]:
    if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and isinstance(expr.slice[0].slice.value, cst.Integer):
        return int(expr.slice[0].slice.value.value, 0)
    return None


def _output_of_name(model: ModuleModel, name: str, fn: Optional[Function], ops, depth: int,
                    bound: Bindings = None, element: Optional[int] = None) -> Optional[str]:
    passed = _bound_value(bound, fn, name)
    if passed is not None:
        value, scope, caller = passed
        return _output_of(caller, value, scope, ops, depth, bound, element)
    return _agreed([_output_of(model, value, scope, ops, depth, bound, element)
                    for value, scope in _values_in_scope(model, name, fn) if not _reshaped_itself(model, value, name)])


def _reshaped_itself(model: ModuleModel, value: cst.BaseExpression, name: str) -> bool:
    """``pred = torch.squeeze(pred)`` / ``pred = pred.view(-1)``: the name keeps the values its
    other assignments give it."""
    if not isinstance(value, cst.Call) or _torch_api(model, value.func) not in _SAME_VALUES:
        return False
    func = value.func
    if isinstance(func, cst.Attribute) and model.imports.qualify(func) is None:
        source = func.value
    else:
        source = value.args[0].value if value.args else None
    return isinstance(source, cst.Name) and source.value == name


# What a call passes to the parameters of the forward it runs: (id(forward), parameter) ->
# (argument, the caller's scope, the caller's module). The caller may itself be a bound forward.
Bindings = Optional[Dict[Tuple[int, str], Tuple[cst.BaseExpression, Optional[Function], ModuleModel]]]


def _bound_value(bound: Bindings, fn: Optional[Function], name: str):
    return bound.get((id(fn), name)) if bound and fn is not None else None


def _bind(bound: Bindings, forward: Function, call: Optional[cst.Call], caller_scope: Optional[Function],
          caller: ModuleModel, method: bool = True) -> Bindings:
    """``bound`` plus what ``call`` passes to ``forward``'s parameters (after ``self`` for a
    method)."""
    if call is None or any(a.star for a in call.args):
        return bound
    added = dict(bound or {})
    for position, param in enumerate(forward.params[1:] if method else forward.params):
        value = arg(call, position, param)
        if value is not None:
            added[(id(forward), param)] = (value, caller_scope, caller)
    return added


def _final_value(fn: Function, name: str) -> Optional[cst.BaseExpression]:
    """What the local ``name`` holds at a ``return name`` (or ``return name, other``) that ends ``fn``'s body, when every
    assignment to it is a statement of that body itself (straight-line code: the last one wins).
    ``x = x.view(...)`` keeps what ``x`` held. None when that is not so simple."""
    last = fn.body[-1] if fn.body else None
    returned = last.body[0].value if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return) else None
    parts = [e.value for e in returned.elements] if isinstance(returned, cst.Tuple) else [returned]
    if not any(isinstance(part, cst.Name) and part.value == name for part in parts):
        return None
    top_level = [
        small for stmt in fn.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == name
    ]
    everywhere = [value for target, value in fn.assigns if isinstance(target, cst.Name) and target.value == name]
    if len(top_level) != len(everywhere) or any(a.target.value == name for a in _aug_assigns(fn)):
        return None
    for assign in reversed(top_level):
        if not _same_name(assign.value, name):
            if fn.owner is not None and _allocation(fn.owner, assign.value) and any(
                    isinstance(target, cst.Subscript) and dotted(target.value) == name for target, _ in fn.assigns):
                return None  # a buffer filled entry by entry: what is stored in it (see _assigned_in)
            return assign.value
    return cst.Name(name)  # only reshaped: what it held on entry


def _aug_assigns(fn: Function):
    return [a for a in fn.aug_assigns if isinstance(a.target, cst.Name)]


def _same_name(value: cst.BaseExpression, name: str) -> bool:
    """``name`` itself, reshaped or moved (``x.view(-1, 784).float()``)."""
    value = _unmoved(value)
    return isinstance(value, cst.Name) and value.value == name


def _values_in_scope(model: ModuleModel, path: str, fn: Optional[Function]):
    """(value, scope it is computed in) for what ``path`` can hold where ``fn`` reads it: the
    function's own variable, an enclosing function's, the class's attribute for ``self.x``, or the
    module's. Empty when it is not known: a parameter (its callers decide), a name unpacked from a
    tuple. ``for out in outputs`` makes ``out`` an element of ``outputs``, which for a tensor of
    probabilities is probabilities too."""
    root = path.split(".", 1)[0]
    scope = fn
    while scope is not None:
        if root == "self" and scope.cls is not None:
            return [(value, assigner) for assigner, value in model.assignments_in_class(scope.cls, path)]
        if root in scope.params:
            return _passed(model, scope, root) if path == root else []
        found = _assigned_in(model, scope, scope.assigns, path, root)
        if found is not None:
            return found
        scope = scope.parent
    return _assigned_in(model, None, model.module_assigns, path, root) or []


def _passed(model: ModuleModel, fn: Function, param: str):
    """(value, caller's scope) for what the callers give parameter ``param`` of the module-level
    function (or the method) ``fn``. Known only when every mention of ``fn`` in the module is a
    call that gives it (a function passed around as a value, or a default, has callers not seen
    here); a method's are its ``self.name(...)`` calls."""
    if fn.parent is not None or fn.default(param) is not None:
        return []
    if fn.cls is not None and fn.name == "__init__":
        # a constructor's callers are the constructions of its class (``Runner(model, ...)``)
        sites = [site for site in model.sites().sites if isinstance(site.call.func, cst.Name) and site.call.func.value == fn.cls]
        if not sites or len(sites) != _name_mentions(model)[fn.cls] - 1:  # (less the class statement's name)
            return []
        position = fn.params.index(param) - 1
    else:
        sites = model.sites().calls_of(fn)
        mentions = _attribute_mentions(model)[fn.name] if fn.cls is not None else _name_mentions(model)[fn.name] - 1
        if not sites or len(sites) != mentions:  # (less the def's own name)
            return []
        method = fn.cls is not None
        if method and (_static(fn) or not all(isinstance(site.call.func, cst.Attribute) for site in sites)):
            return []
        position = fn.params.index(param) - (1 if method else 0)
    passed = []
    for site in sites:
        value = arg(site.call, position, param)
        if value is None or any(a.star for a in site.call.args):
            return []
        passed.append((value, site.function))
    return passed


def _attribute_mentions(model: ModuleModel) -> Counter:
    """How often each name is written as an attribute (``self.auxiliary_loss``), calls included."""
    return model.memo("numerics.attribute_mentions", lambda: Counter(
        node.attr.value for node in model.preorder.nodes if isinstance(node, cst.Attribute)))


def _name_mentions(model: ModuleModel) -> Counter:
    """How often each name is written in the module as a name of its own (``train``, not the
    attribute of ``model.train()`` nor the keyword of ``MNIST(train=True)``; comments and strings
    are not names)."""
    def count() -> Counter:
        nodes = model.preorder.nodes
        labels = {id(node.attr) for node in nodes if isinstance(node, cst.Attribute)}
        labels |= {id(node.keyword) for node in nodes if isinstance(node, cst.Arg) and node.keyword is not None}
        return Counter(node.value for node in nodes if isinstance(node, cst.Name) and id(node) not in labels)
    return model.memo("numerics.name_mentions", count)


def _through_names(model: ModuleModel, values, depth: int = 0):
    """``values`` with each plain name replaced by what it holds in its scope."""
    found = []
    for value, scope in values:
        if isinstance(value, cst.Name) and depth < _MAX_DEPTH:
            found += _through_names(model, _values_in_scope(model, value.value, scope), depth + 1)
        else:
            found.append((value, scope))
    return found


def _assigned_in(model: ModuleModel, scope: Optional[Function], assigns, path: str, root: str):
    """The values ``scope`` assigns to ``path``; None when ``scope`` does not bind ``root`` at all
    (look further out), empty when it binds it in a way not followed (tuple unpacking)."""
    loops = list(_loops_binding(model, scope, root))
    binds = bool(loops)
    values = []
    filled = []  # ``outputs[t] = step_output`` into a tensor allocated for it
    for target, value in assigns:
        if isinstance(target, cst.Subscript) and dotted(target.value) == path:
            filled.append((_stored_value(scope, target, value), scope))
            continue
        if isinstance(target, (cst.Tuple, cst.List)):
            for index, part in enumerate(target.elements):
                if _root(part.value) != root:
                    continue
                if isinstance(part, cst.StarredElement) or any(isinstance(p, cst.StarredElement) for p in target.elements[:index]) \
                        or dotted(part.value) != path:
                    return []
                binds = True
                values.append((_element_of(value, index), scope))
        elif _root(target) == root:
            binds = True
            if dotted(target) == path:
                values.append((value, scope))
    if not binds:
        return None
    if loops and path != root:
        return []
    if filled and values and all(_allocation(model, value) for value, _ in values):
        values = filled  # the allocation holds nothing yet: its entries are what is stored in it
    return values + [(_under_progress_bar(model, loop.iter), scope) for loop in loops]


def _under_progress_bar(model: ModuleModel, iterable: cst.BaseExpression) -> cst.BaseExpression:
    """``for rows in tqdm(probabilities)`` iterates ``probabilities``: a progress bar (known by
    what it was imported as) hands back the elements of its first argument."""
    while isinstance(iterable, cst.Call) and iterable.args and iterable.args[0].keyword is None \
            and model.imports.qualify(iterable.func) in PROGRESS_BARS:
        iterable = iterable.args[0].value
    return iterable


def _stored_value(scope: Optional[Function], target: cst.Subscript, value: cst.BaseExpression) -> cst.BaseExpression:
    """What ``buffer[t] = name`` stores: the value ``name`` was last given before it in the same
    block (``output, hidden = self.decoder(...)`` just above, though ``output`` is given other
    values elsewhere in the loop), else ``name`` itself."""
    if not isinstance(value, cst.Name) or scope is None:
        return value
    for body in _blocks(scope.node):
        at = next((i for i, stmt in enumerate(body) if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Assign) and any(t.target is target for t in small.targets) for small in stmt.body)), None)
        if at is None:
            continue
        for stmt in reversed(body[:at]):
            if not isinstance(stmt, cst.SimpleStatementLine):
                if any(isinstance(n, cst.Name) and n.value == value.value for n in walk(stmt)):
                    return value  # a block in between may rebind it: not followed
                continue
            for small in reversed(stmt.body):
                for assigned in (small.targets if isinstance(small, cst.Assign) else ()):
                    if isinstance(assigned.target, cst.Name) and assigned.target.value == value.value:
                        return small.value
                    if isinstance(assigned.target, (cst.Tuple, cst.List)):
                        names = [e.value.value if isinstance(e.value, cst.Name) and not isinstance(e, cst.StarredElement)
                                 else None for e in assigned.target.elements]
                        if value.value in names:
                            return _element_of(small.value, names.index(value.value))
        return value
    return value


def _blocks(node: cst.CSTNode) -> Iterable[Sequence[cst.CSTNode]]:
    for inner in walk(node):
        if isinstance(inner, cst.IndentedBlock):
            yield inner.body


_ALLOCATIONS = frozenset({"zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like"})
_NEW_TENSOR_METHODS = frozenset({"new_zeros", "new_empty", "new_ones", "new_full"})


def _allocation(model: ModuleModel, value: cst.BaseExpression) -> bool:
    """A tensor allocated to be filled: ``torch.zeros(n, b, v)`` (torch's, as the imports say),
    ``Variable(torch.zeros(...)).cuda()``, ``x.new_zeros(...)``."""
    value = _unmoved(value)
    if isinstance(value, cst.Call) and model.imports.qualify(value.func) == "torch.autograd.Variable" and value.args:
        value = _unmoved(value.args[0].value)
    if not isinstance(value, cst.Call):
        return False
    qualified = model.imports.qualify(value.func)
    if qualified:
        return qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _ALLOCATIONS
    return isinstance(value.func, cst.Attribute) and value.func.attr.value in _NEW_TENSOR_METHODS


def _element_of(value: cst.BaseExpression, index: int) -> cst.BaseExpression:
    """``value[index]``, for the name a tuple assignment binds to that element: the element itself
    when ``value`` is a tuple written out (``net, opt = model, optimizer``)."""
    if isinstance(value, (cst.Tuple, cst.List)) and index < len(value.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in value.elements[:index + 1]):
        return value.elements[index].value
    return cst.Subscript(value=value, slice=[cst.SubscriptElement(slice=cst.Index(value=cst.Integer(str(index))))])


def _root(target: cst.BaseExpression) -> Optional[str]:
    return (dotted(target) or "").split(".", 1)[0] or None


def _loops_binding(model: ModuleModel, fn: Optional[Function], name: str) -> Iterable[cst.For]:
    """The for-loops of ``fn`` (or of the module's own statements) whose target is ``name``."""
    key = f"numerics.loops_binding.{id(fn.node) if fn is not None else 'module'}"
    return model.memo(key, lambda: _loops_by_target(model, fn)).get(name, ())


def _loops_by_target(model: ModuleModel, fn: Optional[Function]) -> Dict[str, List[cst.For]]:
    """Target name -> the for-loops of ``fn`` (or of the module's statements) binding it: indexed
    once, since every use of a loop variable asks."""
    found: Dict[str, List[cst.For]] = {}
    stack: List[cst.CSTNode] = list(fn.body if fn is not None else model.module.body)
    while stack:
        node = stack.pop()
        kind = type(node)  # exact types: see names.dotted
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            continue
        if kind is cst.For and type(node.target) is cst.Name:
            found.setdefault(node.target.value, []).append(node)
        stack.extend(children(node))
    return found


def _called_module_output(model: ModuleModel, func: cst.BaseExpression, fn: Optional[Function], ops,
                          depth: int, bound: Bindings = None, call: Optional[cst.Call] = None,
                          element: Optional[int] = None) -> Optional[str]:
    """What calling the object ``func`` (by ``call``, in ``fn``) returns, as one of ``ops``:
    ``nn.Softmax(dim=1)(x)``, or ``self.softmax(x)`` / ``model(x)`` with every value assigned to
    that path a module that does."""
    if isinstance(func, cst.Call):
        return _module_output(model, func, ops, depth, fn, bound, call, fn, model, element)
    if fn is not None and fn.cls is not None and fn.params and isinstance(func, cst.Name) and func.value == fn.params[0] \
            and _bound_value(bound, fn, func.value) is None and not _static(fn):
        # ``self(x)`` in a method: the instance's own forward
        return _forward_output(model, fn.cls, fn.cls, ops, depth, bound, call, fn, model, element)
    path = dotted(func)
    if path is None:
        return None
    return _named_module_output(model, path, fn, ops, depth, bound, call, element)


def _static(fn: Function) -> bool:
    """A ``@staticmethod``: its first parameter is no instance."""
    return any(dotted(d.decorator) == "staticmethod" for d in fn.node.decorators)


def _named_module_output(model: ModuleModel, path: str, fn: Optional[Function], ops, depth: int,
                         bound: Bindings = None, call: Optional[cst.Call] = None, element: Optional[int] = None) -> Optional[str]:
    """What the module held by ``path`` where ``fn`` reads it returns when called (by ``call``)."""
    known = _attribute_of_instance(model, path, fn, ops, depth, bound, call, element)
    if known is not None:
        return known
    passed = _bound_value(bound, fn, path)
    if passed is not None:
        value, scope, caller = passed
        if isinstance(value, cst.Call):
            return _module_output(caller, value, ops, depth, scope, bound, call, fn, model, element)
        held = dotted(value)
        return _named_module_output(caller, held, scope, ops, depth + 1, bound, None, element) if held and depth < _MAX_DEPTH else None
    # ``model = model.to(device)`` is the same module; a caller's ``model`` passed in is another scope's
    values = [(v, scope) for v, scope in _values_in_scope(model, path, fn) if scope is not fn or dotted(_unmoved(v)) != path]
    if not values:
        return _instances_output(model, path, fn, ops, depth, bound, call, element)
    return _agreed([
        _named_module_output(model, _unmoved(v).value, scope, ops, depth + 1, bound, call, element)
        if isinstance(_unmoved(v), cst.Name) and depth < _MAX_DEPTH
        else _module_output(model, _last_added(model, v, path, scope), ops, depth, scope, bound, call, fn, model, element)
        for v, scope in values
    ])


def _instances_output(model: ModuleModel, path: str, fn: Optional[Function], ops, depth: int,
                      bound: Bindings, call: Optional[cst.Call], element: Optional[int] = None) -> Optional[str]:
    """Where no assignment in reach says what ``path`` holds (a method's parameter, given by
    callers in the project): the objects that can reach it, when all are instances of one project
    class, return what that class's forward does."""
    objects = model.objects.eval(cst.parse_expression(path), fn)
    built = _built_here(model, objects)
    if built is not None:
        # torch modules this module builds (``self.net`` of a helper given the trainer): what
        # each returns, as where it was built (a Sequential filled by add_module there)
        return _agreed([_module_output(model, _last_added(model, value, where, scope), ops, depth + 1, scope, bound,
                                       call, fn, model, element) for value, where, scope in built])
    return _instances_forward_output(objects, model, fn, ops, depth, bound, call, element)


def _built_here(model: ModuleModel, objects) -> Optional[List[Tuple[cst.Call, str, Optional[Function]]]]:
    """(constructor call, the path it is assigned to, its scope) for each of ``objects``, when
    every one is a torch module constructed by a plain assignment of this module; else None. (A
    torch class is no training object: the objects layer keeps it as made by an undescribed call.)"""
    if not objects or any(o.cls is not None or not isinstance(o.node, cst.Call) for o in objects):
        return None
    found = []
    for obj in objects:
        qualified = model.imports.qualify(obj.node.func) or ""
        if qualified.split(".", 1)[0] != "torch" or not qualified.rsplit(".", 1)[-1][:1].isupper():
            return None  # only a torch class constructed here, not any call's result
        site = next(((dotted(target), scope) for scope, assigns in
                     [(None, model.module_assigns)] + [(f, f.assigns) for f in model.all_functions]
                     for target, value in assigns if _unmoved(value) is obj.node and dotted(target)), None)
        if site is None:
            return None
        found.append((obj.node, site[0], site[1]))
    return found


def _instances_forward_output(objects, model: ModuleModel, fn: Optional[Function], ops, depth: int,
                              bound: Bindings, call: Optional[cst.Call], element: Optional[int]) -> Optional[str]:
    """What calling these objects returns, when all are instances of project classes whose
    forwards agree; None if any is something else or unknown."""
    if not objects or any(o.cls is None or o.unknown for o in objects):
        return None
    results = []
    for obj in objects:
        owner = obj.class_module()
        if owner is None:
            return None
        results.append(_forward_output(owner, obj.cls, obj.cls, ops, depth + 1, bound, call, fn, model, element, obj))
    return _agreed(results)


def _last_added(model: ModuleModel, value: cst.BaseExpression, path: str, scope: Optional[Function]) -> cst.BaseExpression:
    """``seq = nn.Sequential()`` filled by ``seq.add_module(name, layer)`` statements in the same
    body: the Sequential's output is its last added layer's. Anything else is itself."""
    if not (isinstance(value, cst.Call) and _torch_api(model, value.func) == "Sequential" and not value.args):
        return value
    added = [
        small.value for stmt in (scope.body if scope is not None else model.module.body)
        if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Attribute)
        and small.value.func.attr.value == "add_module" and dotted(small.value.func.value) == path
    ]
    layer = arg(added[-1], 1, "module") if added else None
    return layer if layer is not None else value


def _unmoved(value: cst.BaseExpression) -> cst.BaseExpression:
    """``Net().to(device).cuda()`` is the module ``Net()``."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_VALUES:
        value = value.func.value
    return value


def _module_output(model: ModuleModel, value: cst.BaseExpression, ops, depth: int,
                   scope: Optional[Function] = None, bound: Bindings = None, call: Optional[cst.Call] = None,
                   caller_scope: Optional[Function] = None, caller: Optional[ModuleModel] = None,
                   element: Optional[int] = None) -> Optional[str]:
    """What the module built by ``value`` (in ``scope``) returns when ``call`` (made in
    ``caller_scope`` of ``caller``) calls it, as one of ``ops`` (``element``: of the tuple it returns)."""
    value = _unmoved(value)
    if depth > _MAX_DEPTH or not isinstance(value, cst.Call):
        return None
    cls = _last(value.func)
    api = _torch_api(model, value.func)
    if api in ops:
        return _op(api, value, model)
    if api == "Sequential":
        layers = [a for a in value.args if a.keyword is None]
        if not layers or layers[-1].star:
            return None
        last = layers[-1].value
        if isinstance(last, cst.Call):
            return _module_output(model, last, ops, depth + 1, scope, bound, element=element)
        return _called_module_output(model, last, scope, ops, depth + 1, bound, element=element)
    builder = _builder(model, value)
    if builder is not None and builder.owner is not None:
        # ``model = build_model(...)``: the module the function returns (read in its own module)
        owner = builder.owner
        return _agreed([
            _named_module_output(owner, ret.value, builder, ops, depth + 1, bound) if isinstance(ret, cst.Name)
            else _module_output(owner, ret, ops, depth + 1, builder, bound)
            for ret in builder.returns
        ])
    copied = _copied(model, value)
    if copied is not None:  # ``deepcopy(net)`` runs the forward ``net`` runs
        if isinstance(_unmoved(copied), cst.Call):
            return _module_output(model, copied, ops, depth + 1, scope, bound, call, caller_scope, caller, element)
        path = dotted(copied)
        return _named_module_output(model, path, scope, ops, depth + 1, bound, call, element) if path else None
    objects = model.objects.eval(value, scope)
    built = [o for o in objects if o.cls is not None and not o.unknown]
    if built and all(o.cls != cls for o in built):
        # a call that hands back instances of other classes (``deepcopy(net)``, a builder in
        # another module): what those instances' forwards return
        return _instances_forward_output(objects, model, caller_scope, ops, depth, bound, call, element)
    init = model.method_of_class(dotted(value.func) or "", "__init__")
    if init is not None:
        # what the construction passes its ``__init__`` (``Seq2Seq(encoder, decoder)``): the
        # forward's ``self.decoder = decoder`` reads it, also where the objects layer does not
        # follow the class (a module of the project that builds no training object)
        bound = _bind(bound, init, value, scope, model)
    return _forward_output(model, cls, dotted(value.func) or "", ops, depth, bound, call, caller_scope, caller, element,
                           built[0] if len(built) == 1 else None)


def _builder(model: ModuleModel, value: cst.Call) -> Optional[Function]:
    """The project function a call runs, by its name here: this module's, or one it imports from
    another module of the project."""
    name = dotted(value.func)
    if not name:
        return None
    found = model.functions.get(name)
    if found is None and model.project is not None and names_an_import(model, name):
        found = model.project.function(model, name)
    return found


def _copied(model: ModuleModel, value: cst.Call) -> Optional[cst.BaseExpression]:
    """What ``value`` copies, when the library descriptions say it returns a copy of its one
    argument (``copy.deepcopy(net)``)."""
    if not library.current().copies(model.imports.qualify(value.func), dotted(value.func) or "") \
            or len(value.args) != 1 or value.args[0].keyword is not None:
        return None
    return value.args[0].value


def _forward_output(model: ModuleModel, cls: str, class_path: str, ops, depth: int, bound: Bindings,
                    call: Optional[cst.Call], caller_scope: Optional[Function], caller: Optional[ModuleModel],
                    element: Optional[int] = None, instance=None) -> Optional[str]:
    """What the forward of the class at ``class_path`` returns when ``call`` calls an instance
    (``instance``: the object the objects layer says it is, whose attributes its forward reads)."""
    forward = model.method_of_class(class_path, "forward")
    if forward is None or not forward.returns:
        return None
    owner = forward.owner or model
    inside = _bind(bound, forward, call, caller_scope, caller or model)
    if instance is not None:
        inside = dict(inside or {})
        inside[(id(forward), _INSTANCE)] = (instance, None, owner)
    returns = forward.returns
    if len(returns) == 1 and isinstance(returns[0], cst.Name):
        returns = [_final_value(forward, returns[0].value) or returns[0]]
    elif len(returns) == 1 and isinstance(returns[0], cst.Tuple) and element is not None \
            and element < len(returns[0].elements) and isinstance(returns[0].elements[element].value, cst.Name):
        # ``return output, hidden`` at the end: what ``output`` holds there
        name = returns[0].elements[element].value.value
        final = _final_value(forward, name)
        if final is not None:
            returns, element = [final], None
    returned = _agreed([_output_of(owner, ret, forward, ops, depth + 1, inside, element) for ret in returns])
    if returned is None:
        return None
    # named after the outermost model: the one the loop calls (the layer may come from its forward)
    return _op(f"{returned.split(' returned by ')[0]} returned by {cls}.forward", forward.node, owner, returned)


# The key under which a forward's bindings hold the instance it runs on (an objects-layer object).
_INSTANCE = "<instance>"


def _attribute_of_instance(model: ModuleModel, path: str, fn: Optional[Function], ops, depth: int,
                           bound: Bindings, call: Optional[cst.Call], element: Optional[int]) -> Optional[str]:
    """``self.decoder(...)`` in a forward run on a known instance: what the modules its
    ``decoder`` field holds return (``Seq2Seq(encoder, Decoder(...))`` built in another module)."""
    held = bound.get((id(fn), _INSTANCE)) if bound and fn is not None else None
    if held is None or not path.startswith("self.") or "." in path[5:]:
        return None
    return _instances_forward_output(held[0].fields.get(path[5:], ()), model, fn, ops, depth, bound, call, element)


def _agreed(results: Sequence[Optional[str]]) -> Optional[str]:
    """What every way of computing a value gives, each one of the ops asked about (an MLP's
    Softmax or a CNN's log_softmax, chosen by a flag); None if any is not one. Different ops are
    made at different statements: the answer then names no single one."""
    if not results or any(r is None for r in results):
        return None
    if all(r == results[0] for r in results):
        return results[0]
    return _Op(" or ".join(dict.fromkeys(results)))


def _is_log_of_softmax(ctx: Context, call: Optional[cst.Call], fn) -> bool:
    if call is None:
        return False
    if _torch_api(ctx.model, call.func) == "log":
        inner = call.args[0].value if call.args else call.func.value
        return _is_call_named(ctx.model, _producer(ctx, inner, fn), ("softmax",))
    return False


def sigmoid_before_bce(ctx: Context) -> Iterable[Match]:
    for site in ctx.sites.sites:
        kind = _loss_kind(ctx, site.call, site.function)
        scores = arg(site.call, 0, "input") if kind in ("bce", "bce_logits") else None
        if scores is None:
            continue
        if kind == "bce":
            # A model that ends in nn.Sigmoid scored by BCELoss is DCGAN's classic setup: only a
            # sigmoid taken apart from the model, right before the loss, is worth changing.
            if _is_call_named(ctx.model, _producer(ctx, scores, site.function), _SIGMOIDS):
                yield Match("TL802", site.call, lambda line_of, c=site.call: (
                    f"{ctx.label(c)} takes probabilities from a separate sigmoid: saturated logits "
                    f"round to 0 or 1 in float32 (and fp16), so the loss clamps and gradients vanish or "
                    f"blow up; use BCEWithLogitsLoss / binary_cross_entropy_with_logits on the logits."
                ))
            continue
        what = _output_of(ctx.model, scores, site.function, _SIGMOIDS)
        if what is not None:
            yield Match("TL802", site.call, lambda line_of, c=site.call, w=what: (
                f"{ctx.label(c)} receives the output of {w}{_made_at(w, c, line_of)}, but it applies the "
                f"sigmoid itself: the scores are squashed twice, so its probabilities stay between 0.5 and "
                f"0.73, the loss can never reach its targets and training fits the wrong thing; pass the raw logits."
            ), mentions=_made_in_other_module(what, ctx.model))


def _sigmoid_before_a_project_loss(ctx: Context) -> Iterable[Match]:
    """TL802 in a file that names no torch loss itself but imports the project's own (a focal
    loss built on ``binary_cross_entropy_with_logits``): read when a module it imports from names
    one."""
    project = ctx.model.project
    if project is not None and any(project.defined_where_text_matches(ctx.model, name, _BCE_TEXT)
                                   for name in ctx.model.imports.names if names_an_import(ctx.model, name)):
        yield from sigmoid_before_bce(ctx)


_BCE_TEXT = re.compile(r"binary_cross_entropy|BCELoss|BCEWithLogitsLoss")


def _sdpa_calls(ctx: Context):
    for site in ctx.sites.sites:
        if _torch_api(ctx.model, site.call.func) == "scaled_dot_product_attention":
            yield site


def _gated_on_training(expr: cst.BaseExpression) -> bool:
    return any(isinstance(n, (cst.Name, cst.Attribute)) and _last(n) == "training" for n in walk(expr))


def _assigned_under_training_test(fn: Optional[Function], name: str) -> bool:
    if fn is None:
        return False
    for node in walk(fn.node):
        if isinstance(node, cst.If) and _gated_on_training(node.test):
            for inner in walk(node):
                if isinstance(inner, cst.AssignTarget) and isinstance(inner.target, cst.Name) and inner.target.value == name:
                    return True
    return False


def sdpa_dropout_in_eval(ctx: Context) -> Iterable[Match]:
    for site in _sdpa_calls(ctx):
        dropout = arg(site.call, 4, "dropout_p")
        if dropout is None or literal_number(dropout) == 0 or _gated_on_training(dropout):
            continue
        if isinstance(dropout, cst.Name):
            assigns = site.function.assigns if site.function is not None else []
            sources = [v for t, v in assigns if isinstance(t, cst.Name) and t.value == dropout.value]
            if not sources or any(_gated_on_training(v) for v in sources):
                continue  # a parameter or a gated local: the caller decides
            if _assigned_under_training_test(site.function, dropout.value):
                continue  # ``if self.training: p = self.drop`` / ``else: p = 0.0``
        elif not (isinstance(dropout, cst.Attribute) or literal_number(dropout)):
            continue
        yield Match("TL803", site.call, lambda line_of, c=site.call, d=ctx.code(dropout): (
            f"{ctx.label(c)} applies dropout_p={d} in eval mode too: unlike nn.Dropout, the "
            f"functional call does not know model.eval(), so validation scores and generations are "
            f"randomly perturbed; pass dropout_p={d} if self.training else 0.0."
        ))


def sdpa_mask_and_causal(ctx: Context) -> Iterable[Match]:
    for site in _sdpa_calls(ctx):
        mask = arg(site.call, 3, "attn_mask")
        causal = arg(site.call, 5, "is_causal")
        if mask is not None and not is_none(mask) and literal_bool(causal) is True:
            yield Match("TL804", site.call, lambda line_of, c=site.call: (
                f"{ctx.label(c)} passes attn_mask together with is_causal=True, which PyTorch "
                f"documents as mutually exclusive: backends disagree (some raise, the CPU math path "
                f"combines the two masks), so the attention the model trains with depends on device "
                f"and version; fold the causal mask into attn_mask, or pass only is_causal=True."
            ))


def sdpa_inverted_mask(ctx: Context) -> Iterable[Match]:
    for site in _sdpa_calls(ctx):
        mask = arg(site.call, 3, "attn_mask")
        built = _hiding_mask(ctx, mask, site.function) if mask is not None else None
        if built is None:
            continue
        yield Match("TL805", site.call, lambda line_of, c=site.call, b=built: (
            f"{ctx.label(c)} gets a boolean attn_mask built as {ctx.code(b)} ({line_of(b)}), True "
            f"on the positions to hide (the masked_fill convention); SDPA reads True as 'attend', so "
            f"every token attends only to the future and never to itself: the model trains on the "
            f"answers; pass torch.tril(...).bool() (True = attend), or is_causal=True alone."
        ))


def _hiding_mask(ctx: Context, expr: cst.BaseExpression, fn: Optional[Function], depth: int = 0) -> Optional[cst.BaseExpression]:
    """The expression that built ``expr`` when it is a boolean mask that is True above the
    diagonal (``triu(..., diagonal=1)`` made boolean, ``~tril(...)``, ``tril(...) == 0``): a
    variable or ``self.`` attribute (also a registered buffer) is followed to its one value,
    through slicing."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value  # ``self.mask[:, :, :t, :t]``
    if isinstance(expr, (cst.Name, cst.Attribute)) and depth < 3:
        path = dotted(expr)
        values = _mask_values(ctx, path, fn) if path else []
        found = [_hiding_mask(ctx, v, fn, depth + 1) for v in values]
        return found[0] if len(found) == 1 else None
    return expr if _hides_future(expr) else None


def _mask_values(ctx: Context, path: str, fn: Optional[Function]) -> List[cst.BaseExpression]:
    """What ``path`` holds: a local's values in its function (module-wide at module level); an
    attribute of ``self``, its values in every method and the buffer registered under its name."""
    if not path.startswith("self."):
        return [v for t, v in fn.assigns if dotted(t) == path] if fn is not None else ctx.model.values_assigned(path)
    values = list(ctx.model.values_assigned(path))
    for site in ctx.sites.sites:  # self.register_buffer("mask", value)
        if site.name == "register_buffer" and len(site.call.args) >= 2 and plain_key(site.call.args[0].value) == path[5:]:
            values.append(site.call.args[1].value)
    return values


def _hides_future(expr: cst.BaseExpression) -> bool:
    """Boolean and True strictly above the diagonal."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return _lower_triangle(expr.expression)  # ~tril(...)
    if isinstance(expr, cst.Call) and _last(expr.func) == "logical_not" and expr.args:
        return _lower_triangle(expr.args[0].value)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        op, value = expr.comparisons[0].operator, literal_number(expr.comparisons[0].comparator)
        if isinstance(op, cst.Equal) and value == 0:
            return _lower_triangle(expr.left)  # tril(...) == 0
        if (isinstance(op, cst.Equal) and value == 1) or (isinstance(op, cst.GreaterThan) and value == 0):
            return _upper_triangle(expr.left)  # triu(..., 1) == 1, triu(..., 1) > 0
        return False
    return _boolean(expr) and _upper_triangle(_unconverted(expr))


def _unconverted(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``x.bool()`` / ``x.to(torch.bool)`` / ``x.to(device)``: x."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("bool", "to", "cuda", "type"):
        expr = expr.func.value
    return expr


def _boolean(expr: cst.BaseExpression) -> bool:
    return any(
        (isinstance(n, cst.Attribute) and n.attr.value == "bool") or (isinstance(n, cst.Name) and n.value == "bool")
        for n in walk(expr)
    )


def _triangle_call(expr: cst.BaseExpression, name: str) -> Optional[cst.Call]:
    expr = _unconverted(expr)
    if isinstance(expr, cst.Call) and _last(expr.func) == name:
        return expr
    return None


def _diagonal(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The ``diagonal`` argument of ``torch.triu(x, d)`` / ``x.triu(d)`` (None when left out)."""
    method = isinstance(call.func, cst.Attribute) and not (dotted(call.func.value) or "").startswith("torch")
    return arg(call, 0 if method else 1, "diagonal")


def _upper_triangle(expr: cst.BaseExpression) -> bool:
    """``torch.triu(x, diagonal=1)`` / ``x.triu(1)``: strictly above the diagonal."""
    call = _triangle_call(expr, "triu")
    diagonal = _diagonal(call) if call is not None else None
    return diagonal is not None and literal_number(diagonal) is not None and literal_number(diagonal) >= 1


def _lower_triangle(expr: cst.BaseExpression) -> bool:
    """``torch.tril(x)`` / ``x.tril()`` with the diagonal kept (diagonal 0 or more)."""
    call = _triangle_call(expr, "tril")
    if call is None:
        return False
    diagonal = _diagonal(call)
    return diagonal is None or (literal_number(diagonal) is not None and literal_number(diagonal) >= 0)


_CROSS_ENTROPY_TEXT = re.compile(r"cross_entropy|CrossEntropyLoss")


def _mentions_cross_entropy(model: ModuleModel) -> bool:
    """Searched once per module: each call handing a model to another module's function asks."""
    return model.memo("numerics.mentions_cross_entropy", lambda: _CROSS_ENTROPY_TEXT.search(model.source) is not None)


def _with_local_callees(ctx: Context, fn: Function, depth: int = 2) -> List[Function]:
    """``fn`` and the functions of its module it calls, ``depth`` calls deep (a training routine
    whose loop body is a helper)."""
    found, level = [fn], [fn]
    for _ in range(depth):
        level = [inner for current in level for inner in (ctx.sites.local_callee(site) for site in ctx.sites.in_function(current))
                 if inner is not None and inner not in found]
        found += list(dict.fromkeys(level))
    return found


# Checks run also where the rule's trigger text is absent, if the file calls into its project.
THROUGH_PROJECT = {"TL801": _probabilities_handed_elsewhere, "TL802": _sigmoid_before_a_project_loss}

RULES = {
    "TL801": softmax_before_cross_entropy,
    "TL802": sigmoid_before_bce,
    "TL803": sdpa_dropout_in_eval,
    "TL804": sdpa_mask_and_causal,
    "TL805": sdpa_inverted_mask,
}
