"""Parameters updated by hand: the OPTIMIZER_STEP (and ZERO_GRAD) of a program with no optimizer
object, where the static engine reads them (static/hand.py), at the same line.

``for p in model.parameters(): p -= lr * p.grad`` under ``torch.no_grad()`` runs no optimizer hook,
and ``p.data.add_(p.grad, alpha=-lr)`` changes the parameter through ``.data``, a view with a
version counter of its own: ``p._version`` does not move, so comparing parameter versions at the
next forward or backward would miss the commonest form (and could not tell an update from a weight
clamp or a re-initialisation). Hooking ``Tensor.add_``/``sub_`` would not see ``lr * p.grad``
being computed from the gradient either. The operations themselves tell, and they are watched only
inside the blocks where such an update can happen:

- ``torch.no_grad``'s ``__enter__`` is hooked. A block the user's code enters (a ``with`` in their
  file, or a function of theirs decorated with it) while backward passes are pending (a backward
  since the last step or zero_grad: gradients an update would consume) is watched. Any other block
  (torch's own in clipping and GradScaler, an evaluation after the step) costs one check at entry.
- A watched block runs under a TorchFunctionMode that follows which tensors hold a parameter's
  gradient or a value computed from it (``p.grad``, ``lr * p.grad``, a momentum buffer it was
  added into) and which are a parameter or its ``.data``. The first in-place update
  (HAND_UPDATE_METHODS) of a parameter with a value computed from its own gradient is the step, at
  its line; the first clearing of a gradient after it (``p.grad.zero_()``, ``p.grad = None``) is a
  zero_grad. An optimizer stepping inside the block ends the watch: its updates are its own.
- The mode only observes: every operation runs as called, its arguments and result untouched, and
  code dynamo compiles sees the bare operation. It is popped when the block exits, exception or
  not, when an optimizer steps inside the block, and at the guard's end if the block is still
  open (on another thread it can only be told to pass everything through). The guard does not
  start coasting through a steady loop while a block is watched, so both hooks go out with the
  other per-step hooks.

Cost: a few attribute reads per no_grad entry and exit while the per-step hooks are in (a tiny
MLP step with clipping enters five, torch's own), nothing while the guard coasts; inside a watched
block, about 5-10 µs per tensor operation (a hand update runs a few per parameter). A program
whose only steps are hand updates has no optimizer to anchor sampling (see .sampling), so every
one of its steps is checked.
"""
from __future__ import annotations

import linecache
import os
import sys
import threading
import weakref
from typing import Dict, FrozenSet, Optional

from ..events import HAND_UPDATE, HAND_UPDATE_METHODS, EventKind
from .hooks_optim import begin_step, emit_zero_grad
from .sites import Site, user_code, user_site

_TRAINLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DYNAMO_DIR = os.sep + os.path.join("torch", "_dynamo") + os.sep
_NO_SOURCES: FrozenSet[int] = frozenset()


class _OpenWatches(dict):
    """id(no_grad object) -> the watch of its block, while the block is watched. The guard's patcher
    calls ``remove`` when the guard ends (see Patcher.handle): blocks still open stop being watched."""

    def close(self, block) -> None:
        watch = self.get(id(block))
        if watch is not None and watch.block is block:
            watch.stop()

    def remove(self) -> None:
        for watch in list(self.values()):
            watch.stop()


