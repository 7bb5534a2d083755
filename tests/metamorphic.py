"""Semantics-preserving program transformations for the metamorphic robustness suite.

A transformation takes a project -- ``{relative posix path: source}`` (one file for a fixture, a
whole directory for a multi-file program) -- and returns the transformed project (every file,
changed or not, plus the modules it creates) or None when it does not apply. Each rewrite is one a
programmer makes without changing what the program does (Python's meaning, not just its syntax),
and each checks the conditions that make it so; where it cannot tell, it does not apply: a pair is
skipped rather than forced. ``TRANSFORMATIONS`` lists them by name (tests/test_metamorphic.py):

 1. add_annotations             parameters/returns/assignments holding loaders, optimizers, modules
 2. remove_annotations          parameter and return annotations, ``x: T = v`` -> ``x = v``
 3. rename                      project functions, methods, parameters, variables -> neutral names
 4. move_constructor_to_builder ``x = DataLoader(...)`` -> ``x = build_loader(<free variables>)``
 5. inline_builder              ``f(a)`` of a one-``return`` function -> its expression
 6. extract_loop_body           the innermost training loop's body -> a module-level function
 7. inline_helper               a function called once as a statement -> its body at the call
 8. wrap_in_class               ``def train(a)`` -> a class keeping ``a`` on self, ``run()`` method
 9. split_helpers_module        functions that read only imports -> ``helpers.py``
10. reexport_through_package    the same -> ``pkg/impl.py``, re-exported by ``pkg/__init__.py``
11. loaders_in_dict             ``train_loader`` -> ``loaders["train"]``
12. add_logging                 logging/timing/print calls that receive no training object
13. wrap_in_tqdm                ``for x in loader`` -> ``for x in tqdm(loader)``
14. positional_to_keyword       positional arguments of this file's functions -> keywords
15. reorder_definitions         runs of definitions reversed (functions defined after their callers)

The engine is libcst: trees are parsed once per source (shared by every transformation), names are
resolved from libcst's ScopeProvider records by scope (order-independent, as Python does; see
``FileInfo.resolve``), and edits are made by rebuilding only the paths from the edited nodes to the
root (``_rebuild``), which is much faster than a CSTTransformer pass.
"""
from __future__ import annotations

import builtins
import dataclasses
import keyword
import re
from collections import OrderedDict
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import (
    Assignment,
    BuiltinAssignment,
    ClassScope,
    ComprehensionScope,
    FunctionScope,
    GlobalScope,
    ImportAssignment,
    MetadataWrapper,
    ScopeProvider,
)

Project = Dict[str, str]
Edit = Callable[[cst.CSTNode], object]  # updated node -> node | list of nodes | None (removed)

# --------------------------------------------------------------------------------------------
# Trees: a fast walk, parents, and edits by rebuilding the edited paths
# --------------------------------------------------------------------------------------------

_SKIPPED_FIELDS = {"lpar", "rpar", "leading_lines", "lines_after_decorators", "header", "footer",
                   "trailing_whitespace", "comma", "semicolon", "newline", "indent", "equal", "dot",
                   "lbracket", "rbracket", "lbrace", "rbrace", "colon", "operator", "star",
                   "whitespace_after_star", "asynchronous", "default_indent", "default_newline",
                   "encoding", "has_trailing_newline", "posonly_ind", "whitespace", "first_line"}
_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _child_fields(kind: type) -> Tuple[str, ...]:
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = tuple(
            f.name for f in dataclasses.fields(kind)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace"))
    return found


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def walk(node: cst.CSTNode) -> List[cst.CSTNode]:
    """Every node below ``node`` (itself included), in source order."""
    out = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(list(children(current))))
    return out


def walk_scope(node: cst.CSTNode) -> List[cst.CSTNode]:
    """Nodes below ``node`` that run in its scope: nested defs, classes and lambdas not entered."""
    out = []
    stack = list(reversed(list(children(node))))
    while stack:
        current = stack.pop()
        out.append(current)
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(list(children(current))))
    return out


def _rebuild(info: "FileInfo", edits: Dict[int, Edit]) -> cst.Module:
    """The module with each edited node (by id) replaced by its edit's result; an edit gets the
    node with its children already edited. In a sequence a list result is spliced, None removed."""
    need: Set[int] = set()
    for node_id in edits:
        node = info.by_id[node_id]
        while node is not None and id(node) not in need:
            need.add(id(node))
            node = info.parent.get(id(node))

    def go(node):
        changes = {}
        for name in _child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                if id(value) in need:
                    new = go(value)
                    if new is not value:
                        changes[name] = new
            elif isinstance(value, (list, tuple)) and any(isinstance(c, cst.CSTNode) and id(c) in need for c in value):
                items = []
                for item in value:
                    if isinstance(item, cst.CSTNode) and id(item) in need:
                        new = go(item)
                        if isinstance(new, list):
                            items.extend(new)
                        elif new is not None:
                            items.append(new)
                    else:
                        items.append(item)
                changes[name] = items
        updated = node.with_changes(**changes) if changes else node
        edit = edits.get(id(node))
        return edit(updated) if edit is not None else updated

    return go(info.module)


def _code(module: cst.Module) -> str:
    """The module's text; blank lines the edits left at its very start are dropped."""
    if module.body and not module.header:
        first = module.body[0]
        lines = list(first.leading_lines)
        while lines and lines[0].comment is None:
            lines.pop(0)
        if len(lines) != len(first.leading_lines):
            module = module.with_changes(body=[first.with_changes(leading_lines=lines)] + list(module.body[1:]))
    return module.code


# --------------------------------------------------------------------------------------------
# Per-file facts (parsed once per source, shared by all transformations)
# --------------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class FileInfo:
    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.module = cst.parse_module(source)
        self.nodes = walk(self.module)
        self.by_id = {id(n): n for n in self.nodes}
        self.parent: Dict[int, cst.CSTNode] = {}
        for node in self.nodes:
            for child in children(node):
                self.parent[id(child)] = node
        self.words = set(_WORD.findall(source))
        self._scopes = None
        self._string_words = None
        self._declared_cache: Dict[int, Tuple[Set[str], Set[str]]] = {}
        self._uses_cache: Dict[Tuple[int, str], List] = {}
        self._all_scopes: Optional[List] = None
        self.imports = _module_imports(self.module)

    @property
    def scopes(self):
        if self._scopes is None:
            self._scopes = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(ScopeProvider)
        return self._scopes

    @property
    def global_scope(self) -> GlobalScope:
        return self.scopes[self.module]

    @property
    def string_words(self) -> Set[str]:
        """Strings that are one identifier (``getattr(m, "name")``, ``__all__``): names a program
        may look up by their text."""
        if self._string_words is None:
            found: Set[str] = set()
            for node in self.nodes:
                if isinstance(node, cst.SimpleString):
                    text = node.value.lstrip("rbuRBU").strip("'\"")
                    if _WORD.fullmatch(text):
                        found.add(text)
            self._string_words = found
        return self._string_words

    # -- name resolution ---------------------------------------------------------------------
    # libcst links a read to the assignments *textually before it* in the same scope (a read in
    # a loop of a variable assigned later in the loop has no referent). Python resolves names by
    # scope, whatever the order: these do the same, from libcst's per-scope records.

    def _declared(self, scope) -> Tuple[Set[str], Set[str]]:
        found = self._declared_cache.get(id(scope))
        if found is None:
            g: Set[str] = set()
            nl: Set[str] = set()
            node = getattr(scope, "node", None)
            if isinstance(scope, (FunctionScope, ClassScope)) and node is not None:
                for n in walk_scope(node):
                    if isinstance(n, cst.Global):
                        g.update(item.name.value for item in n.names)
                    elif isinstance(n, cst.Nonlocal):
                        nl.update(item.name.value for item in n.names)
            found = self._declared_cache[id(scope)] = (g, nl)
        return found

    def resolve(self, scope, name: str):
        """The scope whose binding of ``name`` a use of it in ``scope`` means (the builtin scope
        when none binds it)."""
        current = scope
        while True:
            parent = current.parent
            if parent is current:
                return current
            g, nl = self._declared(current)
            if name in g:
                return self.global_scope
            if name not in nl and current.assignments[name]:
                return current
            current = parent
            while isinstance(current, ClassScope):
                current = current.parent

    def all_scopes(self) -> List:
        if self._all_scopes is None:
            seen: Dict[int, object] = {}
            for scope in self.scopes.values():
                if scope is not None:
                    seen.setdefault(id(scope), scope)
            self._all_scopes = list(seen.values())
        return self._all_scopes

    def uses(self, scope, name: str) -> List:
        """Every read of ``name`` (libcst Access) that means ``scope``'s binding of it."""
        key = (id(scope), name)
        found = self._uses_cache.get(key)
        if found is None:
            found = [access for other in self.all_scopes() for access in other.accesses[name]
                     if self.resolve(other, name) is scope]
            self._uses_cache[key] = found
        return found

    def accesses_of(self, assignment) -> List:
        return self.uses(assignment.scope, assignment.name)

    def references(self, assignments) -> List:
        out, seen = [], set()
        for assignment in assignments:
            key = (id(assignment.scope), assignment.name)
            if key not in seen:
                seen.add(key)
                out.extend(self.accesses_of(assignment))
        return out

    def referents(self, access) -> Set:
        node = access.node
        if not isinstance(node, cst.Name):
            return set(access.referents)
        binding = self.resolve(access.scope, node.value)
        return set(binding.assignments[node.value])

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent.get(id(node))
        while current is not None:
            yield current
            current = self.parent.get(id(current))

    def top_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        current = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.Module):
                return current
            current = ancestor
        return current

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The statement (simple line or compound statement) holding ``node``."""
        current = node
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            current = self.parent.get(id(current))
        return current

    def scope_of(self, node: cst.CSTNode):
        current = node
        while current is not None:
            scope = self.scopes.get(current)
            if scope is not None:
                return scope
            current = self.parent.get(id(current))
        return self.global_scope

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.ancestors(node))

    def code(self, edits: Dict[int, Edit]) -> str:
        return _code(_rebuild(self, edits))

    def has_star_import(self) -> bool:
        return any(isinstance(n, cst.ImportFrom) and isinstance(n.names, cst.ImportStar) for n in self.nodes)

    def uses_dynamic_names(self) -> bool:
        """locals()/vars()/globals()/eval/exec, or an f-string's ``{x=}`` (prints the name)."""
        if self.words & {"locals", "vars", "globals", "eval", "exec", "__dict__"}:
            return True
        return any(isinstance(n, cst.FormattedStringExpression) and n.equal is not None for n in self.nodes)


_INFOS: "OrderedDict[Tuple[str, str], Optional[FileInfo]]" = OrderedDict()


def file_info(path: str, source: str) -> Optional[FileInfo]:
    key = (path, source)
    if key in _INFOS:
        _INFOS.move_to_end(key)
        return _INFOS[key]
    try:
        info: Optional[FileInfo] = FileInfo(path, source)
    except (cst.ParserSyntaxError, RecursionError):
        info = None
    _INFOS[key] = info
    while len(_INFOS) > 2048:
        _INFOS.popitem(last=False)
    return info


def _module_imports(module: cst.Module) -> Dict[str, str]:
    """Top-level import bindings: local name -> qualified name (``nn`` -> ``torch.nn``)."""
    found: Dict[str, str] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    full = dotted(alias.name)
                    if alias.asname is not None:
                        found[alias.asname.name.value] = full
                    else:
                        first = full.split(".")[0]
                        found[first] = first
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                base = "." * len(small.relative) + (dotted(small.module) if small.module is not None else "")
                for alias in small.names:
                    name = alias.name.value if isinstance(alias.name, cst.Name) else dotted(alias.name)
                    local = alias.asname.name.value if alias.asname is not None else name
                    found[local] = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
    return found


def dotted(node) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def qualified(info: FileInfo, node) -> Optional[str]:
    name = dotted(node)
    if name is None:
        return None
    first, _, rest = name.partition(".")
    if first in info.imports:
        return info.imports[first] + ("." + rest if rest else "")
    return name


