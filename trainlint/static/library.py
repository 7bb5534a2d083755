"""Third-party training APIs as data: the tables of ``trainlint/libraries/*.toml`` plus a project's
``[tool.trainlint.library]``, loaded into one ``Library`` that the engine asks what a constructor
builds, what a method or function call does, and which calls hand back the objects they are given.

The engine never names a library in code; what Accelerate's ``backward`` or timm's ``NativeScaler``
does is written in those files (see ``trainlint/libraries/README.md`` for the keys).
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on Python < 3.11
    import tomli as tomllib

from ..events import CADENCE_BATCH, CADENCE_EPOCH, CADENCE_METRIC, EventKind

_SHIPPED = Path(__file__).resolve().parent.parent / "libraries"
ROLES = frozenset({
    "optimizer", "scheduler", "scaler", "loss_scaler", "accelerator", "engine", "fabric",
    "pipeline_schedule", "loader", "wrapped_model",
})
_ROLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_CADENCES = {"batch": CADENCE_BATCH, "epoch": CADENCE_EPOCH, "metric": CADENCE_METRIC}
_EVENTS = {kind.value: kind for kind in (
    EventKind.BACKWARD, EventKind.UNSCALE, EventKind.CLIP, EventKind.OPTIMIZER_STEP, EventKind.SCALER_UPDATE,
    EventKind.ZERO_GRAD,
)}


_TABLES = ("objects", "methods", "functions", "returns", "loops", "losses", "answers", "one_rank", "loader_passes",
           "boundaries")


class LibraryError(ValueError):
    """A library description is malformed; the message names its source and the entry."""


@dataclass(frozen=True)
class Argument:
    """Where a call passes a value: by position or by keyword."""

    position: Optional[int] = None
    keyword: Optional[str] = None


@dataclass(frozen=True)
class Effect:
    """One event a library call produces."""

    event: EventKind
    loss: Optional[str] = None  # backward: "divided" | "argument"
    argument: Optional[Argument] = None  # the loss (backward) or the optimizer (optimizer_step)
    scaled: bool = False
    optimizer: Optional[str] = None  # optimizer_step: "receiver" | "argument"
    manages_grads: bool = False
    only_if_given: Optional[str] = None
    unless_false: Optional[str] = None


@dataclass(frozen=True)
class Constructed:
    """What a constructor call builds."""

    role: str
    cadence: Optional[str] = None
    optimizer: Optional[Argument] = None
    params: Optional[Argument] = None


@dataclass(frozen=True)
class _Names:
    """Qualified names, the last part a glob. ``accelerate.Accelerator`` also matches
    ``accelerate.accelerator.Accelerator`` (a re-export inside the same package)."""

    patterns: Tuple[Tuple[str, str], ...]  # (module, name glob)
    bare: bool

    def match(self, qualified: Optional[str], name: str) -> bool:
        if not qualified:
            return self.bare and any(fnmatch.fnmatchcase(name, glob) for _, glob in self.patterns)
        module, _, last = qualified.rpartition(".")
        return any(
            fnmatch.fnmatchcase(last, glob) and (module == spec or module.startswith(spec + "."))
            for spec, glob in self.patterns
        )


@dataclass(frozen=True)
class Returned:
    """What a call hands back: the objects it was given (``roles`` and ``each`` None), objects of
    these roles in order, any number of objects of one role (``each``), or a copy of its one
    argument (``copies``): new objects of the same kinds and classes."""

    roles: Optional[Tuple[str, ...]] = None
    each: Optional[str] = None
    copies: bool = False

    def for_count(self, count: int) -> Optional[List[Optional[str]]]:
        """Roles of a tuple of ``count`` targets; None: the call's own arguments."""
        if self.each is not None:
            return [self.each] * count
        if self.roles is None:
            return None
        return list(self.roles[:count]) + [None] * (count - len(self.roles))


@dataclass(frozen=True)
class FrameworkLoop:
    """A method a framework calls once per batch (Lightning's ``training_step(batch, batch_idx)``):
    its body is the body of a training loop over batches the program does not write."""

    classes: _Names
    methods: Tuple[str, ...]
    counter: Argument  # the parameter that counts the batches
    batch: Argument  # the parameter that receives the batch


