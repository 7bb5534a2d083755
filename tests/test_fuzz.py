"""Fuzzing: generated and mutated programs get findings or a per-file error, never a crash or a hang.

Each program is written to a file and checked by ``engine.check_file`` (what ``trainlint
--no-cache FILE`` runs per file, with the config found upward from it). The outcome must be
findings or :class:`FileError`\\ s of the engine's own kinds (syntax error, nesting too deep, ...):
an "internal error" (any other exception inside the engine) fails, and so does a file taking
longer than ``TIME_LIMIT_S``.

Programs: hypothesmith's (``from_grammar``: any text the grammar derives; ``from_node``: libcst
trees), some identifiers renamed to training names (``a.b()`` may become ``optimizer.step()``),
raw or put where the flow rules run them (inside a training loop, or next to one); and the
fixture programs under fixtures/ (a project's file with its project) mutated: statements
deleted, duplicated, swapped or moved (re-indented to their new place, suite and all), wrapped
in a compound statement, statements inserted, identifiers renamed; and raw line deletions,
duplications and swaps.

Example counts: 15 to 300 per test under the default profile (about half a minute for the
file on two cores); ``--hypothesis-profile=long`` (tests/conftest.py) runs 10,000 per test.

Environment, for long runs: ``TRAINLINT_FUZZ_LOG=FILE`` appends one JSON line per program
(test, outcome, wall and CPU seconds); ``TRAINLINT_FUZZ_CRASH_DIR=DIR`` saves each crashing or
hanging program and its traceback there and goes on fuzzing instead of failing (collect many,
then minimize).
"""
from __future__ import annotations

import ast
import json
import keyword
import os
import re
import shutil
import signal
import tempfile
import textwrap
import time
import traceback
from pathlib import Path
from typing import List, Optional, Tuple

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from trainlint.config import configs_for, resolve_rules
from trainlint.engine import Settings, check_file
from trainlint.static.project import forget_parsed

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PROJECTS = FIXTURES / "projects"
TIME_LIMIT_S = 10.0
FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*.py") if "__pycache__" not in p.parts)

# Generated programs are odd Python: compiling them (hypothesmith, the engine) warns.
pytestmark = pytest.mark.filterwarnings(
    "ignore::SyntaxWarning", "ignore:invalid escape sequence:DeprecationWarning")

_LOG = os.environ.get("TRAINLINT_FUZZ_LOG")
_CRASH_DIR = os.environ.get("TRAINLINT_FUZZ_CRASH_DIR")


def _profile_name() -> str:
    getter = getattr(settings, "get_current_profile_name", None)
    return getter() if getter else getattr(settings, "_current_profile", "default")


def _budget(default_examples: int):
    """The test's own count under the default profile; another profile (long) sets its own."""
    # (filter_too_much: hypothesmith's strategies discard the invalid trees they draw themselves,
    # no assume() of ours; how many varies with the seed, and one unlucky draw failed a CI run)
    common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                        HealthCheck.large_base_example, HealthCheck.filter_too_much])
    if _profile_name() == "default":
        return settings(max_examples=default_examples, **common)
    return settings(**common)


class _Hang(BaseException):
    """Raised by the alarm: a BaseException, so the engine's per-file ``except Exception`` lets it out."""


def _alarm(signum, frame):
    raise _Hang()


