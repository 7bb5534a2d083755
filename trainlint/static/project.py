"""The user's project: the other modules a checked file imports, found and read (never run).

``trainlint train.py`` must see ``engine.py`` next to it: a file's imports are resolved against its
own directory and the roots of the packages it sits in (the parent of the topmost directory with an
``__init__.py``), the way ``python train.py`` or ``python -m pkg.train`` would find them. Installed
libraries are never read: a module is part of the project only if its file is under those roots.

Modules are parsed once per process (keyed by path, size and modification time) and shared by
every file that imports them. Each analysis records which modules it read and their content
digests, so a cached result is reused only while those files are unchanged.
"""
from __future__ import annotations

import hashlib
import re
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from ..catalog import READS_PROJECT_MODULES, load_catalog, may_fire, trigger_expression
from ..checker import CHECKED_RULES
from . import library

if TYPE_CHECKING:  # libcst and the models load in _load: a run whose files all fail the pre-filter never needs them
    from .module import Function, ModuleModel

MAX_MODULE_BYTES = 2_000_000  # larger files are generated code, not training loops
# Parsed modules, most recently used last; bounded so a run over thousands of files keeps a few
# hundred trees in memory at most (the modules a project imports are used again and again, so they
# stay). One check in torch._dynamo reads some forty large modules and its neighbours read the
# same ones: with 48 kept, 55 of torch's modules were parsed twice or three times (4.8 MB of
# source, a sixth of all parsing); with 160, two.
_PARSED: "OrderedDict[Path, Tuple[Tuple[int, int], Optional[ModuleModel]]]" = OrderedDict()
MAX_PARSED = 160
_PINNED: Optional[Dict[int, ModuleModel]] = None  # the models read by the running check (see pinning)
_PARSED_ORDER: List[Path] = []  # every module parsed to be followed, in order (see parsed_since)
_FOUND: Dict[Tuple[Tuple[Path, ...], str], Optional[Path]] = {}  # (search bases, module name) -> file
_DIRECTORIES: Dict[Path, Path] = {}  # a module's path -> its resolved directory (relative imports)


def _directory_of(path: Path) -> Path:
    """Where a relative import of the module at ``path`` starts: resolved once per path (every
    ``from .x import y`` of every checked file asks, and resolving is a system call per part)."""
    found = _DIRECTORIES.get(path)
    if found is None:
        found = _DIRECTORIES[path] = path.resolve().parent
    return found


@contextmanager
def pinning() -> Iterator[None]:
    """Every model read during the block stays alive until its end. A model's functions link to
    it weakly (see ``module.Function``), and a check may read more modules than are kept: the
    functions it holds must not lose their module before it is done with them."""
    global _PINNED
    if _PINNED is not None:  # within a check already: its pins hold
        yield
        return
    _PINNED = {}
    try:
        yield
    finally:
        _PINNED = None


def _pin(model: Optional[ModuleModel]) -> Optional[ModuleModel]:
    if _PINNED is not None and model is not None:
        _PINNED[id(model)] = model
    return model


def _load(path: Path) -> Optional[ModuleModel]:
    """The module at ``path`` (parsed once per process while unchanged), or None if unreadable."""
    try:
        stat = path.stat()
    except OSError:
        return None
    stamp = (stat.st_size, stat.st_mtime_ns)
    cached = _PARSED.get(path)
    if cached is not None and cached[0] == stamp and _sources_unchanged(cached[1]):
        _PARSED.move_to_end(path)
        return _pin(cached[1])
    model = None
    if stat.st_size <= MAX_MODULE_BYTES:
        import libcst as cst

        from .module import ModuleModel

        try:
            source = path.read_text(encoding="utf-8")
            model = ModuleModel(cst.parse_module(source), source, path=path)
        except (OSError, UnicodeDecodeError, cst.ParserSyntaxError, RecursionError, ValueError):
            model = None  # the import is then unknown, as an installed library's would be
        _PARSED_ORDER.append(path)
    _keep(path, stamp, model)
    return _pin(model)


def parsed_since(mark: int) -> List[Path]:
    """Modules parsed to be followed since ``parsed_count()`` was ``mark``, in order: a run that
    will check some of them itself checks those next, while their trees are still kept."""
    return _PARSED_ORDER[mark:]


def parsed_count() -> int:
    return len(_PARSED_ORDER)


def _keep(path: Path, stamp: Tuple[int, int], model: Optional[ModuleModel]) -> None:
    _PARSED[path] = (stamp, model)
    _PARSED.move_to_end(path)
    while len(_PARSED) > MAX_PARSED:
        _PARSED.popitem(last=False)