@dataclass(frozen=True)
class DescribedLoss:
    """What calling an object of these classes returns, when called with a keyword of some value."""

    classes: _Names
    keyword: str
    equals: Any
    loss: str  # "mean" | "sum"
    unless_true: Optional[str] = None  # a keyword that, set, makes the loss something else


@dataclass(frozen=True)
class LoaderPass:
    """A loader class that iterates a DataLoader inside its own iteration, reading ahead: the pass
    over the data runs from its ``begins`` method to its ``ends`` method, not until the DataLoader
    inside runs out (for the runtime guard: where an accumulation window must be closed)."""

    module: str
    name: str  # the class, defined in ``module``
    begins: str
    ends: str


@dataclass
class Library:
    objects: List[Tuple[_Names, Constructed]]
    methods: Dict[Tuple[Optional[str], str], Tuple[Effect, ...]]
    functions: List[Tuple[_Names, Tuple[Effect, ...]]]
    returning_methods: Dict[str, Tuple[Optional[str], Returned]]  # name -> (receiver role, what it returns)
    returning_calls: List[Tuple[_Names, Returned]]
    loops: List[FrameworkLoop]
    losses: List[DescribedLoss]
    # (role, methods only an object of that role has, whether it takes all of them together to tell)
    answers: List[Tuple[str, FrozenSet[str], bool]]
    # Decorators that run the decorated function on one process only (Lightning's rank_zero_only):
    # qualified names, and (receiver role, method names) for methods used as decorators.
    one_rank: List[_Names]
    one_rank_methods: Dict[str, Optional[str]]  # method name -> receiver role
    loader_passes: List[LoaderPass]
    digest: str  # identifies the descriptions (cache entries depend on them)
    # Text without which no description applies: one of these words, or a match of the pattern
    # (bare names given as globs). Words are searched as words: an alternation of them all was
    # tried at every character of every file.
    mentioned_words: Tuple[str, ...] = ()
    mentions: Optional["re.Pattern[str]"] = None
    # (role, attribute): flags true exactly where an accumulation window ends (Accelerate's
    # ``accelerator.sync_gradients``)
    boundaries: Set[Tuple[str, str]] = field(default_factory=set)
    # (qualified, name) -> answer: every call of every file asks, and the answer never changes
    _constructed: Dict[Tuple[Optional[str], str], Optional[Constructed]] = field(default_factory=dict, repr=False, compare=False)
    _functions: Dict[Tuple[Optional[str], str], Optional[Tuple[Effect, ...]]] = field(default_factory=dict, repr=False, compare=False)

    def mentioned(self, source: str) -> bool:
        """Could a described call be in this source? (A cheap test before parsing.)"""
        return any(word in source for word in self.mentioned_words) or (
            self.mentions is not None and self.mentions.search(source) is not None)

    def constructed(self, qualified: Optional[str], name: str) -> Optional[Constructed]:
        key = (qualified, name)
        if key not in self._constructed:
            self._constructed[key] = next((built for names, built in self.objects if names.match(qualified, name)), None)
        return self._constructed[key]

    def loop_methods(self, qualified_base: Optional[str], name: str) -> Optional[FrameworkLoop]:
        """The framework loop a class deriving from this base runs, if any."""
        for loop in self.loops:
            if loop.classes.match(qualified_base, name):
                return loop
        return None

    def loss_of(self, qualified_class: Optional[str], call: Any) -> Optional[str]:
        """``"mean"``/``"sum"`` when a call of an object built from this class returns that loss
        (``unknown`` when a keyword that changes it is not a literal), None when no entry applies.
        ``Class.from_pretrained`` counts as ``Class``."""
        from .values import literal_of  # reading a call's keywords is the static engine's job

        for described in self.losses:
            candidates = [qualified_class, qualified_class.rpartition(".")[0]] if qualified_class else []
            if not any(c and described.classes.match(c, c.rsplit(".", 1)[-1]) for c in candidates):
                continue
            if literal_of(call, described.keyword) != described.equals:
                continue
            if described.unless_true is not None:
                if literal_of(call, described.unless_true, default=False) is not False:
                    return "unknown"  # per-token losses, or a flag the engine cannot read
            return described.loss
        return None

    def runs_on_one_rank(self, qualified: Optional[str], name: str, receiver_role: Optional[str] = None,
                         method: bool = False) -> bool:
        """Does this decorator run what it decorates on one process only?"""
        if method:
            return name in self.one_rank_methods and self.one_rank_methods[name] in (None, receiver_role)
        return any(names.match(qualified, name) for names in self.one_rank)

    def answering(self, methods: Iterable[str]) -> Optional[str]:
        """The one described role whose distinctive methods include some of ``methods`` (what the
        code calls on an object nothing here built), or None."""
        called = set(methods)
        roles = {role for role, names, together in self.answers if (names <= called if together else names & called)}
        return roles.pop() if len(roles) == 1 else None

    def method(self, role: Optional[str], name: str) -> Optional[Tuple[Effect, ...]]:
        """Effects of ``receiver.name(...)`` for a receiver of this role; an entry without a role
        applies to receivers of any role."""
        found = self.methods.get((role, name)) if role is not None else None
        return found if found is not None else self.methods.get((None, name))

    def function(self, qualified: Optional[str], name: str) -> Optional[Tuple[Effect, ...]]:
        key = (qualified, name)
        if key not in self._functions:
            self._functions[key] = next((effects for names, effects in self.functions if names.match(qualified, name)), None)
        return self._functions[key]

    def returns_given(self, qualified: Optional[str], name: str, receiver_role: Optional[str],
                      method: bool = True) -> Optional[Returned]:
        """What the call hands back, when the descriptions say it hands back objects. A method
        entry applies only to a method call (``method``), never to a function of that name."""
        for names, returned in self.returning_calls:
            if qualified and names.match(qualified, name):
                return returned
        if not method:
            return None
        entry = self.returning_methods.get(name)
        if entry is not None and (entry[0] is None or receiver_role in (None, entry[0])):
            return entry[1]
        return None

    def copies(self, qualified: Optional[str], name: str) -> bool:
        """Does this function return a copy of its one argument (``copy.deepcopy``)?"""
        returned = self.returns_given(qualified, name, None, method=False) if qualified else None
        return returned is not None and returned.copies