@pytest.fixture(scope="module")
def workdir():
    directory = Path(tempfile.mkdtemp(prefix="trainlint-fuzz-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


_counter = [0]


def _outcome(test: str, files: dict, checked: str, base: Path, label: str = ""):
    """Write ``files`` (relative path -> source) to a fresh directory under ``base`` and check the
    file ``checked``: findings or per-file errors (returned), no internal error, no hang."""
    _counter[0] += 1
    directory = base / f"case{_counter[0]}"
    for name, source in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source.encode("utf-8", "surrogatepass"))
    path = directory / checked
    ((config, _),) = configs_for([str(path)])
    settings_ = Settings(rules=resolve_rules(config, None, []), config=config, cache=False, jobs=1)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    start, cpu = time.perf_counter(), time.process_time()
    problem: Optional[str] = None
    findings, errors, notes = [], [], []
    try:
        result = check_file(path, settings_)
        findings, errors = result[0], result[1]
        notes = list(result[2]) if len(result) > 2 else []  # what a budget left out (an engine with budgets)
    except _Hang:
        problem = f"hang: no result after {TIME_LIMIT_S:g} s\n" + traceback.format_exc()
    except Exception:  # noqa: BLE001 - check_file itself must not raise; reported below
        problem = "exception out of check_file\n" + traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        forget_parsed()  # each program alone, as in a process of its own
        shutil.rmtree(directory, ignore_errors=True)
    internal = [e.message for e in errors if e.message.startswith("internal error")]
    if internal and problem is None:
        problem = "internal error\n" + "\n".join(internal)
    if _LOG:
        kind = "crash" if problem and not problem.startswith("hang") else "hang" if problem else (
            "error: " + _error_kind(errors[0].message) if errors else f"findings: {len(findings)}")
        if notes:
            kind += " (incomplete)"
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"test": test, "label": label, "outcome": kind, "seconds": round(seconds, 3),
                                  "cpu": round(cpu, 3)}) + "\n")
    if problem is None:
        return findings, errors
    if _CRASH_DIR:
        _save(test, files, checked, problem)
        return findings, errors
    raise AssertionError(f"{checked} ({label}): {problem}")


def _error_kind(message: str) -> str:
    return re.sub(r"\b(line|column) \d+", r"\1 N", message.split(":", 1)[0] if message.startswith("syntax") else message)[:60]


def _save(test: str, files: dict, checked: str, problem: str) -> None:
    directory = Path(_CRASH_DIR) / f"{test}-{time.time_ns()}"
    directory.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.encode("utf-8", "surrogatepass"))
    (directory / "CHECKED").write_text(checked + "\n", encoding="utf-8")
    (directory / "TRACEBACK.txt").write_text(problem, encoding="utf-8")


# ---------------------------------------------------------------------------- generated programs
_PRELUDE = textwrap.dedent(
    """\
    import torch
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    """
)
_STEP = "optimizer.zero_grad()\nloss = model(x).sum()\nloss.backward()\n{body}optimizer.step()\nscheduler.step()\n"


def _placed(code: str, where: str) -> str:
    """The generated ``code`` where the flow rules run it."""
    if code and not code.endswith("\n"):
        code += "\n"
    loop = "for x in loader:\n" + textwrap.indent(_STEP.format(body=""), "    ")
    if where == "raw":
        return code
    if where == "after-training-loop":
        return _PRELUDE + loop + code
    if where == "before-training-loop":
        return _PRELUDE + code + loop
    if where == "in-training-loop":
        return _PRELUDE + "for x in loader:\n" + textwrap.indent(_STEP.format(body=code), "    ")
    if where == "in-train-function":
        body = textwrap.indent(_STEP.format(body=code), "        ")
        return _PRELUDE + "\n\ndef train(model, loader):\n    for x in loader:\n" + body + "\n\ntrain(model, loader)\n"
    raise ValueError(where)


PLACES = ["raw", "after-training-loop", "before-training-loop", "in-training-loop", "in-train-function"]


def _training_names(data, code: str) -> str:
    """Some of the generated program's identifiers renamed to the names of training code (so
    ``a.b()`` may become ``optimizer.step()``): the program then has events for the rules."""
    names = sorted(set(_IDENT.findall(code)) - set(keyword.kwlist))
    renames = {name: new for name in names if (new := data.draw(st.sampled_from([None, None, *_NAMES]))) is not None}
    if not renames:
        return code
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
    return pattern.sub(lambda m: renames[m.group()], code)


