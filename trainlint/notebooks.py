"""Jupyter notebooks: code cells joined into one module (in execution order), mapped back to cells.

IPython magics and shell escapes become ``pass`` (they cannot contain PyTorch calls the engine
could judge), cell magics (``%%bash``...) skip their cell, and cells that are not valid Python are
left out. Flow crosses cells in the order they ran, so an optimizer built in one cell and a loop
in another are checked together.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import List, Tuple

from .files import SourceError

# %magic, !shell, x = %magic / !shell, and obj? / obj?? help lines.
_MAGIC_LINE = re.compile(r"^(\s*)(?:[%!]|\w+\s*=\s*[%!]|[\w.]+\?{1,2}\s*$)")


@dataclass(frozen=True)
class NotebookSource:
    source: str  # the code cells as one module
    origin: Tuple[Tuple[int, int], ...]  # module line - 1 -> (cell number, line in cell)

    def cell_position(self, line: int) -> Tuple[int, int]:
        index = min(max(line - 1, 0), len(self.origin) - 1)
        return self.origin[index]


def _cell_source(cell: dict, number: int) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise SourceError(f"broken notebook: cell {number}'s source is neither text nor a list of lines of text")
    return source


def _neutralise(source: str) -> List[str]:
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        return []  # a cell magic: the cell is not Python
    return [m.group(1) + "pass" if (m := _MAGIC_LINE.match(line)) and line.strip() else line for line in lines]


def load_notebook(text: str) -> NotebookSource:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"broken notebook: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise SourceError("broken notebook: no 'cells' list")
    code = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise SourceError(f"broken notebook: cell {number} is not an object")
        if cell.get("cell_type") == "code":
            code.append((number, cell.get("execution_count"), _neutralise(_cell_source(cell, number))))
    # Execution order when every code cell ran, else the order of the document.
    if code and all(isinstance(count, int) for _, count, _ in code):
        code.sort(key=lambda item: item[1])
    lines: List[str] = []
    origin: List[Tuple[int, int]] = []
    for number, _, cell_lines in code:
        cell_text = "\n".join(cell_lines) + "\n"
        try:
            ast.parse(cell_text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a cell that is not Python cannot run either
        for offset, line in enumerate(cell_lines, start=1):
            lines.append(line)
            origin.append((number, offset))
    if not origin:
        origin.append((1, 1))
    return NotebookSource("\n".join(lines) + "\n", tuple(origin))