def _argument(source: str, value: Any) -> Optional[Argument]:
    if value is None:
        return None
    if not isinstance(value, dict) or not set(value) <= {"position", "keyword"}:
        raise LibraryError(f"{source}: an argument is {{ position = N, keyword = \"name\" }}, got {value!r}")
    return Argument(value.get("position"), value.get("keyword"))


def _names(source: str, entry: Mapping[str, Any]) -> _Names:
    calls = entry.get("calls")
    if not isinstance(calls, list) or not calls or not all(isinstance(c, str) and "." in c for c in calls):
        raise LibraryError(f"{source}: calls must be a list of qualified names (module.name), got {calls!r}")
    return _Names(tuple(tuple(c.rsplit(".", 1)) for c in calls), bool(entry.get("bare", False)))


def _role(source: str, value: Any) -> str:
    """One of the engine's roles, or a project's own kind of object (its methods described too)."""
    if not isinstance(value, str) or not _ROLE_NAME.match(value):
        raise LibraryError(f"{source}: a role is a lowercase name ({', '.join(sorted(ROLES))}, or your own), got {value!r}")
    return value


def _effects(source: str, values: Any) -> Tuple[Effect, ...]:
    if not isinstance(values, list):
        raise LibraryError(f"{source}: effects must be a list of tables (empty: it does nothing to training objects)")
    effects = []
    for value in values:
        if not isinstance(value, dict) or value.get("event") not in _EVENTS:
            raise LibraryError(f"{source}: an effect needs event = one of {', '.join(sorted(_EVENTS))}, got {value!r}")
        unknown = set(value) - {"event", "loss", "argument", "scaled", "optimizer", "manages_grads", "only_if_given", "unless_false"}
        if unknown:
            raise LibraryError(f"{source}: unknown effect keys {sorted(unknown)}")
        if value.get("loss") not in (None, "divided", "argument") or value.get("optimizer") not in (None, "receiver", "argument"):
            raise LibraryError(f"{source}: loss is \"divided\" or \"argument\"; optimizer is \"receiver\" or \"argument\"")
        effects.append(Effect(
            event=_EVENTS[value["event"]],
            loss=value.get("loss"),
            argument=_argument(source, value.get("argument")),
            scaled=bool(value.get("scaled", False)),
            optimizer=value.get("optimizer"),
            manages_grads=bool(value.get("manages_grads", False)),
            only_if_given=value.get("only_if_given"),
            unless_false=value.get("unless_false"),
        ))
    return tuple(effects)


