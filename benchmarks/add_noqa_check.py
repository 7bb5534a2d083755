"""Acceptance check of ``trainlint --add-noqa`` on the real-world harness's development corpus.

For each repository of ``benchmarks/real_world/corpus.tsv`` (only that file: the validation split
is never read), its materialised tree (``/tmp/trainlint-real-world/owner+name@<12 hex>/``, which
is only read, never written) is copied to ``--work`` (default ``/tmp/addnoqa/``), and there:

1. ``trainlint check --format json`` on the listed paths counts the findings before;
2. ``trainlint check --add-noqa`` on them writes the comments;
3. ``trainlint check`` on them must find nothing, with the default rules and with
   ``--extend-select ADVICE``;
4. a second ``--add-noqa`` must change no file (hashes of every .py/.ipynb file of the tree);
5. every file the comments changed must still compile (if it did before) and parse to the same
   syntax tree (``ast.dump`` without positions) as the original.

The comments are written with ``--extend-select ADVICE`` (``--rules default`` for the default set
only), a superset of the default rules, so that both checks of step 3 apply.

    python benchmarks/add_noqa_check.py                       # every development repository
    python benchmarks/add_noqa_check.py --repo karpathy/nanoGPT --json figures.json
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "real_world"))
sys.path.insert(0, str(ROOT))

from run import DEFAULT_CLONES, chunks, load_corpus, tree_dir  # noqa: E402  (the harness's own helpers)

CORPUS = ROOT / "benchmarks" / "real_world" / "corpus.tsv"
ADDED = re.compile(r"Added (\d+) noqa comments? to (\d+) files?\.")
SUFFIXES = (".py", ".ipynb")


def trainlint(tree: Path, paths: Sequence[str], *options: str, jobs: int) -> Tuple[List[dict], List[dict], str]:
    """(findings, errors, stderr) of ``trainlint check OPTIONS`` on ``paths`` with cwd ``tree``;
    findings and errors are read only with ``--format json``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    findings: List[dict] = []
    errors: List[dict] = []
    stderr = []
    for batch in chunks(list(paths)):
        command = [sys.executable, "-m", "trainlint", "check", "--no-cache", "--jobs", str(jobs), *options, "--", *batch]
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env)
        if done.returncode not in (0, 1, 2):
            raise RuntimeError(f"trainlint failed ({done.returncode}) in {tree}: {done.stderr[-2000:]}")
        stderr.append(done.stderr)
        if "--format" in options:
            report = json.loads(done.stdout)
            findings += report["findings"]
            errors += report["errors"]
    return findings, errors, "".join(stderr)


def _links_into(tree: Path, clones: Path) -> Optional[str]:
    """A symbolic link of the copy that leads into the harness's trees, if any."""
    clones = clones.resolve()
    for directory, subdirectories, files in os.walk(tree):
        for name in subdirectories + files:
            path = Path(directory, name)
            if path.is_symlink() and (path.resolve() == clones or clones in path.resolve().parents):
                return path.relative_to(tree).as_posix()
    return None