@_budget(60)
@given(code=hypothesmith.from_grammar(), where=st.sampled_from(PLACES), data=st.data())
def test_programs_from_the_grammar(workdir, code, where, data):
    code = _training_names(data, code)
    _outcome("grammar", {"fuzzed.py": _placed(code, where)}, "fuzzed.py", workdir, where)


@_budget(15)
@given(code=hypothesmith.from_node(), where=st.sampled_from(PLACES), data=st.data())
def test_programs_from_libcst_nodes(workdir, code, where, data):
    code = _training_names(data, code)
    _outcome("node", {"fuzzed.py": _placed(code, where)}, "fuzzed.py", workdir, where)


# ---------------------------------------------------------------------------- mutated fixtures
_INSERTED = [
    "optimizer.step()", "optimizer.zero_grad()", "loss.backward()", "scheduler.step()", "scaler.update()",
    "scaler.step(optimizer)", "scaler.unscale_(optimizer)", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
    "model.eval()", "model.train()", "loss = model(x).sum()", "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
    "break", "continue", "return", "return loss", "pass", "raise ValueError()", "yield loss", "del optimizer",
    "global model", "nonlocal loss", "x = x", "model = torch.compile(model)", "train(model, loader)",
    "self.step()", "for p in model.parameters(): p.requires_grad = False", "loss = loss / 4",
    "with torch.no_grad(): pass", "import torch.optim as optim", "from . import train",
]
_HEADERS = [
    "if flag:", "if (step + 1) % 4 == 0:", "if not torch.isfinite(loss):", "for _ in range(2):",
    "for step, batch in enumerate(loader):", "while True:", "with torch.no_grad():",
    "with accelerator.accumulate(model):", "def inner():", "class Inner:", "async def inner():",
    "with model.no_sync():", "if torch.distributed.get_rank() == 0:", "if False:", "while False:",
]
_NAMES = ["optimizer", "model", "loss", "scheduler", "scaler", "step", "backward", "zero_grad", "torch", "self",
          "x", "train", "loader", "accelerator", "clip_grad_norm_", "range", "print", "super", "__init__", "cls"]
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _statements(lines: List[str]) -> List[Tuple[int, int]]:
    """(first, end) line indexes of every statement, nested ones included, compound statements
    with their suites; [] when the text does not parse (an earlier mutation broke it)."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            found.append((first - 1, node.end_lineno))
    return sorted(found)


def _moved(block: List[str], indent: str) -> List[str]:
    """``block`` re-indented so that its first line has ``indent`` (its suite keeps its depth)."""
    base = _indent_of(block[0]) if block else ""
    return [indent + line[len(base):] if line.startswith(base) and line.strip() else line for line in block]


@st.composite
def _mutation(draw, lines: List[str]) -> Tuple[str, List[str]]:
    """One mutation. Statement-wise ones keep the indentation consistent (a moved statement takes
    its new place's indentation, its suite comes along), so most results still parse and reach
    the analysis; line-wise ones (``line-*``) mostly make syntax errors."""
    out = list(lines)
    statements = _statements(lines)
    if not out:
        return "insert", [draw(st.sampled_from(_INSERTED))]
    if not statements:
        op = draw(st.sampled_from(["line-delete", "line-duplicate", "line-swap", "rename-all", "rename-one"]))
    else:
        op = draw(st.sampled_from([
            "delete", "duplicate", "swap", "move", "insert", "wrap", "rename-all", "rename-one", "rename-all",
            "line-delete", "line-duplicate", "line-swap"]))
    n = len(out)
    where = ""
    if op.startswith("line-"):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        where = f" at {i + 1}"
        if op == "line-delete":
            del out[i]
        elif op == "line-duplicate":
            out.insert(i, out[i])
        else:
            out[i], out[j] = out[j], out[i]
    elif op in ("rename-all", "rename-one"):
        names = sorted({m.group() for line in lines for m in _IDENT.finditer(line)} - set(keyword.kwlist))
        if names:
            old = draw(st.sampled_from(names))
            new = draw(st.sampled_from(_NAMES + names))
            pattern = re.compile(rf"\b{re.escape(old)}\b")
            if op == "rename-all":
                out = [pattern.sub(new, line) for line in out]
            else:
                k = draw(st.sampled_from([k for k, line in enumerate(out) if pattern.search(line)]))
                out[k] = pattern.sub(new, out[k], count=1)
                where = f" at {k + 1}"
            op = f"{op} {old}->{new}"
    else:
        first, end = draw(st.sampled_from(statements))
        where = f" at {first + 1}"
        indent = _indent_of(out[first])
        if op == "delete":
            out[first:end] = []
        elif op == "duplicate":
            out[end:end] = out[first:end]
        elif op in ("swap", "move"):
            other_first, other_end = draw(st.sampled_from(statements))
            if other_end <= first or other_first >= end:  # disjoint (else: left alone)
                where += f" and {other_first + 1}"
                other_indent = _indent_of(out[other_first])
                a, b = _moved(out[first:end], other_indent), _moved(out[other_first:other_end], indent)
                if op == "swap":
                    chunks = [(first, end, b), (other_first, other_end, a)]
                else:
                    chunks = [(first, end, []), (other_first, other_first, a)]
                for start, stop, replacement in sorted(chunks, reverse=True):
                    out[start:stop] = replacement
        elif op == "insert":
            statement = draw(st.sampled_from(_INSERTED + _HEADERS))
            if statement.endswith(":"):
                statement += " pass"
            out.insert(first, indent + statement)
            op = f"insert {statement!r}"
        elif op == "wrap":
            # the statement and up to 3 of its next siblings, under a new compound header
            for _ in range(draw(st.integers(0, 3))):
                sibling = next((s for s in statements if s[0] == end and _indent_of(out[s[0]]) == indent), None)
                if sibling is None:
                    break
                end = sibling[1]
            header = draw(st.sampled_from(_HEADERS))
            out[first:end] = [indent + header] + ["    " + line if line.strip() else line for line in out[first:end]]
            op = f"wrap {header!r}"
    return op + where, out


@st.composite
def mutated_fixtures(draw):
    fixture = draw(st.sampled_from(FIXTURE_FILES))
    text = fixture.read_text(encoding="utf-8")
    lines = text.splitlines()
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        step, lines = draw(_mutation(lines))
        steps.append(step)
    mutated = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    project = next((PROJECTS / p.parts[len(PROJECTS.parts)] for p in [fixture] if PROJECTS in p.parents), None)
    files = {}
    if project is not None:  # the fixture's whole project, so the calls into its other modules are followed
        for other in project.rglob("*"):
            if other.is_file() and "__pycache__" not in other.parts:
                files[other.relative_to(project).as_posix()] = other.read_text(encoding="utf-8")
        checked = fixture.relative_to(project).as_posix()
    else:
        checked = fixture.name
    files[checked] = mutated
    return fixture.relative_to(FIXTURES).as_posix(), steps, files, checked


@_budget(300)
@given(case=mutated_fixtures())
def test_mutated_fixture_programs(workdir, case):
    name, steps, files, checked = case
    note(f"{name}: {steps}")
    _outcome("fixtures", files, checked, workdir, f"{name}: {'; '.join(steps)}")


def test_the_harness_sees_findings(workdir):
    """An unmutated bad fixture, through the harness, has its finding (so a harness that analyzed
    nothing would not pass silently)."""
    fixture = FIXTURES / "TL101" / "bad_flat_script.py"
    findings, errors = _outcome("self-check", {fixture.name: fixture.read_text(encoding="utf-8")}, fixture.name, workdir)
    assert not errors and any(f.rule == "TL101" for f in findings)