def _loader_passes(source: str, entry: Mapping[str, Any]) -> List[LoaderPass]:
    """The guard imports each class by its name and hooks the two methods it defines itself."""
    begins, ends = entry.get("begins"), entry.get("ends")
    if not all(isinstance(m, str) and m.isidentifier() for m in (begins, ends)) or set(entry) - {"classes", "begins", "ends"}:
        raise LibraryError(f"{source}: a loader pass is {{ classes, begins = \"method\", ends = \"method\" }}, got {entry!r}")
    names = _names(source, {"calls": entry.get("classes")})
    if any(not glob.isidentifier() for _, glob in names.patterns):
        raise LibraryError(f"{source}: a loader pass names its classes exactly, got {entry['classes']!r}")
    return [LoaderPass(module, name, begins, ends) for module, name in names.patterns]


def _method_names(source: str, entry: Mapping[str, Any]) -> List[str]:
    names = entry.get("names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise LibraryError(f"{source}: names must be a non-empty list of method names")
    return names


def build(tables: Iterable[Tuple[str, Mapping[str, Any]]]) -> Library:
    """One Library from ``(source, table)`` pairs; a later table (the project's) takes precedence."""
    library = Library([], {}, [], {}, [], [], [], [], [], {}, [], "")
    fingerprint = []
    for source, table in tables:
        fingerprint.append(table)
        unknown = set(table) - set(_TABLES)
        if unknown:
            raise LibraryError(f"{source}: unknown tables {sorted(unknown)} ({', '.join(_TABLES)})")
        # the first matching entry wins: a later table's entries go in front
        library.objects[:0] = [(_names(source, entry), Constructed(
            role=_role(source, entry.get("role")),
            cadence=_CADENCES.get(entry.get("cadence", "")),
            optimizer=_argument(source, entry.get("optimizer")),
            params=_argument(source, entry.get("params")),
        )) for entry in table.get("objects", [])]
        library.functions[:0] = [
            (_names(source, entry), _effects(source, entry.get("effects"))) for entry in table.get("functions", [])
        ]
        for entry in table.get("methods", []):
            role = _role(source, entry["role"]) if "role" in entry else None
            effects = _effects(source, entry.get("effects"))
            for name in _method_names(source, entry):
                library.methods[(role, name)] = effects
        for entry in table.get("returns", []):
            returned = Returned(
                roles=tuple(_role(source, r) for r in entry["roles"]) if "roles" in entry else None,
                each=_role(source, entry["each"]) if "each" in entry else None,
                copies=bool(entry.get("copies", False)),
            )
            if "calls" in entry:
                library.returning_calls.insert(0, (_names(source, entry), returned))
            else:
                role = _role(source, entry["role"]) if "role" in entry else None
                for name in _method_names(source, entry):
                    library.returning_methods[name] = (role, returned)
        library.loops[:0] = [FrameworkLoop(
            classes=_names(source, {"calls": entry.get("classes"), "bare": entry.get("bare", False)}),
            methods=tuple(_method_names(source, entry)),
            counter=_argument(source, entry.get("counter")) or Argument(),
            batch=_argument(source, entry.get("batch")) or Argument(),
        ) for entry in table.get("loops", [])]
        for entry in table.get("losses", []):
            when = entry.get("when")
            if not isinstance(when, dict) or set(when) != {"keyword", "equals"} or entry.get("loss") not in ("mean", "sum"):
                raise LibraryError(f"{source}: a loss needs when = {{ keyword, equals }} and loss = \"mean\" or \"sum\"")
            library.losses.insert(0, DescribedLoss(
                classes=_names(source, {"calls": entry.get("classes"), "bare": entry.get("bare", False)}),
                keyword=when["keyword"], equals=when["equals"], loss=entry["loss"], unless_true=entry.get("unless_true"),
            ))
        library.answers[:0] = [(_role(source, entry.get("role")), frozenset(_method_names(source, entry)),
                                bool(entry.get("together", False))) for entry in table.get("answers", [])]
        for entry in table.get("one_rank", []):
            if "calls" in entry:
                library.one_rank.insert(0, _names(source, entry))
            for name in entry.get("names", []):
                library.one_rank_methods[name] = _role(source, entry["role"]) if "role" in entry else None
        library.boundaries.update((_role(source, entry.get("role")), name) for entry in table.get("boundaries", [])
                                  for name in entry.get("attributes", []))
        library.loader_passes[:0] = [passes for entry in table.get("loader_passes", [])
                                     for passes in _loader_passes(source, entry)]
    library.digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]
    library.mentioned_words, library.mentions = _mentions(library)
    return library


