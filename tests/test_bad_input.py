"""Bad input gets a clear per-file error, the other files are still checked, exit code 2."""
from __future__ import annotations

import io
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


def test_a_preprocessor_codec_python_lacks_is_read_as_utf8_with_a_note(tmp_path):
    """``# -*- coding: future_fstrings -*-`` names a codec a package registers at run time: the file
    is still Python, so it is analysed (here: its TL101) and a note says how it was read."""
    path = tmp_path / "train.py"
    path.write_bytes(b"# -*- coding: future_fstrings -*-\n# caf\xc3\xa9\n" + CLIP_AFTER_STEP.encode())
    result, data = run_json(path)
    assert result.exit_code == 1 and data["errors"] == []
    assert [(f["rule"], f["line"]) for f in data["findings"]] == [("TL101", 11)]
    assert ["future_fstrings" in note["message"] and "UTF-8" in note["message"] for note in data["incomplete"]] == [True]


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


# Issue 16: faults of the file system and of --fix. We run as root, whom permissions do not stop,
# so refusals are raised where the OS would raise them for another user (as above).


def _deny(monkeypatch, directory):
    """What the OS does to a non-root user for a directory of mode 000: the directory itself can
    be stat'ed, but not listed or opened, nothing below it can be reached, and access() says no."""
    directory = os.path.abspath(directory)

    def refusal(path):
        path = os.path.abspath(os.fsdecode(path))
        return path.startswith(directory + os.sep), path == directory

    def guard(name, real):
        def call(path=".", *args, **kwargs):
            if isinstance(path, int):  # a file descriptor
                return real(path, *args, **kwargs)
            below, itself = refusal(path)
            if name == "access":
                return False if below or itself else real(path, *args, **kwargs)
            if below or (itself and name in ("open", "scandir", "listdir")):
                raise PermissionError(13, "Permission denied", os.fsdecode(path))
            return real(path, *args, **kwargs)
        return call

    for name in ("stat", "lstat", "open", "scandir", "listdir", "access"):
        monkeypatch.setattr(os, name, guard(name, getattr(os, name)))
    monkeypatch.setattr(io, "open", guard("open", io.open))  # what pathlib opens files with


def test_a_symlink_loop_in_a_walked_directory_is_an_error(tmp_path):
    # Named *.py, pathlib's resolve() raised RuntimeError (a traceback); without the suffix, a loop
    # was skipped silently, though it may stand for a directory that should have been checked.
    write(tmp_path, "src/train.py", CLIP_AFTER_STEP)
    os.symlink("loop", tmp_path / "src" / "loop")
    os.symlink("loop.py", tmp_path / "src" / "loop.py")
    for args in ([], ["--no-respect-gitignore"]):
        result, data = run_json(*args, tmp_path / "src")
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.py"]
        assert [(e["path"].rsplit("/", 1)[-1], e["message"]) for e in data["errors"]] == [
            ("loop", "symbolic link loop"), ("loop.py", "symbolic link loop")]


def test_a_symlink_loop_named_on_the_command_line_is_an_error(tmp_path):
    os.symlink("loop.py", tmp_path / "loop.py")
    assert _check_with_good_file(tmp_path, "loop.py") == "symbolic link loop"


def test_an_unreadable_subdirectory_is_an_error_and_the_rest_is_checked(tmp_path, monkeypatch):
    # Before: looking for pyvenv.cfg in it raised PermissionError out of the walk (a traceback).
    write(tmp_path, "src/train.py", CLIP_AFTER_STEP)
    write(tmp_path, "src/locked/hidden.py", CLIP_AFTER_STEP)
    _deny(monkeypatch, tmp_path / "src" / "locked")
    result, data = run_json(tmp_path / "src")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [f["path"].rsplit("/", 1)[-1] for f in data["findings"]] == ["train.py"]
    assert [(e["path"].rsplit("/", 1)[-1], e["message"]) for e in data["errors"]] == [
        ("locked", "cannot list directory: permission denied")]


def test_an_unreadable_file_named_on_the_command_line_is_its_own_error(tmp_path, monkeypatch):
    # Before: click's readable check made it a usage error, and no other path was checked.
    write(tmp_path, "secret.py", CLIP_AFTER_STEP)
    real_access, real_read = os.access, Path.read_bytes
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if os.fsdecode(p).endswith("secret.py") else real_access(p, mode, *a, **k))
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                        if self.name == "secret.py" else real_read(self))
    assert _check_with_good_file(tmp_path, "secret.py") == "permission denied"


@pytest.mark.parametrize("name, message", [
    ("locked/secret.py", "permission denied"),  # before: a traceback from the configuration lookup
    ("locked", "permission denied: directory is not readable"),  # before: a usage error
])
def test_a_path_in_or_of_an_unreadable_directory_is_its_own_error(tmp_path, monkeypatch, name, message):
    write(tmp_path, "locked/secret.py", CLIP_AFTER_STEP)
    write(tmp_path, "good/train.py", CLIP_AFTER_STEP)
    _deny(monkeypatch, tmp_path / "locked")
    assert _check_with_good_file(tmp_path, name) == message


def test_fix_on_a_read_only_file_is_an_error_and_the_other_files_are_fixed(tmp_path, monkeypatch):
    # Before: PermissionError out of --fix (a traceback), the files after it left unfixed.
    readonly = write(tmp_path, "a_readonly.py", CLIP_AFTER_STEP)
    other = write(tmp_path, "b_other.py", CLIP_AFTER_STEP)
    real = Path.write_bytes

    def write_bytes(self, data):
        if self.name == readonly.name:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    result, data = run_json("--fix", tmp_path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert other.read_text(encoding="utf-8") != CLIP_AFTER_STEP, "the other file is fixed"
    assert readonly.read_text(encoding="utf-8") == CLIP_AFTER_STEP
    assert f"Fixed TL101 in {other.as_posix()}" in result.stderr and "a_readonly.py" not in result.stderr
    assert [f["path"] for f in data["findings"]] == [readonly.as_posix()], "its finding is still reported"
    assert data["errors"] == [{"path": readonly.as_posix(), "message": "cannot write the fix: permission denied"}]


def test_a_large_module_is_syntax_checked_exactly(tmp_path):
    # Modules that fail the pre-filter are compiled in parts (bounded memory); an error anywhere,
    # and a string spanning the parts, still get the whole module's verdict.
    body = "".join(f"value_{i} = {i}\n" for i in range(20000))
    write(tmp_path, "late.py", body + "def f(:\n    pass\n" + body)
    assert _check_with_good_file(tmp_path, "late.py").startswith("syntax error at line 20001")
    write(tmp_path, "long_string.py", 'TEXT = """\n' + body + '"""\n' + body)
    result, data = run_json(tmp_path / "long_string.py")
    assert result.exit_code == 0 and data["errors"] == []
