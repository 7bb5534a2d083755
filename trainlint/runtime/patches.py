"""Recorded monkey-patches: every change the guard makes to torch is undone on exit.

Hooks change three kinds of things: attributes of classes and modules, the closure cell of a
decorated function (so callers that imported the function by name before the guard are seen too),
and torch's hook registries (undone through their handles). Each change records its undo first;
restoring runs every undo even when one fails. The guard holds SIGINT while it installs and
restores (see :mod:`.signals`), and so does a per-step swap.

Hooks on calls a training step makes every time (``per_step=True``) can also be taken out and put
back while the session lasts: the guard removes them while it samples a steady loop (see
:mod:`.sampling`), so the steps in between run torch's own functions.

Under ``torch.compile`` every hook is invisible to dynamo (see ``_dispatcher``):

- a hook on a function that compiled code traces (``traceable=True``: functional ops, module
  forwards, clipping, ``Module.train``, the optimizer step pre-hook) hands dynamo the original while
  it traces, so the compiled graph is the one without the guard, with no graph break and no guard
  on the guard's state. What that call would have told the guard is lost; a hook whose call feeds
  the checker (an optimizer step, a clip, ``model.zero_grad()``) says so through an
  :class:`Unseen` flag that the compiled code sets, and the hub then forgets what such a call could
  have changed (an OPAQUE event), so a step the guard did not see is never reported missing;
- a hook on a function dynamo does not trace (a graph break without the guard too: backward,
  ``Optimizer.zero_grad``, LR schedulers, GradScaler, DataLoader iteration) breaks the graph at the
  same call, and its check runs there, eagerly;
- the guard's own code runs only eagerly, with dynamo off, and is never compiled, so no check can
  add a graph, a graph break, a host sync (``.item()``) or a recompile to a compiled region; torch's
  function runs with dynamo as its caller had it, so what dynamo compiles under it is unchanged;
- once dynamo has compiled something, per-step hooks are no longer swapped in and out: compiled
  code guards on the identity of every function it traced, so each swap would recompile it; the
  hooks stay installed and pass straight through to torch's function while they are "out".
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import sys
import threading
import warnings
from types import CellType, FunctionType
from typing import Any, Callable, Dict, List, Optional, Tuple

from .signals import SHIELD

_ABSENT = object()


class Unseen:
    """Set by compiled code that ran a hooked call the guard could not see (dynamo traced torch's
    own function in its place). Compiled code only stores into it, and dynamo replays a store after
    each run of its graph without guarding on the old value, so setting it recompiles nothing; the
    hub reads and clears it eagerly (``Hub.feed``)."""

    def __init__(self) -> None:
        self.seen = False


class Patcher:
    def __init__(self) -> None:
        self._undo: List[Callable[[], None]] = []
        self._finder: Optional[_AfterImport] = None
        # (owner, name, original) for every replaced attribute: what the tests check after exit.
        self.replaced: List[Tuple[Any, str, Any]] = []
        # (put in, take out) of every per-step hook, and whether they are in now.
        self._per_step: List[Tuple[Callable[[], None], Callable[[], None]]] = []
        self.per_step_in = True
        self._held = False  # per-step hooks stay installed and pass through while out (dynamo compiled)

    def wrap(self, owner: Any, name: str, make: Callable[[Any], Any], per_step: bool = False,
             traceable: bool = False, hides: Optional[Unseen] = None) -> None:
        """Replace ``owner.name`` (defined on ``owner`` itself) by ``make(original)``.
        ``traceable``: compiled code may trace the original, and then traces the original;
        ``hides``: the flag such a compiled call sets (its events feed the checker)."""
        original = vars(owner)[name]
        self.replace(owner, name, self.hook(original, make, per_step, traceable, hides), per_step)

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
            self._add_per_step(lambda: setattr(owner, name, value), undo)

    def wrap_cell(self, cell: CellType, make: Callable[[Any], Any], per_step: bool = False,
                  traceable: bool = False, hides: Optional[Unseen] = None) -> None:
        original = cell.cell_contents
        value = self.hook(original, make, per_step, traceable, hides)

        def undo() -> None:
            cell.cell_contents = original

        self._undo.append(undo)
        cell.cell_contents = value
        if per_step:
            def put_in() -> None:
                cell.cell_contents = value

            self._add_per_step(put_in, undo)

    def hook(self, original: Any, make: Callable[[Any], Any], per_step: bool = False, traceable: bool = False,
             hides: Optional[Unseen] = None) -> Any:
        """What to install in place of ``original``: the hook ``make`` builds around it, behind a
        dispatcher that keeps the guard out of compiled code (see _dispatcher). ``make`` only
        defines the hook (it is called twice: around ``original`` itself, and around ``original``
        as a compiled function's graph break must call it, see _as_called). A staticmethod stays
        one."""
        if isinstance(original, staticmethod):
            return staticmethod(self.hook(original.__func__, lambda o: make(o).__func__, per_step, traceable, hides))
        return _dispatcher(original, make(original), make(_as_called(original)), self if per_step else None,
                           traceable, hides)

    def _add_per_step(self, put_in: Callable[[], None], take_out: Callable[[], None]) -> None:
        self._per_step.append((put_in, take_out))
        if not self._held and not self.per_step_in:  # hooked after an import while they are out
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
                _run_all(self._per_step, 0)
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
    """Has dynamo compiled a graph in this process? (Many programs import it, few compile.)"""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"] > 0


def nothing(*args, **kwargs) -> None:
    """The original of a hook that torch calls back (the global optimizer step pre-hook)."""
    return None


class _Suspended(threading.local):
    """The dynamo callback that a hook's own code suspended on this thread (see _dispatcher)."""

    callback: Any = None


_SUSPENDED = _Suspended()


@functools.lru_cache(maxsize=1)
def _dynamo():
    """(is_compiling, set_eval_frame, skip_code, skip), importing dynamo on the first hook: a
    program that steps an optimizer imports it anyway (Optimizer.step does). The last three are
    private: torch.compiler.disable is built on ``set_eval_frame``; ``skip_code`` is the only way
    to have dynamo skip a frame that it still inlines when it traces a call; ``skip`` is
    ``torch.compiler.disable(recursive=False)`` without its wrapper's frame, which would stand
    between the user's code and the hook (hooks read their caller's frame)."""
    import torch.compiler
    from torch._C._dynamo.eval_frame import set_eval_frame
    from torch._dynamo.decorators import skip
    from torch._dynamo.eval_frame import skip_code

    return torch.compiler.is_compiling, set_eval_frame, skip_code, skip


def _dispatcher(original: Any, wrapper: Callable, reentering: Callable, patcher: Optional[Patcher],
                traceable: bool, hides: Optional[Unseen]) -> Callable:
    """What the guard installs: the hook (``wrapper``) where eager code calls it, out of sight of
    dynamo everywhere.

    - While dynamo traces (``is_compiling()``, a constant True to it), a ``traceable`` hook calls
      ``original``, which dynamo then traces as it would without the guard (and sets ``hides``
      when its call feeds the checker). A hook that is not traceable is marked as dynamo's
      ``skip`` marks a function (``torch.compiler.disable(recursive=False)``, less its wrapper):
      the graph breaks at its call, as it breaks at torch's own function, and the call runs
      eagerly. Nothing on these paths reads the guard's
      state, so dynamo guards on none of it.
    - ``hooked``'s own frame is never compiled (``skip_code``): eager code at a compiled
      function's graph break that calls it would otherwise have dynamo compile it as a frame of
      its own, with ``is_compiling()`` True (a graph for torch's function, and no check).
    - The hook runs with dynamo off (``set_eval_frame(None)``, as ``torch.compiler.disable``
      does), so no frame of the guard's checks is ever compiled and their ``.item()`` reads run
      eagerly. Called by compiled code (dynamo's callback was on), the hook is ``reentering``,
      built around ``original`` as _as_called runs it: with the callback back on, so that what
      dynamo compiles under torch's function (the optimizer step inside ``GradScaler.step``, a
      backward hook) is what it compiles without the guard.

    ``patcher``: a per-step hook, which passes through while the hooks are out.
    What the checks lose in compiled regions is listed in the README (runtime guard)."""
    is_compiling, set_eval_frame, skip_code, skip = _dynamo()
    suspended = _SUSPENDED

    # The two bodies differ in their first branch only: a shared helper would cost every hooked
    # call of every step one more frame.
    if traceable:
        def hooked(*args, **kwargs):
            if is_compiling():
                if hides is not None:
                    hides.seen = True
                return original(*args, **kwargs)
            if patcher is not None and not patcher.per_step_in:
                return original(*args, **kwargs)
            prior = set_eval_frame(None)
            if prior is None and suspended.callback is None:  # not called by compiled code
                return wrapper(*args, **kwargs)
            saved, suspended.callback = suspended.callback, prior
            try:
                return reentering(*args, **kwargs)
            finally:
                suspended.callback = saved
                set_eval_frame(prior)
    else:
        def hooked(*args, **kwargs):
            if patcher is not None and not patcher.per_step_in:
                return original(*args, **kwargs)
            prior = set_eval_frame(None)
            if prior is None and suspended.callback is None:  # not called by compiled code
                return wrapper(*args, **kwargs)
            saved, suspended.callback = suspended.callback, prior
            try:
                return reentering(*args, **kwargs)
            finally:
                suspended.callback = saved
                set_eval_frame(prior)

    skip_code(hooked.__code__)
    hooked = functools.wraps(wrapper)(hooked)
    return hooked if traceable else skip(hooked)


def _as_called(original: Any) -> Any:
    """``original`` as a hook called by compiled code calls it: with the dynamo callback that the
    hook's caller had (the hook's own code runs with none, see _dispatcher), so that the frames
    torch's function calls back into are compiled, or not, as without the guard."""
    suspended = _SUSPENDED

    def called(*args, **kwargs):
        prior = suspended.callback
        if prior is None:
            return original(*args, **kwargs)
        set_eval_frame = _dynamo()[1]
        suspended.callback = None
        set_eval_frame(prior)
        try:
            return original(*args, **kwargs)
        finally:
            set_eval_frame(None)
            suspended.callback = prior

    return functools.wraps(original)(called)


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
