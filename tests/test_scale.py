"""Result cache, parallel checking and .gitignore: same findings, less work, never a crash."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_support import BOTH, CLEAN, CLIP_AFTER_STEP, run, run_json, write
from trainlint import cache as cache_module


def _cache_files(directory):
    return sorted(p for p in directory.rglob("*.json"))


def test_warm_run_reads_the_cache_and_agrees(tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(cache_dir))
    path = write(tmp_path, "src/train.py", BOTH)
    _, cold = run_json(path)
    assert len(_cache_files(cache_dir)) == 1
    calls = []
    monkeypatch.setattr("trainlint.engine._analyze", lambda *a: calls.append(a) or ([], []))
    _, warm = run_json(path)
    assert warm == cold and calls == []  # answered from the cache, analyzer not called


def test_cache_key_covers_content_and_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "cache"))
    path = write(tmp_path, "train.py", BOTH)
    run_json(path)
    _, selected = run_json("--select", "TL101", path)
    assert {f["rule"] for f in selected["findings"]} == {"TL101"}
    path.write_text(CLEAN, encoding="utf-8")
    _, changed = run_json(path)
    assert changed["findings"] == []


def test_no_cache_writes_nothing(tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(cache_dir))
    run_json("--no-cache", write(tmp_path, "train.py", BOTH))
    assert not cache_dir.exists()


def test_corrupt_or_foreign_cache_entries_are_ignored(tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(cache_dir))
    path = write(tmp_path, "train.py", BOTH)
    _, expected = run_json(path)
    (entry,) = _cache_files(cache_dir)
    for garbage in ("{not json", json.dumps({"format": 99}), json.dumps({"format": 1, "version": "0.1.0", "findings": [{"bogus": 1}]}), "[]"):
        entry.write_text(garbage, encoding="utf-8")
        result, data = run_json(path)
        assert data == expected and result.exit_code == 1


def test_parallel_jobs_give_the_same_report(tmp_path):
    for i in range(40):
        write(tmp_path, f"pkg/m{i:02}.py", [BOTH, CLEAN, CLIP_AFTER_STEP, "def f(:\n"][i % 4])
    serial_result, serial = run_json("--no-cache", "--jobs", "1", tmp_path)
    parallel_result, parallel = run_json("--no-cache", "--jobs", "2", tmp_path)
    assert parallel == serial and parallel_result.exit_code == serial_result.exit_code == 2
    assert len(serial["findings"]) == 30 and len(serial["errors"]) == 10


def test_gitignore_is_respected_inside_a_git_repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, ".gitignore", "generated/\nscratch.py\n")
    write(tmp_path, "generated/train.py", CLIP_AFTER_STEP)
    write(tmp_path, "scratch.py", CLIP_AFTER_STEP)
    write(tmp_path, "train.py", CLIP_AFTER_STEP)
    _, data = run_json(tmp_path)
    assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.py"]
    _, everything = run_json("--no-respect-gitignore", tmp_path)
    assert len(everything["findings"]) == 3
    _, explicit = run_json(tmp_path / "scratch.py")
    assert len(explicit["findings"]) == 1, "an explicitly named file is checked"


def test_a_directory_whose_files_git_all_ignores_says_so_and_names_the_flag(tmp_path):
    """An installed package inside a git-managed tree (pyenv ignores its /versions): every file is
    left out, and a bare "no Python files found" would not say why."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, ".gitignore", "/versions\n")
    write(tmp_path, "versions/pkg/train.py", CLIP_AFTER_STEP)
    write(tmp_path, "versions/pkg/util.py", CLEAN)
    result = run(tmp_path / "versions" / "pkg")
    assert result.exit_code == 0 and result.stdout == ""
    assert ("warning: no Python files found under the given paths (2 files left out because git ignores them; "
            "--no-respect-gitignore checks them)") in result.stderr
    assert "git ignores" not in run(write(tmp_path, "empty/README.md", "").parent).stderr


def test_cache_directory_marks_itself(tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(cache_dir))
    run_json(write(tmp_path, "train.py", BOTH))
    assert (cache_dir / ".gitignore").read_text().strip().endswith("*")
    assert cache_module.cache_dir(tmp_path) == cache_dir


def test_cache_key_covers_trainlint_code(monkeypatch):
    # An analyzer edited in a checkout (same version string) must not reuse the old code's results.
    args = (b"x = 1\n", "py", frozenset({"TL101"}), {})
    before = cache_module.key(*args)
    monkeypatch.setattr(cache_module, "_code_fingerprint", lambda: "edited")
    assert cache_module.key(*args) != before


