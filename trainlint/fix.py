"""Autofix for the mechanical rules: small line edits, one at a time, re-checked after each.

Every fix moves or inserts whole single-line statements inside one block (or rewrites one
expression on the reported line), so comments and formatting elsewhere are untouched. After each
edit the file is analyzed again (positions stay exact); the result must parse, and a fixed file
has nothing left to fix, so fixing twice is fixing once. A finding whose shape is not the simple
one (statements spread over lines, in different blocks or functions) is left for a human.
"""
from __future__ import annotations

import ast
import re
from typing import AbstractSet, Callable, Dict, List, Optional, Tuple

from .static.analyzer import AnalysisError, Result, analyze_results, parse
from .suppression import parse_suppressions
from .catalog import load_catalog

Lines = List[str]
MAX_FIXES = 50
_FOR = re.compile(r"^\s*(?:async\s+)?for\s+(\w+)\s+in\s+.+:\s*(?:#.*)?$")
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s")
_TERMINAL = re.compile(r"^\s*(?:return|break|continue|raise)\b")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _single_statement(lines: Lines, line: int) -> bool:
    """The 1-based line holds one complete statement (no continuation lines)."""
    try:
        tree = ast.parse(lines[line - 1].strip())
    except SyntaxError:
        return False
    return len(tree.body) == 1 and not isinstance(tree.body[0], (ast.For, ast.While, ast.If, ast.With, ast.FunctionDef))


def _same_block(lines: Lines, first: int, last: int) -> bool:
    """Lines first..last (1-based) lie in one block: nothing between is indented less."""
    level = _indent(lines[first - 1])
    if _indent(lines[last - 1]) != level:
        return False
    return all(_blank(line) or _indent(line) >= level for line in lines[first - 1 : last])


def _move(lines: Lines, source: int, before: int) -> Lines:
    """Move 1-based line ``source`` so that it lands before the line now at ``before``."""
    moved = lines[source - 1]
    rest = lines[: source - 1] + lines[source:]
    index = before - 1 if before < source else before - 2
    return rest[:index] + [moved] + rest[index:]


def _related(result: Result, role: str):
    return next(((span, event) for name, span, event in result.related if name == role), (None, None))


# --------------------------------------------------------------------------- fixers
def fix_clip_after_step(result: Result, lines: Lines) -> Optional[Lines]:
    """TL101: move the clip to just before the optimizer step."""
    clip = result.span[0]
    step_span, _ = _related(result, "step")
    if step_span is None or step_span[0] >= clip or result.span[2] != clip:
        return None
    step = step_span[0]
    if not (_single_statement(lines, clip) and _same_block(lines, step, clip)):
        return None
    return _move(lines, clip, before=step)


def fix_scheduler_before_step(result: Result, lines: Lines) -> Optional[Lines]:
    """TL102: move the scheduler step after the optimizer step (per epoch: to the end of its block)."""
    sched = result.span[0]
    step_span, _ = _related(result, "step")
    if step_span is None or not _single_statement(lines, sched):
        return None
    step = step_span[0]
    if step > sched and _same_block(lines, sched, step) and _single_statement(lines, step):
        return _move(lines, sched, before=step + 1)
    # The step comes later in this block, nested (an inner batch loop) or through a call
    # (train_one_epoch): the scheduler belongs at the end of the block.
    level = _indent(lines[sched - 1])
    if step > sched and _indent(lines[step - 1]) <= level:
        return None
    end = sched
    for number in range(sched + 1, len(lines) + 1):
        line = lines[number - 1]
        if _blank(line):
            continue
        if _indent(line) < level:
            break
        end = number
    if end == sched or (step > sched and end < step):
        return None  # nothing follows, or the step is outside this block: leave it to a human
    if _indent(lines[end - 1]) == level and _TERMINAL.match(lines[end - 1]):
        return _move(lines, sched, before=end)
    return _move(lines, sched, before=end + 1)


def fix_clip_before_unscale(result: Result, lines: Lines) -> Optional[Lines]:
    """TL103: insert scaler.unscale_(optimizer) right before the clip."""
    clip = result.span[0]
    _, backward = _related(result, "backward")
    match = re.match(r"^(.*?)\.scale\(", backward.label) if backward is not None else None
    if match is None or not _single_statement(lines, clip):
        return None
    scaler = match.group(1)
    level = _indent(lines[clip - 1])
    step = re.compile(re.escape(scaler) + r"\.step\(([^()]+)\)")
    for line in lines[clip : clip + 8]:
        found = step.search(line)
        if found and _indent(line) == level:
            unscale = " " * level + f"{scaler}.unscale_({found.group(1).strip()})" + _newline(lines[clip - 1])
            return lines[: clip - 1] + [unscale] + lines[clip - 1 :]
    return None


