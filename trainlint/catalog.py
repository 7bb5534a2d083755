"""The invariant catalog: one TOML entry per rule under ``rules/`` (shipped as ``trainlint._catalog``).

The catalog is the single source of truth for the static engine, the runtime guard, ``trainlint
explain`` and the docs, so everything user-facing about a rule (name, severity, texts, examples)
is read from here and nowhere else.
"""
from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import AbstractSet, Dict, FrozenSet, Iterable, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older interpreters only
    import tomli as tomllib

# The tiers, one policy (README "Tiers"): an ``error`` means training silently computes something
# other than intended; a ``warning`` is a change a reviewer would ask for (a leak that grows without
# bound, a resume that loses state the program relies on); ``advice`` is a recipe or a cost, and runs
# only when selected (``--extend-select ADVICE``).
TIERS = ("error", "warning", "advice")
# The level a finding is shown at: its tier's, or a ``[tool.trainlint.severity]`` override. Advice
# shows as ``info``, the value the JSON format has always used for it.
SEVERITIES = ("error", "warning", "info")
SEVERITY_OF_TIER = {"error": "error", "warning": "warning", "advice": "info"}
ADVICE = "ADVICE"  # the selector for every advice-tier rule and every rule's advice findings
_ID_RE = re.compile(r"^TL[0-9]{3}$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_REQUIRED = ("id", "name", "tier", "summary", "rationale", "fix", "runtime", "bad", "good")


class CatalogError(ValueError):
    """A catalog entry is malformed; raised at load time so a broken entry never ships silently."""


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    tier: str  # one of TIERS
    summary: str
    rationale: str
    fix: str
    runtime: str  # how the guard confirms it, or why it is static-only
    runtime_confirmed: bool
    bad: str
    good: str
    # The pre-filter: the rule cannot fire in a file holding none of its ``triggers`` (substrings)
    # and ``trigger_patterns`` (regular expressions), or missing every substring of one of its
    # ``requires`` groups (``[["step("]]``: no optimizer step, no accumulation bug).
    triggers: Tuple[str, ...]
    trigger_patterns: Tuple["re.Pattern[str]", ...] = ()
    requires: Tuple[Tuple[str, ...], ...] = ()
    autofix: bool = False
    # Which of a default rule's findings are recipes, not bugs, and so of the advice tier (TL901: a
    # weights-only checkpoint nothing resumes from); empty when every finding is of the rule's tier.
    advice: str = ""
    static: bool = True  # False: only the runtime guard can see it (a value, not a code shape)

    @property
    def severity(self) -> str:
        return SEVERITY_OF_TIER[self.tier]

    @property
    def opt_in(self) -> bool:
        """Advice runs only when selected."""
        return self.tier == "advice"

    @property
    def doc_path(self) -> str:
        return f"rules/{self.id}-{self.name}.toml"


def _load_entry(name: str, text: str) -> Rule:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{name}: {exc}") from exc
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise CatalogError(f"{name}: missing keys {missing}")
    if not _ID_RE.match(data["id"]):
        raise CatalogError(f"{name}: id {data['id']!r} is not of the form TLnnn")
    if not _NAME_RE.match(data["name"]):
        raise CatalogError(f"{name}: name {data['name']!r} is not kebab-case")
    if data["tier"] not in TIERS:
        raise CatalogError(f"{name}: tier must be one of {TIERS}")
    if name != f"{data['id']}-{data['name']}.toml":
        raise CatalogError(f"{name}: file must be named {data['id']}-{data['name']}.toml")
    return Rule(
        id=data["id"],
        name=data["name"],
        tier=data["tier"],
        summary=data["summary"].strip(),
        rationale=data["rationale"].strip(),
        fix=data["fix"].strip(),
        runtime=data["runtime"].strip(),
        runtime_confirmed=bool(data.get("runtime_confirmed", False)),
        bad=data["bad"],
        good=data["good"],
        triggers=tuple(data.get("triggers", ())),
        trigger_patterns=_patterns(name, data.get("trigger_patterns", ())),
        requires=tuple(tuple(group) for group in data.get("requires", ())),
        autofix=bool(data.get("autofix", False)),
        advice=data.get("advice", "").strip(),
        static=bool(data.get("static", True)),
    )


def _patterns(name: str, patterns: Iterable[str]) -> Tuple["re.Pattern[str]", ...]:
    try:
        return tuple(re.compile(pattern) for pattern in patterns)
    except re.error as exc:
        raise CatalogError(f"{name}: trigger pattern {exc.pattern!r}: {exc}") from exc


def may_fire(rule: Rule, source: str) -> bool:
    """The pre-filter: could ``rule`` fire in a file with this text?"""
    global _ANSWERED_FOR, _ANSWERS
    if source is not _ANSWERED_FOR:
        _ANSWERED_FOR, _ANSWERS = source, {}
    known = _ANSWERS.get(id(rule))
    if known is None or known[0] is not rule:
        known = _ANSWERS[id(rule)] = (rule, _may_fire(rule, source))
    return known[1]


# The answers for the last text asked about: a file's text is asked about by the engine, then by
# the analyzer and each pattern rule, and a trigger pattern scans the whole text (a regular
# expression such as TL201's, tried at every word, is the costliest part of the pre-filter).
_ANSWERED_FOR: Optional[str] = None
# id(rule or pattern) -> (it, answer); a searched text -> (it, answer)
_ANSWERS: Dict[object, Tuple[object, bool]] = {}


def _may_fire(rule: Rule, source: str) -> bool:
    if rule.triggers or rule.trigger_patterns:
        if not (any(_has(t, source) for t in rule.triggers) or any(_found(p, source) for p in rule.trigger_patterns)):
            return False
    return all(any(_has(text, source) for text in group) for group in rule.requires)


# Rules whose static check also reads the project modules a file imports (a focal loss of the
# project built on binary_cross_entropy_with_logits, a training function applying cross-entropy):
# their trigger text may be in those modules, not in the file (static.patterns'
# through_project_registry; tests/test_catalog.py checks that the two name the same rules).
READS_PROJECT_MODULES = frozenset({"TL303", "TL503", "TL801", "TL802"})


def trigger_expression(rules: AbstractSet[str]) -> "re.Pattern[str]":
    """One expression for the trigger texts of these rules (none: matches nothing)."""
    return _trigger_expression(frozenset(rules))


@functools.lru_cache(maxsize=None)
def _trigger_expression(rules: FrozenSet[str]) -> "re.Pattern[str]":
    catalog = load_catalog()
    chosen = [catalog[rule] for rule in sorted(rules) if rule in catalog]
    parts = [re.escape(text) for rule in chosen for text in rule.triggers]
    parts += [pattern.pattern for rule in chosen for pattern in rule.trigger_patterns]
    return re.compile("|".join(parts) if parts else r"(?!)")


def _has(text: str, source: str) -> bool:
    """Rules share trigger and required texts (``clip_grad``, ``torch.save``, ``step(``): each is
    searched for once per text."""
    known = _ANSWERS.get(text)
    if known is None:
        known = _ANSWERS[text] = (text, text in source)
    return known[1]


def _found(pattern: "re.Pattern[str]", source: str) -> bool:
    """Several rules share a pattern (TL201 and TL503): searched once per text."""
    known = _ANSWERS.get(id(pattern))
    if known is None or known[0] is not pattern:
        known = _ANSWERS[id(pattern)] = (pattern, pattern.search(source) is not None)
    return known[1]


def _catalog_directory():
    """The checkout's rules/ when this package runs from a source checkout (PYTHONPATH=checkout,
    so a second checkout never reads the installed one's catalog); else the wheel's copy."""
    from pathlib import Path

    checkout = Path(__file__).resolve().parent.parent / "rules"
    if (checkout / "TL101-clip-after-step.toml").is_file():
        return checkout
    return resources.files("trainlint._catalog")


@functools.lru_cache(maxsize=1)
def load_catalog() -> Dict[str, Rule]:
    """All rules by id, sorted by id."""
    rules: List[Rule] = []
    for entry in _catalog_directory().iterdir():
        if entry.name.endswith(".toml"):
            rules.append(_load_entry(entry.name, entry.read_text(encoding="utf-8")))
    rules.sort(key=lambda r: r.id)
    by_id = {r.id: r for r in rules}
    names = [r.name for r in rules]
    if len(by_id) != len(rules) or len(set(names)) != len(names):
        raise CatalogError("duplicate rule id or name in the catalog")
    return by_id


@functools.lru_cache(maxsize=1)
def catalog_digest() -> str:
    """A digest of every catalog file's text: a changed trigger, message or tier changes it (the
    result cache keys on it, so an edited rule is never answered from results of the old one)."""
    import hashlib

    digest = hashlib.sha256()
    for entry in sorted(_catalog_directory().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            digest.update(entry.name.encode())
            digest.update(b"\0")
            digest.update(entry.read_bytes())
    return digest.hexdigest()


def get_rule(key: str) -> Optional[Rule]:
    """Look a rule up by id (``TL101``) or name (``clip-after-step``)."""
    catalog = load_catalog()
    if key.upper() in catalog:
        return catalog[key.upper()]
    for rule in catalog.values():
        if rule.name == key:
            return rule
    return None


def matches(rule: Rule, selector: str) -> bool:
    """A selector is an id, a name, or an id prefix such as ``TL1``; ``ALL`` matches everything and
    ``ADVICE`` every advice-tier rule."""
    selector = selector.strip()
    if selector.upper() == "ALL":
        return True
    if selector.upper() == ADVICE:
        return rule.opt_in  # the guard's rule records carry opt_in, not the tier
    return rule.name == selector or rule.id.startswith(selector.upper())


def unknown_selectors(selectors: Iterable[str]) -> List[str]:
    catalog = load_catalog().values()
    return [s for s in selectors if not any(matches(r, s) for r in catalog)]