class ProjectContext:
    """The files of one project, for checks that look beyond the file being rewritten."""

    def __init__(self, files: Project) -> None:
        self.files = files
        self._words: Dict[str, Set[str]] = {}
        self.taken: Set[str] = set()
        for path, source in files.items():
            self._words[path] = set(_WORD.findall(source))
            self.taken |= self._words[path]
        self.created: Set[str] = set()  # module paths created by this transformation
        self.current: Optional[str] = None  # the file being rewritten
        self._taken_in: Dict[str, Set[str]] = {}
        self.star_imports = any("import *" in text for text in files.values())

    def other_words(self, path: str) -> Set[str]:
        out: Set[str] = set()
        for other, words in self._words.items():
            if other != path:
                out |= words
        return out

    def exported(self, path: str, name: str) -> bool:
        """Could another file of the project refer to ``name`` defined at the top of ``path``?"""
        return name in self.other_words(path)

    def fresh(self, base: str) -> str:
        """A name used nowhere in the file being rewritten (nor a keyword or builtin; nor in the
        project where another file star-imports), taken from now on."""
        candidate, n = base, 1
        while self._used(candidate) or keyword.iskeyword(candidate) or hasattr(builtins, candidate):
            n += 1
            candidate = f"{base}{n}"
        self.mark(candidate)
        return candidate

    def _used(self, name: str) -> bool:
        if self.current is None or self.star_imports:
            return name in self.taken
        return name in self._words.get(self.current, set()) or name in self._taken_in.get(self.current, set())

    def mark(self, name: str) -> None:
        self.taken.add(name)
        if self.current is not None:
            self._taken_in.setdefault(self.current, set()).add(name)

    def fresh_module(self, directory: str, base: str) -> str:
        n, candidate = 1, base
        while (_join(directory, candidate + ".py") in self.files or _join(directory, candidate + "/__init__.py") in self.files
               or any(p.startswith(_join(directory, candidate) + "/") for p in self.files)
               or _join(directory, candidate) in self.created or candidate in self.taken):
            n += 1
            candidate = f"{base}{n}"
        self.created.add(_join(directory, candidate))
        self.taken.add(candidate)
        return candidate


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def _directory(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _in_package(files: Project, path: str) -> bool:
    return _join(_directory(path), "__init__.py") in files


# --------------------------------------------------------------------------------------------
# Small builders and predicates
# --------------------------------------------------------------------------------------------

def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _stmt(text: str) -> cst.BaseStatement:
    return cst.parse_statement(text)


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def _top_insert_index(module: cst.Module) -> int:
    """After the module docstring and ``from __future__`` imports."""
    index = 0
    body = module.body
    if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 \
            and isinstance(body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        index = 1
    while index < len(body) and isinstance(body[index], cst.SimpleStatementLine) and any(
            isinstance(s, cst.ImportFrom) and s.module is not None and dotted(s.module) == "__future__" for s in body[index].body):
        index += 1
    return index


def _insert_at_top(info: FileInfo, edits: Dict[int, Edit], statements: List[cst.BaseStatement]) -> None:
    """Insert ``statements`` after the docstring/__future__ imports (composes with other edits)."""
    index = _top_insert_index(info.module)
    if index < len(info.module.body):
        anchor = info.module.body[index]
        previous = edits.get(id(anchor))

        def edit(node, previous=previous):
            node = previous(node) if previous else node
            nodes = node if isinstance(node, list) else ([] if node is None else [node])
            return list(statements) + nodes
        edits[id(anchor)] = edit
    else:
        previous_module = edits.get(id(info.module))

        def edit_module(node, previous=previous_module):
            node = previous(node) if previous else node
            return node.with_changes(body=list(node.body) + list(statements))
        edits[id(info.module)] = edit_module


def _insert_before(edits: Dict[int, Edit], anchor: cst.CSTNode, statements: List[cst.BaseStatement]) -> None:
    previous = edits.get(id(anchor))

    def edit(node, previous=previous):
        node = previous(node) if previous else node
        nodes = node if isinstance(node, list) else ([] if node is None else [node])
        if nodes and isinstance(nodes[0], (cst.SimpleStatementLine, cst.BaseCompoundStatement)) \
                and len(nodes[0].leading_lines) < 2:
            nodes[0] = nodes[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()] + list(nodes[0].leading_lines))
        return list(statements) + nodes
    edits[id(anchor)] = edit


def _method_call_name(call: cst.Call) -> Optional[str]:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def _trains(node: cst.CSTNode) -> bool:
    """Does the code (own scope) call ``.backward(...)`` or ``.step(...)``?"""
    return any(isinstance(n, cst.Call) and _method_call_name(n) in ("backward", "step") for n in walk_scope(node))


def _top_level_functions(info: FileInfo) -> List[cst.FunctionDef]:
    return [s for s in info.module.body if isinstance(s, cst.FunctionDef)]


def _function_scope(info: FileInfo, fn: cst.FunctionDef):
    return info.scopes[fn.params]


def _all_params(fn) -> List[cst.Param]:
    p = fn.params
    out = list(p.posonly_params) + list(p.params)
    if isinstance(p.star_arg, cst.Param):
        out.append(p.star_arg)
    out.extend(p.kwonly_params)
    if p.star_kwarg is not None:
        out.append(p.star_kwarg)
    return out


def _simple_signature(fn: cst.FunctionDef) -> bool:
    p = fn.params
    return not p.posonly_params and not isinstance(p.star_arg, cst.Param) and p.star_kwarg is None and not p.kwonly_params


_LITERAL_TYPES = (cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)


def _is_literal(node) -> bool:
    if isinstance(node, _LITERAL_TYPES):
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    return False


def _single_global_def(info: FileInfo, name: str, node: cst.CSTNode):
    """The module-level assignment of ``name`` if ``node`` is its only binding, else None."""
    assignments = list(info.global_scope.assignments[name])
    if len(assignments) != 1 or assignments[0].node is not node:
        return None
    return assignments[0]


def _direct_calls(info: FileInfo, references) -> Optional[List[cst.Call]]:
    """The calls made through ``references`` if every one is a plain call ``f(...)``, else None."""
    calls = []
    for access in references:
        node = access.node
        parent = info.parent.get(id(node))
        if not isinstance(node, cst.Name) or not isinstance(parent, cst.Call) or parent.func is not node:
            return None
        calls.append(parent)
    return calls


_SAFE_DECORATORS = {"torch.no_grad", "torch.inference_mode", "torch.enable_grad", "staticmethod", "classmethod"}


def _safe_decorators(info: FileInfo, fn) -> bool:
    for decorator in fn.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Call) and not expr.args:
            expr = expr.func
        if qualified(info, expr) not in _SAFE_DECORATORS:
            return False
    return True


def _names_in(node: cst.CSTNode) -> Set[str]:
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def _global_nonlocal_names(info: FileInfo) -> Tuple[Set[str], Set[str]]:
    g, nl = set(), set()
    for node in info.nodes:
        if isinstance(node, cst.Global):
            g.update(item.name.value for item in node.names)
        elif isinstance(node, cst.Nonlocal):
            nl.update(item.name.value for item in node.names)
    return g, nl


def _per_file(transform: Callable[[FileInfo, ProjectContext], Optional[Dict[str, str]]]):
    """A project transformation applying ``transform`` to every Python file it applies to."""

    def apply(files: Project) -> Optional[Project]:
        context = ProjectContext(files)
        out = dict(files)
        changed = False
        for path in sorted(files):
            if not path.endswith(".py"):
                continue
            info = file_info(path, files[path])
            if info is None:
                continue
            context.current = path
            result = transform(info, context)
            if result:
                for new_path, text in result.items():
                    if new_path in files and new_path != path and out[new_path] != files[new_path]:
                        return None  # two rewrites of one file: not composed
                    out[new_path] = text
                changed = True
                # later files see the names this one took
        if not changed or out == files:
            return None
        return out

    apply.__name__ = transform.__name__.lstrip("_")
    apply.__doc__ = transform.__doc__
    return apply


# --------------------------------------------------------------------------------------------
# What expressions hold: loaders, optimizers, modules (for annotations, builders, dicts)
# --------------------------------------------------------------------------------------------

_MODULE_METHODS_RETURNING_SELF = {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval",
                                  "requires_grad_", "to_empty", "type"}
_NOT_MODULES = {"Parameter", "ParameterList", "ParameterDict", "Buffer", "UninitializedParameter", "UninitializedBuffer"}


def _module_classes(info: FileInfo) -> Set[str]:
    """Names of top-level classes deriving from torch.nn.Module (through classes of this file)."""
    found: Set[str] = set()
    changed = True
    classes = [s for s in info.module.body if isinstance(s, cst.ClassDef)]
    while changed:
        changed = False
        for cls in classes:
            if cls.name.value in found:
                continue
            for base in cls.bases:
                q = qualified(info, base.value) or ""
                if (re.fullmatch(r"torch\.nn\.(modules\.module\.)?Module", q) or q in found
                        or re.fullmatch(r"(pytorch_)?lightning(\.pytorch)?\.(LightningModule|core\.LightningModule)", q)):
                    found.add(cls.name.value)
                    changed = True
                    break
    return found


def call_kind(info: FileInfo, call: cst.Call, depth: int = 0) -> Optional[str]:
    q = qualified(info, call.func) or ""
    last = q.rsplit(".", 1)[-1]
    if last == "DataLoader":
        return "loader"
    if q.startswith("torch.optim.lr_scheduler."):
        return "scheduler"
    if re.fullmatch(r"torch\.optim\.[A-Z]\w*", q) and last != "Optimizer":
        return "optimizer"
    if last.endswith("Sampler") and last[:1].isupper():
        return "sampler"
    if (re.fullmatch(r"torch\.nn\.[A-Z]\w*", q) and last not in _NOT_MODULES) or re.fullmatch(r"torch\.nn\.parallel\.[A-Z]\w*", q):
        return "module"
    if isinstance(call.func, cst.Name) and call.func.value in _module_classes(info) and call.func.value not in info.imports:
        return "module"
    if isinstance(call.func, cst.Name) and depth < 4:
        builder = next((f for f in _top_level_functions(info) if f.name.value == call.func.value), None)
        if builder is not None and _single_global_def(info, builder.name.value, builder) is not None:
            returns = [n for n in walk_scope(builder.body) if isinstance(n, cst.Return)]
            if returns and not any(isinstance(n, (cst.Yield, cst.Await)) for n in walk_scope(builder.body)):
                kinds = {expr_kind(info, r.value, depth + 1) if r.value is not None else None for r in returns}
                if len(kinds) == 1:
                    return kinds.pop()
    if isinstance(call.func, cst.Attribute):
        method = call.func.attr.value
        if method in _MODULE_METHODS_RETURNING_SELF and depth < 4 and expr_kind(info, call.func.value, depth + 1) == "module":
            return "module"
        if method == "from_pretrained":
            base = qualified(info, call.func.value) or ""
            cls = base.rsplit(".", 1)[-1]
            if base.startswith("transformers.") and (cls.startswith("AutoModel") or "For" in cls or cls.endswith("Model")):
                return "module"
    return None