def fix_undivided_loss(result: Result, lines: Lines) -> Optional[Lines]:
    """TL201: divide the loss by the accumulation steps where it is backpropagated."""
    line_no = result.span[0]
    _, step = _related(result, "step")
    if _related(result, "zeroed")[1] is not None:
        return None  # while zero_grad wipes each micro-batch (TL104), dividing would shrink the update
    k = step.accum if step is not None else None
    if not k or not _is_expression(k):
        return None
    line = lines[line_no - 1]
    scaled = re.search(r"\.scale\(([^()]+)\)\.backward\(", line)
    if scaled:
        loss = scaled.group(1).strip()
        new = line[: scaled.start(1)] + f"{_operand(loss)} / {k}" + line[scaled.end(1) :]
        return lines[: line_no - 1] + [new] + lines[line_no:]
    plain = re.search(r"(?<![\w.)\]])([A-Za-z_][\w.]*)\.backward\(", line)
    if plain:
        new = line[: plain.start(1)] + f"({plain.group(1)} / {k})" + line[plain.end(1) :]
        return lines[: line_no - 1] + [new] + lines[line_no:]
    return None


def fix_missing_set_epoch(result: Result, lines: Lines) -> Optional[Lines]:
    """TL301: call sampler.set_epoch(epoch) at the top of the enclosing epoch loop."""
    loop = result.span[0]
    sampler = result.event.sampler if result.event is not None else None
    if not sampler or _may_be_none(sampler, lines):
        return None
    level = _indent(lines[loop - 1])
    for number in range(loop - 1, 0, -1):
        line = lines[number - 1]
        if _blank(line) or _indent(line) >= level:
            continue
        if _DEF.match(line):
            return None
        level = _indent(line)
        match = _FOR.match(line)
        if match and match.group(1) != "_":
            body = next(l for l in lines[number:] if not _blank(l))
            insert = " " * _indent(body) + f"{sampler}.set_epoch({match.group(1)})" + _newline(line)
            return lines[:number] + [insert] + lines[number:]
    return None


def fix_sdpa_dropout(result: Result, lines: Lines) -> Optional[Lines]:
    """TL803: gate dropout_p on self.training (inside a method)."""
    line_no = result.span[0]
    if result.span[2] != line_no or not _in_method(lines, line_no):
        return None
    line = lines[line_no - 1]
    match = re.search(r"dropout_p\s*=\s*([^,()]+?)\s*(?=[,)])", line)
    if match is None:
        return None
    new = line[: match.start()] + f"dropout_p={match.group(1)} if self.training else 0.0" + line[match.end() :]
    return lines[: line_no - 1] + [new] + lines[line_no:]


def fix_sdpa_mask_and_causal(result: Result, lines: Lines) -> Optional[Lines]:
    """TL804: when attn_mask already is the causal mask, drop the redundant is_causal=True.
    (Folding a causal mask into an arbitrary mask depends on its dtype: left to a human.)"""
    line_no = result.span[0]
    line = lines[line_no - 1]
    mask = re.search(r"attn_mask\s*=\s*([^,()]+(?:\[[^\]]*\])?)", line)
    causal = re.search(r",\s*is_causal\s*=\s*True", line)
    if result.span[2] != line_no or not mask or not causal or not re.search(r"causal|tril|bias", mask.group(1)):
        return None
    return lines[: line_no - 1] + [line[: causal.start()] + line[causal.end() :]] + lines[line_no:]


FIXERS: Dict[str, Callable[[Result, Lines], Optional[Lines]]] = {
    "TL101": fix_clip_after_step,
    "TL102": fix_scheduler_before_step,
    "TL103": fix_clip_before_unscale,
    "TL201": fix_undivided_loss,
    "TL301": fix_missing_set_epoch,
    "TL803": fix_sdpa_dropout,
    "TL804": fix_sdpa_mask_and_causal,
}


def _newline(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n"


def _is_expression(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
        return True
    except SyntaxError:
        return False


def _operand(expr: str) -> str:
    return expr if re.fullmatch(r"[\w.]+", expr) else f"({expr})"


def _may_be_none(sampler: str, lines: Lines) -> bool:
    """A sampler that is None when not distributed needs a guard the fix cannot know."""
    head = re.escape(sampler)
    return any(re.search(rf"\b{head}\s*=.*\bNone\b", line) for line in lines)


def _in_method(lines: Lines, line_no: int) -> bool:
    level = _indent(lines[line_no - 1])
    for line in reversed(lines[: line_no - 1]):
        if not _blank(line) and _indent(line) < level and _DEF.match(line):
            return "(self" in line
    return False


# --------------------------------------------------------------------------- driver
def fix_source(text: str, rules: AbstractSet[str]) -> Tuple[str, List[str]]:
    """The fixed text and the rule ids fixed, in order. Suppressed findings are not fixed."""
    fixable = frozenset(rules) & FIXERS.keys()
    if not fixable:
        return text, []
    catalog = load_catalog()
    applied: List[str] = []
    current = text
    for _ in range(MAX_FIXES):
        suppressions = parse_suppressions(current)
        if suppressions.skip_file:
            break
        lines = current.splitlines(keepends=True)
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += "\n"
        for result in analyze_results(current, fixable):
            rule = catalog[result.rule]
            if suppressions.suppresses(result.span[0], rule.id, rule.name):
                continue
            fixed = FIXERS[result.rule](result, lines)
            if fixed is not None:
                candidate = "".join(fixed)
                if not text.endswith(("\n", "\r")) and candidate.endswith("\n"):
                    candidate = candidate[:-1]
                try:
                    parse(candidate)
                except AnalysisError:
                    continue  # a fix must never break the file
                current = candidate
                applied.append(result.rule)
                break
        else:
            break
    return current, applied