def forget_parsed() -> None:
    """Drop every kept model (their roles were read under other library descriptions)."""
    _PARSED.clear()
    _PARSED_ORDER.clear()
    _TEXT_CHECKED.clear()
    _BLOCKS.clear()
    _DIRECTORIES.clear()
    _TEXT_OF.clear()
    _REEXPORTS.clear()


def start_check() -> None:
    """Before each checked file: the kept modules stay parsed, and their object flows stay while
    they are what a fresh computation would give (see ``objects.Home``); the others are computed
    again for this file, so a file gets the same verdict whichever files the process checked
    before it."""
    flows = [(model, flow) for _, model in _PARSED.values() if model is not None for flow in model.kept_flows()]
    if not flows:
        return
    from .objects import keep_finished  # the objects layer loads with the first flow

    kept = keep_finished(flow for _, flow in flows)
    for model, flow in flows:
        if id(flow) not in kept:
            model.forget_flow(flow)


def remember_checked(model: ModuleModel) -> None:
    """A checked file's model, kept for the files of the same run that import it."""
    if model.path is None:
        return
    try:
        stat = model.path.stat()
    except OSError:
        return
    _keep(model.path, (stat.st_size, stat.st_mtime_ns), model)


def parsed_before(path: Path, source: str) -> Optional[ModuleModel]:
    """The model of ``path`` if this process already parsed exactly ``source`` for it."""
    cached = _PARSED.get(path)
    model = cached[1] if cached is not None else None
    return model if model is not None and model.source == source and _sources_unchanged(model) else None


def _stamp(path: Path) -> Optional[Tuple[int, int]]:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns)


def _sources_unchanged(model: Optional[ModuleModel]) -> bool:
    """The modules ``model`` adopted loaders from are as they were then (else its roles are stale)."""
    return model is None or all(_stamp(source.path) == stamp for source, stamp in model.data_sources)