def expr_kind(info: FileInfo, expr, depth: int = 0) -> Optional[str]:
    """'loader', 'optimizer', 'module', 'sampler', 'scheduler' when ``expr`` certainly holds one."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Call):
        return call_kind(info, expr, depth)
    if isinstance(expr, cst.Name):
        access = _access_of(info, expr)
        if access is None or not info.referents(access):
            return None
        kinds = set()
        for assignment in info.referents(access):
            if not isinstance(assignment, Assignment) or not isinstance(assignment.node, cst.Name):
                return None
            parent = info.parent.get(id(assignment.node))
            statement = info.parent.get(id(parent)) if isinstance(parent, cst.AssignTarget) else parent
            if isinstance(parent, cst.AssignTarget) and isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                kinds.add(expr_kind(info, statement.value, depth + 1))
            elif isinstance(parent, cst.AnnAssign) and parent.value is not None:
                kinds.add(expr_kind(info, parent.value, depth + 1))
            else:
                return None
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _access_of(info: FileInfo, name: cst.Name):
    scope = info.scope_of(name)
    if scope is None:
        return None
    for access in scope.accesses[name.value]:
        if access.node is name:
            return access
    return None


# ============================================================================================
# 1. add_annotations
# ============================================================================================

_INTROSPECTING = {"dataclass", "dataclasses", "NamedTuple", "TypedDict", "get_type_hints", "__annotations__",
                  "pydantic", "BaseModel", "typer", "jsonargparse", "LightningCLI", "HfArgumentParser", "signature",
                  "attr", "attrs", "fire", "tyro", "simple_parsing", "Protocol", "singledispatch", "cattrs",
                  "beartype", "typechecked", "validate_call", "get_annotations", "click", "hydra"}


def _bound_to(info: FileInfo, name: str, target: str) -> bool:
    """Is module-level ``name`` bound only by one top-level import of ``target``?"""
    if info.imports.get(name) != target:
        return False
    return len(list(info.global_scope.assignments[name])) == 1


def _param_kind_from_use(info: FileInfo, fn: cst.FunctionDef, param: cst.Param) -> Optional[str]:
    """What a parameter holds, from how the function body uses it (unambiguous uses only)."""
    scope = _function_scope(info, fn)
    assignments = [a for a in scope.assignments[param.name.value]]
    if len(assignments) != 1 or assignments[0].node is not param:
        return None  # rebound in the body
    kinds = set()
    for access in info.accesses_of(assignments[0]):
        node = access.node
        parent = info.parent.get(id(node))
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = info.parent.get(id(parent))
            if parent.attr.value == "parameters" and isinstance(grand, cst.Call) and grand.func is parent:
                arg = info.parent.get(id(grand))
                call = info.parent.get(id(arg)) if isinstance(arg, cst.Arg) else None
                if isinstance(call, cst.Call) and call_kind(info, call) == "optimizer" and call.args and call.args[0] is arg:
                    kinds.add("module")
            elif parent.attr.value == "param_groups":
                kinds.add("optimizer")
        elif isinstance(parent, cst.Arg):
            call = info.parent.get(id(parent))
            if isinstance(call, cst.Call) and call_kind(info, call) == "scheduler" and call.args and call.args[0] is parent \
                    and parent.keyword is None:
                kinds.add("optimizer")
    return kinds.pop() if len(kinds) == 1 else None


def _bind_arguments(fn: cst.FunctionDef, call: cst.Call, skip_first: bool = False) -> Optional[Dict[str, cst.BaseExpression]]:
    """Parameter name -> argument expression of ``call`` (None when it cannot be matched)."""
    positional = [p.name.value for p in list(fn.params.posonly_params) + list(fn.params.params)]
    if skip_first:
        positional = positional[1:]
    keywords = {p.name.value for p in fn.params.params} | {p.name.value for p in fn.params.kwonly_params}
    bound: Dict[str, cst.BaseExpression] = {}
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if index >= len(positional):
                return None
            bound[positional[index]] = arg.value
            index += 1
        else:
            if arg.keyword.value not in keywords or arg.keyword.value in bound:
                return None
            bound[arg.keyword.value] = arg.value
    return bound


def _class_calls(info: FileInfo, cls: cst.ClassDef) -> Optional[List[cst.Call]]:
    assignment = _single_global_def(info, cls.name.value, cls)
    if assignment is None:
        return None
    calls = []
    for access in info.accesses_of(assignment):
        parent = info.parent.get(id(access.node))
        if isinstance(parent, cst.Call) and parent.func is access.node:
            calls.append(parent)
        elif isinstance(parent, cst.Arg) or isinstance(access.node, cst.Name):
            continue  # isinstance(x, C), bases: no call of __init__
    return calls


def _add_annotations(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Annotate parameters, builders' returns and assignments that hold a DataLoader, optimizer or
    module (``train_data: DataLoader``, ``-> DataLoader``, ``model: nn.Module``), importing the names
    (plainly where the module imports torch already, else under ``if TYPE_CHECKING:``, quoted)."""
    if info.has_star_import() or (info.words & _INTROSPECTING):
        return None
    wanted: Dict[int, Tuple[str, str]] = {}  # id(node) -> (what, kind): what in param/returns/assign
    globals_, nonlocals = _global_nonlocal_names(info)
    for fn in (n for n in info.nodes if isinstance(n, cst.FunctionDef)):
        if fn.asynchronous is not None:
            continue
        parent = info.parent.get(id(fn))
        owner = info.parent.get(id(parent)) if isinstance(parent, cst.IndentedBlock) else None
        calls: Optional[List[cst.Call]] = None
        skip_first = False
        if isinstance(parent, cst.Module) and not fn.decorators:
            assignment = _single_global_def(info, fn.name.value, fn)
            if assignment is not None and not context.exported(info.path, fn.name.value):
                calls = _direct_calls(info, info.accesses_of(assignment))
        elif isinstance(owner, cst.ClassDef) and fn.name.value == "__init__" and isinstance(info.parent.get(id(owner)), cst.Module):
            if not context.exported(info.path, owner.name.value):
                calls = _class_calls(info, owner)
                skip_first = True
        for param in list(fn.params.params) + list(fn.params.kwonly_params) + list(fn.params.posonly_params):
            if param.annotation is not None or param.name.value in ("self", "cls"):
                continue
            kind = None
            if calls:
                kinds = set()
                for call in calls:
                    bound = _bind_arguments(fn, call, skip_first)
                    if bound is None or param.name.value not in bound:
                        kinds.add(None)
                    else:
                        kinds.add(expr_kind(info, bound[param.name.value]))
                kind = kinds.pop() if len(kinds) == 1 else None
            if kind is None:
                kind = _param_kind_from_use(info, fn, param)
            if kind in ("loader", "optimizer", "module"):
                wanted[id(param)] = ("param", kind)
        if fn.returns is None:
            returns = [n for n in walk_scope(fn.body) if isinstance(n, cst.Return)]
            if returns and not any(isinstance(n, (cst.Yield, cst.Await)) for n in walk_scope(fn.body)):
                kinds = {expr_kind(info, r.value) if r.value is not None else None for r in returns}
                if len(kinds) == 1 and next(iter(kinds)) in ("loader", "optimizer", "module"):
                    wanted[id(fn)] = ("returns", next(iter(kinds)))
    for node in info.nodes:
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            name = node.targets[0].target.value
            scope = info.scope_of(node)
            if isinstance(scope, (ClassScope, ComprehensionScope)) or name in globals_ or name in nonlocals:
                continue
            line = info.parent.get(id(node))
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            kind = expr_kind(info, node.value)
            if kind in ("loader", "optimizer", "module"):
                wanted[id(node)] = ("assign", kind)
    if not wanted:
        return None
    # How each kind is spelled, and the imports that make the spelling valid.
    runtime = any(q == "torch" or q.startswith("torch.") for q in info.imports.values())
    # an existing import is reused only where it runs before the first annotation evaluated
    body = list(info.module.body)
    first_use = min(body.index(info.top_statement(info.by_id[i])) for i in wanted)

    def bound_here(info, name, target):
        if not _bound_to(info, name, target):
            return False
        binding = next(iter(info.global_scope.assignments[name])).node
        return body.index(info.top_statement(binding)) < first_use
    spelling: Dict[str, str] = {}
    imports: List[str] = []
    kinds_needed = {kind for _, kind in wanted.values()}
    for kind in sorted(kinds_needed):
        if kind == "loader":
            existing = next((n for n, q in info.imports.items() if q == "torch.utils.data.DataLoader" and bound_here(info, n, q)), None)
            if existing and runtime:
                spelling[kind] = existing
                continue
            name = context.fresh("DataLoader")
            imports.append(f"from torch.utils.data import DataLoader{'' if name == 'DataLoader' else ' as ' + name}")
            spelling[kind] = name
        elif kind == "module":
            if runtime and any(bound_here(info, n, "torch.nn") for n in ["nn"]):
                spelling[kind] = "nn.Module"
            elif runtime and bound_here(info, "torch", "torch"):
                spelling[kind] = "torch.nn.Module"
            else:
                name = context.fresh("nn")
                imports.append(f"from torch import nn{'' if name == 'nn' else ' as ' + name}")
                spelling[kind] = f"{name}.Module"
        elif kind == "optimizer":
            if runtime and bound_here(info, "torch", "torch"):
                spelling[kind] = "torch.optim.Optimizer"
            else:
                name = context.fresh("Optimizer")
                imports.append(f"from torch.optim import Optimizer{'' if name == 'Optimizer' else ' as ' + name}")
                spelling[kind] = name
    header: List[cst.BaseStatement] = []
    quoted = False
    if imports:
        if runtime:
            header = [_stmt(line + "\n") for line in imports]
        else:
            quoted = True
            checking = next((n for n, q in info.imports.items() if q == "typing.TYPE_CHECKING" and bound_here(info, n, q)), None)
            if checking is None:
                checking = context.fresh("TYPE_CHECKING")
                header.append(_stmt(f"from typing import TYPE_CHECKING{'' if checking == 'TYPE_CHECKING' else ' as ' + checking}\n"))
            body = "".join(f"    {line}\n" for line in imports)
            header.append(_stmt(f"if {checking}:\n{body}"))

    def annotation(kind: str) -> cst.Annotation:
        text = spelling[kind]
        return cst.Annotation(annotation=cst.SimpleString(f'"{text}"') if quoted else _expr(text))

    edits: Dict[int, Edit] = {}
    for node_id, (what, kind) in wanted.items():
        node = info.by_id[node_id]
        if what == "param":
            edits[node_id] = lambda n, k=kind: n.with_changes(annotation=annotation(k))
        elif what == "returns":
            edits[node_id] = lambda n, k=kind: n.with_changes(returns=annotation(k))
        else:
            edits[node_id] = lambda n, k=kind: cst.AnnAssign(target=n.targets[0].target, annotation=annotation(k), value=n.value)
    if header:
        _insert_at_top(info, edits, header)
    return {info.path: info.code(edits)}


# ============================================================================================
# 2. remove_annotations
# ============================================================================================