def test_cache_key_covers_the_catalog_text(tmp_path, monkeypatch):
    # A rule edited in the checkout's rules/ (a trigger, not its tier) must not reuse old results.
    import shutil

    from trainlint import catalog

    rules = tmp_path / "rules"
    shutil.copytree(catalog._catalog_directory(), rules)
    monkeypatch.setattr(catalog, "_catalog_directory", lambda: rules)
    args = (b"x = 1\n", "py", frozenset({"TL502"}), {})
    catalog.catalog_digest.cache_clear()
    before = cache_module.key(*args)
    (entry,) = rules.glob("TL502-*.toml")
    entry.write_text(entry.read_text(encoding="utf-8") + "\n# an edited trigger\n", encoding="utf-8")
    catalog.catalog_digest.cache_clear()
    try:
        assert cache_module.key(*args) != before
    finally:
        catalog.catalog_digest.cache_clear()


def _poisoned_entry_runs(tmp_path, monkeypatch, poison):
    """The report of a run whose cache entry for train.py was replaced by ``poison(entry)``, next
    to a good file, and the report of the same run without a cache."""
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(cache_dir))
    bad = write(tmp_path, "bad/train.py", BOTH)
    good = write(tmp_path, "good/train.py", CLIP_AFTER_STEP)
    _, expected = run_json("--no-cache", bad, good)
    run_json(bad)
    (entry,) = _cache_files(cache_dir)
    poison(entry)
    result, data = run_json(bad, good)
    return result, data, expected


WRONG_TYPES = {
    "findings of ints": lambda e, f: {**e, "findings": [1, 2]},
    "findings a dict": lambda e, f: {**e, "findings": {"a": 1}},
    "findings null": lambda e, f: {**e, "findings": None},
    "a finding null": lambda e, f: {**e, "findings": [None]},
    "line a string": lambda e, f: {**e, "findings": [{**f, "line": "9"}]},
    "line a bool": lambda e, f: {**e, "findings": [{**f, "line": True}]},
    "rule null": lambda e, f: {**e, "findings": [{**f, "rule": None}]},
    "message a list": lambda e, f: {**e, "findings": [{**f, "message": ["x"]}]},
    "severity unknown": lambda e, f: {**e, "findings": [{**f, "severity": "fatal"}]},
    "rule unknown": lambda e, f: {**e, "findings": [{**f, "rule": "TL999"}]},
    "cell a string": lambda e, f: {**e, "findings": [{**f, "cell": "3"}]},
    "trace an int": lambda e, f: {**e, "findings": [{**f, "trace": 5}]},
    "trace of nulls": lambda e, f: {**e, "findings": [{**f, "trace": [None]}]},
    "path an int": lambda e, f: {**e, "findings": [{**f, "path": 3}]},
    "errors of ints": lambda e, f: {**e, "errors": [1]},
    "errors null": lambda e, f: {**e, "errors": None},
    "modules a list": lambda e, f: {**e, "modules": ["x"]},
    "modules null": lambda e, f: {**e, "modules": None},
    "a module digest an int": lambda e, f: {**e, "modules": {"x.py": 1}},
    "the entry a list": lambda e, f: [e],
}


@pytest.mark.parametrize("shape", sorted(WRONG_TYPES))
def test_cache_entries_of_the_wrong_shape_are_misses(tmp_path, monkeypatch, shape):
    # Valid JSON, wrong value types: before, some crashed the run (sorting or rendering the
    # findings) and others were reported as findings with a wrong rule, line or error message.
    def poison(entry):
        stored = json.loads(entry.read_text(encoding="utf-8"))
        entry.write_text(json.dumps(WRONG_TYPES[shape](stored, stored["findings"][0])), encoding="utf-8")

    result, data, expected = _poisoned_entry_runs(tmp_path, monkeypatch, poison)
    assert data == expected and result.exit_code == 1, "recomputed, as without the cache"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_in_the_cache_directory_does_not_hang(tmp_path):
    # Before: reading the entry (or writing CACHEDIR.TAG) blocked forever on the FIFO. In a
    # subprocess, so a regression fails on the timeout instead of hanging the test run.
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "TRAINLINT_CACHE_DIR": str(cache_dir)}
    bad = write(tmp_path, "bad/train.py", BOTH)
    good = write(tmp_path, "good/train.py", CLIP_AFTER_STEP)
    command = [sys.executable, "-m", "trainlint", "--format", "json", str(bad), str(good)]
    expected = json.loads(subprocess.run([*command, "--no-cache"], capture_output=True, env=env, timeout=120).stdout)
    subprocess.run([sys.executable, "-m", "trainlint", str(bad)], capture_output=True, env=env, timeout=120)
    (entry,) = _cache_files(cache_dir)
    for path in (entry, cache_dir / ".gitignore", cache_dir / "CACHEDIR.TAG"):
        path.unlink()
        os.mkfifo(path)
    result = subprocess.run(command, capture_output=True, env=env, timeout=60)
    assert result.returncode == 1 and json.loads(result.stdout) == expected
    assert entry.is_file(), "the entry was written again, in place of the FIFO"
