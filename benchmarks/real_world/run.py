"""Real-world precision/recall harness for trainlint.

Files (all in this directory, tab-separated, first line a header):

* ``corpus.tsv``  ``repo  commit  path``: the checked files. Each repository is pinned at
  one full 40-hex commit; the paths are .py files with hand-written training code.
* ``ledger.tsv``  ``repo  path  line  rule  verdict  reason``: triage of findings on the
  corpus. ``verdict`` is ``true`` (a real training bug on a path the program takes),
  ``debatable`` (defensible either way) or ``false`` (the program is correct there). A
  finding matches a row by (repo, path, line, rule). Rows are written from reading the
  code; no code of the corpus is ever copied into this repository.
* ``bugs.tsv``  ``repo  commit  path  lines  rule  fix  description``: known real bugs
  (``lines`` is ``N`` or ``N-M``, at ``commit``, usually the parent of ``fix``). A bug is
  found when trainlint reports ``rule`` on a line inside ``lines`` of ``path``.

Workflow:

1. Every repository is materialised at its pinned commit as a full tree under
   ``--clones`` (``DIR/owner+name@<12 hex>/``): reused if there, else extracted from a
   local bare mirror (``/work/.mirror/owner+name/repo`` and the roots listed in
   ``$TRAINLINT_MIRRORS``, ``:``-separated) with ``git archive``, else cloned from GitHub
   (not with ``--no-clone`` / ``$TRAINLINT_NO_CLONE``).
   A repository that cannot be had is reported as skipped.
2. trainlint runs once per repository (cwd = the tree, so imported modules resolve) on the
   listed paths with ``--format json --no-cache``.
3. Precision: findings are matched against the ledger and counted per rule and severity;
   untriaged findings are listed so they can be triaged (add rows to ledger.tsv) and
   ledger rows no finding matches any more are counted as "no longer reported".
4. Recall: each row of bugs.tsv is checked at its own commit, on its own path.

    python benchmarks/real_world/run.py [--clones DIR] [--rules TL101,TL2] [--no-recall]
        [--no-precision] [--json OUT] [--strict] [--verbose]

Standard library only (plus trainlint, run as ``python -m trainlint`` in a subprocess).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
CORPUS_HEADER = ["repo", "commit", "path"]
LEDGER_HEADER = ["repo", "path", "line", "rule", "verdict", "reason"]
BUGS_HEADER = ["repo", "commit", "path", "lines", "rule", "fix", "description"]
VERDICTS = ("true", "debatable", "false")
DEFAULT_CLONES = "/tmp/trainlint-real-world"
DEFAULT_MIRROR_ROOT = "/work/.mirror"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_ARGS_CHARS = 64_000  # per trainlint invocation; far below any ARG_MAX
MESSAGE_WIDTH = 160


# --------------------------------------------------------------------------- files

def read_tsv(path: Path, header: Sequence[str]) -> List[Dict[str, str]]:
    """Rows of a TSV file whose first line must be ``header``; blank and ``#`` lines skipped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t") != list(header):
        raise ValueError(f"{path}: the first line must be {chr(9).join(header)!r}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != len(header):
            raise ValueError(f"{path}:{number}: {len(cells)} fields, expected {len(header)}")
        rows.append(dict(zip(header, cells)))
    return rows


def ensure_file(path: Path, header: Sequence[str]) -> None:
    """Create ``path`` with only its header line when it does not exist (never overwrite)."""
    if not path.exists():
        with open(path, "x", encoding="utf-8") as handle:
            handle.write("\t".join(header) + "\n")


def load_corpus(path: Path) -> Dict[str, Tuple[str, List[str]]]:
    """repo -> (commit, paths). Each repository must be pinned at exactly one commit."""
    corpus: Dict[str, Tuple[str, List[str]]] = {}
    for row in read_tsv(path, CORPUS_HEADER):
        repo, commit = row["repo"], row["commit"]
        check_repo_commit(repo, commit, path)
        if repo in corpus and corpus[repo][0] != commit:
            raise ValueError(f"{path}: {repo} is pinned at two commits")
        corpus.setdefault(repo, (commit, []))[1].append(row["path"])
    return corpus


def load_ledger(path: Path) -> Dict[Tuple[str, str, int, str], Dict[str, str]]:
    """(repo, path, line, rule) -> ledger row; an absent file is an empty ledger."""
    if not path.exists():
        return {}
    ledger = {}
    for row in read_tsv(path, LEDGER_HEADER):
        if row["verdict"] not in VERDICTS:
            raise ValueError(f"{path}: bad verdict {row['verdict']!r} in {row}")
        key = (row["repo"], normpath(row["path"]), int(row["line"]), row["rule"])
        if key in ledger:
            raise ValueError(f"{path}: duplicate row for {key}")
        ledger[key] = row
    return ledger


def load_bugs(path: Path) -> List[Dict[str, str]]:
    rows = read_tsv(path, BUGS_HEADER) if path.exists() else []
    for row in rows:
        check_repo_commit(row["repo"], row["commit"], path)
        parse_lines(row["lines"])
    return rows


def check_repo_commit(repo: str, commit: str, source: Path) -> None:
    if not REPO_RE.match(repo):
        raise ValueError(f"{source}: bad repository name {repo!r}")
    if not HEX40.match(commit):
        raise ValueError(f"{source}: {repo} commit {commit!r} is not 40 hex digits")


def parse_lines(text: str) -> Tuple[int, int]:
    """``N`` or ``N-M`` -> (first, last), inclusive."""
    first, _, last = text.strip().partition("-")
    low, high = int(first), int(last or first)
    if low < 1 or high < low:
        raise ValueError(f"bad line range {text!r}")
    return low, high


def normpath(path: str) -> str:
    return os.path.normpath(path).replace(os.sep, "/")


# --------------------------------------------------------------------- materialise

def mirror_roots() -> List[Path]:
    roots = [Path(DEFAULT_MIRROR_ROOT)]
    roots += [Path(p) for p in os.environ.get("TRAINLINT_MIRRORS", "").split(":") if p]
    return roots


def find_mirror(repo: str, commit: str, roots: Iterable[Path]) -> Optional[Path]:
    """The first mirror ``ROOT/owner+name/repo`` (bare, or a checkout's ``repo/.git``) that
    holds ``commit``."""
    for root in roots:
        base = root / repo.replace("/", "+") / "repo"
        for mirror in (base / ".git", base):
            if mirror.is_dir() and git_ok(["git", "--git-dir", str(mirror), "cat-file", "-e",
                                            f"{commit}^{{commit}}"]):
                return mirror
    return None


def git_ok(command: Sequence[str], cwd: Optional[Path] = None, timeout: float = 600) -> bool:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    try:
        return subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def tree_dir(clones: Path, repo: str, commit: str) -> Path:
    return clones / f"{repo.replace('/', '+')}@{commit[:12]}"


def materialise(repo: str, commit: str, clones: Path,
                roots: Optional[Iterable[Path]] = None) -> Tuple[Optional[Path], str]:
    """A full tree of ``repo`` at ``commit``: (path, how) or (None, why not)."""
    target = tree_dir(clones, repo, commit)
    if target.is_dir():
        return target, "cached"
    clones.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=clones))
    try:
        mirror = find_mirror(repo, commit, mirror_roots() if roots is None else roots)
        if mirror is not None and extract(mirror, commit, staging):
            how = f"mirror {mirror}"
        elif clone(repo, commit, staging):
            how = "cloned"
        else:
            return None, "no mirror holds the commit and it could not be cloned"
        staging.rename(target)
        return target, how
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def extract(mirror: Path, commit: str, into: Path) -> bool:
    """``git archive COMMIT | tar -x``; when the mirror lacks some blobs (snapshots may leave
    out their largest files), fall back to writing every blob it has, one by one."""
    archive = subprocess.Popen(["git", "--git-dir", str(mirror), "archive", commit],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    untar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout,
                           stderr=subprocess.DEVNULL)
    archive.stdout.close()
    if archive.wait() == 0 and untar.returncode == 0:
        return True
    for child in into.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    return extract_blobs(mirror, commit, into)