def install(patcher, hub) -> None:
    import torch
    from torch.autograd import grad_mode
    from torch.compiler import is_compiling
    from torch.overrides import TorchFunctionMode
    from torch.utils import _contextlib

    tensor = torch.Tensor
    grad_attribute = vars(torch._C.TensorBase)["grad"]
    data_attribute = vars(torch._C.TensorBase)["data"]
    decorator_file = _contextlib.__file__
    steps = hub.cache("hand_step")
    zeros = hub.cache("hand_zero_grad")
    watches = _OpenWatches()

    class Watch(TorchFunctionMode):
        """The tensor operations of one watched no_grad block (see the module's docstring)."""

        def __init__(self, stream, block) -> None:
            super().__init__()
            self.stream = stream
            self.block = block
            self.thread = threading.get_ident()
            self.finished = False  # nothing more to see: stepped and zeroed, or stopped
            self.stepped = False
            self.held: Dict[int, weakref.ref] = {}  # id(parameter) -> the parameter
            # id(tensor) -> (the tensor, id of the parameter): a parameter, its .data or detach()
            self.parameters: Dict[int, tuple] = {}
            # id(tensor) -> (the tensor, id of the parameter): a parameter's gradient, or its .data
            self.grads: Dict[int, tuple] = {}
            # id(tensor) -> (the tensor, ids of the parameters whose gradients it is computed from)
            self.from_grads: Dict[int, tuple] = {}

        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            # is_compiling() first: while dynamo traces through the mode it reads nothing of the guard's
            if not is_compiling() and not self.finished:
                self._follow(func, args, kwargs, result)
            return result

        def start(self) -> None:
            self.__enter__()  # pushes the mode on this thread's stack
            self.stream.watch = watches[id(self.block)] = self

        def stop(self) -> None:
            """No more watching: at the block's exit, at an optimizer step inside it (its updates are
            the optimizer's), at the guard's end. Once only: the mode is popped once."""
            if watches.pop(id(self.block), None) is not self:
                return
            self.finished = True
            if self.stream.watch is self:
                self.stream.watch = None
            if self.thread == threading.get_ident():
                self.__exit__(None, None, None)  # pops the mode (another thread's stack is not ours to pop)

        # ------------------------------------------------------------------ what an operation does
        def _follow(self, func, args, kwargs, result) -> None:
            name = getattr(func, "__name__", "")
            if name == "__get__" or name == "detach":
                # ``p.grad``, ``p.data``, ``p.detach()`` (which shares the parameter's storage as .data does)
                owner = data_attribute if name == "detach" else getattr(func, "__self__", None)
                self._read(owner, args[0], result)
            elif name == "__set__":
                if getattr(func, "__self__", None) is grad_attribute and args[1] is None:
                    self._cleared(self._parameter_of(args[0]))
            elif name.endswith("_") and not name.startswith("_") and args and isinstance(args[0], tensor):
                self._in_place(name, args, kwargs)
            else:
                sources = self._sources(args, kwargs)
                if sources:
                    self._mark(result, sources)

        def _read(self, owner, receiver, result) -> None:
            if not isinstance(result, tensor) or not isinstance(receiver, tensor):
                return
            if owner is grad_attribute:
                parameter = self._parameter_of(receiver, register=True)
                self.grads[id(result)] = (weakref.ref(result), parameter)
                self.from_grads[id(result)] = (weakref.ref(result), frozenset((parameter,)))
            elif owner is data_attribute:
                parameter = self._parameter_of(receiver, register=receiver.requires_grad)
                if parameter is not None:
                    self.parameters[id(result)] = (weakref.ref(result), parameter)
                    return
                grad_of = _entry(self.grads, receiver)  # ``p.grad.data`` is the gradient too
                if grad_of is not None:
                    self.grads[id(result)] = (weakref.ref(result), grad_of)
                sources = _entry(self.from_grads, receiver)
                if sources:
                    self.from_grads[id(result)] = (weakref.ref(result), sources)

        def _in_place(self, name: str, args, kwargs) -> None:
            receiver = args[0]
            sources = self._sources(args[1:], kwargs)
            parameter = self._parameter_of(receiver)
            grad_of = _entry(self.grads, receiver) if name == "zero_" else None
            if parameter is not None:
                if name in HAND_UPDATE_METHODS and parameter in sources:
                    self._updated(parameter)
            elif grad_of is not None:
                self._cleared(grad_of)
            elif sources:
                self._mark(receiver, sources)  # ``buf.mul_(m).add_(p.grad)``: a momentum buffer

        def _parameter_of(self, value, register: bool = False) -> Optional[int]:
            """Which parameter ``value`` is (itself, its .data or detach()); with ``register``, a
            tensor whose gradient or storage is read is a parameter from now on."""
            parameter = _entry(self.parameters, value)
            if parameter is None and register:
                parameter = id(value)
                self.parameters[parameter] = (weakref.ref(value), parameter)
                self.held[parameter] = weakref.ref(value)
            return parameter

        def _sources(self, args, kwargs) -> FrozenSet[int]:
            """The parameters whose gradients the tensor arguments (and those in lists) come from."""
            if not self.from_grads:
                return _NO_SOURCES
            found = _NO_SOURCES
            for value in (*args, *(kwargs.values() if kwargs else ())):
                for item in (value if type(value) in (list, tuple) else (value,)):
                    entry = self.from_grads.get(id(item))
                    if entry is not None and entry[0]() is item:
                        found = found | entry[1]
            return found

        def _mark(self, result, sources: FrozenSet[int]) -> None:
            for item in (result if type(result) in (list, tuple) else (result,)):
                if isinstance(item, tensor):
                    known = _entry(self.from_grads, item) or _NO_SOURCES
                    self.from_grads[id(item)] = (weakref.ref(item), known | sources)

        # ------------------------------------------------------------------ events
        def _updated(self, parameter: int) -> None:
            """The first parameter changed from its own gradient: the block is a step."""
            if self.stepped:
                return
            self.stepped = True
            site = user_site()
            accum, boundary = begin_step(hub, self.stream, self.held[parameter]())
            key = (site, boundary, accum)
            hub.feed(self.stream, steps.get(key) or hub.event(
                steps, key, EventKind.OPTIMIZER_STEP, _statement(site), site, target=HAND_UPDATE,
                boundary=boundary, accum=None if accum is None else str(accum),
            ))

        def _cleared(self, parameter: Optional[int]) -> None:
            """A parameter's gradient cleared after the step: the block's zero_grad."""
            if not self.stepped or parameter is None:
                return
            self.finished = True
            site = user_site()
            emit_zero_grad(hub, self.stream, zeros.get(site) or hub.event(
                zeros, site, EventKind.ZERO_GRAD, _statement(site), site))

    verdicts: Dict[object, bool] = {}  # code object -> whether its no_grad blocks are the user's

    def users_block(frame) -> bool:
        """Is the no_grad block starting in ``frame`` the user's (past the guard's own wrappers;
        for a function decorated with no_grad, that function rather than torch's decorator)?"""
        # past the guard's frames and dynamo's disable wrapper around them (torch.compiler.disable)
        while frame.f_code.co_filename.startswith(_TRAINLINT_DIR) or _DYNAMO_DIR in frame.f_code.co_filename:
            frame = frame.f_back
        code = frame.f_code
        verdict = verdicts.get(code)
        if verdict is None:
            if code.co_filename == decorator_file and code.co_name == "decorate_context":
                decorated = getattr(frame.f_locals.get("func"), "__code__", None)  # one decorator, many functions
                return decorated is not None and user_code(decorated)
            verdict = verdicts[code] = user_code(code)
        return verdict

    def enter_wrapper(original):
        def __enter__(self):
            original(self)
            if hub.active and not hub.coasting:
                stream = hub.streams.stream
                if stream.backwards and stream.watch is None and users_block(sys._getframe(1)):
                    Watch(stream, self).start()

        return __enter__

    def exit_wrapper(original):
        def __exit__(self, exc_type, exc_value, traceback):
            if not watches:
                return original(self, exc_type, exc_value, traceback)
            try:
                watches.close(self)
            finally:
                result = original(self, exc_type, exc_value, traceback)
            return result

        return __exit__

    # Not ``traceable``: dynamo reads ``with torch.no_grad():`` as a grad-mode switch of its own and
    # never calls these methods, so eager code pays no compile check for them. Both go out while the
    # guard coasts: it never starts while a block is watched (see StepSampler._coast; an optimizer
    # step inside a watched block stops the watch first).
    patcher.wrap(grad_mode.no_grad, "__enter__", enter_wrapper, per_step=True)
    patcher.wrap(grad_mode.no_grad, "__exit__", exit_wrapper, per_step=True)
    patcher.handle(watches)
    hub.watches = watches


def _entry(table: Dict[int, tuple], value):
    """What ``table`` says of the tensor ``value`` (keyed by id, so checked to be the same object)."""
    entry = table.get(id(value))
    return entry[1] if entry is not None and entry[0]() is value else None


def _statement(site: Site) -> str:
    """The statement as written, for messages: its source line without a trailing comment."""
    text = linecache.getline(site[0], site[1]).partition(" #")[0].strip()
    return text or "the parameters updated by hand"