class Project:
    """Resolution of one checked file's imports to the project's own modules."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        self.roots = _roots(self.path)
        # Checking an installed package (``site-packages/torch/...``): its own top-level name.
        self.installed_as = next((self.path.relative_to(root).parts[0] for root in self.roots
                                  if root.name in _INSTALL_DIRECTORIES), None)
        self.read: Dict[Path, str] = {}  # modules read by this analysis -> sha256 of their content
        # the models behind ``read`` (see settle), weakly: a checked model holds its project
        self._noted: List["weakref.ref[ModuleModel]"] = []
        # importer -> name -> function: weak keys, as a module no longer kept may be freed (and a
        # new one take its address) while this project, kept with its checked module, lives on.
        self._functions: "weakref.WeakKeyDictionary[ModuleModel, Dict[str, Optional[Function]]]" = weakref.WeakKeyDictionary()
        # the last text asked imports_training_text, and the answer: the engine's pre-filter and
        # then the analyzer's ask it of the same file
        self._trains_for: Tuple[Optional[str], bool] = (None, False)

    def function(self, model: ModuleModel, name: str) -> Optional[Function]:
        """The project function an imported name refers to in ``model`` (``from engine import
        train_one_epoch``; ``misc.helper`` after ``import util.misc as misc``), or None."""
        known = self._functions.get(model)
        if known is None:
            known = self._functions[model] = {}
        if name in known:
            found = known[name]
            if found is None:
                return None
            if _pin(found.owner) is not None:  # else its module was freed: found again below
                return found
        found = known[name] = self._function(model, name)
        return found

    def _function(self, model: ModuleModel, name: str) -> Optional[Function]:
        """Through re-exports too: a package ``__init__`` (``from .impl import *`` or by name) or
        a module that imports the function from another one."""
        imported = _imported(model, name)
        for _ in range(_REEXPORT_HOPS):
            if imported is None:
                return None
            other = self.module(imported[0], model)
            if other is None:
                return None
            found = other.functions.get(imported[1])
            if found is not None:
                return found
            imported = _reexported(other, imported[1])
            model = other
        return None

    def may_train(self, model: ModuleModel, name: str) -> bool:
        """Could the project function ``name`` refers to produce a training event? Answered from
        its module's text, without parsing it: most imported helpers of a package cannot."""
        path = self._path_of(model, name)
        return path is not None and _has_event_text(path) and _definition_may_train(path, name.rsplit(".", 1)[-1])

    def inert(self, model: ModuleModel, name: str) -> bool:
        """Is ``name`` a function or class of the project whose text cannot produce a training
        event (its definition, what it calls in its module, nothing imported)? Such a call is
        known to do nothing to training objects, as if its (empty) summary had been computed."""
        path = self._path_of(model, name)
        return path is not None and not (_has_event_text(path) and _definition_may_train(path, name.rsplit(".", 1)[-1]))

    def may_freeze(self, model: ModuleModel, name: str) -> bool:
        """Could the project function ``name`` refers to set ``requires_grad``? From its module's
        text, without parsing it."""
        return self.may_mention(model, name, "requires_grad")

    def defined_where_text_matches(self, model: ModuleModel, name: str, text: "re.Pattern[str]") -> bool:
        """Does the module defining what ``name`` refers to (through re-exports) have ``text``? A
        cheap, cached test from its text, before it is parsed."""
        path = self._path_of(model, name)
        return path is not None and text_matches(path, text)

    def may_mention(self, model: ModuleModel, name: str, word: str) -> bool:
        """Does the module defining the project function ``name`` refers to contain ``word``? A
        cheap test from its text, before parsing it."""
        path = self._path_of(model, name)
        if path is None:
            return False
        try:
            return word in path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False

    def _path_of(self, model: ModuleModel, name: str) -> Optional[Path]:
        """The file that defines what ``name`` refers to, through re-exports (a package
        ``__init__`` that imports it is read; the defining module is not)."""
        imported = _imported(model, name)
        for _ in range(_REEXPORT_HOPS):
            if imported is None:
                return None
            path = self._find(imported[0], model)
            if path is None or imported[1] in _definition_blocks(path) or not _may_reexport(path, imported[1]):
                return path
            other = _load(path)
            if other is None:
                return path
            imported = _reexported(other, imported[1])
            if imported is None:
                return path
            model = other
        return None

    def method(self, model: ModuleModel, class_name: str, method: str, depth: int = 0) -> Optional[Function]:
        """A method of a class that ``model`` imports from the project (``from model import GPT``,
        ``models.GPT`` after ``import models``), defined there or inherited from its bases."""
        found = self.class_of(model, class_name)
        return found[0].method_of_class(found[1], method, depth + 1, self) if found is not None else None

    def class_of(self, model: ModuleModel, class_name: str) -> Optional[Tuple[ModuleModel, str]]:
        """(module, name) of the class that ``class_name`` names in ``model`` through its imports
        of the project, a package's ``__init__`` re-exporting it included."""
        first, _, rest = class_name.partition(".")
        for _ in range(_REEXPORT_HOPS):
            qualified = model.imports.names.get(first)
            if qualified is None:
                return None
            qualified = f"{qualified}.{rest}" if rest else qualified
            if "." not in qualified or qualified.split(".", 1)[0] in _NEVER_PROJECT:
                return None
            module_name, _, class_name = qualified.rpartition(".")
            other = self.module(module_name, model)
            if other is None or other is model:
                return None
            if class_name in other.classes:
                return other, class_name
            model, first, rest = other, class_name, ""  # a package's ``__init__`` re-exporting it
        return None

    def module(self, name: str, importer: ModuleModel) -> Optional[ModuleModel]:
        path = self._find(name, importer)
        if path is None:
            return None
        model = _load(path)
        if model is not None:
            self.note_read(model)
        return model

    def note_read(self, model: ModuleModel) -> None:
        """This analysis depends on ``model`` and on the modules its objects came from."""
        self._noted.append(weakref.ref(model))
        for source in [model] + [source for source, _ in model.data_sources]:
            if source.path is not None and source.path != self.path and source.path not in self.read:
                self.read[source.path] = hashlib.sha256(source.source.encode("utf-8")).hexdigest()

    def settle(self) -> None:
        """At the end of the analysis: the modules that objects came from into the modules it read
        (their flows are computed as asked, after they were noted)."""
        done = 0
        while done < len(self._noted):
            model = self._noted[done]()
            done += 1
            for source, _ in model.data_sources if model is not None else ():
                if source.path is not None and source.path != self.path and source.path not in self.read:
                    self.note_read(source)

    def imports_training_text(self, source: str) -> bool:
        """Does the checked file call something of its project that may produce a training event?
        Read from the text, before parsing: a script whose loop calls ``engine.train_one_epoch``
        has no event of its own to pass the rules' pre-filter. A name imported from a project
        module counts when the file calls it (``train_one_epoch(``, ``engine.train_one_epoch(``)
        and its definition may train (``_definition_may_train``); a module imported whole, when
        the file calls one of its functions that may."""
        if self._trains_for[0] is not source:
            self._trains_for = (source, self._imports_training_text(source))
        return self._trains_for[1]

    def _imports_training_text(self, source: str) -> bool:
        calls = _CallsInText(source)
        for found in _IMPORT_LINE.finditer(source):
            module = found.group("module") or found.group("plain")
            if module.lstrip(".").split(".", 1)[0] in _NEVER_PROJECT:
                continue
            names = found.group("names") if found.group("names") is not None else found.group("inline") or ""
            imported = [_IMPORTED_NAME.match(part.strip()) for part in names.split(",") if part.strip()]
            if found.group("plain"):
                # ``import pkg.engine as engine`` / ``import engine``: calls of ``engine.f(``
                alias = found.group("alias") or module
                if self._calls_into(calls, self._find(module, None), alias):
                    return True
                continue
            path = self._find(module, None)
            if names.strip() == "*":  # ``from engine import *``: any of its names may be called
                if path is not None and _has_event_text(path):
                    return True
                continue
            for match in imported:
                if match is None:
                    continue
                name, alias = match.group(1), match.group(2) or match.group(1)
                # where the name is defined, for a name the file calls: a package ``__init__`` or
                # module re-exporting it is read for where it comes from (``from .impl import fit``)
                # (a class the file derives from is as good as called: its methods run on the
                # file's objects, ``class Classifier(LoopBase)`` then ``Classifier(...).fit()``)
                called = path is not None and alias in calls.names
                where = self._defined_in(path, name) if called else None
                if where is not None and _has_event_text(where[0]) and _definition_may_train(*where):
                    return True
                # ``from pkg import engine``: a module imported by name
                submodule = f"{module}.{name}" if not module.endswith(".") else module + name
                if self._calls_into(calls, self._find(submodule, None), alias):
                    return True
        return False

    def read_for(self, source: str, rules: AbstractSet[str]) -> bool:
        """Is the file read for a selected rule whose check also reads the project modules it
        imports (the ordering rules, whose objects may be built there, and the patterns of
        catalog.READS_PROJECT_MODULES)? Such a rule may fire in training code whose own text lacks
        its trigger (``--select TL802`` on a script calling the project's focal loss, ``--select
        TL301`` on a loop over loaders another module builds): when the file could hold a finding
        of any rule on by default and imports a module with the trigger. (Those rules' triggers
        together already cover such files: a default run reads no more files for it.)"""
        reading = rules & (READS_PROJECT_MODULES | CHECKED_RULES)
        if not reading:
            return False
        trains = any(may_fire(rule, source) for rule in load_catalog().values() if rule.static and rule.tier != "advice")
        return (trains or self.imports_training_text(source)) and self.imports_text_matching(source, trigger_expression(reading))

    def imports_text_matching(self, source: str, text: "re.Pattern[str]") -> bool:
        """Does the checked file import a project module (or a module of a package it imports
        names from) whose text matches ``text``? Read from the text, before parsing."""
        for found in _IMPORT_LINE.finditer(source):
            module = found.group("module") or found.group("plain")
            if module.lstrip(".").split(".", 1)[0] in _NEVER_PROJECT:
                continue
            path = self._find(module, None)
            if path is not None and text_matches(path, text):
                return True
            names = found.group("names") if found.group("names") is not None else found.group("inline") or ""
            for match in (_IMPORTED_NAME.match(part.strip()) for part in names.split(",") if part.strip()):
                if match is None:
                    continue
                # the module defining the name, through a package's re-exports, or a submodule
                where = self._defined_in(path, match.group(1)) if path is not None else None
                if where is not None and text_matches(where[0], text):
                    return True
                submodule = f"{module}.{match.group(1)}" if not module.endswith(".") else module + match.group(1)
                where_module = self._find(submodule, None)
                if where_module is not None and text_matches(where_module, text):
                    return True
        return False

    def _calls_into(self, calls: "_CallsInText", path: Optional[Path], alias: str) -> bool:
        """Does the source call a function of the module at ``path`` (``alias.f(...)``) that may
        train? A function the module imports from another one (``from .impl import fit``) is read
        where it is defined."""
        if path is None:
            return False
        for name in calls.methods.get(alias, ()):
            where = self._defined_in(path, name)
            if where is not None and _has_event_text(where[0]) and _definition_may_train(*where):
                return True
        return False

    def _defined_in(self, path: Path, name: str) -> Optional[Tuple[Path, str]]:
        """The module that defines ``name`` as the module at ``path`` sees it, and its name there,
        through re-exports (``from .impl import fit``)."""
        for _ in range(_REEXPORT_HOPS):
            if name in _definition_blocks(path) or not _may_reexport(path, name):
                return path, name
            other = _load(path)
            imported = _reexported(other, name) if other is not None else None
            found = self._find(imported[0], other) if imported is not None else None
            if found is None:
                return path, name
            path, name = found, imported[1]
        return None

    def _find(self, name: str, importer: Optional[ModuleModel]) -> Optional[Path]:
        level = len(name) - len(name.lstrip("."))
        parts = [p for p in name.lstrip(".").split(".") if p]
        if level:
            base = _directory_of((importer.path if importer is not None else None) or self.path)
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:
            bases = self.roots
        if parts and parts[0] in _NEVER_PROJECT:
            # a library the engine describes (or never reads) shipped in the repository's own src/
            # (Accelerate's examples import ``accelerate``) is still that library, not project code
            bases = [base for base in bases if base.name != "src"]
        if self.installed_as is not None and parts and parts[0] != self.installed_as:
            # another distribution installed beside the checked package is not its project
            bases = [base for base in bases if base.name not in _INSTALL_DIRECTORIES]
        if not level and parts and importer is not None and importer.path is not None:
            bases = bases + _named_ancestors(_directory_of(importer.path), parts[0]) + _search_path_of(importer)
        key = (tuple(bases), ".".join(parts))
        if key not in _FOUND:
            _FOUND[key] = _first_file(bases, parts)
        found = _FOUND[key]
        return found if found != self.path else None


