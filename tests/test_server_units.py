"""The language server's parts that need no pygls: the noqa edit, findings as LSP
diagnostics and edits, the per-file store, and one document's analysis from its unsaved text."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_support import CLEAN, CLIP_AFTER_STEP, run, write
from lsp_client import ROOT, apply_edits
from trainlint.catalog import get_rule, load_catalog
from trainlint.engine import check_source
from trainlint.findings import Finding
from trainlint.server import translate
from trainlint.server.analysis import Failure, Options, absolute, analyse, encode, failure_of, summary
from trainlint.server.noqa import noqa_text
from trainlint.server.store import DiagnosticStore

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT = frozenset(r.id for r in load_catalog().values() if not r.opt_in)
FIXTURES = ROOT / "fixtures"




# --------------------------------------------------------------------------- noqa
def _suppressed(text: str, line: int, rule: str = "TL101") -> str:
    edited = noqa_text(text, line, rule)
    assert edited is not None
    return edited


def test_noqa_appended_to_the_findings_line_silences_the_finding():
    [finding] = check_source(CLIP_AFTER_STEP, "train.py", _settings())
    edited = _suppressed(CLIP_AFTER_STEP, finding.line)
    assert edited.splitlines()[finding.line - 1].endswith("1.0)  # noqa: TL101")
    assert check_source(edited, "train.py", _settings()) == []


@pytest.mark.parametrize("comment, merged", [
    ("# noqa: TL102", "# noqa: TL102, TL101"),
    ("# noqa:TL102,TL103", "# noqa:TL102,TL103, TL101"),
    ("# trainlint: ignore[TL102]", "# trainlint: ignore[TL102, TL101]"),
    ("# keep the clip here", "# keep the clip here  # noqa: TL101"),
])
def test_noqa_merges_into_the_comment_already_there(comment, merged):
    text = CLIP_AFTER_STEP.replace("1.0)\n", f"1.0)  {comment}\n")
    edited = _suppressed(text, 9)
    assert edited.splitlines()[8].endswith(f"1.0)  {merged}")
    assert check_source(edited, "train.py", _settings()) == []


def test_noqa_goes_on_the_first_line_of_a_statement_over_several_lines():
    text = CLIP_AFTER_STEP.replace("clip_grad_norm_(model.parameters(), 1.0)\n",
                                   "clip_grad_norm_(\n        model.parameters(), 1.0\n    )\n")
    [finding] = check_source(text, "train.py", _settings())
    edited = _suppressed(text, finding.line)
    assert edited.splitlines()[finding.line - 1].endswith("clip_grad_norm_(  # noqa: TL101")
    assert check_source(edited, "train.py", _settings()) == []


@pytest.mark.parametrize("source, line, edited", [
    ('x = f("""a\nb""")\n', 1, 'x = f("""a\nb""")  # noqa: TL101\n'),  # the line ends inside a string
    ("x = 1 + \\\n    2\n", 1, "x = 1 + \\\n    2  # noqa: TL101\n"),  # a line continuation
])
def test_noqa_goes_where_the_statement_ends_when_its_line_cannot_hold_a_comment(source, line, edited):
    assert noqa_text(source, line, "TL101") == edited


@pytest.mark.parametrize("source, line", [
    ("x = 1  # noqa\n", 1),       # a bare noqa suppresses everything already
    ("x = 1\n", 5),               # no such line
])
def test_no_noqa_where_none_is_needed_or_possible(source, line):
    assert noqa_text(source, line, "TL101") is None


def test_noqa_keeps_line_ends():
    assert noqa_text("x = 1   \r\ny = 2\r\n", 1, "TL101") == "x = 1  # noqa: TL101\r\ny = 2\r\n"


# --------------------------------------------------------------------------- translation
def _finding(**changes) -> Finding:
    values = dict(path="train.py", line=2, column=5, rule="TL101", name="clip-after-step", severity="error",
                  message="m", end_line=2, end_column=9)
    values.update(changes)
    return Finding(**values)


@pytest.mark.parametrize("severity, expected", [("error", 1), ("warning", 2), ("info", 3)])
def test_severity_code_source_and_documentation_link(severity, expected):
    diagnostic = translate.diagnostic(_finding(severity=severity), ["", "    clip(x)"])
    assert diagnostic["severity"] == expected
    assert diagnostic["code"] == "TL101" and diagnostic["source"] == "trainlint"
    homepage = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]
    assert diagnostic["codeDescription"]["href"] == f"{homepage}/blob/main/rules/TL101-clip-after-step.toml"
    assert (ROOT / get_rule("TL101").doc_path).is_file()
    assert diagnostic["range"] == {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 8}}


def test_columns_count_the_agreed_code_units():
    line = 'y = "\U0001F600é"; clip(x)'  # an astral character (2 UTF-16 units, 4 UTF-8 bytes) and é (2 bytes)
    start = line.index("clip") + 1
    finding = _finding(line=1, column=start, end_line=1, end_column=start + len("clip(x)"))
    for encoding, shift in (("utf-16", 1), ("utf-8", 4), ("utf-32", 0)):
        rng = translate.diagnostic(finding, [line], encoding)["range"]
        assert rng["start"]["character"] == start - 1 + shift, encoding
        assert rng["end"]["character"] == start - 1 + shift + len("clip(x)"), encoding


@pytest.mark.parametrize("old, new", [
    (CLIP_AFTER_STEP, CLEAN),
    ("a\nb\nc", "a\nB\nc"),
    ("a\r\nb\r\n", "a\r\nc\r\nb\r\n"),
    ("a\nb", "a\nb\nc"),
    ("x = '\U0001F600'\nb\n", "x = '\U0001F600'\nc\n"),
])
def test_a_text_edit_turns_the_old_text_into_the_new(old, new):
    assert apply_edits(old, [translate.text_edit(old, new)]) == new


def test_failures_and_notes_are_diagnostics():
    lines = ["import torch", "x = (", ""]
    syntax = translate.failure_diagnostic(failure_of("syntax error at line 2, column 5: '(' was never closed"), lines)
    assert syntax["range"]["start"] == {"line": 1, "character": 4} and syntax["severity"] == 2
    crash = translate.failure_diagnostic(failure_of("internal error: RuntimeError: boom\nmore"), lines)
    assert crash["message"] == "analysis failed: RuntimeError: boom" and crash["severity"] == 1
    assert crash["range"]["start"] == {"line": 0, "character": 0}
    assert summary(ValueError("first\nsecond")) == "ValueError: first"
    [note] = translate.diagnostics(["budget"], "x\n")
    assert note["message"] == "analysis incomplete: budget" and note["severity"] == 3


def test_hover_shows_the_explanation_and_the_witness():
    text = translate.hover_markdown([_finding(trace=("step: optimizer.step() (line 8)", "reported: clip (line 9)"))])
    assert "step: optimizer.step() (line 8)\nreported: clip (line 9)" in text
    explained = run("explain", "TL101").stdout.strip()
    assert explained in text


def test_ranges_meet():
    rng = {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 8}}
    assert translate.contains(rng, {"line": 1, "character": 8})
    assert not translate.contains(rng, {"line": 2, "character": 0})
    assert translate.overlaps(rng, {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}})
    assert not translate.overlaps(rng, {"start": {"line": 1, "character": 9}, "end": {"line": 1, "character": 9}})


# --------------------------------------------------------------------------- store
def test_a_files_diagnostics_are_the_union_of_what_documents_report_into_it():
    store = DiagnosticStore()
    engine, train = Path("/p/engine.py"), Path("/p/train.py")
    shared = _finding(path="engine.py")
    assert store.replace("file:///p/train.py", {train: [_finding()], engine: [shared]}) == {train, engine}
    assert store.replace("file:///p/engine.py", {engine: [shared, "note"]}) == {engine}
    assert store.items(engine) == [shared, "note"]  # the same finding from both documents, once
    assert store.replace("file:///p/train.py", {train: []}) == {train, engine}
    assert store.items(engine) == [shared, "note"]
    store.drop_file(engine)
    assert store.items(engine) == []
    assert store.drop_source("file:///p/train.py") == {train}


# --------------------------------------------------------------------------- options and analysis
def test_editor_settings_over_the_command_lines_options():
    options = Options(select=("TL1",), cache=False)
    assert options.updated({"trainlint": {"ignore": "TL101", "extendSelect": ["ADVICE"], "config": "x.toml"}}) == Options(
        config="x.toml", select=("TL1",), extend_select=("ADVICE",), ignore=("TL101",), cache=False)
    assert options.updated({"select": [1, 2], "cache": "yes"}) == options  # not what it takes: ignored
    assert options.updated(None) == options


def _settings():
    from trainlint.engine import Settings

    return Settings(rules=DEFAULT, cache=False)


def test_the_unsaved_text_is_analysed_not_the_file(tmp_path):
    path = write(tmp_path, "train.py", CLEAN)
    outcome = analyse(path, CLIP_AFTER_STEP, Options(cache=False))
    assert [(f.rule, f.line) for f in outcome.findings[absolute(path)]] == [("TL101", 9)]
    path.write_text(CLIP_AFTER_STEP)
    assert analyse(path, CLEAN, Options(cache=False)).findings == {}
    assert analyse(tmp_path / "new.py", CLIP_AFTER_STEP, Options(cache=False)).findings  # never saved


def test_the_configuration_is_found_as_the_cli_finds_it(tmp_path):
    path = write(tmp_path / "pkg", "train.py", CLIP_AFTER_STEP)
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nper-file-ignores = { "pkg/train.py" = ["TL101"] }\n')
    assert analyse(path, CLIP_AFTER_STEP, Options(cache=False)).findings == {}
    assert analyse(path, CLIP_AFTER_STEP, Options(cache=False, select=("TL101",))).findings == {}  # ignores stay
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nexclude = ["pkg"]\n')
    assert analyse(path, CLIP_AFTER_STEP, Options(cache=False)).findings == {}
    write(tmp_path, "pyproject.toml", '[tool.trainlint]\nselect = ["TL999"]\n')
    failure = analyse(path, CLIP_AFTER_STEP, Options(cache=False)).failure
    assert failure.kind == "config" and "TL999" in failure.message and "pyproject.toml" in failure.message
    assert analyse(path, CLIP_AFTER_STEP, Options(cache=False, select=("TL999",))).failure.kind == "config"
    trainlint_toml = write(tmp_path, "trainlint.toml", 'ignore = ["clip-after-step"]\n')
    assert analyse(path, CLIP_AFTER_STEP, Options(cache=False, config=str(trainlint_toml))).findings == {}


def test_a_finding_in_another_file_of_the_project_is_that_files(tmp_path):
    project = tmp_path / "epochs_run_by_another_module_bad"
    project.mkdir()
    for name in ("main.py", "trainer.py"):
        write(project, name, (FIXTURES / "projects" / "epochs_run_by_another_module_bad" / name).read_text())
    main = project / "main.py"
    outcome = analyse(main, main.read_text(), Options(cache=False))
    assert {path.name: [f.rule for f in found] for path, found in outcome.findings.items()} == {
        "main.py": ["TL102"], "trainer.py": ["TL301"]}


def test_a_file_that_cannot_be_analysed_is_one_failure(tmp_path):
    outcome = analyse(tmp_path / "broken.py", "import torch\nx = (\n", Options(cache=False))
    assert outcome.findings == {} and outcome.failure == Failure(
        "source", "cannot analyze: syntax error at line 2, column 5: '(' was never closed", 2, 5)


def test_the_unsaved_text_keeps_its_declared_encoding():
    assert encode("# -*- coding: latin-1 -*-\nx = 'é'\n") == "# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1")
    assert encode("x = 'é'\n") == "x = 'é'\n".encode("utf-8")


def test_static_use_never_imports_pygls():
    probe = textwrap.dedent("""
        import sys
        from trainlint.cli import main
        import trainlint.server.analysis, trainlint.server.translate, trainlint.server.noqa
        import trainlint.server.store, trainlint.server.command
        try:
            main(["--version"])
        except SystemExit:
            pass
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pygls", "lsprotocol", "cattrs"))
        assert not loaded, loaded
    """)
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=_env())
    assert done.returncode == 0, done.stderr


def test_without_pygls_the_server_says_what_to_install():
    probe = textwrap.dedent("""
        import sys
        class NoPygls:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name.split(".")[0] == "pygls":
                    raise ModuleNotFoundError("No module named 'pygls'", name="pygls")
        sys.meta_path.insert(0, NoPygls)
        sys.argv = ["trainlint", "server"]
        from trainlint.cli import entry
        entry()
    """)
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=_env(), stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "install trainlint[server]" in done.stderr
    assert "Traceback" not in done.stderr


def _env():
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def test_the_server_fills_the_clis_cache(tmp_path, monkeypatch):
    import trainlint.engine as engine

    monkeypatch.setenv("TRAINLINT_CACHE_DIR", str(tmp_path / "cache"))
    path = write(tmp_path / "project", "train.py", CLEAN)
    assert analyse(path, CLIP_AFTER_STEP, Options()).findings  # the unsaved text, cached by its content
    path.write_text(CLIP_AFTER_STEP, encoding="utf-8")  # saved: now the file holds what the server checked

    def not_from_the_cache(*args, **kwargs):
        raise AssertionError("analysed again instead of read from the cache")

    monkeypatch.setattr(engine, "_analyze", not_from_the_cache)
    result = run("--format", "json", path)
    assert result.exit_code == 1 and '"rule": "TL101"' in result.stdout