def hashes(tree: Path) -> Dict[str, str]:
    result = {}
    for directory, subdirectories, files in os.walk(tree):
        subdirectories[:] = [d for d in subdirectories if d != ".git"]
        for name in files:
            if name.endswith(SUFFIXES):
                path = Path(directory, name)
                if path.is_file() and not path.is_symlink():
                    result[path.relative_to(tree).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result


def _text(path: Path) -> str:
    from trainlint.files import decode_source

    return decode_source(path.read_bytes())


def _codes(path: Path) -> List[str]:
    """The Python a file holds: the module, or a notebook's code cells (magics neutralised)."""
    if path.suffix != ".ipynb":
        return [_text(path)]
    from trainlint.notebooks import _cell_source, _neutralise

    cells = json.loads(_text(path))["cells"]
    return ["\n".join(_neutralise(_cell_source(c, i))) + "\n" for i, c in enumerate(cells, 1) if c.get("cell_type") == "code"]


def _compiles(code: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(code, "<file>", "exec", dont_inherit=True)
            return True
        except (SyntaxError, ValueError):
            return False


def _tree(code: str) -> Optional[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.dump(ast.parse(code), include_attributes=False)
        except (SyntaxError, ValueError):
            return None


def _rest_of_notebook(path: Path) -> object:
    """A notebook without its cells' sources: what the comments must not touch."""
    data = json.loads(_text(path))
    for cell in data.get("cells", []):
        cell.pop("source", None)
    return data


def check_repo(repo: str, commit: str, paths: List[str], clones: Path, work: Path, rules: List[str], jobs: int) -> dict:
    source = tree_dir(clones, repo, commit)
    if not source.is_dir():
        return {"repo": repo, "skipped": f"not materialised at {source}"}
    tree = work / source.name
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(source, tree, symlinks=True)
    escaping = _links_into(tree, clones)
    if escaping:  # writing through it would change the harness's tree
        shutil.rmtree(tree)
        return {"repo": repo, "skipped": f"{escaping} is a symbolic link into {clones}"}
    paths = [p for p in paths if (tree / p).is_file()]
    json_options = ("--format", "json", *rules)
    before, errors, _ = trainlint(tree, paths, *json_options, jobs=jobs)
    _, _, added_text = trainlint(tree, paths, "--add-noqa", *rules, jobs=jobs)
    comments = sum(int(m.group(1)) for m in ADDED.finditer(added_text))
    refused = [line for line in added_text.splitlines() if "cannot add noqa comments" in line]
    after_first = hashes(tree)
    after_default, _, _ = trainlint(tree, paths, "--format", "json", jobs=jobs)
    after_advice, _, _ = trainlint(tree, paths, "--format", "json", "--extend-select", "ADVICE", jobs=jobs)
    _, _, again_text = trainlint(tree, paths, "--add-noqa", *rules, jobs=jobs)
    after_second = hashes(tree)
    changed = sorted(p for p, digest in after_first.items() if (source / p).is_file()
                     and hashlib.sha256((source / p).read_bytes()).hexdigest() != digest)
    compiled = same_tree = compiled_before = 0
    different = []
    for name in changed:
        old, new = _codes(source / name), _codes(tree / name)
        compiled_before += all(_compiles(code) for code in old)
        compiled += all(_compiles(code) for code in new)
        same = len(old) == len(new) and all(_tree(a) is not None and _tree(a) == _tree(b) for a, b in zip(old, new))
        if name.endswith(".ipynb"):
            same = same and _rest_of_notebook(source / name) == _rest_of_notebook(tree / name)
        same_tree += same
        if not same:
            different.append(name)
    return {
        "repo": repo, "files": len(paths), "analysis_errors": len(errors), "findings_before": len(before),
        "comments_added": comments, "files_changed": len(changed), "refused": refused,
        "findings_after_default": len(after_default), "findings_after_advice": len(after_advice),
        "leftover": [f"{f['path']}:{f['line']} {f['rule']}" for f in after_default + after_advice],
        "second_run_changed": sorted(p for p in set(after_first) | set(after_second)
                                     if after_first.get(p) != after_second.get(p)),
        "second_run_added": sum(int(m.group(1)) for m in ADDED.finditer(again_text)),
        "compiled_before": compiled_before, "compiles": compiled, "ast_identical": same_tree, "ast_different": different,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", help="only this repository (owner/name); repeatable")
    parser.add_argument("--corpus", default=str(CORPUS), help="the development corpus (tests pass a small one; "
                        "the validation split is refused)")
    parser.add_argument("--clones", default=DEFAULT_CLONES, help="the harness's materialised trees (read only)")
    parser.add_argument("--work", default="/tmp/addnoqa", help="where the copies are made and rewritten")
    parser.add_argument("--rules", choices=("advice", "default"), default="advice",
                        help="the rules --add-noqa runs with: default plus ADVICE (default), or the default set")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if (ROOT / "benchmarks" / "real_world" / "validation") in Path(args.corpus).resolve().parents:
        parser.error("the validation split is held out: it is never used to check --add-noqa")
    corpus = load_corpus(Path(args.corpus))
    repos = args.repo or sorted(corpus)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rules = ["--extend-select", "ADVICE"] if args.rules == "advice" else []
    results = []
    started = time.perf_counter()
    for repo in repos:
        commit, paths = corpus[repo]
        result = check_repo(repo, commit, paths, Path(args.clones), work, rules, args.jobs)
        results.append(result)
        if "skipped" in result:
            print(f"{repo}: skipped ({result['skipped']})", flush=True)
            continue
        print(f"{repo}: {result['files']} files, {result['findings_before']} findings, {result['comments_added']} comments "
              f"in {result['files_changed']} files; after: {result['findings_after_default']} default, "
              f"{result['findings_after_advice']} with advice; second run changed {len(result['second_run_changed'])}; "
              f"AST identical {result['ast_identical']}/{result['files_changed']}", flush=True)
    done = [r for r in results if "skipped" not in r]

    def total(key: str) -> int:
        return sum(r[key] if isinstance(r[key], int) else len(r[key]) for r in done)

    figures = {
        "repositories": len(done), "skipped": len(results) - len(done), "files": total("files"),
        "analysis_errors": total("analysis_errors"), "findings_before": total("findings_before"),
        "comments_added": total("comments_added"), "files_changed": total("files_changed"),
        "refused": total("refused"), "findings_after_default": total("findings_after_default"),
        "findings_after_advice": total("findings_after_advice"),
        "idempotent": total("second_run_changed") == 0 and total("second_run_added") == 0,
        "compiled_before": total("compiled_before"), "compiles_after": total("compiles"),
        "ast_identical": total("ast_identical"), "seconds": round(time.perf_counter() - started, 1),
    }
    print()
    print(f"repositories {figures['repositories']} (skipped {figures['skipped']}), listed files {figures['files']} "
          f"(could not be analysed: {figures['analysis_errors']})")
    print(f"findings before: {figures['findings_before']} (--add-noqa rules: {args.rules})")
    print(f"noqa comments added: {figures['comments_added']}, files changed: {figures['files_changed']}, "
          f"files refused: {figures['refused']}")
    print(f"findings after: {figures['findings_after_default']} (default rules), "
          f"{figures['findings_after_advice']} (--extend-select ADVICE)")
    print(f"idempotent: {'yes' if figures['idempotent'] else 'no'} (second run changed "
          f"{total('second_run_changed')} files, added {total('second_run_added')} comments)")
    print(f"compile: {figures['compiles_after']} of {figures['files_changed']} changed files "
          f"({figures['compiled_before']} compiled before)")
    print(f"AST identical: {figures['ast_identical']} of {figures['files_changed']} changed files")
    for r in done:
        for key in ("refused", "leftover", "second_run_changed", "ast_different"):
            for item in r[key]:
                print(f"  {r['repo']}: {key}: {item}")
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "repositories": results}, indent=2) + "\n")
    ok = (figures["findings_after_default"] == 0 and figures["findings_after_advice"] == 0 and figures["idempotent"]
          and figures["ast_identical"] == figures["files_changed"] and figures["compiles_after"] >= figures["compiled_before"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
