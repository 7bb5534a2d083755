"""Import/alias resolution and access paths, without libcst's metadata providers.

libcst's QualifiedNameProvider and ScopeProvider cost several times the parse itself. Training code
needs far less: what a local name was imported as, and a stable text for an object reached through
names and attributes (``self.optimizer``), so one pass over the imports is enough.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import libcst as cst

# tqdm's progress bars by qualified name: each iterates what it wraps, element for element.
PROGRESS_BARS = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm"})
# Tensor methods whose result holds no autograd graph: what is kept or computed through one of
# them is a number or a detached copy (the static engine's loss, mode and graph questions share it).
DETACHING = frozenset({"item", "detach", "detach_", "tolist", "numpy"})


def dotted(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes, else None."""
    # ``type(x) is`` rather than isinstance: libcst's node classes are ABCs, so every isinstance
    # that fails goes through ABCMeta's Python-level hook, and this runs for nearly every node.
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def literal_key(node: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, str]]:
    """(container, key) for ``x["train"]``: a subscript by one plain string literal, else None."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return None
    index = node.slice[0].slice
    key = plain_key(index.value) if isinstance(index, cst.Index) else None
    return (node.value, key) if key is not None else None


def plain_key(node: Optional[cst.BaseExpression]) -> Optional[str]:
    """The text of a string literal that reads as a name (``"train"``), else None."""
    value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    return value if isinstance(value, str) and _PLAIN_KEY.match(value) else None


def keyed(container: Optional[str], key: str) -> Optional[str]:
    """The access path of ``container["key"]`` (``loaders['train']``)."""
    return f"{container}['{key}']" if container else None


def access_path(node: cst.BaseExpression) -> Optional[str]:
    """``dotted`` extended to string-keyed subscripts: ``loaders['train']``, ``self.samplers['dev']``."""
    found = literal_key(node)
    if found is None:
        return dotted(node)
    return keyed(access_path(found[0]), found[1])


_PLAIN_KEY = re.compile(r"^\w+$")

Selector = Tuple[str, str]  # (the value tested, the literal it equals): ``args.schedule == "cosine"``


def selectors(test: cst.BaseExpression) -> Tuple[Selector, ...]:
    """The ``value == literal`` conjuncts of an ``if`` test, the value as an access path with
    ``cfg.get("k")`` read as ``cfg['k']``: code that builds one of several objects under
    ``if cfg["kind"] == "a":`` and uses it under the same test means the object built there."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return selectors(test.left) + selectors(test.right)
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return ()
    left, right = test.left, test.comparisons[0].comparator
    if isinstance(left, (cst.SimpleString, cst.Integer)):
        left, right = right, left
    if not isinstance(right, (cst.SimpleString, cst.Integer)):
        return ()
    subject = _selected_value(left)
    return ((subject, str(right.evaluated_value)),) if subject is not None else ()


def _selected_value(node: cst.BaseExpression) -> Optional[str]:
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
            and node.args and node.args[0].keyword is None):
        key = plain_key(node.args[0].value)
        container = access_path(node.func.value)
        return keyed(container, key) if key is not None and container is not None else None
    return access_path(node)


def _module_name(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_module_name(node.value)}.{node.attr.value}"
    return ""


# Names whose meaning is universal in PyTorch code, for snippets and notebooks that use them without
# the import in view (star imports, an import in another cell that did not parse).
_CONVENTIONAL = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}


class ImportMap:
    """Local name -> fully qualified name, from every import in the module (flow-insensitive)."""

    def __init__(self) -> None:
        self.names: Dict[str, str] = {}

    def add(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None:
                    self.names[alias.asname.name.value] = full  # type: ignore[union-attr]
                else:
                    head = full.split(".")[0]
                    self.names.setdefault(head, head)
        elif isinstance(node, cst.ImportFrom):
            if isinstance(node.names, cst.ImportStar) or (node.module is None and not node.relative):
                return
            # ``from .utils import X``: the leading dots stay, for the project to resolve.
            module = "." * len(node.relative) + (_module_name(node.module) if node.module is not None else "")
            for alias in node.names:
                name = _module_name(alias.name)
                local = alias.asname.name.value if alias.asname is not None else name  # type: ignore[union-attr]
                self.names[local] = f"{module}.{name}" if not module.endswith(".") else f"{module}{name}"

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        """The qualified name a name/attribute chain refers to through imports, or None."""
        path = dotted(node)
        if path is None:
            return None
        head, _, rest = path.partition(".")
        full = self.names.get(head, _CONVENTIONAL.get(head))
        if full is None:
            return None
        return f"{full}.{rest}" if rest else full


def all_params(params: cst.Parameters) -> List[cst.Param]:
    """Every parameter of a ``def``, ``*args`` and ``**kwargs`` included, in order."""
    result = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            result.append(star)
    return result
