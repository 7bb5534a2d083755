"""Result cache, parallel checking and .gitignore: same findings, less work, never a crash."""
from __future__ import annotations

import json
import subprocess

from cli_support import BOTH, CLEAN, CLIP_AFTER_STEP, run_json, write
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