def _remove_annotations(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Drop parameter and return annotations; ``x: T = v`` becomes ``x = v`` (class bodies, whose
    annotations can declare fields, and bare declarations are left alone)."""
    if info.words & _INTROSPECTING:
        return None
    edits: Dict[int, Edit] = {}
    for node in info.nodes:
        if isinstance(node, cst.Param) and node.annotation is not None:
            edits[id(node)] = lambda n: n.with_changes(annotation=None)
        elif isinstance(node, cst.FunctionDef) and node.returns is not None:
            edits[id(node)] = lambda n: n.with_changes(returns=None)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            if isinstance(info.scope_of(node), ClassScope):
                continue
            edits[id(node)] = lambda n: cst.Assign(targets=[cst.AssignTarget(target=n.target)], value=n.value)
    if not edits:
        return None
    return {info.path: info.code(edits)}


# ============================================================================================
# 3. rename
# ============================================================================================

_FUNCTION_NAMES = ["prepare", "setup", "run", "step_fn", "process", "handle", "execute", "compute"]
# Method names a library or protocol may call on an object handed to it (never renamed).
_PROTOCOL_METHODS = {
    "step", "zero_grad", "state_dict", "load_state_dict", "set_epoch", "forward", "backward", "update", "scale",
    "unscale_", "train", "eval", "parameters", "named_parameters", "modules", "children", "to", "cuda", "cpu",
    "close", "write", "flush", "read", "readline", "keys", "values", "items", "get", "run", "start", "join",
    "get_lr", "get_last_lr", "add_param_group", "apply", "collate", "fit", "predict", "test", "validate",
    "setup", "teardown", "prepare", "item", "sample", "reset", "register", "compute", "log", "format",
    "emit", "filter", "handle", "send", "recv", "copy", "clear", "pop", "append", "extend", "encode", "decode",
    "tokenize", "generate", "save", "load", "init", "configure_optimizers",
}


class _Names:
    def __init__(self, context: ProjectContext) -> None:
        self.context = context
        self.functions = 0
        self.objects = 0

    def function(self) -> str:
        while self.functions < len(_FUNCTION_NAMES):
            base = _FUNCTION_NAMES[self.functions]
            self.functions += 1
            if not self.context._used(base):
                self.context.mark(base)
                return base
        return self.context.fresh("fn")

    def obj(self) -> str:
        self.objects += 1
        return self.context.fresh(f"obj{self.objects}")


def _class_family(info: FileInfo) -> Tuple[Dict[str, cst.ClassDef], Dict[str, Set[str]], Set[str]]:
    """Top-level classes by name, each one's family (classes linked by inheritance in this file),
    and the classes whose ancestry is entirely this file's (no library base, no metaclass)."""
    classes = {s.name.value: s for s in info.module.body if isinstance(s, cst.ClassDef)}
    counts = {name: len(list(info.global_scope.assignments[name])) for name in classes}
    links: Dict[str, Set[str]] = {name: {name} for name in classes}
    own: Set[str] = set()
    pending = True
    while pending:
        pending = False
        for name, cls in classes.items():
            if name in own or counts[name] != 1 or cls.keywords or cls.decorators:
                continue
            bases = [dotted(b.value) for b in cls.bases]
            if all(b == "object" or (b in classes and b in own) for b in bases):
                own.add(name)
                pending = True
    for name, cls in classes.items():
        for base in cls.bases:
            b = dotted(base.value)
            if b in classes:
                links[name].add(b)
                links[b].add(name)
    families: Dict[str, Set[str]] = {}
    for name in classes:
        seen, stack = set(), [name]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(links[current] - seen)
        families[name] = seen
    return classes, families, own


def _method_receivers_known(info: FileInfo, family: Set[str], attribute: cst.Attribute) -> bool:
    """Is ``x.m`` certainly an attribute of an instance (or the class) of ``family``?"""
    receiver = attribute.value
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super" and not receiver.args:
        receiver_class = _enclosing_class(info, attribute)
        return receiver_class is not None and receiver_class.name.value in family
    if not isinstance(receiver, cst.Name):
        return False
    if receiver.value in family and receiver.value not in info.imports:
        return True  # C.m
    if receiver.value in ("self", "cls"):
        cls = _enclosing_class(info, attribute)
        method = _enclosing_function(info, attribute)
        if cls is None or cls.name.value not in family or method is None:
            return False
        first = _all_params(method)[:1]
        return bool(first) and first[0].name.value == receiver.value
    access = _access_of(info, receiver)
    if access is None or not info.referents(access):
        return False
    for assignment in info.referents(access):
        if not isinstance(assignment, Assignment) or not isinstance(assignment.node, cst.Name):
            return False
        target = info.parent.get(id(assignment.node))
        statement = info.parent.get(id(target))
        if not (isinstance(target, cst.AssignTarget) and isinstance(statement, cst.Assign) and len(statement.targets) == 1
                and isinstance(statement.value, cst.Call) and isinstance(statement.value.func, cst.Name)
                and statement.value.func.value in family):
            return False
    return True


def _enclosing_function(info: FileInfo, node) -> Optional[cst.FunctionDef]:
    for ancestor in info.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor
        if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
            return None
    return None


def _enclosing_class(info: FileInfo, node) -> Optional[cst.ClassDef]:
    """The class whose method (directly) holds ``node``."""
    fn = _enclosing_function(info, node)
    if fn is None:
        return None
    block = info.parent.get(id(fn))
    owner = info.parent.get(id(block))
    return owner if isinstance(owner, cst.ClassDef) else None


_PLAIN_LIBRARY_BASES = {"torch.nn.Module", "torch.utils.data.Dataset", "torch.utils.data.IterableDataset",
                        "torch.utils.data.dataset.Dataset", "object"}


def _plain_bases(info: FileInfo, cls: cst.ClassDef, own: Set[str]) -> bool:
    """Bases that never construct the class or call its methods by keyword themselves."""
    if cls.keywords or cls.decorators:
        return False
    for base in cls.bases:
        name = dotted(base.value)
        if name in own and name not in info.imports:
            continue
        if qualified(info, base.value) not in _PLAIN_LIBRARY_BASES:
            return False
    return True


_POSITIONAL_PROTOCOL = {"__getitem__", "__setitem__", "__delitem__", "__len__", "__iter__", "__next__", "__enter__",
                        "__exit__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                        "__repr__", "__str__", "__hash__", "__bool__", "__add__", "__mul__"}


def _rename(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Rename project-defined functions, methods, parameters and variables to neutral names
    (``prepare``, ``setup``, ``run``..., ``obj1``...), keeping keyword call sites consistent. Library
    API (attributes, library keywords, dunders, methods of library-derived classes) is never renamed."""
    if info.uses_dynamic_names():
        return None
    gscope = info.global_scope
    globals_, nonlocals = _global_nonlocal_names(info)
    names = _Names(context)
    renamed: Dict[int, str] = {}  # id(Name node) -> new identifier
    keyword_renames: Dict[int, str] = {}  # id(Arg) -> new keyword
    exported = context.other_words(info.path)
    no_module_renames = any("import *" in text for path, text in context.files.items() if path != info.path)
    keyword_names = {n.keyword.value for n in info.nodes if isinstance(n, cst.Arg) and n.keyword is not None}

    def references_are_names(assignments) -> bool:
        return all(isinstance(a.node, cst.Name) for a in info.references(assignments))

    def rename_binding(assignments, new: str) -> bool:
        for assignment in assignments:
            node = assignment.node
            if isinstance(node, cst.Name):
                renamed[id(node)] = new
            elif isinstance(node, cst.Param):
                renamed[id(node.name)] = new
            elif isinstance(node, cst.FunctionDef):
                renamed[id(node.name)] = new
            else:
                return False
        for access in info.references(assignments):
            renamed[id(access.node)] = new
        return True

    def module_name_ok(name: str) -> bool:
        return not (_is_dunder(name) or no_module_renames or name in exported or name in info.string_words
                    or name in nonlocals)

    # -- module-level functions: the call sites of each (when all are plain calls) --------------
    known_calls: Dict[int, Optional[List[cst.Call]]] = {}  # id(FunctionDef) -> calls or None
    for fn in _top_level_functions(info):
        name = fn.name.value
        assignment = _single_global_def(info, name, fn)
        if assignment is None or not module_name_ok(name) or name in globals_ or not _safe_decorators(info, fn):
            continue
        if not references_are_names([assignment]):
            continue
        rename_binding([assignment], names.function())
        calls = _direct_calls(info, info.accesses_of(assignment))
        if calls is not None and not any(a.star == "**" for c in calls for a in c.args) and not fn.decorators:
            known_calls[id(fn)] = calls

    # -- methods of classes whose whole ancestry is this file's ----------------------------------
    classes, families, own = _class_family(info)
    attributes_by_name: Dict[str, List[cst.Attribute]] = {}
    for node in info.nodes:
        if isinstance(node, cst.Attribute):
            attributes_by_name.setdefault(node.attr.value, []).append(node)
    done_methods: Set[Tuple[frozenset, str]] = set()
    for cls_name, cls in classes.items():
        family = families[cls_name]
        if not family <= own or any(context.exported(info.path, c) for c in family):
            continue
        for statement in cls.body.body:
            if not isinstance(statement, cst.FunctionDef):
                continue
            method = statement.name.value
            key = (frozenset(family), method)
            if key in done_methods or _is_dunder(method) or method in _PROTOCOL_METHODS or method in exported \
                    or method in info.string_words or method in info.imports:
                continue
            done_methods.add(key)
            definitions = [s for c in family for s in classes[c].body.body
                           if isinstance(s, cst.FunctionDef) and s.name.value == method]
            other_bindings = [s for c in family for s in classes[c].body.body
                              if (not isinstance(s, cst.FunctionDef) and method in _names_in(s))
                              or (isinstance(s, cst.FunctionDef) and any(method in _names_in(d) for d in s.decorators))]
            if other_bindings or any(not _safe_decorators(info, d) or d.decorators for d in definitions):
                continue
            if any(isinstance(n, cst.FunctionDef) and n.name.value == method and n not in definitions for n in info.nodes):
                continue
            accesses = attributes_by_name.get(method, [])
            if not all(_method_receivers_known(info, family, a) for a in accesses):
                continue
            new = names.function()
            for d in definitions:
                renamed[id(d.name)] = new
            for a in accesses:
                renamed[id(a.attr)] = new
            calls = []
            for a in accesses:
                parent = info.parent.get(id(a))
                if isinstance(parent, cst.Call) and parent.func is a:
                    calls.append(parent)
                else:
                    calls = None
                    break
            if calls is not None and len(definitions) == 1 and not any(x.star == "**" for c in calls for x in c.args):
                known_calls[id(definitions[0])] = calls
        # __init__: its call sites are the class's calls (no subclasses: no super().__init__ calls)
        init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is not None and family == {cls_name} and not init.decorators and _plain_bases(info, cls, own):
            assignment = _single_global_def(info, cls_name, cls)
            if assignment is not None and cls_name not in info.string_words and not context.exported(info.path, cls_name):
                calls = []
                for access in info.accesses_of(assignment):
                    parent = info.parent.get(id(access.node))
                    if isinstance(parent, cst.Call) and parent.func is access.node:
                        calls.append(parent)
                    elif isinstance(parent, cst.Arg):  # isinstance(x, C) and the like
                        grand = info.parent.get(id(parent))
                        if not (isinstance(grand, cst.Call) and dotted(grand.func) in ("isinstance", "issubclass")):
                            calls = None
                            break
                    else:
                        calls = None
                        break
                if calls is not None and not any(x.star == "**" for c in calls for x in c.args):
                    known_calls[id(init)] = calls

    # -- parameters and local variables of every function -----------------------------------------
    for fn in (n for n in info.nodes if isinstance(n, cst.FunctionDef)):
        scope = _function_scope(info, fn)
        cls = None
        block = info.parent.get(id(fn))
        owner = info.parent.get(id(block))
        if isinstance(owner, cst.ClassDef):
            cls = owner
        params = {p.name.value: p for p in _all_params(fn)}
        star_params = set()
        if isinstance(fn.params.star_arg, cst.Param):
            star_params.add(fn.params.star_arg.name.value)
        if fn.params.star_kwarg is not None:
            star_params.add(fn.params.star_kwarg.name.value)
        calls = known_calls.get(id(fn))
        if calls is None and cls is None and not isinstance(block, cst.Module) and not fn.decorators:
            # a nested function: its calls, through the enclosing scope
            outer = info.scope_of(fn)
            assignments = [a for a in outer.assignments[fn.name.value]]
            if len(assignments) == 1 and assignments[0].node is fn:
                found = _direct_calls(info, info.accesses_of(assignments[0]))
                if found is not None and not any(x.star == "**" for c in found for x in c.args):
                    calls = found
        positional_protocol = cls is not None and fn.name.value in _POSITIONAL_PROTOCOL and _plain_bases(info, cls, own)
        by_name: Dict[str, List] = {}
        for assignment in scope.assignments:
            by_name.setdefault(assignment.name, []).append(assignment)
        for name, assignments in by_name.items():
            if name in globals_ or name in nonlocals or name in ("self", "cls") or _is_dunder(name):
                continue
            if any(isinstance(a, ImportAssignment) or isinstance(a.node, (cst.ClassDef, cst.Import, cst.ImportFrom))
                   or not isinstance(a, Assignment) for a in assignments):
                continue
            if not references_are_names(assignments):
                continue
            is_param = name in params
            if is_param and name not in star_params:
                if calls is None and not positional_protocol:
                    continue
                if positional_protocol and name in keyword_names:
                    continue
                if params[name] in fn.params.posonly_params:
                    pass
            if any(isinstance(a.node, cst.FunctionDef) for a in assignments):
                continue  # nested functions keep their names (their __name__)
            new = names.obj()
            if not rename_binding(assignments, new):
                continue
            if is_param and name not in star_params and calls:
                for call in calls:
                    for arg in call.args:
                        if arg.keyword is not None and arg.keyword.value == name:
                            keyword_renames[id(arg)] = new

    # -- module-level variables ---------------------------------------------------------------------
    by_name = {}
    for assignment in gscope.assignments:
        by_name.setdefault(assignment.name, []).append(assignment)
    for name, assignments in by_name.items():
        if not module_name_ok(name):
            continue
        if not all(isinstance(a, Assignment) and not isinstance(a, ImportAssignment) and isinstance(a.node, cst.Name)
                   for a in assignments):
            continue
        if not references_are_names(assignments):
            continue
        new = names.obj()
        rename_binding(assignments, new)
        for node in info.nodes:
            if isinstance(node, cst.Global):
                for item in node.names:
                    if item.name.value == name:
                        renamed[id(item.name)] = new

    if not renamed:
        return None
    edits: Dict[int, Edit] = {}
    for node_id, new in renamed.items():
        edits[node_id] = lambda n, new=new: n.with_changes(value=new)
    for node_id, new in keyword_renames.items():
        edits[node_id] = lambda n, new=new: n.with_changes(keyword=cst.Name(new))
    return {info.path: info.code(edits)}


# ============================================================================================
# 4. move_constructor_to_builder
# ============================================================================================

_BUILDER_NAMES = {"loader": "build_loader", "optimizer": "build_optimizer", "sampler": "build_sampler",
                  "scheduler": "build_scheduler"}


def _free_variables(info: FileInfo, expr: cst.CSTNode) -> Optional[List[str]]:
    """Names read in ``expr`` that are bound in a function's scope (not module globals, builtins or
    names bound inside ``expr`` itself), in order of first use; None if one is a class attribute or
    the expression cannot be moved to module level (super(), yield, await, walrus)."""
    names: List[str] = []
    lambda_names: Set[str] = set()
    for node in walk(expr):
        if isinstance(node, (cst.Yield, cst.Await, cst.NamedExpr)):
            return None
        if isinstance(node, cst.Name) and node.value == "super":
            return None
        if not isinstance(node, cst.Name):
            continue
        access = _access_of(info, node)
        if access is None:
            continue  # an attribute name, keyword or the like
        outside = []
        for assignment in info.referents(access):
            if isinstance(assignment, BuiltinAssignment):
                continue
            defining = assignment.node
            if info.inside(defining, expr):
                continue
            outside.append(assignment)
        for assignment in outside:
            scope = assignment.scope
            if isinstance(scope, ClassScope):
                return None
            if isinstance(scope, (FunctionScope, ComprehensionScope)):
                if node.value not in names:
                    names.append(node.value)
                if any(isinstance(a, cst.Lambda) for a in info.ancestors(node) if info.inside(a, expr)):
                    lambda_names.add(node.value)
    # A lambda keeps reading the variable later: only a variable bound once reads the same there.
    for name in lambda_names:
        scope = info.scope_of(expr)
        if len(list(info.resolve(scope, name).assignments[name])) != 1:
            return None
    return names


def _move_constructor_to_builder(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """``loader = DataLoader(...)`` (and optimizer, sampler, scheduler constructors) becomes
    ``loader = build_loader(<free variables>)`` with ``def build_loader(...): return DataLoader(...)``
    defined at module level just before the top-level statement that holds the assignment."""
    edits: Dict[int, Edit] = {}
    builders: Dict[int, List[cst.BaseStatement]] = {}  # id(top statement) -> defs to insert before it
    for node in info.nodes:
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call)):
            continue
        target = node.targets[0].target
        if not isinstance(target, (cst.Name, cst.Attribute)):
            continue
        kind = call_kind(info, node.value)
        if kind not in _BUILDER_NAMES:
            continue
        scope = info.scope_of(node)
        if isinstance(scope, (ClassScope, ComprehensionScope)):
            continue
        free = _free_variables(info, node.value)
        if free is None:
            continue
        name = context.fresh(_BUILDER_NAMES[kind])
        params = ", ".join(free)
        definition = cst.FunctionDef(
            name=cst.Name(name),
            params=cst.Parameters(params=[cst.Param(cst.Name(v)) for v in free]),
            body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Return(value=node.value)])]),
            leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
        )
        call = _expr(f"{name}({params})")
        edits[id(node.value)] = lambda n, call=call: call
        top = info.top_statement(node)
        builders.setdefault(id(top), []).append(definition)
    if not builders:
        return None
    for top_id, definitions in builders.items():
        _insert_before(edits, info.by_id[top_id], definitions)
    return {info.path: info.code(edits)}


# ============================================================================================
# 5. inline_builder
# ============================================================================================

def _single_return(fn: cst.FunctionDef) -> Optional[cst.BaseExpression]:
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    if body and _is_docstring(body[0]):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    statement = body[0].body[0]
    return statement.value if isinstance(statement, cst.Return) and statement.value is not None else None


def _is_docstring(statement) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _simple_argument(node) -> bool:
    if _is_literal(node) or isinstance(node, cst.Name):
        return True
    return isinstance(node, cst.Attribute) and dotted(node) is not None


_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp,
           cst.SetComp, cst.SimpleString)


def _bound_inside(expr: cst.CSTNode) -> Set[str]:
    """Names bound within ``expr``: comprehension targets, lambda parameters, walrus targets."""
    found: Set[str] = set()
    for node in walk(expr):
        if isinstance(node, cst.CompFor):
            found |= _names_in(node.target)
        elif isinstance(node, cst.Lambda):
            found |= {p.name.value for p in _all_params(node)}
        elif isinstance(node, cst.NamedExpr):
            found |= _names_in(node.target)
    return found


def _parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, _ATOMIC) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _inline_builder(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """A module-level function whose body is one ``return <expr>``, called with simple arguments
    (names, constants, ``a.b``): each call becomes the expression with the arguments substituted;
    the definition goes once no reference is left."""
    if info.uses_dynamic_names():
        return None
    edits: Dict[int, Edit] = {}
    for fn in _top_level_functions(info):
        expr = _single_return(fn)
        if expr is None or fn.decorators or fn.asynchronous is not None or not _simple_signature(fn):
            continue
        if any(p.default is not None and not _is_literal(p.default) for p in fn.params.params):
            continue
        assignment = _single_global_def(info, fn.name.value, fn)
        if assignment is None or fn.name.value in info.string_words:
            continue
        scope = _function_scope(info, fn)
        params = {p.name.value: p for p in fn.params.params}
        # every local of the function must be a parameter (the expression binds nothing but inside it)
        if any(a.name not in params for a in scope.assignments):
            continue
        param_uses: Dict[str, List[cst.Name]] = {name: [] for name in params}
        late: Set[str] = set()  # parameters read inside a lambda or generator (evaluated later)
        ok = True
        for name in params:
            for access in info.references([a for a in scope.assignments[name]]):
                if not isinstance(access.node, cst.Name) or not info.inside(access.node, expr):
                    ok = False
                    break
                param_uses[name].append(access.node)
                if any(isinstance(a, (cst.Lambda, cst.GeneratorExp)) for a in info.ancestors(access.node) if info.inside(a, expr)):
                    late.add(name)
        if not ok:
            continue
        bound_inside = _bound_inside(expr)
        global_reads: Dict[str, Set] = {}
        for node in walk(expr):
            if isinstance(node, cst.Name) and node.value not in params:
                access = _access_of(info, node)
                if access is None:
                    continue
                referents = set(info.referents(access))
                if any(not isinstance(r, BuiltinAssignment) and info.inside(r.node, expr) for r in referents):
                    continue
                global_reads[node.value] = referents
        if fn.name.value in _names_in(expr):
            continue  # recursion
        references = list(info.accesses_of(assignment))
        inlined = 0
        for access in references:
            call = info.parent.get(id(access.node))
            if not isinstance(call, cst.Call) or call.func is not access.node:
                continue
            site_scope = info.scope_of(call)
            if isinstance(site_scope, ClassScope):
                continue
            bound = _bind_arguments(fn, call)
            if bound is None:
                continue
            for name, param in params.items():
                if name not in bound and param.default is not None:
                    bound[name] = param.default
            if set(bound) != set(params) or not all(_simple_argument(v) for v in bound.values()):
                continue
            if any(name in late and not _is_literal(value) for name, value in bound.items()):
                continue
            argument_names = set().union(*[_names_in(v) for v in bound.values()]) if bound else set()
            if argument_names & bound_inside:
                continue  # a name of an argument would be captured by a comprehension or lambda inside
            # the expression's globals must mean the same at the call site
            same = True
            for name, meaning in global_reads.items():
                here = set(info.resolve(site_scope, name).assignments[name])
                if here != meaning:
                    same = False
                    break
            if not same:
                continue
            replacement = _substitute(expr, {id(n): _argument_at(info, n, bound[name]) for name, uses in param_uses.items() for n in uses})
            edits[id(call)] = lambda n, r=replacement: _parenthesized(r)
            inlined += 1
        if inlined == 0:
            continue
        if inlined == len(references) and not context.exported(info.path, fn.name.value):
            edits[id(fn)] = lambda n: None
    if not edits:
        return None
    return {info.path: info.code(edits)}


def _argument_at(info: FileInfo, use: cst.Name, argument: cst.BaseExpression) -> cst.BaseExpression:
    """``argument`` as it must be written where ``use`` (a parameter) stood: a number or negation
    used as an attribute's receiver or an operand is parenthesized."""
    if isinstance(argument, (cst.Name, cst.Attribute, cst.SimpleString)):
        return argument
    parent = info.parent.get(id(use))
    if isinstance(argument, (cst.Integer, cst.Float, cst.Imaginary)) and not isinstance(parent, (cst.Attribute, cst.Subscript)):
        return argument
    if isinstance(argument, cst.Name) or (isinstance(parent, (cst.Arg, cst.Element, cst.DictElement)) and not isinstance(argument, cst.Tuple)):
        return argument
    return _parenthesized(argument)


def _substitute(expr: cst.CSTNode, replacements: Dict[int, cst.CSTNode]) -> cst.CSTNode:
    """``expr`` with the nodes whose ids are keys replaced (a rebuild of a detached subtree)."""
    class _Sub(cst.CSTTransformer):
        def on_leave(self, original, updated):
            new = replacements.get(id(original))
            return new if new is not None else updated
    return expr.visit(_Sub())


# ============================================================================================
# 6. extract_loop_body
# ============================================================================================

def _loop_level_jumps(block: cst.CSTNode) -> bool:
    """Does ``block`` (a loop body) hold a break/continue that leaves or restarts that loop?"""
    stack = list(children(block))
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Break, cst.Continue)):
            return True
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, (cst.For, cst.While)):
            if node.orelse is not None:
                stack.append(node.orelse)  # an inner loop's else runs in the outer loop
            continue
        stack.extend(children(node))
    return False