def extract_blobs(mirror: Path, commit: str, into: Path) -> bool:
    """Write the blobs of ``commit`` that ``mirror`` holds; missing blobs are left out."""
    listing = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "-r", "-z", commit],
                             capture_output=True)
    if listing.returncode != 0:
        return False
    entries = []
    for record in listing.stdout.split(b"\0"):
        if record:
            meta, _, name = record.partition(b"\t")
            mode, kind, sha = meta.split()
            if kind == b"blob":
                entries.append((mode, sha, os.fsdecode(name)))
    batch = subprocess.Popen(["git", "--git-dir", str(mirror), "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for mode, sha, name in entries:
            batch.stdin.write(sha + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if len(header) < 3:  # "<sha> missing"
                continue
            data = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)
            write_blob(into / name, mode, data)
    finally:
        batch.stdin.close()
        batch.wait()
    return True


def write_blob(target: Path, mode: bytes, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode == b"120000":
        os.symlink(os.fsdecode(data), target)
    else:
        target.write_bytes(data)
        if mode == b"100755":
            target.chmod(0o755)


def clone(repo: str, commit: str, into: Path) -> bool:
    """git clone from GitHub and check out ``commit``; off when $TRAINLINT_NO_CLONE is set."""
    if os.environ.get("TRAINLINT_NO_CLONE"):
        return False
    url = f"https://github.com/{repo}"
    return (git_ok(["git", "clone", "--quiet", "--no-checkout", url, str(into)])
            and git_ok(["git", "-c", "advice.detachedHead=false", "checkout", "--quiet", commit],
                       cwd=into))


# ------------------------------------------------------------------------ trainlint

def chunks(paths: Sequence[str], limit: int = MAX_ARGS_CHARS) -> Iterable[List[str]]:
    """Split ``paths`` so that no command line carries more than ``limit`` characters."""
    batch: List[str] = []
    size = 0
    for path in paths:
        if batch and size + len(path) + 1 > limit:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path) + 1
    if batch:
        yield batch


def run_trainlint(tree: Path, paths: Sequence[str],
                  rules: Optional[str] = None) -> Tuple[List[dict], List[dict]]:
    """(findings, errors) of trainlint on ``paths`` with cwd ``tree``; paths normalised."""
    findings: List[dict] = []
    errors: List[dict] = []
    for batch in chunks(list(paths)):
        # Advice too, so its findings are triaged and counted apart from the default tiers'.
        command = [sys.executable, "-m", "trainlint", "check", "--format", "json", "--no-cache", "--extend-select", "ADVICE"]
        if rules:
            command += ["--select", rules]
        command += ["--", *batch]
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
        if done.returncode not in (0, 1, 2):
            raise RuntimeError(f"trainlint failed ({done.returncode}) in {tree}: {done.stderr[-2000:]}")
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(f"trainlint gave no JSON in {tree} (exit {done.returncode}): "
                               f"{done.stderr[-2000:]}") from None
        for finding in report.get("findings", []):
            findings.append(dict(finding, path=normpath(finding["path"])))
        for error in report.get("errors", []):
            errors.append(dict(error, path=normpath(error.get("path", ""))))
    return findings, errors


# ------------------------------------------------------------------------ precision

@dataclass
class Tally:
    name: str = ""
    severity: str = ""
    findings: int = 0
    verdicts: Counter = field(default_factory=Counter)

    def add(self, verdict: str) -> None:
        self.findings += 1
        self.verdicts[verdict] += 1

    def figures(self) -> dict:
        true, false = self.verdicts["true"], self.verdicts["false"]
        return {"name": self.name, "severity": self.severity, "findings": self.findings,
                "true": true, "debatable": self.verdicts["debatable"], "false": false,
                "untriaged": self.verdicts["untriaged"],
                "precision": round(true / (true + false), 4) if true + false else None}


def verdict_of(finding: dict, ledger: dict) -> str:
    row = ledger.get(finding_key(finding))
    return row["verdict"] if row else "untriaged"


def finding_key(finding: dict) -> Tuple[str, str, int, str]:
    return finding["repo"], finding["path"], int(finding["line"]), finding["rule"]


def tally(findings: Sequence[dict], ledger: dict) -> Dict[str, Tally]:
    """rule -> Tally of its findings by verdict."""
    tallies: Dict[str, Tally] = {}
    for finding in findings:
        # A rule's recipes (its advice-tier findings) are tallied apart from its default findings.
        tier = finding.get("tier", finding.get("severity", ""))
        key = finding["rule"] + ("/advice" if tier == "advice" else "")
        entry = tallies.setdefault(key, Tally(finding.get("name", ""), tier))
        entry.add(verdict_of(finding, ledger))
    return tallies


def totals(tallies: Dict[str, Tally], severity: str) -> Tally:
    total = Tally(f"all {severity}s", severity)
    for entry in tallies.values():
        if entry.severity == severity:
            total.findings += entry.findings
            total.verdicts.update(entry.verdicts)
    return total


def rule_selected(rule: str, rules: Optional[str]) -> bool:
    """Whether a ledger/bug rule id falls under ``--rules`` (ids or id prefixes)."""
    if not rules:
        return True
    return any(rule.upper().startswith(s.strip().upper()) for s in rules.split(",") if s.strip())


def stale_rows(ledger: dict, findings: Sequence[dict], checked_repos: Iterable[str],
               rules: Optional[str] = None) -> List[Dict[str, str]]:
    """Ledger rows of checked repositories (and selected rules) that no finding matches."""
    current = {finding_key(f) for f in findings}
    repos = set(checked_repos)
    return [row for key, row in sorted(ledger.items())
            if key[0] in repos and key not in current and rule_selected(key[3], rules)]


def check_corpus(corpus: Dict[str, Tuple[str, List[str]]], clones: Path,
                 rules: Optional[str] = None, roots: Optional[Iterable[Path]] = None,
                 log=print) -> Tuple[List[dict], List[dict], Dict[str, str]]:
    """Run trainlint over the corpus: (findings with repo/commit, errors, skipped repo -> why)."""
    findings: List[dict] = []
    errors: List[dict] = []
    skipped: Dict[str, str] = {}
    for repo, (commit, paths) in sorted(corpus.items()):
        tree, how = materialise(repo, commit, clones, roots)
        if tree is None:
            skipped[repo] = how
            log(f"skipped {repo}@{commit[:12]}: {how}")
            continue
        started = time.monotonic()
        found, failed = run_trainlint(tree, paths, rules)
        findings += [dict(f, repo=repo, commit=commit) for f in found]
        errors += [dict(e, repo=repo, commit=commit) for e in failed]
        log(f"{repo}@{commit[:12]} ({how}): {len(paths)} files, {len(found)} findings, "
            f"{len(failed)} errors, {time.monotonic() - started:.1f}s")
    return findings, errors, skipped


def shorten(text: str, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def precision_table(tallies: Dict[str, Tally]) -> List[str]:
    head = f"{'rule':<7}{'name':<32}{'severity':<9}{'found':>7}{'true':>6}{'debat':>6}" \
           f"{'false':>6}{'untri':>6}{'precision':>11}"
    lines = [head, "-" * len(head)]

    def row(rule: str, entry: Tally) -> str:
        f = entry.figures()
        precision = "-" if f["precision"] is None else f"{f['precision']:.2f}"
        return (f"{rule:<7}{f['name'][:31]:<32}{f['severity']:<9}{f['findings']:>7}{f['true']:>6}"
                f"{f['debatable']:>6}{f['false']:>6}{f['untriaged']:>6}{precision:>11}")

    for severity in ("error", "warning"):
        for rule in sorted(r for r, t in tallies.items() if t.severity == severity):
            lines.append(row(rule, tallies[rule]))
    lines.append("-" * len(head))
    for severity in ("error", "warning"):
        lines.append(row("total", totals(tallies, severity)))
    advice = sorted(r for r, t in tallies.items() if t.severity not in ("error", "warning"))
    if advice:
        lines.append("")
        lines.append("advice (opt-in, not in the totals):")
        lines += [row(rule, tallies[rule]) for rule in advice]
    return lines


def report_precision(findings, errors, skipped, ledger, checked_repos, rules, verbose,
                     out=print) -> Dict[str, Tally]:
    tallies = tally(findings, ledger)
    out("")
    out("== precision ==")
    for line in precision_table(tallies):
        out(line)
    stale = stale_rows(ledger, findings, checked_repos, rules)
    if stale:
        per_rule = Counter(row["rule"] for row in stale)
        out("")
        out("ledger rows no longer reported: " +
            ", ".join(f"{rule} {n}" for rule, n in sorted(per_rule.items())))
        if verbose:
            for row in stale:
                out(f"  {row['repo']} {row['path']}:{row['line']} {row['rule']} "
                    f"[{row['verdict']}] {row['reason']}")
    untriaged = [f for f in findings if verdict_of(f, ledger) == "untriaged"]
    out("")
    out(f"untriaged findings: {len(untriaged)}")
    for f in sorted(untriaged, key=lambda f: (f["rule"], f["repo"], f["path"], f["line"])):
        out(f"{f['repo']} {f['path']}:{f['line']} {f['rule']} {shorten(f['message'])}")
    if errors:
        out("")
        out(f"files trainlint could not analyse: {len(errors)}")
        for e in errors:
            out(f"  {e['repo']} {e['path']}: {shorten(e.get('message', ''))}")
    if skipped:
        out("")
        out(f"repositories skipped: {len(skipped)}")
        for repo, why in sorted(skipped.items()):
            out(f"  {repo}: {why}")
    return tallies


# --------------------------------------------------------------------------- recall

def check_bugs(bugs: Sequence[dict], clones: Path, rules: Optional[str] = None,
               roots: Optional[Iterable[Path]] = None) -> List[dict]:
    """Each bug row with ``status``: hit, miss or skipped (and the findings on that path)."""
    results = []
    for bug in bugs:
        if not rule_selected(bug["rule"], rules):
            continue
        tree, how = materialise(bug["repo"], bug["commit"], clones, roots)
        if tree is None:
            results.append(dict(bug, status="skipped", why=how, found=[]))
            continue
        found, failed = run_trainlint(tree, [bug["path"]] + importers(tree, bug["path"]))
        low, high = parse_lines(bug["lines"])
        wanted = normpath(bug["path"])
        on_path = [f for f in found if f["path"] == wanted]
        matching = [f for f in on_path if f["rule"] == bug["rule"] and low <= int(f["line"]) <= high]
        # Found only as advice (off by default) is a miss of the default set, said as such.
        hit = any(f.get("tier") != "advice" for f in matching)
        status = "hit" if hit else "miss"
        why = "; ".join(e.get("message", "") for e in failed) if failed else ""
        results.append(dict(bug, status=status, why=why, found=on_path))
    return results


def importers(tree: Path, path: str, limit: int = 8) -> List[str]:
    """The repository's files that import ``path``'s module by name (``from pkg.train.loop import
    fit``, ``from .loop import fit`` next to it): checked in the same run, as ``trainlint .`` in the
    repository would check them, so a loader built by the caller reaches the loop in ``path``.
    At most ``limit``, the nearest first."""
    module = Path(path).with_suffix("")
    dotted_name = ".".join(module.parts)
    patterns = [re.compile(rf"^\s*(?:from\s+{re.escape(dotted_name)}\s+import|import\s+{re.escape(dotted_name)}\b)", re.M)]
    if len(module.parts) > 1:
        parent, last = ".".join(module.parts[:-1]), module.parts[-1]
        patterns.append(re.compile(rf"^\s*from\s+{re.escape(parent)}\s+import\s+[^\n]*\b{re.escape(last)}\b", re.M))
    sibling = re.compile(rf"^\s*from\s+\.{re.escape(module.name)}\s+import", re.M)
    found = []
    for candidate in sorted(tree.rglob("*.py"), key=lambda p: (len(p.relative_to(tree).parts), str(p))):
        relative = candidate.relative_to(tree).as_posix()
        if relative == normpath(path) or "test" in relative.lower():
            continue
        try:
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(p.search(text) for p in patterns) or (candidate.parent == (tree / path).parent and sibling.search(text)):
            found.append(relative)
            if len(found) == limit:
                break
    return found


def recall_figures(results: Sequence[dict]) -> Dict[str, dict]:
    """rule -> {bugs, hits, misses, skipped, recall}, plus an ``all`` entry."""
    figures: Dict[str, dict] = defaultdict(lambda: {"bugs": 0, "hits": 0, "misses": 0, "skipped": 0})
    for result in results:
        for key in (result["rule"], "all"):
            entry = figures[key]
            entry["bugs"] += 1
            entry[{"hit": "hits", "miss": "misses", "skipped": "skipped"}[result["status"]]] += 1
    for entry in figures.values():
        checked = entry["hits"] + entry["misses"]
        entry["recall"] = round(entry["hits"] / checked, 4) if checked else None
    return dict(figures)


def report_recall(results: Sequence[dict], out=print) -> Dict[str, dict]:
    figures = recall_figures(results)
    out("")
    out("== recall ==")
    out(f"{'rule':<7}{'bugs':>6}{'hits':>6}{'miss':>6}{'skip':>6}{'recall':>8}")
    for rule in sorted(figures, key=lambda r: (r == "all", r)):
        f = figures[rule]
        recall = "-" if f["recall"] is None else f"{f['recall']:.2f}"
        out(f"{rule:<7}{f['bugs']:>6}{f['hits']:>6}{f['misses']:>6}{f['skipped']:>6}{recall:>8}")
    misses = [r for r in results if r["status"] != "hit"]
    if misses:
        out("")
        out("misses:")
    for r in misses:
        got = ", ".join(f"{f['rule']}@{f['line']}" for f in r["found"]) or "nothing"
        extra = f" ({r['why']})" if r.get("why") else ""
        out(f"  [{r['status']}] {r['repo']}@{r['commit'][:12]} {r['path']}:{r['lines']} {r['rule']}: "
            f"{shorten(r['description'], 100)}; reported {got}{extra}")
    return figures


# ----------------------------------------------------------------------------- main

def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clones", default=DEFAULT_CLONES, help="where the trees go")
    parser.add_argument("--rules", help="only these rules (ids or id prefixes, comma-separated)")
    parser.add_argument("--corpus", default=str(HERE / "corpus.tsv"))
    parser.add_argument("--ledger", default=str(HERE / "ledger.tsv"))
    parser.add_argument("--bugs", default=str(HERE / "bugs.tsv"))
    parser.add_argument("--repo", action="append", help="only this repository, for precision and recall (repeatable)")
    parser.add_argument("--no-clone", action="store_true",
                        help="use local mirrors and --clones only (sets TRAINLINT_NO_CLONE)")
    parser.add_argument("--no-recall", action="store_true")
    parser.add_argument("--no-precision", action="store_true")
    parser.add_argument("--json", metavar="OUT", help="write findings and figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a finding is untriaged")
    parser.add_argument("--verbose", action="store_true", help="list stale ledger rows")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None, roots: Optional[Iterable[Path]] = None) -> int:
    args = parse_args(argv)
    if args.no_clone:
        os.environ["TRAINLINT_NO_CLONE"] = "1"
    clones = Path(args.clones)
    started = time.monotonic()
    result: dict = {"version": 1}
    untriaged = 0
    if not args.no_precision:
        corpus = load_corpus(Path(args.corpus))
        if args.repo:
            corpus = {r: v for r, v in corpus.items() if r in set(args.repo)}
        ledger = load_ledger(Path(args.ledger))
        print(f"corpus: {len(corpus)} repositories, "
              f"{sum(len(p) for _, p in corpus.values())} files", flush=True)
        findings, errors, skipped = check_corpus(
            corpus, clones, args.rules, roots, log=lambda m: print(m, flush=True))
        checked = [r for r in corpus if r not in skipped]
        tallies = report_precision(findings, errors, skipped, ledger, checked, args.rules,
                                   args.verbose)
        untriaged = sum(1 for f in findings if verdict_of(f, ledger) == "untriaged")
        result.update(
            repositories=len(corpus), files=sum(len(p) for _, p in corpus.values()),
            skipped=skipped,
            findings=[dict(f, verdict=verdict_of(f, ledger)) for f in findings],
            errors=errors,
            precision={rule: t.figures() for rule, t in sorted(tallies.items())},
            totals={s: totals(tallies, s).figures() for s in ("error", "warning")},
            no_longer_reported=stale_rows(ledger, findings, checked, args.rules))
    if not args.no_recall:
        bugs_path = Path(args.bugs)
        ensure_file(bugs_path, BUGS_HEADER)
        bugs = load_bugs(bugs_path)
        if args.repo:
            bugs = [b for b in bugs if b["repo"] in set(args.repo)]
        results = check_bugs(bugs, clones, args.rules, roots)
        result["recall"] = report_recall(results)
        result["bugs"] = results
    elapsed = time.monotonic() - started
    result["seconds"] = round(elapsed, 1)
    print(f"\ntotal time: {elapsed:.1f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 1 if args.strict and untriaged else 0


if __name__ == "__main__":
    sys.exit(main())
