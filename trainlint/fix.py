"""Autofix for the mechanical rules: small line edits, one at a time, each verified before it is kept.

Every fix moves or inserts one whole single-line statement inside its block (or rewrites one
expression on the reported line), so comments and formatting elsewhere are untouched. Lines are
counted as the parser counts them: a line ends only at ``\\n``, ``\\r\\n`` or ``\\r`` (never at a form
feed, a vertical tab or U+2028, where ``str.splitlines`` would break), so the reported positions
are the lines edited.

An edit is kept only if the result still parses, has as many statements as it should, keeps the
edited statement in its block, and, analyzed again, no longer has the finding at that statement
and has no finding that was not there before (except the one rule a fix may hand over to: a clip
moved before an AMP step must then be unscaled, TL103). A no-op edit is no fix. A move never carries
a statement across a ``break``/``continue``/``return``/``raise``/``yield``, an exit, a checkpoint
save, or a statement that uses what the moved statement acts on. Anything else is left for a human.
Each kept fix removes a finding and adds none that could start the cycle again, so fixing converges
in one pass and fixing twice is fixing once; if the loop ever hits its limit, the file is left as
it was (all or nothing).
"""
from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import AbstractSet, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

from .catalog import load_catalog
from .events import ANY_ENTRY, as_written
from .static.analyzer import AnalysisError, Result, analyze_results
from .suppression import parse_suppressions