_GLOB_CHARACTERS = frozenset("*?[]-")


def _mentions(library: Library) -> Tuple[Tuple[str, ...], Optional["re.Pattern[str]"]]:
    """The words a source must contain for a description to apply: the package of every described
    call (it is imported from there), the literal part of bare names, and the methods described
    for receivers of any role (copies apart). A bare name that is a glob is a pattern over
    identifier characters instead. With nothing described, every source may (the empty word)."""
    words = set()
    patterns = set()
    named = [names for names, _ in library.objects] + [names for names, _ in library.functions]
    # a copy (``copy.deepcopy``) makes no training object and no event of its own: a file that only
    # copies has nothing for the rules (and "copy" is in most sources)
    named += [names for names, returned in library.returning_calls if not returned.copies]
    named += [loop.classes for loop in library.loops]
    named += [described.classes for described in library.losses]
    for names in named:
        for module, glob in names.patterns:
            words.add(module.split(".", 1)[0])
            if names.bare and _GLOB_CHARACTERS.isdisjoint(glob):
                words.add(glob)
            elif names.bare:
                patterns.add("".join(r"\w*" if c == "*" else r"\w" if c == "?" else c if c in "[]-" else re.escape(c) for c in glob))
    words.update(f"{name}(" for (role, name) in library.methods if role is None)
    words.update(f"{name}(" for name, (role, _) in library.returning_methods.items() if role is None)
    if not words and not patterns:
        words.add("")
    return tuple(sorted(words)), re.compile("|".join(sorted(patterns))) if patterns else None


def shipped_tables() -> List[Tuple[str, Mapping[str, Any]]]:
    tables = []
    for path in sorted(_SHIPPED.glob("*.toml")):
        try:
            tables.append((path.name, tomllib.loads(path.read_text(encoding="utf-8"))))
        except tomllib.TOMLDecodeError as exc:
            raise LibraryError(f"{path.name}: invalid TOML: {exc}") from None
    return tables


_BUILT: Dict[str, Library] = {}  # the extension's JSON -> its library ("" for none)
_active: Optional[Library] = None


def activate(extension: Optional[Mapping[str, Any]] = None, source: str = "[tool.trainlint.library]") -> Library:
    """Make the shipped descriptions, extended by a project's table, the ones the engine reads."""
    global _active
    marker = json.dumps(extension, sort_keys=True, default=str) if extension else ""
    library = _BUILT.get(marker)
    if library is None:
        library = _BUILT[marker] = build(shipped_tables() + ([(source, extension)] if extension else []))
    if _active is not None and _active is not library:
        from .project import forget_parsed  # modules read under other descriptions hold stale roles

        forget_parsed()
    _active = library
    return library


def current() -> Library:
    return _active if _active is not None else activate()