def _target_names(target) -> Optional[List[str]]:
    """Names bound by an assignment target made of names (tuples/lists of them); None otherwise."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out = []
        for element in target.elements:
            value = element.value
            inner = _target_names(value.value if isinstance(value, cst.StarredElement) else value)
            if inner is None:
                return None
            out.extend(inner)
        return out
    return None


def _statement_binds(statement, name: str) -> bool:
    """Does executing ``statement`` (preceding the point of interest in its block) certainly bind ``name``?"""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    if name in (_target_names(target.target) or []):
                        return True
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                if isinstance(small.target, cst.Name) and small.target.value == name:
                    return True
            elif isinstance(small, cst.AugAssign):
                if isinstance(small.target, cst.Name) and small.target.value == name:
                    return True
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    bound = alias.asname.name.value if alias.asname else dotted(alias.name).split(".")[0]
                    if bound == name:
                        return True
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name.value if alias.asname else alias.name.value
                    if bound == name:
                        return True
        return False
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return statement.name.value == name
    if isinstance(statement, cst.With):
        return any(item.asname is not None and name in (_target_names(item.asname.name) or []) for item in statement.items)
    return False


def _assigned_before(info: FileInfo, node: cst.CSTNode, name: str, stop: cst.CSTNode) -> bool:
    """Is ``name`` certainly bound whenever ``node`` (a statement) starts to run, from what precedes
    it in its block and in the blocks around it, up to ``stop`` (a function: its parameters count)?"""
    current = node
    while True:
        block = info.parent.get(id(current))
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return False
        body = list(block.body)
        index = next(i for i, s in enumerate(body) if s is current)
        if any(_statement_binds(s, name) for s in body[:index]):
            return True
        if isinstance(block, cst.Module):
            return False
        owner = info.parent.get(id(block))
        if owner is stop:
            return isinstance(stop, cst.FunctionDef) and name in {p.name.value for p in _all_params(stop)}
        if isinstance(owner, (cst.FunctionDef, cst.ClassDef)) or owner is None:
            return False
        if isinstance(owner, cst.For) and owner.body is block and name in (_target_names(owner.target) or []):
            return True
        if isinstance(owner, cst.With) and _statement_binds(owner, name):
            return True
        # up to the statement that sits in a block (an else/except/finally/elif belongs to one)
        current = owner
        while not isinstance(info.parent.get(id(current)), (cst.IndentedBlock, cst.Module)):
            current = info.parent.get(id(current))
            if current is None:
                return False


def _extract_loop_body(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """The body of each innermost ``for`` loop that calls backward()/step() becomes a module-level
    function of the variables it reads, returning those it assigns that are read later (in the
    next iteration or after the loop), which the loop re-binds."""
    if info.uses_dynamic_names():
        return None
    loops = [n for n in info.nodes if isinstance(n, cst.For) and n.asynchronous is None and _trains(n.body)]
    loop_ids = {id(n) for n in loops}
    innermost = [n for n in loops if not any(id(x) in loop_ids for x in walk_scope(n.body))]
    edits: Dict[int, Edit] = {}
    for loop in innermost:
        extracted = _extract_one(info, context, loop)
        if extracted is None:
            continue
        definition, call_statement = extracted
        edits[id(loop)] = lambda n, s=call_statement: n.with_changes(body=n.body.with_changes(body=[s]))
        _insert_before(edits, info.top_statement(loop), [definition])
    if not edits:
        return None
    return {info.path: info.code(edits)}


def _extract_one(info: FileInfo, context: ProjectContext, loop: cst.For):
    body = loop.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    scope = info.scope_of(loop)
    if not isinstance(scope, (FunctionScope, GlobalScope)):
        return None
    owner = scope.node if isinstance(scope, FunctionScope) else info.module
    if isinstance(owner, cst.Lambda) or (isinstance(owner, cst.FunctionDef) and owner.asynchronous is not None):
        return None
    for node in walk_scope(body):
        if isinstance(node, (cst.Return, cst.Yield, cst.Await, cst.Global, cst.Nonlocal, cst.FunctionDef,
                             cst.ClassDef, cst.NamedExpr)):
            return None
        if isinstance(node, cst.Del) and any(isinstance(n, cst.Name) for n in walk(node.target)):
            return None
        if isinstance(node, cst.Name) and node.value == "super":
            return None
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return None
    if _loop_level_jumps(body):
        return None
    in_body = {id(n) for n in walk(body)}
    targets = _target_names(loop.target)
    if targets is None:
        return None
    # what the body reads and writes of the enclosing scope
    reads: List[Tuple[cst.Name, str]] = []
    global_reads: Set[str] = set()
    for node in walk(body):
        if not isinstance(node, cst.Name):
            continue
        access = _access_of(info, node)
        if access is None:
            continue
        for referent in info.referents(access):
            if isinstance(referent, BuiltinAssignment):
                continue
            if referent.scope is scope:
                if isinstance(scope, GlobalScope) and not (isinstance(referent, Assignment) and not isinstance(referent, ImportAssignment)
                                                           and isinstance(referent.node, cst.Name)):
                    global_reads.add(node.value)
                    continue
                reads.append((node, node.value))
                break
            if isinstance(referent.scope, GlobalScope):
                continue  # a module global, read from the helper as well
            if id(referent.node) in in_body or info.inside(referent.node, body):
                continue  # bound inside the body (a comprehension's variable)
            return None  # a variable of an enclosing function (a closure)
    for node in walk(body):
        if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            reads.append((node.target, node.target.value))
    written: List[str] = []
    for assignment in scope.assignments:
        if id(assignment.node) in in_body:
            if not (isinstance(assignment, Assignment) and not isinstance(assignment, ImportAssignment)
                    and isinstance(assignment.node, cst.Name)):
                return None
            if assignment.name not in written:
                written.append(assignment.name)
    if isinstance(scope, FunctionScope):
        # a global assigned in the body through the function's `global` declaration
        for assignment in info.global_scope.assignments:
            if id(assignment.node) in in_body:
                return None
    # inputs: names read before the body assigns them (in order), definitions per top statement
    read_ids: Dict[int, str] = {id(node): name for node, name in reads}
    defined: Set[str] = set()
    inputs: List[str] = []
    for statement in body.body:
        for node in walk(statement):
            name = read_ids.get(id(node))
            if name is not None and name not in defined and name not in inputs:
                inputs.append(name)
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        defined.update(_target_names(target.target) or [])
                elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                    defined.add(small.target.value)
    # outputs: written names read outside the body (after the loop, or by the next iteration)
    outputs: List[str] = []
    exported = context.other_words(info.path) if isinstance(scope, GlobalScope) else set()
    for name in written:
        # read before assigned: the next iteration reads it (the loop's target is rebound first)
        live = (name in inputs and name not in targets) or name in exported
        if not live:
            for assignment in scope.assignments[name]:
                if any(id(access.node) not in in_body for access in info.accesses_of(assignment)):
                    live = True
                    break
        if live:
            outputs.append(name)
    for name in outputs:
        if name not in defined and name not in inputs:
            inputs.append(name)
    stop = owner
    final_inputs = []
    for name in inputs:
        if name in targets or _assigned_before(info, loop, name, stop):
            final_inputs.append(name)
        elif isinstance(scope, GlobalScope) and name not in written:
            continue  # read as a global from the helper
        else:
            return None
    if outputs and any(isinstance(a, (cst.Try, cst.TryStar)) for a in _ancestors_until(info, loop, owner)):
        return None  # an exception caught around the loop would see the variables half updated
    name = context.fresh("loop_body")
    statements = list(body.body)
    if outputs:
        result = ", ".join(outputs)
        statements.append(_stmt(f"return {result}\n"))
    definition = cst.FunctionDef(
        name=cst.Name(name), params=cst.Parameters(params=[cst.Param(cst.Name(v)) for v in final_inputs]),
        body=cst.IndentedBlock(body=statements), leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    call = f"{name}({', '.join(final_inputs)})"
    if outputs:
        call = f"{', '.join(outputs)} = {call}"
    return definition, _stmt(call + "\n")


def _ancestors_until(info: FileInfo, node: cst.CSTNode, stop: cst.CSTNode) -> List[cst.CSTNode]:
    out = []
    for ancestor in info.ancestors(node):
        if ancestor is stop:
            break
        out.append(ancestor)
    return out


# ============================================================================================
# 7. inline_helper
# ============================================================================================

def _replace_in(node: cst.CSTNode, replacements: Dict[int, Callable[[cst.CSTNode], cst.CSTNode]]) -> cst.CSTNode:
    """A detached copy of ``node`` with the nodes whose ids are keys rewritten by their function."""
    if not replacements:
        return node

    class _Replace(cst.CSTTransformer):
        def on_leave(self, original, updated):
            fn = replacements.get(id(original))
            return fn(updated) if fn is not None else updated
    return node.visit(_Replace())


def _inline_helper(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """A module-level function called exactly once, as a statement: its body replaces the call,
    its parameters bound by assignments first, its variables renamed to fresh names."""
    if info.uses_dynamic_names():
        return None
    edits: Dict[int, Edit] = {}
    candidates = []
    for fn in _top_level_functions(info):
        if fn.decorators or fn.asynchronous is not None or isinstance(fn.params.star_arg, cst.Param) \
                or fn.params.star_kwarg is not None or not isinstance(fn.body, cst.IndentedBlock):
            continue
        if any(p.default is not None and not _is_literal(p.default) for p in _all_params(fn)):
            continue
        name = fn.name.value
        assignment = _single_global_def(info, name, fn)
        if assignment is None or context.exported(info.path, name) or name in info.string_words:
            continue
        references = list(info.accesses_of(assignment))
        if len(references) != 1:
            continue
        reference = references[0].node
        call = info.parent.get(id(reference))
        expression = info.parent.get(id(call))
        line = info.parent.get(id(expression))
        block = info.parent.get(id(line))
        if not (isinstance(call, cst.Call) and call.func is reference and isinstance(expression, cst.Expr)
                and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
                and isinstance(block, (cst.IndentedBlock, cst.Module))) or info.inside(call, fn):
            continue
        site_scope = info.scope_of(call)
        if isinstance(site_scope, (ClassScope, ComprehensionScope)):
            continue
        body = list(fn.body.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        last_return = None
        if body and isinstance(body[-1], cst.SimpleStatementLine) and len(body[-1].body) == 1 \
                and isinstance(body[-1].body[0], cst.Return):
            last_return = body[-1].body[0]
        bad = False
        for node in walk(fn.body):
            if isinstance(node, (cst.Yield, cst.Await, cst.Global, cst.Nonlocal, cst.FunctionDef, cst.ClassDef,
                                 cst.Lambda, cst.Import, cst.ImportFrom, cst.NamedExpr)):
                bad = True
            elif isinstance(node, cst.Return) and node is not last_return:
                bad = True
            elif isinstance(node, cst.Name) and node.value == "super":
                bad = True
        if bad:
            continue
        bound = _bind_arguments(fn, call)
        if bound is None:
            continue
        order = [arg.keyword.value if arg.keyword is not None else None for arg in call.args]
        positional = [p.name.value for p in list(fn.params.posonly_params) + list(fn.params.params)]
        sequence: List[Tuple[str, cst.BaseExpression]] = []
        index = 0
        for keyword_name in order:
            if keyword_name is None:
                sequence.append((positional[index], bound[positional[index]]))
                index += 1
            else:
                sequence.append((keyword_name, bound[keyword_name]))
        missing = False
        for param in _all_params(fn):
            if param.name.value not in bound:
                if param.default is None:
                    missing = True
                sequence.append((param.name.value, param.default))
        if missing:
            continue
        scope = _function_scope(info, fn)
        local_names = sorted({a.name for a in scope.assignments})
        if any(not isinstance(a, Assignment) or isinstance(a, ImportAssignment) for a in scope.assignments):
            continue
        if not all(isinstance(access.node, cst.Name) for a in scope.assignments for access in info.accesses_of(a)):
            continue
        # the function's globals must mean the same at the call site
        same = True
        for node in walk(fn.body):
            if not isinstance(node, cst.Name):
                continue
            access = _access_of(info, node)
            if access is None:
                continue
            referents = set(info.referents(access))
            if any(r.scope is scope or (not isinstance(r, BuiltinAssignment) and info.inside(r.node, fn)) for r in referents):
                continue
            if set(info.resolve(site_scope, node.value).assignments[node.value]) != referents:
                same = False
                break
        if not same:
            continue
        fresh = {n: context.fresh(f"{n}_") for n in local_names}
        renames: Dict[int, Callable] = {}
        for a in scope.assignments:
            new = fresh[a.name]
            if isinstance(a.node, cst.Name):
                renames[id(a.node)] = lambda n, new=new: n.with_changes(value=new)
            for access in info.accesses_of(a):
                renames[id(access.node)] = lambda n, new=new: n.with_changes(value=new)
        statements: List[cst.BaseStatement] = []
        for param_name, value in sequence:
            statements.append(cst.SimpleStatementLine(body=[cst.Assign(
                targets=[cst.AssignTarget(target=cst.Name(fresh[param_name]))], value=value)]))
        for statement in body:
            if last_return is not None and statement is body[-1]:
                if last_return.value is None:
                    continue
                value = _replace_in(last_return.value, renames)
                statements.append(statement.with_changes(body=[cst.Expr(value=value)]))
                continue
            statements.append(_replace_in(statement, renames))
        if not statements:
            statements = [_stmt("pass\n")]
        statements[0] = statements[0].with_changes(leading_lines=line.leading_lines)
        candidates.append((fn, line, statements))
    # One inlining at a time per definition: none whose call is in a function inlined as well.
    chosen = []
    for fn, line, statements in candidates:
        if any(info.inside(line, other) or info.inside(other_line, fn) for other, other_line, _ in chosen):
            continue
        chosen.append((fn, line, statements))
    for fn, line, statements in chosen:
        edits[id(line)] = lambda n, s=statements: list(s)
        edits[id(fn)] = lambda n: None
    if not edits:
        return None
    return {info.path: info.code(edits)}


# ============================================================================================
# 8. wrap_in_class
# ============================================================================================

def _wrap_in_class(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """A top-level training function ``def train(a, b)`` becomes a class whose ``__init__`` keeps
    the parameters on ``self`` and whose ``run`` method is the body with ``self.a`` for ``a``; each
    call ``train(x, y)`` becomes ``Runner(x, y).run()``."""
    if info.uses_dynamic_names():
        return None
    candidates = sorted(_top_level_functions(info), key=lambda f: not any(
        isinstance(n, cst.Call) and _method_call_name(n) == "backward" for n in walk_scope(f.body)))
    for fn in candidates:
        if not _trains(fn.body) or fn.decorators or fn.asynchronous is not None or not isinstance(fn.body, cst.IndentedBlock):
            continue
        name = fn.name.value
        assignment = _single_global_def(info, name, fn)
        if assignment is None or context.exported(info.path, name) or name in info.string_words:
            continue
        calls = _direct_calls(info, info.accesses_of(assignment))
        if calls is None:
            continue
        scope = _function_scope(info, fn)
        if "self" in _names_in(fn):
            continue
        params = [p.name.value for p in _all_params(fn)]
        if any(p == "run" or _is_dunder(p) for p in params):
            continue  # self.run = run would hide the method
        edits: Dict[int, Edit] = {}
        ok = True
        for param in params:
            assignments = list(scope.assignments[param])
            for a in assignments:
                node = a.node
                if isinstance(node, cst.Param):
                    continue
                if not isinstance(node, cst.Name):
                    ok = False
                    break
                parent = info.parent.get(id(node))
                # bound as an attribute only where an attribute can be a target
                if isinstance(parent, (cst.AsName,)) and isinstance(info.parent.get(id(parent)), cst.ExceptHandler):
                    ok = False
                    break
                if isinstance(parent, cst.CompFor) or any(isinstance(x, (cst.Del, cst.NamedExpr)) for x in info.ancestors(node)):
                    ok = False
                    break
                edits[id(node)] = lambda n: cst.Attribute(value=cst.Name("self"), attr=cst.Name(n.value))
            if not ok:
                break
            for access in info.references(assignments):
                if not isinstance(access.node, cst.Name):
                    ok = False
                    break
                edits[id(access.node)] = lambda n: cst.Attribute(value=cst.Name("self"), attr=cst.Name(n.value))
            if not ok:
                break
        if not ok or any(isinstance(n, (cst.Nonlocal, cst.Global)) for n in walk(fn.body)):
            continue
        class_name = context.fresh("Runner")
        instance = None
        for call in calls:
            # ``train(x)`` / ``y = train(x)`` as a statement: ``runner = Runner(x)`` then ``runner.run()``;
            # elsewhere (inside an expression) ``Runner(x).run()``
            statement = info.parent.get(id(call))
            line = info.parent.get(id(statement))
            block = info.parent.get(id(line))
            simple = (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(block, (cst.IndentedBlock, cst.Module))
                      and not isinstance(info.scope_of(line), ClassScope) and not info.inside(call, fn)
                      and (isinstance(statement, cst.Expr) or (isinstance(statement, cst.Assign) and len(statement.targets) == 1)))
            if simple:
                instance = instance or context.fresh("runner")

                def split(n, c=class_name, i=instance):
                    call_node = n.body[0].value
                    made = cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(i))],
                                                                    value=call_node.with_changes(func=cst.Name(c)))],
                                                   leading_lines=n.leading_lines)
                    run = _expr(f"{i}.run()")
                    kept = n.with_changes(leading_lines=[], body=[n.body[0].with_changes(value=run)])
                    return [made, kept]
                edits[id(line)] = split
            else:
                edits[id(call)] = lambda n, c=class_name: cst.Call(
                    func=cst.Attribute(value=n.with_changes(func=cst.Name(c)), attr=cst.Name("run")))
        init_params = fn.params.with_changes(
            params=[cst.Param(cst.Name("self"))] + list(fn.params.params)) if not fn.params.posonly_params else \
            fn.params.with_changes(posonly_params=[cst.Param(cst.Name("self"))] + list(fn.params.posonly_params))
        stores = [_stmt(f"self.{p} = {p}\n") for p in params] or [_stmt("pass\n")]

        def build(updated, fn=fn, init_params=init_params, stores=stores, class_name=class_name):
            init = cst.FunctionDef(name=cst.Name("__init__"), params=init_params, body=cst.IndentedBlock(body=stores))
            run = updated.with_changes(name=cst.Name("run"), params=cst.Parameters(params=[cst.Param(cst.Name("self"))]),
                                       leading_lines=[cst.EmptyLine(indent=False)], returns=updated.returns)
            return cst.ClassDef(name=cst.Name(class_name), body=cst.IndentedBlock(body=[init, run]),
                                leading_lines=updated.leading_lines)
        edits[id(fn)] = build
        return {info.path: info.code(edits)}
    return None


# ============================================================================================
# 9 and 10. split_helpers_module, reexport_through_package
# ============================================================================================

def _movable_functions(info: FileInfo, context: ProjectContext) -> Tuple[List[cst.FunctionDef], Set[str]]:
    """Top-level functions that read no module global but imports (and each other): they can live
    in another module that makes the same imports. Returns them and the import names they use."""
    gscope = info.global_scope
    imports_ok: Set[str] = set()
    for statement in info.module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(getattr(small, "names", None), cst.ImportStar):
                    for alias in small.names:
                        if isinstance(small, cst.Import):
                            local = alias.asname.name.value if alias.asname else dotted(alias.name).split(".")[0]
                        else:
                            local = alias.asname.name.value if alias.asname else alias.name.value
                        imports_ok.add(local)
    # names bound once at top level by an import and nothing else
    imports_ok = {n for n in imports_ok if len(list(gscope.assignments[n])) == 1}
    candidates = {}
    for fn in _top_level_functions(info):
        if _single_global_def(info, fn.name.value, fn) is None or _is_dunder(fn.name.value):
            continue
        if fn.decorators and not _safe_decorators(info, fn):
            continue
        if any(isinstance(n, (cst.Global, cst.Nonlocal)) for n in walk(fn)):
            continue
        candidates[fn.name.value] = fn
    uses: Dict[str, Set[str]] = {}
    for name, fn in list(candidates.items()):
        needed: Set[str] = set()
        ok = True
        for node in walk(fn):
            if not isinstance(node, cst.Name):
                continue
            if node.value.startswith("__") and node.value.endswith("__") and node.value not in ("__init__",):
                access = _access_of(info, node)
                if access is not None:
                    ok = False
                    break
            access = _access_of(info, node)
            if access is None:
                continue
            if not info.referents(access):
                ok = False
                break
            for referent in info.referents(access):
                if isinstance(referent, BuiltinAssignment):
                    continue
                if referent.scope is gscope:
                    if referent.name in imports_ok:
                        needed.add(referent.name)
                    elif referent.name in candidates:
                        needed.add(referent.name)
                    else:
                        ok = False
                        break
            if not ok:
                break
        if ok:
            uses[name] = needed
    # only functions whose callees (in this module) move too
    movable = set(uses)
    changed = True
    while changed:
        changed = False
        for name in list(movable):
            if any(n in candidates and n not in movable for n in uses[name]):
                movable.discard(name)
                changed = True
    functions = [f for f in _top_level_functions(info) if f.name.value in movable]
    needed_imports = set().union(*[uses[f.name.value] for f in functions]) - movable if functions else set()
    return functions, needed_imports


def _import_lines(info: FileInfo, names: Set[str], extra_level: int) -> List[str]:
    """The module's top-level import statements reduced to ``names`` (relative ones one level deeper
    when ``extra_level``), plus its ``from __future__`` imports."""
    lines = []
    for statement in info.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom) and small.module is not None and dotted(small.module) == "__future__":
                lines.insert(0, cst.Module(body=[]).code_for_node(small))
            elif isinstance(small, cst.Import):
                kept = [a for a in small.names
                        if (a.asname.name.value if a.asname else dotted(a.name).split(".")[0]) in names]
                for alias in kept:
                    text = dotted(alias.name)
                    lines.append(f"import {text}" + (f" as {alias.asname.name.value}" if alias.asname else ""))
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                kept = [a for a in small.names if (a.asname.name.value if a.asname else a.name.value) in names]
                if not kept:
                    continue
                level = len(small.relative)
                module = dotted(small.module) if small.module is not None else ""
                if level:
                    level += extra_level
                parts = ", ".join(a.name.value + (f" as {a.asname.name.value}" if a.asname else "") for a in kept)
                lines.append(f"from {'.' * level}{module} import {parts}")
    return lines


def _split(info: FileInfo, context: ProjectContext, package: bool) -> Optional[Dict[str, str]]:
    if info.has_star_import() or info.path.endswith("__init__.py"):
        return None
    functions, needed = _movable_functions(info, context)
    if not functions:
        return None
    directory = _directory(info.path)
    in_package = _in_package(context.files, info.path)
    dot = "." if in_package else _namespace_prefix(context, info.path)
    names = [f.name.value for f in functions]
    code = cst.Module(body=[])
    bodies = "\n\n".join(code.code_for_node(f.with_changes(leading_lines=[])).rstrip("\n") + "\n" for f in functions)
    out: Dict[str, str] = {}
    if package:
        pkg = context.fresh_module(directory, "pkg")
        header = "\n".join(_import_lines(info, needed, 1))
        out[_join(directory, f"{pkg}/impl.py")] = (header + "\n\n\n" if header else "") + bodies
        if all(not n.startswith("_") for n in names):
            init = "from .impl import *\n"
        else:
            init = f"from .impl import {', '.join(names)}\n"
        out[_join(directory, f"{pkg}/__init__.py")] = init
        import_line = f"from {dot}{pkg} import {', '.join(names)}\n"
    else:
        module = context.fresh_module(directory, "helpers")
        header = "\n".join(_import_lines(info, needed, 0))
        out[_join(directory, f"{module}.py")] = (header + "\n\n\n" if header else "") + bodies
        import_line = f"from {dot}{module} import {', '.join(names)}\n"
    edits: Dict[int, Edit] = {}
    first = functions[0]
    for fn in functions:
        edits[id(fn)] = lambda n: None
    edits[id(first)] = lambda n, first=first: [_stmt(import_line).with_changes(leading_lines=first.leading_lines)]
    out[info.path] = info.code(edits)
    return out


def _namespace_prefix(context: ProjectContext, path: str) -> str:
    """``nets.`` for nets/picker.py in a folder without ``__init__.py`` that another file imports
    as ``nets.picker``: the program runs from the folder above, so a sibling module is imported
    as ``nets.helpers`` (a bare ``helpers`` would not be found); "" for a script's own folder."""
    directory = _directory(path)
    if not directory:
        return ""
    dotted_module = path[:-len(".py")].replace("/", ".")
    imported = re.compile(rf"^\s*(?:from\s+{re.escape(dotted_module)}\s+import|import\s+{re.escape(dotted_module)}\b)", re.MULTILINE)
    if any(other != path and imported.search(text) for other, text in context.files.items()):
        return directory.replace("/", ".") + "."
    return ""