Lines = List[str]
MAX_FIXES = 50  # the floor of the loop's limit; see fix_report
# The rules whose new findings a fix of this rule may leave behind (to be fixed next, in this pass).
HANDOFF: Dict[str, FrozenSet[str]] = {"TL101": frozenset({"TL103"})}

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_LEADING = re.compile(r"[ \t\f]*")
_COMPOUND = tuple(
    getattr(ast, name) for name in (
        "For", "AsyncFor", "While", "If", "With", "AsyncWith", "Try", "TryStar", "Match",
        "FunctionDef", "AsyncFunctionDef", "ClassDef",
    ) if hasattr(ast, name)
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SAVE = re.compile(r"save|checkpoint|ckpt", re.IGNORECASE)
_EXITS = frozenset({"exit", "quit", "_exit", "abort"})
_LR_READS = frozenset({"get_last_lr", "get_lr", "_last_lr", "param_groups", "last_epoch", "state_dict"})


def split_lines(text: str) -> Lines:
    """Physical lines with their ends, broken where the parser breaks them (``\\n``, ``\\r\\n``, ``\\r``)."""
    return _LINE.findall(text)


def _leading(line: str) -> str:
    """The indentation to copy onto a new line next to this one (a form feed in it resets the
    column, as in CPython, so what stands before one is not copied)."""
    return _LEADING.match(line).group().rpartition("\f")[2]


def _line_end(line: str, default: str = "\n") -> str:
    for end in ("\r\n", "\r", "\n"):
        if line.endswith(end):
            return end
    return default


def _single_statement(lines: Lines, line: int) -> bool:
    """The 1-based line, read on its own, is exactly one simple statement."""
    if not 1 <= line <= len(lines):
        return False
    try:
        tree = ast.parse(lines[line - 1].strip(" \t\f\r\n"))
    except (SyntaxError, ValueError):
        return False
    return len(tree.body) == 1 and not isinstance(tree.body[0], _COMPOUND)


# --------------------------------------------------------------------------- the parser's view
class Tree:
    """CPython's tree of one text, indexed by the lines statements start on."""

    def __init__(self, text: str, compiled: bool = False) -> None:
        """``compiled``: also compile the text (the compiler refuses more than the parser: a break
        outside a loop, a return outside a function, ...)."""
        self.module = ast.parse(text)
        if compiled:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarnings of the user's code are not ours to print
                compile(self.module, "<fix>", "exec", dont_inherit=True)
        self.parents: Dict[int, Tuple[ast.AST, str, list]] = {}  # id(stmt) -> (owner, field, body)
        self.up: Dict[int, ast.AST] = {}  # id(node) -> the node it is in
        self.by_line: Dict[int, List[ast.stmt]] = {}
        self.count = 0
        stack: List[ast.AST] = [self.module]
        while stack:
            node = stack.pop()
            for name, value in ast.iter_fields(node):
                if isinstance(value, list):
                    for item in value:
                        self.up[id(item)] = node
                        if isinstance(item, ast.stmt):
                            self.parents[id(item)] = (node, name, value)
                            self.by_line.setdefault(item.lineno, []).append(item)
                            self.count += 1
                        if isinstance(item, ast.AST):
                            stack.append(item)
                elif isinstance(value, ast.AST):
                    self.up[id(value)] = node
                    stack.append(value)

    def simple_at(self, lines: Lines, line: int) -> Optional[ast.stmt]:
        """The simple statement that is alone on this line and on no other, or None."""
        starting = self.by_line.get(line, [])
        if len(starting) != 1:
            return None
        stmt = starting[0]
        if isinstance(stmt, _COMPOUND) or stmt.end_lineno != line or not _single_statement(lines, line):
            return None
        return stmt

    def starting_at(self, line: int) -> Optional[ast.stmt]:
        """The outermost statement that starts on this line."""
        starting = self.by_line.get(line, [])
        outer = [s for s in starting if not any(self.parents[id(s)][0] is t for t in starting)]
        return outer[0] if len(outer) == 1 else None

    def body_of(self, stmt: ast.stmt) -> Tuple[list, int]:
        body = self.parents[id(stmt)][2]
        return body, next(i for i, s in enumerate(body) if s is stmt)

    def owner(self, stmt: ast.stmt) -> ast.AST:
        return self.parents[id(stmt)][0]

    def block_key(self, stmt: ast.stmt) -> Tuple[int, str]:
        """Which block a statement is in: its owner's first line (0: the module) and the owner's field."""
        owner, name, _ = self.parents[id(stmt)]
        return _first_line(owner), name

    def enclosing(self, stmt: ast.stmt) -> Iterator[ast.AST]:
        """The nodes around a statement, innermost first (except handlers and match cases included)."""
        node: ast.AST = stmt
        while id(node) in self.up:
            node = self.up[id(node)]
            yield node


def _first_line(node: ast.AST) -> int:
    if isinstance(node, ast.Module):
        return 0
    line = getattr(node, "lineno", None)
    if line is None and hasattr(node, "pattern"):  # match_case
        line = node.pattern.lineno
    return line or 0


# --------------------------------------------------------------------------- edits
@dataclass(frozen=True)
class Edit:
    """One line edit. ``line``: move/replace: the statement's line; insert: the new line goes before it."""

    kind: str  # "move", "insert" or "replace"
    line: int
    block: Tuple[int, str]  # the block (Tree.block_key, before the edit) the written statement must be in
    text: str = ""  # insert/replace: the new physical line, with its end
    before: int = 0  # move: the statement lands before the line now at ``before``

    def apply(self, items: list, new: object = ...) -> list:
        """The edit applied to the file's lines, or to a list in step with them (``new``: what stands
        for the inserted or rewritten line there)."""
        new = self.text if new is ... else new
        index = self.line - 1
        if self.kind == "insert":
            return items[:index] + [new] + items[index:]
        if self.kind == "replace":
            return items[:index] + [new] + items[index + 1:]
        moved, rest = items[index], items[:index] + items[index + 1:]
        target = self.before - 1 if self.before < self.line else self.before - 2
        return rest[:target] + [moved] + rest[target:]

    def origins(self, count: int) -> List[Optional[int]]:
        """For each line after the edit, the line it was before (None: a new line)."""
        origin: List[Optional[int]] = list(range(1, count + 1))
        return self.apply(origin, self.line if self.kind == "replace" else None)

    def written(self, origin: List[Optional[int]]) -> int:
        """The line the moved, inserted or rewritten statement is on after the edit."""
        return origin.index(None) + 1 if self.kind == "insert" else origin.index(self.line) + 1


def _move(tree: Tree, stmt: ast.stmt, before: int) -> Edit:
    return Edit("move", stmt.lineno, tree.block_key(stmt), before=before)


def _replace(tree: Tree, stmt: ast.stmt, text: str) -> Edit:
    return Edit("replace", stmt.lineno, tree.block_key(stmt), text=text)


def _insert_before(tree: Tree, lines: Lines, stmt: ast.stmt, code: str) -> Edit:
    line = lines[stmt.lineno - 1]
    return Edit("insert", stmt.lineno, tree.block_key(stmt), text=_leading(line) + code + _line_end(line))


# --------------------------------------------------------------------------- what a move crosses
def _path(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _accesses(stmt: ast.AST) -> Tuple[Set[str], Set[str]]:
    """The (read, written) access paths of a statement, each the longest chain it names."""
    inner = {id(n.value) for n in ast.walk(stmt) if isinstance(n, ast.Attribute)}
    reads: Set[str] = set()
    writes: Set[str] = set()
    for node in ast.walk(stmt):
        target = node.value if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load) else node
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) in inner:
            continue
        path = _path(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
        if path is None:
            continue
        (reads if isinstance(getattr(node, "ctx", None), ast.Load) else writes).add(path)
    return reads, writes


def _flow(node: ast.AST, in_loop: bool = False) -> Iterator[Tuple[ast.AST, bool]]:
    """The nodes of a statement run in the same frame, each with whether it is inside a loop of it."""
    yield node, in_loop
    if isinstance(node, _SCOPES):
        return
    for name, value in ast.iter_fields(node):
        nested = in_loop or (isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and name == "body")
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                yield from _flow(child, nested)


def _name(node: ast.AST) -> Optional[str]:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _crossing_hazard(moved: ast.stmt, crossed: Sequence[ast.stmt], objects: Sequence[str],
                     reads_lr: bool = False, reads_grads: bool = False) -> Optional[str]:
    """Why carrying ``moved`` across ``crossed`` could change what the program does (None: no reason seen)."""
    moved_reads, moved_writes = _accesses(moved)
    for stmt in crossed:
        for node, in_loop in _flow(stmt):
            if isinstance(node, (ast.Return, ast.Raise, ast.Yield, ast.YieldFrom)):
                return "it would cross a return, raise or yield"
            if isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
                return "it would cross a break or continue"
            name = _name(node)
            if name is not None and _SAVE.search(name):
                return "it would cross a checkpoint save"
            if isinstance(node, ast.Call) and _name(node.func) in _EXITS:
                return "it would cross an exit"
            if reads_lr and (name in _LR_READS or (isinstance(node, ast.Constant) and node.value == "lr")):
                return "it would cross a statement reading the learning rate"
            if reads_grads and name == "grad":
                return "it would cross a statement reading gradients"
        reads, writes = _accesses(stmt)
        if any(_overlap(w, p) for w in writes for p in moved_reads | moved_writes) or any(
                _overlap(w, p) for w in moved_writes for p in reads):
            return "it would cross a statement sharing its names"
        if any(_overlap(o, p) for o in objects for p in reads | writes):
            return "it would cross a statement using the object it acts on"
    return None


def _receiver(stmt: ast.stmt) -> Optional[str]:
    """``scheduler`` of ``scheduler.step(...)`` (the statement's only call of a method named step)."""
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "step"]
    return _path(calls[0].func.value) if len(calls) == 1 else None


