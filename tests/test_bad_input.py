"""Bad input gets a clear per-file error, the other files are still checked, exit code 2."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_support import CLIP_AFTER_STEP, run, run_json, write


def _check_with_good_file(tmp_path, bad_name):
    good = write(tmp_path, "good/train.py", CLIP_AFTER_STEP)
    result, data = run_json(tmp_path / bad_name, good)
    assert result.exit_code == 2
    assert [f["rule"] for f in data["findings"]] == ["TL101"], "the good file is still checked"
    assert len(data["errors"]) == 1
    assert "Traceback" not in result.output
    return data["errors"][0]["message"]


def test_syntax_error(tmp_path):
    write(tmp_path, "broken.py", "import torch\nfor x in loader\n    optimizer.step()\n")
    message = _check_with_good_file(tmp_path, "broken.py")
    assert message.startswith("syntax error at line 2")


def test_syntax_error_in_a_file_the_prefilter_skips(tmp_path):
    write(tmp_path, "broken.py", "def f(:\n    pass\n")
    assert _check_with_good_file(tmp_path, "broken.py").startswith("syntax error at line 1")


def test_non_utf8_without_cookie(tmp_path):
    (tmp_path / "latin.py").write_bytes("# caf\xe9\nimport torch\n".encode("latin-1"))
    message = _check_with_good_file(tmp_path, "latin.py")
    assert "cannot decode as utf-8" in message and "0xe9" in message


def test_latin1_with_a_coding_cookie_is_analyzed(tmp_path):
    source = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + CLIP_AFTER_STEP
    path = tmp_path / "latin.py"
    path.write_bytes(source.encode("latin-1"))
    result, data = run_json(path)
    assert result.exit_code == 1
    assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 11)]


def test_binary_file(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"\x7fELF\x00\x01\x02")
    assert "binary file" in _check_with_good_file(tmp_path, "blob.py")


def test_empty_file_is_fine(tmp_path):
    result, data = run_json(write(tmp_path, "empty.py", ""))
    assert result.exit_code == 0 and data == {"version": 1, "findings": [], "errors": []}


def test_missing_path(tmp_path):
    assert _check_with_good_file(tmp_path, "nope.py") == "no such file or directory"


def test_unreadable_file(tmp_path):
    path = write(tmp_path, "secret.py", CLIP_AFTER_STEP)
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("chmod 000 does not stop this user (root); test_unreadable_file_simulated covers it")
        assert _check_with_good_file(tmp_path, path.name) == "permission denied"
    finally:
        path.chmod(0o644)


def test_unreadable_file_simulated(tmp_path, monkeypatch):
    # The same refusal, raised where the OS would raise it, so it is tested under root as well.
    path = write(tmp_path, "secret.py", CLIP_AFTER_STEP)
    original = Path.read_bytes

    def read_bytes(self):
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied", str(self))
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert _check_with_good_file(tmp_path, path.name) == "permission denied"


def test_deeply_nested_expression(tmp_path):
    write(tmp_path, "deep.py", "x = " + "(" * 5000 + "1" + ")" * 5000 + "\nloss.backward()\n")
    assert _check_with_good_file(tmp_path, "deep.py").startswith("nesting too deep to analyze")


def test_deeply_nested_statements(tmp_path):
    source = "".join("    " * depth + "if x:\n" for depth in range(150)) + "    " * 150 + "loss.backward()\n"
    write(tmp_path, "deep.py", source)
    assert _check_with_good_file(tmp_path, "deep.py").startswith("nesting too deep to analyze")


def test_huge_file(tmp_path):
    path = tmp_path / "huge.py"
    path.write_bytes(b"# " + b"x" * (11 * 1024 * 1024) + b"\n")
    assert _check_with_good_file(tmp_path, "huge.py").startswith("file too large")


def test_directory_with_only_bad_files_reports_each(tmp_path):
    write(tmp_path, "a.py", "def f(:\n")
    (tmp_path / "b.py").write_bytes(b"\x00\x00")
    result, data = run_json(tmp_path)
    assert result.exit_code == 2
    assert [e["path"].rsplit("/", 1)[-1] for e in data["errors"]] == ["a.py", "b.py"]


def test_nothing_is_written(tmp_path):
    path = write(tmp_path, "train.py", CLIP_AFTER_STEP)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    run(path)
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    assert before == after


def test_utf8_bom_is_analyzed(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + CLIP_AFTER_STEP.encode())
    result, data = run_json(path)
    assert result.exit_code == 1
    assert [(f["rule"], f["line"], f["column"]) for f in data["findings"]] == [("TL101", 9, 5)]


def test_unknown_coding_cookie(tmp_path):
    (tmp_path / "odd.py").write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    assert "no-such-codec" in _check_with_good_file(tmp_path, "odd.py")


def test_coding_cookie_naming_a_codec_that_is_not_a_text_encoding(tmp_path):
    (tmp_path / "rot.py").write_bytes(b"# coding: rot13\nx = 1\n")
    assert "rot13" in _check_with_good_file(tmp_path, "rot.py")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_an_error_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    assert _check_with_good_file(tmp_path, "pipe.py") == "not a regular file"


def test_an_internal_error_is_reported_for_that_file_only(tmp_path, monkeypatch):
    from trainlint import engine

    real = engine.analyze_results

    def analyze_results(source, rules, *args):
        if "explode" in source:
            raise KeyError("boom")
        return real(source, rules, *args)

    monkeypatch.setattr(engine, "analyze_results", analyze_results)
    write(tmp_path, "explode.py", "explode = 1\n")
    assert _check_with_good_file(tmp_path, "explode.py") == "internal error: KeyError: 'boom'"


def test_a_file_with_no_rules_left_still_reports_its_syntax_error(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.trainlint.per-file-ignores]\n"broken.py" = ["ALL"]\n')
    write(tmp_path, "broken.py", "def f(:\n")
    assert _check_with_good_file(tmp_path, "broken.py").startswith("syntax error at line 1")