def names_an_import(model: ModuleModel, name: str) -> bool:
    """Could ``name`` be a definition of another module of the project (one of ``model``'s
    imports, not a library's)? Answered from the imports alone."""
    return model.path is not None and _imported(model, name) is not None


def _imported(model: ModuleModel, name: str) -> Optional[Tuple[str, str]]:
    """(module, function) that ``name`` (``train_one_epoch``, ``misc.helper``) refers to through
    ``model``'s imports, unless it is nobody's project (torch, numpy, ...)."""
    first, _, rest = name.partition(".")
    qualified = model.imports.names.get(first)
    if qualified is None or qualified.split(".", 1)[0] in _NEVER_PROJECT:
        return None
    module_name, _, function_name = (f"{qualified}.{rest}" if rest else qualified).rpartition(".")
    return (module_name, function_name) if module_name else None


def _reexported(model: ModuleModel, name: str) -> Optional[Tuple[str, str]]:
    """(module, name) that ``model`` hands ``name`` on from: imported by name, or through its one
    ``from .impl import *``; None if it does neither."""
    if name in model.imports.names:
        return _imported(model, name)
    if len(model.star_imports) == 1:
        return (model.star_imports[0], name)
    return None


def imported_definition(model: ModuleModel, name: str, text: "re.Pattern[str]",
                        known: Dict[Path, ModuleModel], classes: bool = False) -> Optional[Tuple[ModuleModel, str]]:
    """(module, top-level name) of the project definition that ``name`` refers to in ``model``
    through its imports (``from data import build``; ``d.build`` after ``import pkg.data as d``;
    a package ``__init__`` re-exporting it, by name or with ``*``), when the text of that module
    matches ``text`` or, with ``classes``, defines that class (other modules are never parsed
    for this). A module whose own objects are
    being computed is not entered again (an import cycle). ``known``: the modules the asker has
    read already, reused (and kept alive by it) so that an object built there is one object
    even after the module was evicted from the kept models."""
    imported = _imported(model, name)
    if model.path is None or imported is None:
        return None  # most names asked are nobody's import: answered before any path is resolved
    project = project_of(model)
    importer = model
    for _ in range(_REEXPORT_HOPS):
        if imported is None:
            return None
        module_name, defined = imported
        path = project._find(module_name, importer)
        if path is None or path in _FOLLOWING or not (
                text_matches(path, text) or _may_reexport(path, defined) or (classes and _defines_class(path, defined))
                or _builds_elsewhere(path, defined)):
            return None
        other = known.get(path)
        if other is None:
            _FOLLOWING.append(path)
            try:
                other = _load(path)
            finally:
                _FOLLOWING.pop()
            if other is None:
                return None
            known[path] = other
        stamp = _stamp(path)
        if stamp is not None and all(source is not other for source, _ in model.data_sources):
            model.data_sources.append((other, stamp))
        if defined in other.functions or defined in other.classes or defined in other.flow().top_level():
            return other, defined
        imported = _reexported(other, defined)
        importer = other
    return None