def _split_helpers_module(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Move the top-level functions that use nothing of the module but its imports into a sibling
    module ``helpers.py`` (with the imports they need) and import them back by name."""
    return _split(info, context, package=False)


def _reexport_through_package(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """As split_helpers_module, into ``pkg/impl.py``, re-exported by ``pkg/__init__.py``
    (``from .impl import *``, or by name for private names); the module imports ``from pkg``."""
    return _split(info, context, package=True)


# ============================================================================================
# 11. loaders_in_dict
# ============================================================================================

def _dict_key(name: str) -> str:
    for pattern in ("_dataloader", "_data_loader", "_loader", "dataloader_", "data_loader_", "loader_"):
        if pattern in name and name.replace(pattern, "", 1):
            return name.replace(pattern, "", 1)
    return name


def _loaders_in_dict(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """``train_loader = DataLoader(...)`` (a name bound once) becomes ``loaders = {"train": DataLoader(...)}``
    and every use of ``train_loader`` becomes ``loaders["train"]``; more loaders of the same block
    join the dict (``loaders["val"] = DataLoader(...)``)."""
    if info.uses_dynamic_names():
        return None
    globals_, nonlocals = _global_nonlocal_names(info)
    exported = context.other_words(info.path)
    edits: Dict[int, Edit] = {}
    dicts: Dict[int, Tuple[str, Set[str], int]] = {}  # id(block) -> (dict name, keys, index of creation)
    for node in info.nodes:
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and isinstance(node.value, cst.Call) and call_kind(info, node.value) == "loader"):
            continue
        target = node.targets[0].target
        name = target.value
        scope = info.scope_of(node)
        if not isinstance(scope, (FunctionScope, GlobalScope)) or name in globals_ or name in nonlocals:
            continue
        if isinstance(scope, GlobalScope) and (name in exported or name in info.string_words):
            continue
        assignments = list(scope.assignments[name])
        if len(assignments) != 1 or assignments[0].node is not target:
            continue
        references = list(info.accesses_of(assignments[0]))
        if not all(isinstance(a.node, cst.Name) for a in references):
            continue
        if any(isinstance(info.parent.get(id(a.node)), cst.Del) or any(isinstance(x, cst.Del) for x in info.ancestors(a.node))
               for a in references):
            continue
        line = info.parent.get(id(node))
        block = info.parent.get(id(line))
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or not isinstance(block, (cst.IndentedBlock, cst.Module)):
            continue
        index = next(i for i, s in enumerate(block.body) if s is line)
        key = _dict_key(name)
        existing = dicts.get(id(block))
        if existing is not None and key not in existing[1] and existing[2] < index:
            dict_name = existing[0]
            existing[1].add(key)
            edits[id(node)] = lambda n, d=dict_name, k=key: cst.Assign(
                targets=[cst.AssignTarget(target=_expr(f'{d}["{k}"]'))], value=n.value)
        else:
            dict_name = context.fresh("loaders")
            dicts[id(block)] = (dict_name, {key}, index)
            edits[id(node)] = lambda n, d=dict_name, k=key: cst.Assign(
                targets=[cst.AssignTarget(target=cst.Name(d))],
                value=cst.Dict(elements=[cst.DictElement(key=cst.SimpleString(f'"{k}"'), value=n.value)]))
        for access in references:
            edits[id(access.node)] = lambda n, d=dict_name, k=key: _expr(f'{d}["{k}"]')
    if not edits:
        return None
    return {info.path: info.code(edits)}


# ============================================================================================
# 12. add_logging
# ============================================================================================

def _add_logging(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Logging, timing and progress calls that receive no training object: at the start of every
    loop body ``t0 = time.perf_counter()`` and ``logger.info("epoch %d", epoch)`` (an int loop
    variable) or ``logger.debug("iteration")``; after each ``.backward()``/``.step()`` statement
    ``print("step")`` and the elapsed time."""
    if "print" in {a.name for a in info.global_scope.assignments}:
        return None
    logging_name = next((n for n, q in info.imports.items() if q == "logging" and _bound_to(info, n, "logging")), None)
    time_name = next((n for n, q in info.imports.items() if q == "time" and _bound_to(info, n, "time")), None)
    header = []
    if logging_name is None:
        logging_name = context.fresh("logging")
        header.append(_stmt(f"import logging{'' if logging_name == 'logging' else ' as ' + logging_name}\n"))
    if time_name is None:
        time_name = context.fresh("time")
        header.append(_stmt(f"import time{'' if time_name == 'time' else ' as ' + time_name}\n"))
    logger = context.fresh("logger")
    header.append(_stmt(f"{logger} = {logging_name}.getLogger(__name__)\n"))
    edits: Dict[int, Edit] = {}
    clock = context.fresh("t0")
    timed_loops: Set[int] = set()
    for node in info.nodes:
        if not isinstance(node, (cst.For, cst.While)) or not isinstance(node.body, cst.IndentedBlock):
            continue
        if isinstance(info.scope_of(node), ClassScope):
            continue
        message = _stmt(f'{logger}.debug("iteration")\n')
        if isinstance(node, cst.For):
            int_var = None
            if isinstance(node.target, cst.Name) and isinstance(node.iter, cst.Call) and dotted(node.iter.func) == "range" \
                    and "range" not in info.imports and "range" not in {a.name for a in info.global_scope.assignments}:
                int_var = node.target.value
            elif isinstance(node.target, cst.Tuple) and isinstance(node.iter, cst.Call) and dotted(node.iter.func) == "enumerate" \
                    and node.target.elements and isinstance(node.target.elements[0].value, cst.Name) \
                    and "enumerate" not in {a.name for a in info.global_scope.assignments}:
                int_var = node.target.elements[0].value.value
            if int_var is not None:
                message = _stmt(f'{logger}.info("epoch %d", {int_var})\n')
        start = [_stmt(f"{clock} = {time_name}.perf_counter()\n"), message]
        body = node.body
        edits[id(body.body[0])] = lambda n, start=start: list(start) + [n]
        timed_loops.add(id(node))
    for node in info.nodes:
        if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr)
                and isinstance(node.body[0].value, cst.Call) and _method_call_name(node.body[0].value) in ("backward", "step")):
            continue
        if not isinstance(info.parent.get(id(node)), cst.IndentedBlock):
            continue
        # the innermost loop around it, in the same function, starts the clock
        loop = None
        for ancestor in info.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, (cst.For, cst.While)) and id(ancestor) in timed_loops and info.inside(node, ancestor.body):
                loop = ancestor
                break
        after = [_stmt('print("step")\n')]
        if loop is not None:
            after.append(_stmt(f'{logger}.debug("%.3f s", {time_name}.perf_counter() - {clock})\n'))
        previous = edits.get(id(node))

        def edit(n, after=after, previous=previous):
            result = previous(n) if previous else n
            result = result if isinstance(result, list) else [result]
            return result + list(after)
        edits[id(node)] = edit
    if not edits:
        return None
    _insert_at_top(info, edits, header)
    return {info.path: info.code(edits)}


