"""Positions rendered per top-level statement (static/positions.py) are libcst's own positions.

Every node of every fixture, and of sources whose statements CPython and libcst split differently
(``a; b``, decorators over several lines, a byte-order mark, CRLF, continuation lines), must get
exactly the range libcst's whole-module position metadata gives it.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from trainlint.static.analyzer import parse
from trainlint.static.module import ModuleModel
from trainlint.static.positions import Positions

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))

TRICKY = {
    "statements sharing a line": "import torch; import os\nx = 1; y = 2\n",
    "decorators over several lines": "@dec\n@dec2(\n    x,\n)\ndef f():\n    pass\n\n\n@cls_dec\nclass A(\n    B,\n):\n    x = 1\n",
    "leading comments and docstring": "# one\n\n# two\n'''doc'''\nimport os\n",
    "comments after a block": "if x:\n    pass\nelif y:\n    pass\n    # indented trailing\n# outdented trailing\n\n\nz = 1  # c\n",
    "async and continuation lines": "async def f():\n    async for x in y:\n        await z\nx = 1 \\\n    + 2\n",
    "multi-line expressions": "x = (\n    1,\n    2)\ny = [i for i in\n     range(3)]\n",
    "crlf newlines": "import torch\r\ndef f(a):\r\n    return a\r\n",
    "byte-order mark": "\ufeffimport os\nx = 1\n",
    "match statement": "match x:\n    case 1:\n        pass\n    case _:\n        y = 2\n",
    "methods and nested definitions": (
        'class A(Base):\n    """doc"""\n    x = 1; y = 2\n\n    @property\n    def p(self):\n        return 1\n\n'
        "    # comment\n    @staticmethod\n    def s(a,\n          b):\n        def inner(c):\n            return (c +\n"
        "                    1)\n        return inner(a); pass\n\n    class Inner:\n        def one(self): return 1\n\n"
        "    async def co(self):\n        async with x:\n            await y\n"
    ),
    "tabs and odd indentation": (
        "class A:\n\tdef f(self):\n\t\tif x:\n\t\t\treturn 1\n\t\treturn 2\n\n"
        "def g():\n   x = 1\n   def h():\n         return x\n   return h\n"
    ),
    "empty module": "",
    "only comments": "# nothing here\n",
}


def _same_as_libcst(source: str) -> None:
    module = parse(source)
    model = ModuleModel(module, source)
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    # Asked outermost first, a definition is rendered whole and places what is in it; asked
    # innermost first, each statement is rendered inside its definitions reduced to their headers.
    for order in (model.preorder.nodes, list(reversed(model.preorder.nodes))):
        lazy = Positions(model, lambda resolve: resolve())
        for node in order:
            if node is module:
                continue  # the module itself is never a finding's statement
            assert node in lazy, type(node).__name__
            assert lazy[node] == whole[node], (type(node).__name__, lazy[node], whole[node])


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fixture_positions_match_libcst(path: Path) -> None:
    _same_as_libcst(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_positions_match_libcst(name: str) -> None:
    _same_as_libcst(TRICKY[name])


def test_a_node_of_another_tree_has_no_position() -> None:
    source = "x = 1\n"
    other = parse("y = 2\n")
    positions = Positions(ModuleModel(parse(source), source), lambda resolve: resolve())
    assert other.body[0] not in positions
    with pytest.raises(KeyError):
        positions[other.body[0]]


def test_only_the_statement_asked_about_is_rendered() -> None:
    # a method of a big class: its own statement is rendered, inside the class and the method
    # reduced to their headers, not the whole class
    methods = "".join(f"    def m{i}(self, x):\n        y = x + {i}\n        return y\n\n" for i in range(50))
    source = "import os\n\n\nclass Big:\n" + methods
    module = parse(source)
    positions = Positions(ModuleModel(module, source), lambda resolve: resolve())
    target = module.body[1].body.body[37].body.body[1]
    assert positions[target].start.line == 4 + 37 * 4 + 3
    assert positions[target].start.column == 8
    assert positions._rendered.keys() == {id(target)}