_FOLLOWING: List[Path] = []  # modules being read to follow objects (an import cycle stops here)


def following() -> bool:
    """Is a module being read to follow objects (so an import cycle may answer None for now)?"""
    return bool(_FOLLOWING)

def project_of(model: ModuleModel) -> "Project":
    """The Project a module of the project resolves its own imports in: that of its folder (the
    same whichever checked file read it)."""
    directory = _directory_of(model.path)
    project = _PROJECTS.get(directory)
    if project is None:
        project = _PROJECTS[directory] = Project(model.path)
    return project


_PROJECTS: Dict[Path, "Project"] = {}  # a directory -> the Project its modules resolve imports in
_TEXT_OF: Dict[Tuple[Path, str], bool] = {}


def _defines_class(path: Path, name: str) -> bool:
    """Does the module's text define a class ``name``? Its instances carry what ``__init__`` stores."""
    return text_matches(path, re.compile(rf"^class[ \t]+{re.escape(name)}\b", re.MULTILINE))


def _may_reexport(path: Path, name: str) -> bool:
    """Could the module hand on ``name`` from another (``from .impl import *``, ``from .impl import
    name``)? Read from its text: such a package ``__init__`` is followed whatever else it holds.
    A ``from ... import`` line whose names start with ``*`` or have the word ``name`` (on that
    line) does."""
    known = _REEXPORTS.get(path)
    if known is None:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        rests = [found.group(1) for found in _FROM_IMPORT_LINE.finditer(text)]
        known = _REEXPORTS[path] = (any(rest.startswith("*") for rest in rests),
                                    frozenset(word for rest in rests for word in re.findall(r"\w+", rest)))
    return known[0] or name in known[1]


# What follows ``import`` on a ``from ... import`` line (the names, up to the line's end).
_FROM_IMPORT_LINE = re.compile(r"^[ \t]*from[ \t]+\S+[ \t]+import[ \t]+([^\n]*)", re.MULTILINE)
_REEXPORTS: Dict[Path, Tuple[bool, FrozenSet[str]]] = {}  # path -> (a star import, the words imported)


class _CallsInText:
    """What a module's text calls, read in one pass each when first asked, whatever the number of
    its imports (a search per imported name was 3 % of checking a large package)."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._names: Optional[FrozenSet[str]] = None
        self._methods: Optional[Dict[str, Set[str]]] = None

    @property
    def names(self) -> FrozenSet[str]:
        """Names called (``f(``, not ``x.f(``) or a class is derived from (``class C(LoopBase)``)."""
        if self._names is None:
            derived = (_NAME_IN_TEXT.findall(bases) for bases in _CLASS_BASES.findall(self._source))
            self._names = frozenset(_NAME_CALLED.findall(self._source)).union(*derived)
        return self._names

    @property
    def methods(self) -> Dict[str, Set[str]]:
        """``engine.train(`` / ``pkg.engine.train(``: what is called, by what it is called on."""
        if self._methods is None:
            self._methods = {}
            for chain in _CHAIN_CALLED.findall(self._source):
                prefix, dot, name = chain.rpartition(".")
                if dot:
                    self._methods.setdefault(prefix, set()).add(name)
        return self._methods


_NAME_CALLED = re.compile(r"(?<![\w.])(\w+)[ \t]*\(")
_CHAIN_CALLED = re.compile(r"(?<![\w.])(\w+(?:\.\w+)*)[ \t]*\(")
_CLASS_BASES = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)", re.MULTILINE)
_NAME_IN_TEXT = re.compile(r"(?<![\w.])\w+")


def text_matches(path: Path, text: "re.Pattern[str]") -> bool:
    """Does the text of the file at ``path`` match ``text``? Read once per path and pattern."""
    key = (path, text.pattern)
    known = _TEXT_OF.get(key)
    if known is None:
        try:
            known = bool(text.search(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            known = False
        _TEXT_OF[key] = known
    return known


# How many re-exports (``from .module import X`` in a package's __init__) a class is followed through.
_REEXPORT_HOPS = 4  # a package __init__ that re-exports a module that re-exports a star import, and one more
_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<module>\.*[\w.]*)[ \t]+import[ \t]+(?:\((?P<names>[^)]*)\)|(?P<inline>[\w, \t*]*))"
    r"|import[ \t]+(?P<plain>[\w.]+)(?:[ \t]+as[ \t]+(?P<alias>\w+))?)",
    re.MULTILINE,
)
_IMPORTED_NAME = re.compile(r"^(\w+)(?:\s+as\s+(\w+))?")
# Text a module needs for one of its functions to produce a training event: the event calls, a
# call of anything named like a backward (not ``def backward(ctx, ...)`` of autograd functions),
# an optimizer handled. Modules without it are never parsed to be followed.
_EVENT_LITERALS = (".backward(", ".step(", "zero_grad", "set_epoch", "clip_grad", ".eval()", ".train(", "no_sync",
                   "unscale_", ".scale(",
                   # a builder of a loader over a DistributedSampler: the caller's epochs over it
                   # need set_epoch
                   "DistributedSampler")
# The rest as (a text each match contains, the expression): searched only where that text is. One
# alternation of them all was tried at every character of every module read.
_EVENT_EXPRESSIONS = (
    (".grad", re.compile(r"\.grad\b")),
    ("backward", re.compile(r"(?<!def )\b\w*backward\w*\(")),
    ("optimizer", re.compile(r"\boptimizer\b")),
)


def _event_text(text: str) -> bool:
    return any(literal in text for literal in _EVENT_LITERALS) or any(
        needed in text and expression.search(text) is not None for needed, expression in _EVENT_EXPRESSIONS)


_TEXT_CHECKED: Dict[Path, bool] = {}


def _has_event_text(path: Path) -> bool:
    known = _TEXT_CHECKED.get(path)
    if known is None:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            known = _event_text(text) or library.current().mentioned(text)
        except OSError:
            known = False
        _TEXT_CHECKED[path] = known
    return known


def module_has_event_text(model: ModuleModel) -> bool:
    """Could a function of ``model`` produce a training event, by its text (see _EVENT_LITERALS)?"""
    return _has_event_text(model.path) if model.path is not None else _event_text(model.source)


def _definition_may_train(path: Path, name: str) -> bool:
    """Could the top-level function or class ``name`` of the module at ``path`` produce a training
    event? Read from the text of its definition and of the module's other definitions it calls,
    and of everything it calls that the module imports (which may train elsewhere): a module of
    a library has event text somewhere, rarely in the helper a file imports from it. Without such
    text the module is never parsed to follow that call."""
    blocks = _definition_blocks(path)
    if name not in blocks:
        return True  # assigned, re-exported, defined in a branch: not read here, so it may
    pending, seen = [name], {name}
    while pending:
        has_event, called = blocks[pending.pop()]
        if has_event or called & blocks.imported:
            return True
        for callee in called & blocks.keys() - seen:
            seen.add(callee)
            pending.append(callee)
    return False


def _builds_elsewhere(path: Path, name: str) -> bool:
    """Does the top-level function ``name`` of the module at ``path`` call what that module
    imports from modules that may be the project's (``M(opt)`` after ``from models.plain import
    Plain as M``)? Its result can then be an object made there: a builder that picks a class."""
    blocks = _definition_blocks(path)
    return name in blocks and bool(blocks[name][1] & blocks.imported)


class _Blocks(dict):
    """Top-level name -> (its text has event text, the names it calls), and the names imported
    from modules that could be the project's."""
    imported: frozenset = frozenset()


_BLOCKS: "OrderedDict[Path, _Blocks]" = OrderedDict()
_TOP_LEVEL = re.compile(r"^(?:async[ \t]+def|def|class)[ \t]+(\w+)|^@", re.MULTILINE)
_CALLED = re.compile(r"(?<![\w.])(\w+)(?:\.\w+)*[ \t]*\(")  # f(...), misc.f(...): the first name


def _definition_blocks(path: Path) -> _Blocks:
    blocks = _BLOCKS.get(path)
    if blocks is not None:
        _BLOCKS.move_to_end(path)
        return blocks
    blocks = _Blocks()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    described = library.current()
    starts = list(_TOP_LEVEL.finditer(text))
    for found, following in zip(starts, starts[1:] + [None]):
        if found.group(1) is None:
            continue  # a decorator line: it belongs to the definition below
        body = text[found.start():following.start() if following is not None else len(text)]
        has_event = _event_text(body) or described.mentioned(body)
        blocks.setdefault(found.group(1), (has_event, frozenset(_CALLED.findall(body))))
    imported = set()
    for line in _IMPORT_LINE.finditer(text):
        module = line.group("module") or line.group("plain") or ""
        if module.lstrip(".").split(".", 1)[0] in _NEVER_PROJECT and not module.startswith("."):
            continue
        end = text.find("\n", line.end())
        statement = text[line.start():end if end >= 0 else len(text)]
        if "(" in statement and ")" not in statement:  # from .x import (\n a,\n b)
            close = text.find(")", line.end())
            statement = text[line.start():close if close >= 0 else len(text)]
        imported.update(re.findall(r"\w+", statement))
    blocks.imported = frozenset(imported - {"from", "as", "import"})
    _BLOCKS[path] = blocks
    while len(_BLOCKS) > MAX_PARSED * 4:
        _BLOCKS.popitem(last=False)
    return blocks


def _named_ancestors(directory: Path, package: str) -> List[Path]:
    """Where ``import package.x`` from a module in ``directory`` finds ``package`` when the module
    sits inside a directory of that name (``from models.gan import GAN`` in models/select.py,
    a folder without ``__init__.py``): the program runs from the folder above, so that is a root."""
    chain = [directory, *directory.parents][:_PACKAGE_DEPTH]
    return [d.parent for d in chain if d.name == package]


_PACKAGE_DEPTH = 4  # directories above an importer looked at for the package it names


def _search_path_of(importer: ModuleModel) -> List[Path]:
    """The directories the program puts on ``sys.path`` that the importer's imports see: those
    the importer adds itself, and those a module of its folder, or of the folders of the packages
    it sits in, adds (the ``import _init_paths`` idiom: sys.path is the whole program's, so a
    helper moved beside the script, or into a package under it, resolves its imports there too).
    Kept with the importer's model: every import it resolves asks, and resolving its path and
    reading its stamp each time was 5 % of checking a large package."""
    return importer.memo("search_path", lambda: _search_path_of_file(importer))


def _search_path_of_file(importer: ModuleModel) -> List[Path]:
    from .search_path import declared_roots

    path = Path(importer.path).resolve()
    stamp = _stamp(path)
    cached = _SEARCH_PATHS.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    found = list(declared_roots(importer))
    directory = path.parent
    for _ in range(_PACKAGE_DEPTH):
        for module_path in _search_path_modules(directory):
            if module_path == path:
                continue
            model = _load(module_path)
            if model is not None:
                found += [d for d in declared_roots(model) if d not in found]
        # up out of the packages the importer sits in, never past them: a folder above a script
        # is another program's (or /tmp)
        if not (directory / "__init__.py").is_file() or any((directory / marker).exists() for marker in _ROOT_MARKERS) \
                or directory.parent == directory:
            break
        directory = directory.parent
    _SEARCH_PATHS[path] = (stamp, found)
    return found


def _search_path_modules(directory: Path) -> List[Path]:
    """The modules of ``directory`` whose text touches ``sys.path`` (read once per folder)."""
    known = _SEARCH_PATH_MODULES.get(directory)
    if known is None:
        try:
            candidates = sorted(directory.glob("*.py"))
        except OSError:
            candidates = []
        known = _SEARCH_PATH_MODULES[directory] = [p.resolve() for p in candidates
                                                   if text_matches(p, _SEARCH_PATH_TEXT)]
    return known


_SEARCH_PATHS: Dict[Path, Tuple[Optional[Tuple[int, int]], List[Path]]] = {}  # importer -> (its stamp, the folders)
_SEARCH_PATH_MODULES: Dict[Path, List[Path]] = {}
_SEARCH_PATH_TEXT = re.compile(r"sys\.path|addsitedir")


def _first_file(bases: List[Path], parts: List[str]) -> Optional[Path]:
    for base in bases:
        candidate = base.joinpath(*parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if parts and path.is_file():
                return path.resolve()
    return None


_INSTALL_DIRECTORIES = frozenset({"site-packages", "dist-packages"})
# Top-level packages that are never the user's own code (a local file shadowing them would break
# the program anyway): no file system look-up for ``torch.nn.functional.relu(...)``.
_NEVER_PROJECT = frozenset({
    "torch", "numpy", "np", "os", "sys", "math", "time", "json", "logging", "random", "re", "typing",
    "collections", "functools", "itertools", "pathlib", "argparse", "dataclasses", "copy", "pickle",
    "transformers", "accelerate", "deepspeed", "lightning", "pytorch_lightning", "timm", "diffusers",
    "datasets", "wandb", "tqdm", "torchvision", "torchaudio", "einops", "scipy", "sklearn", "pandas",
})


def _roots(path: Path) -> List[Path]:
    """The file's directory, the directory holding its topmost package, and the project root."""
    roots = [path.parent]
    package = path.parent
    while (package / "__init__.py").is_file() and package.parent != package:
        package = package.parent
    if package not in roots:
        roots.append(package)
    # Scripts in a subdirectory import the repository's packages (run from its root, or with the
    # root put on sys.path): the nearest directory that marks a project root is searched last.
    for directory in path.parents:
        if any((directory / marker).exists() for marker in _ROOT_MARKERS):
            if directory not in roots:
                roots.append(directory)
            # the src layout: the project's packages are installed from ``src/``, not the root
            if (directory / "src").is_dir() and directory / "src" not in roots:
                roots.append(directory / "src")
            break
    return roots


_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