# ============================================================================================
# 13. wrap_in_tqdm
# ============================================================================================

def _wrap_in_tqdm(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """``for x in loader`` -> ``for x in tqdm(loader)`` and ``enumerate(loader)`` ->
    ``enumerate(tqdm(loader))`` (iterables that are names, attributes or subscripts), with
    ``from tqdm import tqdm``. tqdm yields the very items of the iterable, in order."""
    existing = next((n for n, q in info.imports.items() if q in ("tqdm.tqdm", "tqdm.auto.tqdm") and _bound_to(info, n, q)), None)
    header = []
    if existing is not None:
        tqdm_name = existing
    elif "tqdm" in info.words and _bound_to(info, "tqdm", "tqdm"):
        tqdm_name = "tqdm.tqdm"
    else:
        name = context.fresh("tqdm")
        header.append(_stmt(f"from tqdm import tqdm{'' if name == 'tqdm' else ' as ' + name}\n"))
        tqdm_name = name
    wrapped = _expr(tqdm_name)
    edits: Dict[int, Edit] = {}
    plain = (cst.Name, cst.Attribute, cst.Subscript)
    enumerate_shadowed = "enumerate" in {a.name for a in info.global_scope.assignments}
    for node in info.nodes:
        if isinstance(node, cst.For) and isinstance(node.iter, plain):
            edits[id(node.iter)] = lambda n: cst.Call(func=wrapped, args=[cst.Arg(n)])
        elif isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and dotted(node.iter.func) == "enumerate" \
                and not enumerate_shadowed and node.iter.args and node.iter.args[0].keyword is None \
                and not node.iter.args[0].star and isinstance(node.iter.args[0].value, plain):
            edits[id(node.iter.args[0].value)] = lambda n: cst.Call(func=wrapped, args=[cst.Arg(n)])
    if not edits:
        return None
    _insert_at_top(info, edits, header) if header else None
    return {info.path: info.code(edits)}


# ============================================================================================
# 14. positional_to_keyword
# ============================================================================================

def _positional_to_keyword(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Calls of this file's own functions (and classes, through their ``__init__``, and methods called
    on ``self`` in their class) pass their positional arguments by keyword instead."""
    signatures: Dict[int, Tuple[cst.FunctionDef, bool]] = {}  # id(Call) -> (callee, skip self)
    for fn in _top_level_functions(info):
        if fn.decorators:
            continue
        assignment = _single_global_def(info, fn.name.value, fn)
        if assignment is None:
            continue
        for access in info.accesses_of(assignment):
            call = info.parent.get(id(access.node))
            if isinstance(call, cst.Call) and call.func is access.node:
                signatures[id(call)] = (fn, False)
    classes, families, own = _class_family(info)
    attribute_targets: Set[str] = set()  # attributes assigned somewhere: an instance may shadow a method
    for node in info.nodes:
        if isinstance(node, cst.AssignTarget):
            for target in walk(node.target):
                if isinstance(target, cst.Attribute):
                    attribute_targets.add(target.attr.value)
    for cls_name, cls in classes.items():
        if cls.decorators or cls.keywords or any(dotted(b.value) in ("Enum", "IntEnum", "NamedTuple", "TypedDict", "Protocol")
                                                 for b in cls.bases):
            continue
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        if "__new__" in methods:
            continue
        init = methods.get("__init__")
        assignment = _single_global_def(info, cls_name, cls)
        if init is not None and not init.decorators and assignment is not None:
            for access in info.accesses_of(assignment):
                call = info.parent.get(id(access.node))
                if isinstance(call, cst.Call) and call.func is access.node:
                    signatures[id(call)] = (init, True)
        subclassed = len(families[cls_name]) > 1
        if subclassed or context.exported(info.path, cls_name):
            continue
        for method_name, method in methods.items():
            if method.decorators or _is_dunder(method_name) or method_name in attribute_targets:
                continue
            params = _all_params(method)
            if not params or params[0].name.value != "self":
                continue
            for node in walk(cls):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method_name \
                        and isinstance(node.func.value, cst.Name) and node.func.value.value == "self":
                    enclosing = _enclosing_function(info, node)
                    if enclosing is None or _enclosing_class(info, node) is not cls:
                        continue
                    first = _all_params(enclosing)[:1]
                    if first and first[0].name.value == "self":
                        signatures[id(node)] = (method, True)
    edits: Dict[int, Edit] = {}
    for call_id, (fn, skip_self) in signatures.items():
        call = info.by_id[call_id]
        if any(a.star for a in call.args):
            continue
        names = [p.name.value for p in fn.params.params]
        if skip_self:
            names = names[1:]
            if fn.params.posonly_params:
                continue
        elif fn.params.posonly_params:
            continue
        positional = [a for a in call.args if a.keyword is None]
        if not positional or len(positional) > len(names):
            continue

        def edit(n, names=names):
            args = []
            index = 0
            for arg in n.args:
                if arg.keyword is None:
                    args.append(arg.with_changes(keyword=cst.Name(names[index]), equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
                    index += 1
                else:
                    args.append(arg)
            return n.with_changes(args=args)
        edits[call_id] = edit
    if not edits:
        return None
    return {info.path: info.code(edits)}


# ============================================================================================
# 15. reorder_definitions
# ============================================================================================

def _def_time_expressions(info: FileInfo, statement, future_annotations: bool) -> Optional[List[cst.CSTNode]]:
    """What a def/class statement evaluates when it runs (decorators, defaults, annotations, bases,
    the class body's statements); None if it may do more than bind its name: a decorator other
    than the harmless ones, a call elsewhere, a class body statement other than a definition, a
    docstring, pass or a constant assignment."""
    out: List[cst.CSTNode] = []
    if isinstance(statement, cst.FunctionDef):
        if not _safe_decorators(info, statement):
            return None
        out.extend(d.decorator for d in statement.decorators)
        evaluated = []
        for param in _all_params(statement):
            if param.default is not None:
                evaluated.append(param.default)
            if param.annotation is not None and not future_annotations:
                evaluated.append(param.annotation)
        if statement.returns is not None and not future_annotations:
            evaluated.append(statement.returns)
        for expr in evaluated:
            if any(isinstance(n, (cst.Call, cst.Lambda, cst.Await, cst.Yield, cst.NamedExpr, cst.Subscript)) for n in walk(expr)):
                return None
        return out + evaluated
    if isinstance(statement, cst.ClassDef):
        if statement.decorators or statement.keywords:
            return None
        for base in statement.bases:
            if base.star or not isinstance(base.value, (cst.Name, cst.Attribute)):
                return None
            out.append(base.value)
        for inner in statement.body.body:
            if isinstance(inner, (cst.FunctionDef, cst.ClassDef)):
                found = _def_time_expressions(info, inner, future_annotations)
                if found is None:
                    return None
                out.extend(found)
            elif _is_docstring(inner):
                continue
            elif isinstance(inner, cst.SimpleStatementLine) and all(
                    isinstance(s, cst.Pass) or (isinstance(s, cst.Assign) and _is_literal(s.value)) for s in inner.body):
                continue
            else:
                return None
        return out
    return None


def _reorder_definitions(info: FileInfo, context: ProjectContext) -> Optional[Dict[str, str]]:
    """Reverse each run of consecutive top-level function/class definitions whose definition runs
    nothing and reads none of the run's names: a function is then defined after the functions
    that call it (or before, in the other direction); what runs at import time is unchanged."""
    future = any(isinstance(s, cst.SimpleStatementLine) and any(
        isinstance(x, cst.ImportFrom) and x.module is not None and dotted(x.module) == "__future__"
        and not isinstance(x.names, cst.ImportStar) and any(a.name.value == "annotations" for a in x.names) for x in s.body)
        for s in info.module.body)
    if any("__init_subclass__" == n.name.value for n in info.nodes if isinstance(n, cst.FunctionDef)):
        return None
    body = list(info.module.body)
    runs: List[List[int]] = []
    current: List[int] = []
    reads: Dict[int, Set[str]] = {}
    for index, statement in enumerate(body):
        found = _def_time_expressions(info, statement, future) if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) else None
        if found is None:
            if len(current) > 1:
                runs.append(current)
            current = []
            continue
        reads[index] = set().union(*[_names_in(e) for e in found]) if found else set()
        current.append(index)
    if len(current) > 1:
        runs.append(current)
    edits: Dict[int, Edit] = {}
    for run in runs:
        bound = [body[i].name.value for i in run]
        if len(set(bound)) != len(bound) or any(reads[i] & set(bound) for i in run):
            continue
        if any(len(list(info.global_scope.assignments[n])) != 1 for n in bound):
            continue
        statements = [body[i] for i in run]
        reordered = list(reversed(statements))
        leading = [s.leading_lines for s in statements]
        for position, i in enumerate(run):
            replacement = reordered[position].with_changes(leading_lines=leading[position])
            edits[id(body[i])] = lambda n, r=replacement: r
    if not edits:
        return None
    return {info.path: info.code(edits)}


# ============================================================================================

TRANSFORMATIONS: "OrderedDict[str, Callable[[Project], Optional[Project]]]" = OrderedDict(
    (fn.__name__.lstrip("_"), _per_file(fn)) for fn in [
        _add_annotations,
        _remove_annotations,
        _rename,
        _move_constructor_to_builder,
        _inline_builder,
        _extract_loop_body,
        _inline_helper,
        _wrap_in_class,
        _split_helpers_module,
        _reexport_through_package,
        _loaders_in_dict,
        _add_logging,
        _wrap_in_tqdm,
        _positional_to_keyword,
        _reorder_definitions,
    ])
