"""The pre-commit hook, run by the real pre-commit against a throwaway repository."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import CLEAN, CLIP_AFTER_STEP

CHECKOUT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def hook_source(tmp_path_factory):
    """This checkout as a git repository at a commit, as pre-commit requires (uncommitted work
    included, so the test checks what is on disk)."""
    source = tmp_path_factory.mktemp("hook-source")
    shutil.copytree(CHECKOUT, source / "trainlint", ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", ".trainlint_cache", "build", ".ruff_cache", ".benchmarks"))
    repo = source / "trainlint"
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "hook")
    return repo


def _try_repo(hook_source: Path, work: Path, name: str, text: str) -> subprocess.CompletedProcess:
    work.mkdir(parents=True, exist_ok=True)
    _git(work, "init", "-q")
    (work / name).write_text(text, encoding="utf-8")
    _git(work, "add", name)
    env = dict(os.environ, PRE_COMMIT_HOME=str(work.parent / "pre-commit-home"))
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_source), "trainlint"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )


def test_buggy_staged_file_fails_the_hook(hook_source, tmp_path):
    result = _try_repo(hook_source, tmp_path / "work", "train.py", CLIP_AFTER_STEP)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "TL101 [clip-after-step]" in result.stdout


def test_clean_staged_file_passes_the_hook(hook_source, tmp_path):
    result = _try_repo(hook_source, tmp_path / "work", "train.py", CLEAN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout
