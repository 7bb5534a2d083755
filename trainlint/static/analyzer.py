"""Static analysis of one module's source: parse, model, explore, and report positioned findings."""
from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Callable, Dict, List, Optional, Tuple, TypeVar

import libcst as cst

from .. import checker
from ..catalog import load_catalog, may_fire
from ..checker import Violation
from ..events import Event
from . import library
from .extract import Extractor, Frame
from .flow import Interpreter, Witness
from .budget import Budget, OutOfTime
from .cpython import cpython_tree
from .module import ModuleModel
from .patterns import Context, Match, registry, through_project_registry
from .positions import Positions
from .roles import SCALER
from .project import Project, parsed_before, pinning, remember_checked, start_check
from .sites import SiteIndex

# Rules decided by the shared ordering checker over explored paths, and rules that are patterns.
FLOW_RULES = checker.CHECKED_RULES
PATTERN_RULES = registry()
THROUGH_PROJECT_RULES = through_project_registry()

Span = Tuple[int, int, int, int]


class AnalysisError(Exception):
    """The file could not be analyzed (e.g. a syntax error); the message says why, for humans."""


def could_fire(source: str, rules: AbstractSet[str]) -> bool:
    """Cheap pre-filter before parsing: a rule cannot fire without one of its trigger substrings."""
    catalog = load_catalog()
    for rule_id in rules:
        rule = catalog.get(rule_id)
        if rule is None:
            continue
        if may_fire(rule, source):
            return True
    # a described library call (trainlint/libraries, [tool.trainlint.library]) may be any event
    return bool(rules & FLOW_RULES) and library.current().mentioned(source)


# Indentation up to its last form feed: CPython counts the columns after it only.
_FORM_FEED_INDENT = re.compile(r"^[ \t\x0c]*\x0c", re.MULTILINE)


def parse(source: str) -> cst.Module:
    """libcst's tree, behind CPython's own parser as a guard: libcst's native parser can crash or
    hang on pathologically nested input that CPython rejects at once, and CPython's messages are
    the ones users know. A file only libcst accepts (newer grammar than this interpreter) is fine."""
    try:
        cpython_tree(source)
        cpython_error = None
    except (RecursionError, MemoryError):
        raise AnalysisError("nesting too deep to analyze") from None
    except SyntaxError as exc:
        if "too many" in str(exc.msg):  # too many nested parentheses / levels of indentation
            raise AnalysisError(f"nesting too deep to analyze ({exc.msg}, line {exc.lineno})") from None
        cpython_error = exc
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        if cpython_error is None and "\x0c" in source:
            try:  # libcst mis-reads a form feed in indentation; CPython restarts the count there
                return cst.parse_module(_FORM_FEED_INDENT.sub("", source))
            except cst.ParserSyntaxError:
                pass
        if cpython_error is not None:
            column = f", column {cpython_error.offset}" if cpython_error.offset else ""
            raise AnalysisError(f"syntax error at line {cpython_error.lineno}{column}: {cpython_error.msg}") from None
        raise AnalysisError(f"syntax error at line {exc.raw_line}, column {exc.raw_column + 1}: {exc.message}") from None
    except RecursionError:
        raise AnalysisError("nesting too deep to analyze") from None


def check_syntax(source: str) -> None:
    """Files the pre-filter skips still get their syntax errors reported, at CPython's parse cost
    (several times cheaper than libcst's); libcst confirms before anything is reported."""
    try:
        cpython_tree(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        parse(source)


def find_violations(model: ModuleModel, sites: SiteIndex, project: Optional[Project] = None,
                    witnesses: Optional[Dict[Violation, Witness]] = None, budget: Optional[Budget] = None) -> List[Violation]:
    """Violations of the flow rules; ``witnesses`` receives the path that showed each one, and
    ``budget`` (see budget.py) what the exploration had to leave out."""
    interpreter = Interpreter(model, Extractor(model, project=project), sites, project, budget=budget)
    try:
        try:
            interpreter.run(model.module.body, Frame(None), history_known=True)
            interpreter.run_framework_loops()
            called = model.called_names()
            uncalled = [fn for fn in model.all_functions if fn.parent is None and not called.get(fn.name)]
            for fn in uncalled + model.all_functions:
                if id(fn.node) not in interpreter.reached and interpreter.eventful(fn):
                    interpreter.run(fn.body, Frame(fn, cls=fn.cls), history_known=True)
        except OutOfTime:
            pass  # what was found keeps its witness; confirmed() drops what needs every path
        if witnesses is not None:
            witnesses.update(interpreter.witnesses)
        return interpreter.confirmed()
    finally:
        interpreter.close()


def find_matches(model: ModuleModel, sites: SiteIndex, rules: AbstractSet[str], source: str,
                 calls_into_project: bool = False) -> List[Match]:
    """``calls_into_project``: the file belongs to a project whose modules it may call, so the
    rules' parts that look into them run even without the rule's own trigger text here (each
    reads the imported modules' text first)."""
    catalog = load_catalog()
    wanted = [rule for rule in sorted(rules & PATTERN_RULES.keys()) if could_fire(source, {rule}) or rule not in catalog]
    through = [rule for rule in sorted(rules & THROUGH_PROJECT_RULES.keys()) if rule not in wanted] if calls_into_project else []
    if not wanted and not through:
        return []
    context = Context(model, sites)
    return [match for rule in wanted for match in PATTERN_RULES[rule](context)] + [
        match for rule in through for match in THROUGH_PROJECT_RULES[rule](context)]


def _spans(positions, nodes: List[cst.CSTNode]) -> Dict[int, Span]:
    """Spans of the nodes findings name (a compound statement: its header only)."""
    spans: Dict[int, Span] = {}
    for node in nodes:
        if node is None or id(node) in spans or node not in positions:
            continue
        start, end = positions[node].start, positions[node].end
        if isinstance(node, (cst.For, cst.While, cst.If, cst.With)):
            header = node.iter if isinstance(node, cst.For) else node.items[-1] if isinstance(node, cst.With) else node.test
            end = positions[header].end  # the statement's header, not its whole body
        spans[id(node)] = (start.line, start.column + 1, end.line, end.column + 1)
    return spans


def plain_position(line: int) -> str:
    return f"line {line}"


@dataclass(frozen=True)
class Result:
    """One finding, with what an autofix needs to know about the statements it names."""

    rule: str
    span: Span
    message: str
    related: Tuple[Tuple[str, Span, Event], ...] = ()  # (role, span, event) of the other statements
    event: Optional[Event] = None  # the reported event (flow rules)
    path: Optional[Path] = None  # the file of the reported statement, if another module of the project
    trace: Tuple[str, ...] = ()  # the witness path, for humans (``--trace``)
    advice: bool = False  # a recipe of the rule, not a bug (patterns.Match.advice)
    # reported at a call that runs the statement in another module (see _call_into_other_module):
    # the statement to change is not in this file, so no autofix applies here
    through: bool = False


def analyze(
    source: str, rules: AbstractSet[str], position: Callable[[int], str] = plain_position
) -> List[Tuple[str, Span, str]]:
    """(rule id, span, message) for each finding of the selected rules in this source, sorted by
    position.

    ``position`` says how messages refer to other lines (notebooks name the cell)."""
    return [(r.rule, r.span, r.message) for r in analyze_results(source, rules, position) if r.path is None]


def analyze_results(
    source: str, rules: AbstractSet[str], position: Callable[[int], str] = plain_position,
    project: Optional[Project] = None, incomplete: Optional[List[str]] = None,
) -> List[Result]:
    """Findings of the selected rules; with a ``project``, calls into the file's other modules are
    followed and a finding whose statement is in one of them carries that module's ``path``.
    ``incomplete`` receives a note for each part of the analysis its budget left out (budget.py).

    A tree deeper than the interpreter's recursion limit allows (an ``elif`` chain of thousands:
    valid Python, and libcst's own position metadata recurses over it) is analyzed again on a
    thread with a deep stack; only what even that cannot hold is "nesting too deep"."""
    with pinning():
        try:
            return _analyze_results(source, rules, position, project, incomplete)
        except Exception as exc:  # noqa: BLE001 - libcst turns a RecursionError into other errors
            if not _out_of_stack(exc):
                raise
        return _on_a_deep_stack(lambda: _analyze_results(source, rules, position, project, incomplete))


def _out_of_stack(exc: BaseException) -> bool:
    """The error is, or arose while handling, a RecursionError (libcst's position metadata
    re-raises one as a KeyError)."""
    seen = 0
    current: Optional[BaseException] = exc
    while current is not None and seen < 1000:
        if isinstance(current, (RecursionError, _TooDeep)):
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


class _TooDeep(AnalysisError):
    pass


T = TypeVar("T")


DEEP_STACK_BYTES = 512 * 1024 * 1024  # virtual: only the pages a deep walk touches are used
DEEP_RECURSION_LIMIT = 200_000


def _positions(model: ModuleModel) -> Positions:
    """Positions of the module's nodes, each statement that holds one rendered on first use (only
    files with findings ask, see positions.py). libcst's rendering recurses through nested
    statements: a deep tree gets a deep stack."""
    return Positions(model, _with_deep_stack_if_needed)


def _with_deep_stack_if_needed(resolve: Callable[[], T]) -> T:
    try:
        return resolve()
    except Exception as exc:  # noqa: BLE001 - libcst turns a RecursionError into other errors
        if not _out_of_stack(exc):
            raise
    return _on_a_deep_stack(resolve)


def _on_a_deep_stack(analysis: Callable[[], T]) -> T:
    """``analysis()`` on a thread with a deep stack and a high recursion limit."""
    outcome: Dict[str, object] = {}

    def run() -> None:
        try:
            outcome["results"] = analysis()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = AnalysisError("nesting too deep to analyze") if _out_of_stack(exc) else exc

    previous_stack, previous_limit = threading.stack_size(), sys.getrecursionlimit()
    threading.stack_size(DEEP_STACK_BYTES)
    sys.setrecursionlimit(max(previous_limit, DEEP_RECURSION_LIMIT))
    try:
        worker = threading.Thread(target=run, name="trainlint-deep-analysis")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(previous_stack)
        sys.setrecursionlimit(previous_limit)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["results"]  # type: ignore[return-value]


def _analyze_results(
    source: str, rules: AbstractSet[str], position: Callable[[int], str],
    project: Optional[Project], incomplete: Optional[List[str]],
) -> List[Result]:
    known = rules & (FLOW_RULES | PATTERN_RULES.keys())
    follows_project = project is not None and bool(known & FLOW_RULES) and project.imports_training_text(source)
    if known and not (could_fire(source, known) or follows_project) and project is not None:
        # a rule's part that reads other modules (a loss defined in the project) has its trigger
        # text there: ``--select TL802`` must find what the default run finds
        follows_project = project.read_for(source, known)
    if not known or not (could_fire(source, known) or follows_project):
        check_syntax(source)
        return []
    start_check()
    model = parsed_before(project.path, source) if project is not None else None
    module = model.module if model is not None else parse(source)
    try:
        if model is None:
            model = ModuleModel(module, source, path=project.path if project is not None else None)
            if project is not None:
                remember_checked(model)
        model.project = project
        if project is not None:
            project.note_read(model)
        sites = model.sites()
        violations = []
        witnesses: Dict[Violation, Witness] = {}
        budget = Budget()
        if known & FLOW_RULES and (follows_project or could_fire(source, known & FLOW_RULES)):
            violations = [v for v in find_violations(model, sites, project, witnesses, budget) if v.rule in known]
        matches = find_matches(model, sites, known, source, project is not None)
        if project is not None:
            project.settle()
    except RecursionError:
        raise _TooDeep("nesting too deep to analyze") from None
    if budget.left_out and incomplete is not None:
        incomplete.extend(_left_out(budget, model, position))
    if not violations and not matches:
        return []
    events = [ev for v in violations for ev in (v.at,) + tuple(e for _, e in v.related)]
    called = {id(fn): fn for w in witnesses.values() for fn in w.calls}.values()
    entries = {v: call for v in violations for call in [_call_into_other_module(v, witnesses.get(v), model)] if call is not None}
    # A pass of another module's function that this module's loop repeats: reported at that loop.
    epoch_loops = {v: loop for v in violations if v not in entries
                   for loop in [_epoch_loop_here(v, witnesses.get(v), model, sites)] if loop is not None}
    # The functions first: each is rendered once for its position and places the statements in it.
    nodes = [fn.node for fn in called if fn.owner in (None, model)]
    nodes += [ev.site for ev in events if ev.origin is None] + [m.node for m in matches if m.origin is None] + list(entries.values())
    nodes += [node for loop in epoch_loops.values() for node in loop]
    positions = _positions(model)
    spans = _spans(positions, nodes)
    origins: Dict[int, ModuleModel] = {}
    others = {id(ev.origin): ev.origin for ev in events if ev.origin is not None}
    others.update((id(fn.owner), fn.owner) for fn in called if fn.owner not in (None, model))
    others.update((id(m.origin), m.origin) for m in matches if m.origin is not None)
    others.update((id(owner), owner) for m in matches for _, owner in m.mentions if owner is not model)
    for other in others.values():
        other_positions = _positions(other)
        other_spans = _spans(other_positions, [ev.site for ev in events if ev.origin is other]
                             + [fn.node for fn in called if fn.owner is other] + [m.node for m in matches if m.origin is other]
                             + [node for m in matches for node, owner in m.mentions if owner is other])
        spans.update(other_spans)
        origins.update((key, other) for key in other_spans)

    def lines_seen_from(home: Optional[ModuleModel]) -> Callable[[cst.CSTNode], Optional[str]]:
        """Where a statement is, as a message reported in ``home`` (None: the checked file) says
        it: a plain line in the same file, else the file's name too. A finding in engine.py says
        the same whether train.py or engine.py was checked, so the two are one finding."""
        def line_of_site(site: cst.CSTNode) -> Optional[str]:
            span = spans.get(id(site))
            if span is None:
                return None
            where = origins.get(id(site))
            if where is home or (where is not None and home is not None and where.path == home.path):
                return position(span[0]) if where is None else f"line {span[0]}"
            return f"{_shown(where.path if where is not None else project.path, project)} line {span[0]}"
        return line_of_site

    def trace(violation: Violation) -> Tuple[str, ...]:
        witness = witnesses.get(violation)
        if witness is None:
            return ()
        entry = entries.get(violation)
        line_of_site = lines_seen_from(None if entry is not None else origins.get(id(violation.at.site)))
        lines = []
        if witness.calls:
            lines.append("through " + " -> ".join(
                f"{fn.name}() ({line_of_site(fn.node) or 'defined elsewhere'})" for fn in witness.calls))
        for condition, value in sorted(witness.assume):
            lines.append(f"on this path `{condition}` is {'true' if value else 'false'}")
        for role, event in sorted(violation.related, key=lambda r: spans.get(id(r[1].site), (0,))):
            lines.append(f"{role}: {event.label} ({line_of_site(event.site) or 'unknown line'})")
        if entry is not None:
            lines.append(f"runs: {violation.at.label} ({line_of_site(violation.at.site) or 'unknown line'})")
            lines.append(f"reported: {_code(entry)} ({line_of_site(entry) or 'unknown line'})")
        else:
            lines.append(f"reported: {violation.at.label} ({line_of_site(violation.at.site) or 'unknown line'})")
        return tuple(lines)

    def message_of(violation: Violation) -> str:
        if violation in epoch_loops:
            loop, call = epoch_loops[violation]
            line_of_site = lines_seen_from(None)
            message = checker.render(violation, lambda event: line_of_site(event.site))
            label, where = violation.at.label, line_of_site(violation.at.site) or "in another module"
            said = message[len(label):] if message.startswith(label) else f": {message}"
            return f"this loop calls {_code(call)} ({line_of_site(call) or 'unknown line'}) on each pass, and its {label} ({where}){said}"
        entry = entries.get(violation)
        line_of_site = lines_seen_from(None if entry is not None else origins.get(id(violation.at.site)))
        message = checker.render(violation, lambda event: line_of_site(event.site))
        if entry is None:
            return message
        return (f"{_code(entry)} runs {violation.at.label} ({line_of_site(violation.at.site) or 'in another module'}) "
                f"here: {message}")

    def lines_for_match(match) -> Callable[[cst.CSTNode], Optional[str]]:
        """A pattern's statements: this file's by line, the other files' it names by file and line."""
        mentioned = {id(node) for node, owner in match.mentions if owner is not model}
        line_of_site = lines_seen_from(match.origin)

        def line_of_node(node: cst.CSTNode) -> Optional[str]:
            if id(node) in mentioned:
                return line_of_site(node)
            return position(positions[node].start.line) if node in positions else None
        return line_of_node

    candidates = [
        (v.rule, epoch_loops[v][0] if v in epoch_loops else entries.get(v, v.at.site), lambda v=v: message_of(v),
         v.related, v.at, lambda v=v: trace(v), False)
        for v in violations
    ] + [(m.rule, m.node, lambda m=m: m.render(lines_for_match(m)), (), None, tuple, m.advice) for m in matches]
    entered = {id(call) for call in entries.values()} | {id(loop) for loop, _ in epoch_loops.values()}
    results = []
    seen = set()
    for rule, node, render, related, event, traced, advice in candidates:
        span = spans.get(id(node))
        path = origins[id(node)].path if id(node) in origins else None
        if span is None or (rule, span, path) in seen:
            continue  # one statement reached through several callers is one finding
        seen.add((rule, span, path))
        # Statements of other files are named in the message; only this file's can be fixed here.
        others = tuple((role, spans[id(ev.site)], ev) for role, ev in related if id(ev.site) in spans and ev.origin is None)
        results.append(Result(rule, span, render(), others, event, path, traced(), advice, through=id(node) in entered))
    results.sort(key=lambda r: (str(r.path or ""), r.span, r.rule))
    return results


def _call_into_other_module(violation: Violation, witness: Optional[Witness], model: ModuleModel) -> Optional[cst.Call]:
    """Where a violation between statements of two files is reported: the call in this module
    that runs the other file's statement (``clip_gradients(model)`` after this file's
    ``optimizer.step()``). The order is decided here, by that call; the helper's statement is
    right for a caller that orders it well. A violation whose statements are all in one other
    module is that module's (the same finding as its own check gives): None."""
    if witness is None or violation.at.origin is None or all(ev.origin is not None for _, ev in violation.related):
        return None
    entry = caller = None
    for index, (fn, call) in enumerate(witness.reported_in):
        caller_here = index == 0 or witness.reported_in[index - 1][0].owner in (None, model)
        if call is not None and caller_here and fn.owner not in (None, model):
            entry, caller = call, witness.reported_in[index - 1][0] if index else None
    needed = _FIXED_WITH.get(violation.rule)
    if entry is not None and needed is not None and _hands(model, entry, caller, needed):
        return None  # the helper is given what the fix needs: it is fixed there, where it is reported
    return entry


def _epoch_loop_here(violation: Violation, witness: Optional[Witness], model: ModuleModel, sites: SiteIndex
                     ) -> Optional[Tuple[cst.CSTNode, cst.Call]]:
    """TL301 on a pass in another module's function (``fit_one_epoch(model, loader, epoch)``) that
    a loop of this module calls: that loop is the epoch loop, where ``set_epoch`` goes (the sampler
    is this module's, and so is the epoch count). (loop, the call in it); None when the loop that
    repeats the pass is the other module's own."""
    if violation.rule != "TL301" or witness is None or violation.at.origin is None:
        return None
    for index, (fn, call) in enumerate(witness.reported_in):
        if call is None or fn.owner in (None, model):
            continue
        caller = witness.reported_in[index - 1][0] if index else None
        if caller is not None and caller.owner not in (None, model):
            return None  # entered from another module: its loop, not one of ours
        site = sites.of_call(call)  # the loops around a call are the call-site index's
        return (site.loops[-1], call) if site is not None and site.loops else None
    return None


# A violation whose fix needs an object (TL103: the GradScaler, to unscale_ before the clip) is
# fixed in the helper when the call hands the helper that object (``updater.step(grad_scaler=
# scaler)`` clipping inside), else by the caller before the call (``clip_gradients(model)``).
_FIXED_WITH = {"TL103": SCALER}


def _hands(model: ModuleModel, call: cst.Call, scope, kind: str) -> bool:
    """Does ``call`` give its callee an object of this kind: as an argument, or held by the object
    whose method it calls (``self.updater`` built with the scaler)?"""
    given = [a.value for a in call.args] + ([call.func.value] if isinstance(call.func, cst.Attribute) else [])
    for expr in given:
        for obj in model.objects.eval(expr, scope):
            if (obj.role is not None and obj.role.kind == kind) or any(
                    held.role is not None and held.role.kind == kind for field in obj.fields.values() for held in field):
                return True
    return False


def _code(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 and "\n" not in text else text.split("(", 1)[0] + "(...)"


def _left_out(budget: Budget, model: ModuleModel, position: Callable[[int], str]) -> List[str]:
    positions = _positions(model)

    def line_of(node: cst.CSTNode) -> Optional[str]:
        # a statement of another module (a followed call) has no position in this one
        return position(positions[node].start.line) if node in positions else None

    return budget.notes(line_of)


def _shown(path: Optional[Path], project: Optional[Project]) -> str:
    """How a message names another file: relative to the checked file's directory when below it."""
    if path is None:
        return "another module"
    if project is not None:
        try:
            return path.relative_to(project.path.parent).as_posix()
        except ValueError:
            pass
    return path.name
