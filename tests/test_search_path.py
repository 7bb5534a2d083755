"""Directories a module puts on sys.path itself, read from its code (trainlint/static/search_path.py)."""
from __future__ import annotations

import libcst as cst
import pytest

from trainlint.static.module import ModuleModel
from trainlint.static.search_path import declared_roots


def _roots(tmp_path, source):
    (tmp_path / "repo" / "lib").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    (tmp_path / "repo" / "tools").mkdir()
    script = tmp_path / "repo" / "tools" / "train.py"
    script.write_text(source)
    model = ModuleModel(cst.parse_module(source), source, path=script)
    return [p.relative_to(tmp_path / "repo").as_posix() for p in declared_roots(model)]


@pytest.mark.parametrize("source, expected", [
    ("import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))\n", ["lib"]),
    ("import sys\nimport os.path as osp\nhere = osp.dirname(osp.abspath(__file__))\nsys.path.append(osp.join(here, '../src'))\n", ["src"]),
    ("import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'lib'))\n", ["lib"]),
    ("import sys\nfrom pathlib import Path\nROOT = Path(__file__).parent.parent\nsys.path.append(str(ROOT / 'src'))\n", ["src"]),
    ("import sys\nsys.path.append('../lib')\n", ["lib"]),  # relative to the script's folder
    ("import site, os\nsite.addsitedir(os.path.join(os.path.dirname(__file__), '..', 'src'))\n", ["src"]),
    ("import sys, os.path as osp\ndef add(p):\n    if p not in sys.path:\n        sys.path.insert(0, p)\nadd(osp.join(osp.dirname(__file__), '..', 'lib'))\n", ["lib"]),
])
def test_paths_computed_from_the_file_and_literals_are_read(tmp_path, source, expected):
    assert _roots(tmp_path, source) == expected


@pytest.mark.parametrize("source", [
    "import sys, os\nsys.path.append(os.getcwd())\n",  # where the program runs from is not known here
    "import sys, os\nsys.path.append(os.environ['CODE_ROOT'])\n",
    "import sys, os\nsys.path.append(os.path.join(os.path.dirname(__file__), '..', 'missing'))\n",  # no such folder
    "import os\nroot = os.path.join(os.path.dirname(__file__), '..', 'lib')\n",  # computed, never put on the path
])
def test_anything_else_adds_nothing(tmp_path, source):
    assert _roots(tmp_path, source) == []


def test_a_helper_imported_from_beside_the_module_is_followed(tmp_path):
    (tmp_path / "repo" / "lib").mkdir(parents=True)
    tools = tmp_path / "repo" / "tools"
    tools.mkdir()
    (tools / "paths.py").write_text("import sys\n\n\ndef add_path(path):\n    sys.path.insert(0, path)\n")
    source = ("import os.path as osp\nimport sys\nfrom paths import add_path\n\n"
              "LIB = osp.join(osp.dirname(__file__), '..', 'lib')\nif LIB not in sys.path:\n    add_path(path=LIB)\n")
    script = tools / "train.py"
    script.write_text(source)
    model = ModuleModel(cst.parse_module(source), source, path=script)
    assert [p.relative_to(tmp_path / "repo").as_posix() for p in declared_roots(model)] == ["lib"]
