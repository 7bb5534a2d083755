"""Attribution: the user's own source line behind a hooked call.

That is the first stack frame outside torch, trainlint, the Python standard library and the
installed libraries the user's code called (Accelerate's backward, a trainer's step), so a
finding lands on the line the static analyzer reports: the clip call, ``scheduler.step()``, the
``.backward()`` call, the ``for batch in loader:`` line.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from types import CodeType, FrameType
from typing import Dict, Optional, Set, Tuple

Site = Tuple[str, int]  # (filename, line)
UNKNOWN: Site = ("<unknown>", 0)


def _internal_roots() -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    import torch  # the guard only attributes while it is installed, so torch is loaded

    trainlint_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    internal = {os.path.dirname(os.path.abspath(torch.__file__)), trainlint_dir}
    for key in ("stdlib", "platstdlib"):
        internal.add(os.path.abspath(sysconfig.get_paths()[key]))
    # torch decorates some of its functions with typing_extensions.deprecated: plumbing, not user code.
    try:
        import typing_extensions

        internal.add(os.path.abspath(typing_extensions.__file__))
    except ImportError:
        pass
    roots = tuple(sorted(internal))
    # Third-party packages live under the stdlib directory in most layouts; they are user code.
    return roots, ("site-packages", "dist-packages")


_roots: Optional[Tuple[Tuple[str, ...], Tuple[str, ...]]] = None
# Code filenames already classified: one entry per source file, so the sets stay small.
_internal: Set[str] = set()
_user: Set[str] = set()  # everything not internal, installed libraries included
_library: Set[str] = set()  # the files of _user under site-packages: skipped when the user's code called them
# (id(code), f_lasti) -> (code, site): a frame's line number costs a scan of its code's line table,
# so it is computed once per call site. The code object is kept to check that the id is still its.
_sites: Dict[Tuple[int, int], Tuple[CodeType, Site]] = {}
_SITES_KEPT = 4096


def _is_internal(filename: str) -> bool:
    """Classify a filename seen for the first time, and remember the verdict."""
    global _roots
    if _roots is None:
        _roots = _internal_roots()
    roots, packages = _roots
    if filename.startswith("<frozen "):
        result = True
    elif filename.startswith("<"):
        result = False  # <string>, <stdin>, notebook cells: the user's code
    else:
        path = os.path.abspath(filename)
        under = [root for root in roots if path == root or path.startswith(root + os.sep)]
        # A file under site-packages is internal only if it is under torch or trainlint themselves.
        result = any(not any(p in os.path.relpath(path, root).split(os.sep) for p in packages) for root in under)
        if not result and any(p in path.split(os.sep) for p in packages):
            _library.add(filename)
    (_internal if result else _user).add(filename)
    return result


def _first_user(frame: Optional[FrameType]) -> Optional[FrameType]:
    """The first frame from ``frame`` outward whose file is the user's own, past the frames of
    installed libraries (Accelerate's backward, a Trainer's loop): a finding raised inside a
    library belongs at the user's line that called it. The first library frame when no frame
    of the user's is on the stack; None if there is neither."""
    library = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in _internal or (filename not in _user and _is_internal(filename)):
            frame = frame.f_back
        elif filename in _library:
            library = library or frame
            frame = frame.f_back
        else:
            return frame
    return library


def user_code(code: CodeType) -> bool:
    """Is this the code of the user's files (installed libraries included), not of torch,
    trainlint or the standard library?"""
    filename = code.co_filename
    return filename not in _internal and (filename in _user or not _is_internal(filename))


def user_frame() -> Optional[FrameType]:
    """Called by trainlint code only: its own frame and its caller's are skipped unexamined."""
    return _first_user(sys._getframe(2))


def user_site() -> Site:
    """(filename, line) of the user frame; the same tuple object for the same call site. Called by
    trainlint code only (the walk starts at its caller's caller).

    This runs at nearly every hooked call of every training step, so its usual path is kept short:
    frames of files seen before are skipped with one set lookup each (``_first_user`` classifies a
    file seen for the first time), and the line of a call site is computed once."""
    frame = sys._getframe(2)
    internal = _internal
    while frame is not None and frame.f_code.co_filename in internal:
        frame = frame.f_back
    if frame is not None and (frame.f_code.co_filename not in _user or frame.f_code.co_filename in _library):
        frame = _first_user(frame)
    if frame is None:
        return UNKNOWN
    code = frame.f_code
    cached = _sites.get((id(code), frame.f_lasti))
    if cached is not None and cached[0] is code:
        return cached[1]
    if len(_sites) >= _SITES_KEPT:
        _sites.clear()
    site = (code.co_filename, frame.f_lineno)
    _sites[(id(code), frame.f_lasti)] = (code, site)
    return site


def frame_site(frame: Optional[FrameType]) -> Site:
    return UNKNOWN if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def display_path(filename: str) -> str:
    """As reports show it: relative to the working directory when the file is under it."""
    if filename.startswith("<") or not os.path.isabs(filename):
        return filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if relative.startswith(os.pardir) else relative
