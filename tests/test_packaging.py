"""The wheel ships every package and the rule catalog."""
from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "trainlint").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk | {"trainlint._catalog"} == listed


def test_catalog_ships_as_package_data():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"]["trainlint._catalog"] == "rules"
    assert "*.toml" in setuptools["package-data"]["trainlint._catalog"]