def _related(result: Result, role: str):
    return next(((span, event) for name, span, event in result.related if name == role), (None, None))


# --------------------------------------------------------------------------- fixers
Fixer = Callable[[Result, Lines, Tree], Optional[Edit]]


def fix_clip_after_step(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL101: move the clip to just before the optimizer step."""
    clip_line = result.span[0]
    step_span, _ = _related(result, "step")
    if step_span is None or step_span[0] >= clip_line or result.span[2] != clip_line:
        return None
    clip = tree.simple_at(lines, clip_line)
    step = tree.starting_at(step_span[0])
    if clip is None or step is None or tree.parents[id(step)][2] is not tree.parents[id(clip)][2]:
        return None
    body, at = tree.body_of(clip)
    first = tree.body_of(step)[1] + (tree.simple_at(lines, step.lineno) is step)  # a compound step is crossed too
    if _crossing_hazard(clip, body[first:at], (), reads_grads=True):
        return None
    return _move(tree, clip, before=step.lineno)


def fix_scheduler_before_step(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL102: move the scheduler step after the optimizer step (per epoch: to the end of its loop body)."""
    sched_line = result.span[0]
    step_span, _ = _related(result, "step")
    sched = tree.simple_at(lines, sched_line)
    scheduler = _receiver(sched) if sched is not None else None
    if step_span is None or scheduler is None:
        return None
    step_line = step_span[0]
    body, at = tree.body_of(sched)
    later = body[at + 1:]
    # The step is a later statement of this block: just after it.
    step = next((s for s in later if s.lineno == step_line), None)
    if step is not None:
        if tree.simple_at(lines, step_line) is not step:
            return None
        crossed = body[at + 1:body.index(step)]
        if _crossing_hazard(sched, crossed, (scheduler,), reads_lr=True):
            return None
        return _move(tree, sched, before=step.end_lineno + 1)
    # The step runs later in this loop's body, nested (an inner batch loop) or through a call
    # (train_one_epoch): the scheduler belongs at the end of the body.
    if not isinstance(tree.owner(sched), (ast.For, ast.AsyncFor, ast.While)) or tree.parents[id(sched)][1] != "body":
        return None
    if step_line > sched_line and not any(s.lineno <= step_line <= s.end_lineno for s in later):
        return None  # the step is outside this block: leave it to a human
    if any(s.lineno <= step_line <= s.end_lineno for s in body[:at]):
        return None  # the step comes earlier in this body: the order is not what the move would fix
    if not later:
        return None
    if isinstance(later[-1], (ast.Return, ast.Break, ast.Continue, ast.Raise)):
        crossed, before = later[:-1], later[-1].lineno
    else:
        crossed, before = later, later[-1].end_lineno + 1
    if not crossed or _crossing_hazard(sched, crossed, (scheduler,), reads_lr=True):
        return None
    return _move(tree, sched, before=before)


def fix_clip_before_unscale(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL103: insert scaler.unscale_(optimizer) right before the clip."""
    _, backward = _related(result, "backward")
    match = re.match(r"^(.*?)\.scale\(", backward.label) if backward is not None else None
    clip = tree.simple_at(lines, result.span[0])
    if match is None or clip is None:
        return None
    scaler = match.group(1)
    body, at = tree.body_of(clip)
    if any(_name(n) == "unscale_" for s in body for n in ast.walk(s)):
        return None  # an unscale_ already on some path: a second one in the same step raises
    for stmt in body[at + 1:at + 8]:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "step"
                and _path(call.func.value) == scaler and len(call.args) == 1 and not call.keywords):
            optimizer = ast.get_source_segment("".join(lines), call.args[0])
            if optimizer is None or "\n" in optimizer or "\r" in optimizer:
                return None
            return _insert_before(tree, lines, clip, f"{scaler}.unscale_({optimizer})")
    return None


def fix_undivided_loss(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL201: divide the loss by the accumulation steps where it is backpropagated."""
    line_no = result.span[0]
    _, step = _related(result, "step")
    if _related(result, "zeroed")[1] is not None:
        return None  # while zero_grad wipes each micro-batch (TL104), dividing would shrink the update
    k = step.accum if step is not None else None
    stmt = tree.simple_at(lines, line_no)
    if not k or not _is_expression(k) or stmt is None:
        return None
    line = lines[line_no - 1]
    scaled = re.search(r"\.scale\(([^()]+)\)\.backward\(", line)
    if scaled:
        loss = scaled.group(1).strip()
        return _replace(tree, stmt, line[: scaled.start(1)] + f"{_operand(loss)} / {k}" + line[scaled.end(1):])
    plain = re.search(r"(?<![\w.)\]])([A-Za-z_][\w.]*)\.backward\(", line)
    if plain:
        return _replace(tree, stmt, line[: plain.start(1)] + f"({plain.group(1)} / {k})" + line[plain.end(1):])
    return None


def fix_missing_set_epoch(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL301: call sampler.set_epoch(epoch) at the top of the epoch loop around the loader's loop."""
    sampler = as_written(result.event.sampler, result.event.target) if result.event is not None else None
    loop = tree.starting_at(result.span[0])
    if not sampler or ANY_ENTRY in sampler or _may_be_none(sampler, lines) or not isinstance(loop, (ast.For, ast.AsyncFor)):
        return None  # a pass started another way (iter(loader) restarted) has no epoch loop to name
    for owner in tree.enclosing(loop):
        if isinstance(owner, _SCOPES):
            return None
        if isinstance(owner, (ast.For, ast.AsyncFor)) and isinstance(owner.target, ast.Name) and owner.target.id != "_":
            first = owner.body[0]
            if first.lineno <= owner.iter.end_lineno or any(
                    _name(n) == "set_epoch" for s in owner.body for n in ast.walk(s)):
                return None  # a one-line loop, or set_epoch is called there already (on another path)
            return _insert_before(tree, lines, first, f"{sampler}.set_epoch({owner.target.id})")
    return None


def fix_sdpa_dropout(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL803: gate dropout_p on self.training (inside a method)."""
    line_no = result.span[0]
    stmt = tree.simple_at(lines, line_no)
    if result.span[2] != line_no or stmt is None or not _in_method(tree, stmt):
        return None
    line = lines[line_no - 1]
    match = re.search(r"dropout_p\s*=\s*([^,()]+?)\s*(?=[,)])", line)
    if match is None:
        return None
    new = line[: match.start()] + f"dropout_p={match.group(1)} if self.training else 0.0" + line[match.end():]
    return _replace(tree, stmt, new)


def fix_sdpa_mask_and_causal(result: Result, lines: Lines, tree: Tree) -> Optional[Edit]:
    """TL804: when attn_mask already is the causal mask, drop the redundant is_causal=True.
    (Folding a causal mask into an arbitrary mask depends on its dtype: left to a human.)"""
    line_no = result.span[0]
    line = lines[line_no - 1]
    stmt = tree.simple_at(lines, line_no)
    mask = re.search(r"attn_mask\s*=\s*([^,()]+(?:\[[^\]]*\])?)", line)
    causal = re.search(r",\s*is_causal\s*=\s*True", line)
    if result.span[2] != line_no or stmt is None or not mask or not causal or not re.search(r"causal|tril|bias", mask.group(1)):
        return None
    return _replace(tree, stmt, line[: causal.start()] + line[causal.end():])


FIXERS: Dict[str, Fixer] = {
    "TL101": fix_clip_after_step,
    "TL102": fix_scheduler_before_step,
    "TL103": fix_clip_before_unscale,
    "TL201": fix_undivided_loss,
    "TL301": fix_missing_set_epoch,
    "TL803": fix_sdpa_dropout,
    "TL804": fix_sdpa_mask_and_causal,
}


def _is_expression(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
        return True
    except (SyntaxError, ValueError):
        return False


def _operand(expr: str) -> str:
    return expr if re.fullmatch(r"[\w.]+", expr) else f"({expr})"


def _may_be_none(sampler: str, lines: Lines) -> bool:
    """A sampler that is None when not distributed needs a guard the fix cannot know."""
    head = re.escape(sampler)
    return any(re.search(rf"\b{head}\s*=.*\bNone\b", line) for line in lines)


def _in_method(tree: Tree, stmt: ast.stmt) -> bool:
    function = next((o for o in tree.enclosing(stmt) if isinstance(o, _SCOPES)), None)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = function.args.posonlyargs + function.args.args
    return bool(args) and args[0].arg == "self"


# --------------------------------------------------------------------------- driver
@dataclass
class FixReport:
    """What fixing one text did: the text, the rules fixed (in order) and where each fixed
    statement is in the fixed text, the fixes declined (rule, line in the text they were tried on,
    why), and whether the loop ran out (then nothing was changed)."""

    text: str
    applied: List[str] = field(default_factory=list)
    fixed: List[Tuple[str, int]] = field(default_factory=list)
    declined: List[Tuple[str, int, str]] = field(default_factory=list)
    exhausted: bool = False


def fix_source(text: str, rules: AbstractSet[str]) -> Tuple[str, List[str]]:
    """The fixed text and the rule ids fixed, in order. Suppressed findings are not fixed."""
    report = fix_report(text, rules)
    return report.text, report.applied


def fix_report(text: str, rules: AbstractSet[str], max_fixes: Optional[int] = None) -> FixReport:
    """Fix what can be fixed safely, one verified edit at a time (see the module's description).
    ``max_fixes``: the loop's limit (default: MAX_FIXES plus twice the findings to fix)."""
    selected = frozenset(rules)
    fixable = selected & FIXERS.keys()
    if not fixable:
        return FixReport(text)
    catalog = load_catalog()
    report = FixReport(text)
    analyses: Dict[str, List[Result]] = {}

    def findings(source: str) -> List[Result]:
        if source not in analyses:
            analyses[source] = [r for r in analyze_results(source, selected) if r.path is None]
        return analyses[source]

    current = text
    limit: Optional[int] = None
    while True:
        suppressions = parse_suppressions(current)
        if suppressions.skip_file:
            break
        found = analyses[current] if current in analyses else analyze_results(current, fixable)
        candidates = [
            r for r in found if _in_this_file(r) and r.rule in fixable
            and not suppressions.suppresses(r.span[0], catalog[r.rule].id, catalog[r.rule].name)
        ]
        if limit is None:
            # Each kept fix removes a finding and adds none but handed-over ones (TL101 -> TL103), so
            # a pass takes at most about twice as many fixes as there were findings.
            limit = MAX_FIXES + 2 * len(candidates) if max_fixes is None else max_fixes
        if not candidates:
            break
        prepared = _prepared(current, compiled=current is text)  # a fixed text compiled already
        if prepared is None:
            break  # CPython refuses it (a break outside a loop; syntax newer than this interpreter): no fix
        tree, lines, added = prepared
        for result in candidates:
            edit = FIXERS[result.rule](result, lines, tree)
            if edit is None:
                continue
            candidate, origin, reason = _verified(result, edit, lines, tree, current, added, findings)
            if candidate is None:
                report.declined.append((result.rule, result.span[0], reason))
                continue
            if len(report.applied) >= limit:
                return FixReport(text, declined=report.declined, exhausted=True)
            current = candidate
            report.applied.append(result.rule)
            report.fixed = [(rule, origin.index(line) + 1) for rule, line in report.fixed]
            report.fixed.append((result.rule, origin.index(result.span[0]) + 1))
            break
        else:
            break
    report.text = current
    return report


def fix_finding(text: str, rules: AbstractSet[str], rule: str, line: int, column: int) -> Optional[str]:
    """The text with the one finding of ``rule`` at ``line``:``column`` (1-based, where the finding
    starts) fixed, by the edit ``fix_report`` makes for it when it is the first one fixed: the same
    fixer, kept only after the same checks. None: no safe fix (or no such finding, or suppressed).
    The language server's quick fix for one diagnostic."""
    selected = frozenset(rules)
    if rule not in selected or rule not in FIXERS:
        return None
    catalog = load_catalog()
    suppressions = parse_suppressions(text)
    if suppressions.skip_file or suppressions.suppresses(line, catalog[rule].id, catalog[rule].name):
        return None
    result = next((r for r in analyze_results(text, selected & FIXERS.keys())
                   if _in_this_file(r) and r.rule == rule and r.span[:2] == (line, column)), None)
    prepared = _prepared(text, compiled=True) if result is not None else None
    if prepared is None:
        return None
    tree, lines, added = prepared
    edit = FIXERS[rule](result, lines, tree)
    if edit is None:
        return None
    analyses: Dict[str, List[Result]] = {}

    def findings(source: str) -> List[Result]:
        if source not in analyses:
            analyses[source] = [r for r in analyze_results(source, selected) if r.path is None]
        return analyses[source]

    return _verified(result, edit, lines, tree, text, added, findings)[0]


def _in_this_file(result: Result) -> bool:
    """The statement a fix would change is in the fixed file: not another module's (``path``),
    nor reached through a call into one (``through``)."""
    return result.path is None and not result.through


def _prepared(text: str, compiled: bool) -> Optional[Tuple[Tree, Lines, str]]:
    """The text's tree, its lines (the last one given a line end if it had none) and that added
    line end; None if CPython refuses the text."""
    try:
        tree = Tree(text, compiled=compiled)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = split_lines(text)
    added = ""
    if lines and _line_end(lines[-1], "") == "":
        added = _line_end(lines[0])
        lines[-1] += added
    return tree, lines, added


def _verified(result: Result, edit: Edit, lines: Lines, tree: Tree, current: str, added: str,
              findings: Callable[[str], List[Result]]) -> Tuple[Optional[str], List[Optional[int]], str]:
    """The edited text and where each of its lines was before, if the edit is a real, safe fix of
    this finding; else None and why not."""
    edited = edit.apply(lines)
    candidate = "".join(edited)
    if added and candidate.endswith(added):
        candidate = candidate[: -len(added)]
    if candidate == current:
        return None, [], "the edit changes nothing"
    try:
        new_tree = Tree(candidate, compiled=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, [], "the edit does not compile"
    origin = edit.origins(len(lines))
    written = new_tree.simple_at(edited, edit.written(origin))
    block_line, block_field = edit.block
    if (
        new_tree.count != tree.count + (edit.kind == "insert")
        or written is None
        or new_tree.block_key(written) != ((origin.index(block_line) + 1) if block_line else 0, block_field)
    ):
        return None, [], "the edited statement would not stay a statement of its block"
    try:
        before, after = findings(current), findings(candidate)
    except (AnalysisError, RecursionError):
        return None, [], "the edit cannot be analyzed"
    old = Counter((r.rule, r.span[0]) for r in before)
    new = Counter((r.rule, origin[r.span[0] - 1] if 0 < r.span[0] <= len(origin) else None) for r in after)
    if new[(result.rule, result.span[0])]:
        return None, [], "the finding stays after the edit"
    allowed = HANDOFF.get(result.rule, frozenset())
    if any(rule not in allowed for rule, _ in new - old):
        return None, [], "the edit causes another finding"
    return candidate, origin, ""
