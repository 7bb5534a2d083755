"""Recorded monkey-patches: every change the guard makes to torch is undone on exit.

Hooks change three kinds of things: attributes of classes and modules, the closure cell of a
decorated function (so callers that imported the function by name before the guard are seen too),
and torch's hook registries (undone through their handles). Each change records its undo first;
restoring runs every undo even when one fails. The guard holds SIGINT while it installs and
restores (see :mod:`.signals`), and so does a per-step swap.

Hooks on calls a training step makes every time (``per_step=True``) can also be taken out and put
back while the session lasts: the guard removes them while it samples a steady loop (see
:mod:`.sampling`), so the steps in between run torch's own functions.

Under ``torch.compile`` two more things hold. A hook on a function that compiled code traces
(``traceable=True``: functional ops, module forwards, clipping) hands dynamo the original: the
compiled graph is the one without the guard, with no graph break (the check runs where the call
runs eagerly). And once dynamo has compiled something, per-step hooks are no longer swapped in and
out: compiled code guards on the identity of every function it traced, so each swap would
recompile it; the hooks stay installed and pass straight through to torch's function while they
are "out".
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import sys
import warnings
from types import CellType, FunctionType
from typing import Any, Callable, Dict, List, Optional, Tuple

from .signals import SHIELD

_ABSENT = object()


class Patcher:
    def __init__(self) -> None:
        self._undo: List[Callable[[], None]] = []
        self._finder: Optional[_AfterImport] = None
        # (owner, name, original) for every replaced attribute: what the tests check after exit.
        self.replaced: List[Tuple[Any, str, Any]] = []
        # (put in, take out, hold in) of every per-step hook, and whether they are in now.
        self._per_step: List[Tuple[Callable[[], None], Callable[[], None], Callable[[], None]]] = []
        self.per_step_in = True
        self._held = False  # per-step hooks stay installed and pass through while out (dynamo loaded)

    def wrap(self, owner: Any, name: str, make: Callable[[Any], Any], per_step: bool = False,
             traceable: bool = False) -> None:
        """Replace ``owner.name`` (defined on ``owner`` itself) by ``make(original)``.
        ``traceable``: compiled code may call it; it then sees the original."""
        original = vars(owner)[name]
        wrapper = make(original)
        value = _compiled_sees(original, wrapper, self if per_step else None) if traceable else wrapper
        self.replace(owner, name, value, per_step)
        if per_step and not traceable:
            self._per_step[-1] = self._per_step[-1][:2] + (
                lambda: setattr(owner, name, _passes_while_out(original, wrapper, self)),)

    def replace(self, owner: Any, name: str, value: Any, per_step: bool = False) -> None:
        original = vars(owner).get(name, _ABSENT)

        def undo() -> None:
            if original is not _ABSENT:
                setattr(owner, name, original)
            elif name in vars(owner):
                delattr(owner, name)

        # Each undo is recorded before its change, so no interruption can leave a change unrecorded
        # (an undo of a change not made yet changes nothing).
        self._undo.append(undo)
        self.replaced.append((owner, name, original))
        try:
            setattr(owner, name, value)
        except Exception:  # not changed: nothing to undo
            self._undo.pop()
            self.replaced.pop()
            raise
        if per_step:
            put_in = lambda: setattr(owner, name, value)  # noqa: E731
            self._add_per_step(put_in, undo, put_in)

    def wrap_cell(self, cell: CellType, make: Callable[[Any], Any], per_step: bool = False,
                  traceable: bool = False) -> None:
        original = cell.cell_contents
        wrapper = make(original)
        value = _compiled_sees(original, wrapper, self if per_step else None) if traceable else wrapper

        def undo() -> None:
            cell.cell_contents = original

        self._undo.append(undo)
        cell.cell_contents = value
        if per_step:
            def put_in() -> None:
                cell.cell_contents = value

            def hold() -> None:
                cell.cell_contents = value if traceable else _passes_while_out(original, wrapper, self)

            self._add_per_step(put_in, undo, hold)

    def _add_per_step(self, put_in: Callable[[], None], take_out: Callable[[], None],
                      hold: Callable[[], None]) -> None:
        self._per_step.append((put_in, take_out, hold))
        if self._held:
            hold()
        elif not self.per_step_in:  # hooked after an import while they are out: out with the rest
            take_out()

    @SHIELD.holder
    def set_per_step(self, put_in: bool) -> None:
        """Put the per-step hooks in, or take them out (torch's own functions run instead). SIGINT
        is held meanwhile (a sample every ~50 steps pays about a microsecond for it): a Ctrl-C the
        training loop catches and survives must not leave some hooks in and some out."""
        if put_in == self.per_step_in:
            return
        SHIELD.hold()
        try:
            self.per_step_in = put_in
            if not self._held and _compiled_code_exists():
                # From now on the hooks stay installed (see the module's docstring): each reads
                # ``per_step_in`` and passes through to torch's function while out.
                self._held = True
                _run_all(self._per_step, 2)
            if not self._held:
                _run_all(self._per_step, 0 if put_in else 1)
        finally:
            SHIELD.release()

    def handle(self, handle: Any) -> None:
        """A torch RemovableHandle (global optimizer hooks and the like)."""
        self._undo.append(handle.remove)

    def after_import(self, module_name: str, install: Callable[[Any], None]) -> None:
        """Run ``install(module)`` now if the module is loaded, else right after it is first imported.
        Importing it eagerly would cost every guard the import (over a second for FSDP)."""
        module = sys.modules.get(module_name)
        if module is not None:
            install(module)
            return
        if self._finder is None:
            finder = self._finder = _AfterImport()
            self._undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
            sys.meta_path.insert(0, finder)
        self._finder.callbacks.setdefault(module_name, []).append(install)

    @property
    def pending(self) -> int:
        """Undos not run yet (non-zero only while restoring, or after a restore was cut short)."""
        return len(self._undo)

    def restore(self) -> None:
        """Undo every change, newest first. Each undo is taken off the list only once it has run:
        whatever one raises (a KeyboardInterrupt included), it is tried once more and the others
        still run, and the first problem is re-raised at the end; an exception that stops the loop
        itself (one no handler sees, see .signals) leaves the rest for the next restore."""
        undo = self._undo
        first: Optional[BaseException] = None
        while undo:
            try:
                undo[-1]()
            except BaseException as exc:
                if first is None:
                    first = exc
                try:  # once more: an exception from outside (see .signals) may have cut it short
                    undo[-1]()
                except BaseException:
                    pass
            finally:
                undo.pop()
        self._finder = None
        self.replaced.clear()
        self._per_step.clear()
        self.per_step_in = True
        self._held = False
        if first is not None:
            raise first


def _run_all(hooks: List[tuple], index: int) -> None:
    """Run ``hook[index]()`` of every hook even if some raise (each is tried twice); re-raise the
    first problem."""
    first: Optional[BaseException] = None
    for hook in hooks:
        try:
            hook[index]()
        except BaseException as exc:
            if first is None:
                first = exc
            try:  # once more, as in Patcher.restore
                hook[index]()
            except BaseException:
                pass
    if first is not None:
        raise first


def _compiled_code_exists() -> bool:
    """Has dynamo compiled a graph in this process? (Read without importing it: many programs
    import dynamo through other modules and never compile anything.)"""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    return counters is not None and counters["stats"]["unique_graphs"] > 0


def _compiled_sees(original: Any, wrapper: Any, patcher: Optional[Patcher]) -> Any:
    """``wrapper`` as eager code calls it, ``original`` as dynamo traces it: ``is_compiling()`` is
    a constant True while dynamo traces, so the compiled graph holds the original call and no
    guard on the guard's own state. ``patcher``: a per-step hook, passing through while out."""
    if not isinstance(wrapper, FunctionType):
        return wrapper
    from torch.compiler import is_compiling

    if patcher is None:
        def hooked(*args, **kwargs):
            if is_compiling():
                return original(*args, **kwargs)
            return wrapper(*args, **kwargs)
    else:
        def hooked(*args, **kwargs):
            if is_compiling() or not patcher.per_step_in:
                return original(*args, **kwargs)
            return wrapper(*args, **kwargs)

    return functools.wraps(wrapper)(hooked)


def _passes_while_out(original: Any, wrapper: Any, patcher: Patcher) -> Any:
    """A per-step hook held installed: torch's own function while the hooks are out."""
    if not isinstance(wrapper, FunctionType):
        return wrapper

    def hooked(*args, **kwargs):
        if patcher.per_step_in:
            return wrapper(*args, **kwargs)
        return original(*args, **kwargs)

    return functools.wraps(wrapper)(hooked)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds the watched modules with the ordinary path finder and runs callbacks once they have
    executed. A callback that fails only warns: the user's import must not break."""

    def __init__(self) -> None:
        self.callbacks: Dict[str, List[Callable[[Any], None]]] = {}

    def find_spec(self, fullname, path, target=None):
        callbacks = self.callbacks.pop(fullname, None)
        if callbacks is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _CallbackLoader(spec.loader, callbacks)
        return spec


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, loader, callbacks: List[Callable[[Any], None]]) -> None:
        self.loader = loader
        self.callbacks = callbacks

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        # The module keeps the real loader, as if this one had never been involved.
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        for callback in self.callbacks:
            try:
                callback(module)
            except Exception as exc:
                warnings.warn(f"trainlint: could not hook {module.__name__}: {exc!r}", RuntimeWarning, stacklevel=2)


def inner_cell(function: Any) -> Optional[CellType]:
    """The closure cell holding the undecorated function behind a ``functools.wraps`` wrapper (torch
    2.x wraps clip_grad_norm_ and friends in ``_no_grad``); None for an undecorated function."""
    closure = getattr(function, "__closure__", None) or ()
    wrapped = getattr(function, "__wrapped__", None)
    for cell in closure:
        if isinstance(cell.cell_contents, FunctionType) and cell.cell_contents is wrapped:
            return cell
    return None


def takes_same_parameters(original: Callable, wrapper: Callable) -> bool:
    """Whether ``wrapper`` declares exactly ``original``'s parameters: names, kinds and defaults.

    A wrapper on a hot path written with the parameter list of the torch it was built against binds
    its arguments without building a tuple and a dict per call, several times faster than
    ``*args, **kwargs``; it may stand in for the original only where the two lists agree, so a
    torch that changed them gets the generic wrapper."""
    try:
        theirs = inspect.signature(original).parameters.values()
        ours = inspect.signature(wrapper).parameters.values()
    except (TypeError, ValueError):
        return False
    return [(p.name, p.kind, p.default) for p in theirs] == [(p.name, p.kind, p.default) for p in ours]
