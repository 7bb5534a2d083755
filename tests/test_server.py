"""``trainlint server`` driven as an editor drives it: the real server in a subprocess, JSON-RPC over
its stdin/stdout (tests/lsp_client.py). Plus the crash guard of the analysis handler, in process."""
from __future__ import annotations

import asyncio
import shutil

import pytest

pytest.importorskip("pygls")

from cli_support import CLEAN, CLIP_AFTER_STEP, run, write  # noqa: E402
from lsp_client import ROOT, LspClient, apply_edits  # noqa: E402

FIXTURES = ROOT / "fixtures"


@pytest.fixture
def client(tmp_path):
    """A server for a workspace in ``tmp_path`` (its cache there too), shut down however the test ends."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    started = []

    def start(initialization_options=None, **kwargs) -> LspClient:
        import os

        env = dict(os.environ, TRAINLINT_CACHE_DIR=str(tmp_path / "cache"))
        server = LspClient(workspace, env=env, **kwargs)
        started.append(server)
        server.initialize(workspace, initialization_options)
        return server

    start.workspace = workspace
    yield start
    for server in started:
        server.kill()


def _codes(params):
    return [(d["code"], d["range"]["start"]["line"]) for d in params["diagnostics"]]


def test_an_editor_session(client, tmp_path):
    """open -> diagnostics, hover, quick fix applied -> clean after the change, noqa, shutdown, exit 0."""
    server = client()
    path = client.workspace / "train.py"
    shutil.copy(FIXTURES / "TL101" / "bad_flat_script.py", path)
    text = path.read_text(encoding="utf-8")
    uri = server.open(path)

    published = server.diagnostics(uri)
    [diagnostic] = published["diagnostics"]
    cli = run("--format", "json", "--no-cache", path)
    assert cli.exit_code == 1
    import json

    [expected] = json.loads(cli.stdout)["findings"]
    assert diagnostic["code"] == "TL101" and expected["rule"] == "TL101"
    assert diagnostic["range"] == {"start": {"line": expected["line"] - 1, "character": expected["column"] - 1},
                                   "end": {"line": expected["end_line"] - 1, "character": expected["end_column"] - 1}}
    assert diagnostic["range"]["start"] == {"line": 16, "character": 8}  # the clip after optimizer.step()
    assert diagnostic["severity"] == 1 and diagnostic["source"] == "trainlint"
    assert diagnostic["codeDescription"]["href"].endswith("/rules/TL101-clip-after-step.toml")
    assert published["version"] == 1

    hover = server.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                  "position": {"line": 16, "character": 20}})
    value = hover["contents"]["value"]
    assert run("explain", "TL101").stdout.strip() in value  # the rule's explanation
    assert "step: optimizer.step() (line 16)" in value and "reported: torch.nn.utils.clip_grad_norm_" in value  # witness
    assert server.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                 "position": {"line": 2, "character": 0}}) is None

    actions = server.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}})
    by_title = {action["title"]: action for action in actions}
    assert set(by_title) == {"Fix TL101 (clip-after-step)", "Suppress with `# noqa: TL101`"}
    fix = by_title["Fix TL101 (clip-after-step)"]
    assert fix["kind"] == "quickfix" and fix["isPreferred"]
    fixed = apply_edits(text, fix["edit"]["changes"][uri])
    fixed_by_cli = write(tmp_path, "by_cli/train.py", text)
    assert run("--fix", "--no-cache", fixed_by_cli).exit_code == 0
    assert fixed == fixed_by_cli.read_text(encoding="utf-8")  # what `trainlint --fix` writes
    [fix_all] = server.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": ["source.fixAll"]}})
    assert fix_all["kind"] == "source.fixAll.trainlint" and apply_edits(text, fix_all["edit"]["changes"][uri]) == fixed

    server.change(uri, fixed, 2)
    assert server.diagnostics(uri)["diagnostics"] == []

    server.change(uri, text, 3)
    assert _codes(server.diagnostics(uri, lambda p: p["version"] == 3)) == [("TL101", 16)]
    suppress = by_title["Suppress with `# noqa: TL101`"]
    suppressed = apply_edits(text, suppress["edit"]["changes"][uri])
    assert suppressed.splitlines()[16].endswith("  # expect: TL101  # noqa: TL101")
    server.change(uri, suppressed, 4)
    assert server.diagnostics(uri, lambda p: p["version"] == 4)["diagnostics"] == []

    assert server.close() == 0


def test_changes_are_debounced_and_the_latest_text_wins(client):
    server = client()
    path = write(client.workspace, "train.py", CLEAN)
    uri = server.open(path)
    assert server.diagnostics(uri)["diagnostics"] == []
    for version, text in ((2, CLIP_AFTER_STEP), (3, CLEAN), (4, CLIP_AFTER_STEP)):
        server.change(uri, text, version)  # faster than the debounce: one analysis, of version 4
    latest = server.diagnostics(uri)
    assert latest["version"] == 4 and _codes(latest) == [("TL101", 8)]
    server.drain(0.8)
    assert not [n for n in server.notifications if n["method"] == "textDocument/publishDiagnostics"]
    path.write_text(CLIP_AFTER_STEP)
    server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert _codes(server.diagnostics(uri)) == [("TL101", 8)]
    assert server.close() == 0


def test_settings_from_the_initialization_options(client):
    server = client(initialization_options={"trainlint": {"ignore": ["clip-after-step"]}})
    uri = server.open(write(client.workspace, "train.py", CLIP_AFTER_STEP))
    assert server.diagnostics(uri)["diagnostics"] == []
    server.notify("workspace/didChangeConfiguration", {"settings": {"trainlint": {}}})
    assert _codes(server.diagnostics(uri)) == [("TL101", 8)]
    assert server.close() == 0


def test_findings_in_other_files_configuration_and_deleted_files(client):
    server = client()
    for name in ("main.py", "trainer.py"):
        shutil.copy(FIXTURES / "projects" / "epochs_run_by_another_module_bad" / name, client.workspace / name)
    main, engine = client.workspace / "main.py", client.workspace / "trainer.py"
    main_uri, engine_uri = server.open(main), engine.as_uri()

    def codes(diagnostics):
        return [(d["code"], d["range"]["start"]["line"]) for d in diagnostics]

    # The epochs and their missing set_epoch are trainer.py's: published for trainer.py's URI.
    now = server.published(main_uri, engine_uri)
    assert codes(now[main_uri]) == [("TL102", 14)] and codes(now[engine_uri]) == [("TL301", 6)]
    registered = [r for r in server.server_requests if r["method"] == "client/registerCapability"]
    globs = {w["globPattern"] for r in registered for reg in r["params"]["registrations"]
             for w in reg["registerOptions"]["watchers"]}
    assert {"**/pyproject.toml", "**/trainlint.toml", "**/*.py"} <= globs

    # The configuration file changed: read again.
    pyproject = write(client.workspace, "pyproject.toml", '[tool.trainlint]\nignore = ["TL102"]\n')
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": pyproject.as_uri(), "type": 2}]})
    now = server.published(main_uri, engine_uri)
    assert codes(now[main_uri]) == [] and codes(now[engine_uri]) == [("TL301", 6)]

    # The editor's settings, as the command line's options: a select starts over, as --select does.
    server.notify("workspace/didChangeConfiguration", {"settings": {"trainlint": {"select": ["TL102"]}}})
    now = server.published(main_uri, engine_uri)
    assert codes(now[main_uri]) == [("TL102", 14)] and codes(now[engine_uri]) == []

    # Pulled with workspace/configuration when the notification carries none.
    server.settings = {"trainlint": {"select": ["TL301"]}}
    server.notify("workspace/didChangeConfiguration", {"settings": None})
    now = server.published(main_uri, engine_uri)
    assert codes(now[main_uri]) == [] and codes(now[engine_uri]) == [("TL301", 6)]
    assert any(r["method"] == "workspace/configuration" for r in server.server_requests)

    # A deleted file's diagnostics are cleared, and the files that imported it are checked again.
    engine.unlink()
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": engine_uri, "type": 3}]})
    assert server.published(engine_uri)[engine_uri] == []
    assert codes(server.published(main_uri)[main_uri]) == []
    server.drain(0.5)
    assert not [n for n in server.notifications if n["params"].get("uri") == engine_uri]
    assert server.close() == 0


SITECUSTOMIZE = '''
"""Test only: the engine raises on files named crash_me.py, as an engine bug would."""
import trainlint.engine

_check_file = trainlint.engine.check_file


def check_file(path, settings, data=None):
    if path.name == "crash_me.py":
        raise RuntimeError("boom from the test\\nsecond line")
    return _check_file(path, settings, data)


trainlint.engine.check_file = check_file
'''


def test_a_crash_in_one_file_leaves_the_server_and_the_other_files_working(client, tmp_path):
    patch = tmp_path / "patch"
    write(patch, "sitecustomize.py", SITECUSTOMIZE)
    server = client(pythonpath=[patch])
    crash = server.open(write(client.workspace, "crash_me.py", CLIP_AFTER_STEP))
    [failed] = server.diagnostics(crash)["diagnostics"]
    assert failed["message"] == "analysis failed: RuntimeError: boom from the test"
    assert failed["severity"] == 1 and failed["range"]["start"] == {"line": 0, "character": 0}

    broken = server.open(write(client.workspace, "broken.py", "import torch\nx = (\n"))
    [syntax] = server.diagnostics(broken)["diagnostics"]
    assert syntax["message"].startswith("cannot analyze: syntax error at line 2") and syntax["range"]["start"]["line"] == 1

    train = server.open(write(client.workspace, "train.py", CLIP_AFTER_STEP))
    assert _codes(server.diagnostics(train)) == [("TL101", 8)]
    server.change(crash, CLEAN, 2)
    assert len(server.diagnostics(crash)["diagnostics"]) == 1  # still the one failure, and still answering
    assert server.request("textDocument/hover", {"textDocument": {"uri": train},
                                                 "position": {"line": 8, "character": 10}})["contents"]["value"]
    assert server.close() == 0


def test_the_analysis_handler_survives_an_exception(tmp_path, monkeypatch):
    """In process: the engine call raising for one document gives it one failure diagnostic; the
    next document is analysed as usual."""
    from lsprotocol import types

    from trainlint.server import protocol

    real = protocol.analyse

    def analyse(path, text, options):
        if path.name == "crash_me.py":
            raise MemoryError("out of it")
        return real(path, text, options)

    monkeypatch.setattr(protocol, "analyse", analyse)
    server = _in_process(tmp_path, monkeypatch)
    uris = [server.open_document(name, CLIP_AFTER_STEP).as_uri() for name in ("crash_me.py", "train.py")]

    async def both():
        for uri in uris:
            await server.analyse(uri)

    asyncio.run(both())
    server.engine.shutdown()
    by_uri = {p.uri: p.diagnostics for p in server.published}
    [failed] = by_uri[uris[0]]
    assert failed.message == "analysis failed: MemoryError: out of it" and failed.severity == types.DiagnosticSeverity.Error
    assert [d.code for d in by_uri[uris[1]]] == ["TL101"]


def _in_process(tmp_path, monkeypatch, encoding=None):
    """A server with a workspace but no client: what it publishes is collected."""
    from lsprotocol import types
    from pygls.workspace import Workspace

    from trainlint.server import protocol

    server = protocol.build(protocol.Options(cache=False))
    server.protocol._workspace = Workspace(None, **({"position_encoding": encoding} if encoding else {}))
    server.published = []
    monkeypatch.setattr(server, "text_document_publish_diagnostics", server.published.append)

    def open_document(name, text):
        path = write(tmp_path, name, text)
        server.workspace.put_text_document(types.TextDocumentItem(uri=path.as_uri(), language_id="python",
                                                                  version=1, text=text))
        return path

    server.open_document = open_document
    return server


@pytest.mark.parametrize("encoding, character", [("utf-16", 14), ("utf-8", 17), ("utf-32", 13)])
def test_positions_in_the_encoding_agreed_with_the_client(tmp_path, monkeypatch, encoding, character):
    from lsprotocol import types

    server = _in_process(tmp_path, monkeypatch, types.PositionEncodingKind(encoding))
    text = CLIP_AFTER_STEP.replace("    torch.nn.utils.clip", "    \u00e9 = '\U0001F600'; torch.nn.utils.clip")
    path = server.open_document("train.py", text)
    asyncio.run(server.analyse(path.as_uri()))
    server.engine.shutdown()
    [published] = server.published
    [diagnostic] = published.diagnostics
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (8, character)


def test_no_fix_and_no_error_for_a_text_that_does_not_parse(tmp_path, monkeypatch):
    server = _in_process(tmp_path, monkeypatch)
    path = server.open_document("train.py", CLIP_AFTER_STEP)
    asyncio.run(server.analyse(path.as_uri()))
    [finding] = server.store.items(path.resolve())
    assert server.fixed(CLIP_AFTER_STEP, path.resolve(), finding) == CLEAN
    assert server.fixed(CLIP_AFTER_STEP + "x = (\n", path.resolve(), finding) is None
    server.engine.shutdown()


def test_the_readme_documents_the_real_command():
    """The editor settings in the README start this command, for Python files."""
    import json
    import re
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Editor integration\n", 1)[1].split("\n## ", 1)[0]
    blocks = dict(re.findall(r"```(\w+)\n(.*?)```", section, re.S))
    assert set(blocks) == {"jsonc", "lua", "toml"}, blocks.keys()

    vscode = json.loads(re.sub(r"//[^\n]*", "", blocks["jsonc"]))
    neovim = blocks["lua"]
    helix = tomllib.loads(blocks["toml"])
    commands = [
        [vscode["glspc.server.command"], *vscode["glspc.server.commandArguments"]],
        re.findall(r'"([^"]*)"', re.search(r"cmd\s*=\s*\{([^}]*)\}", neovim).group(1)),
        [helix["language-server"]["trainlint"]["command"], *helix["language-server"]["trainlint"]["args"]],
    ]
    for command in commands:
        assert command == ["trainlint", "server"]
    assert vscode["glspc.server.languageId"] == ["python"]
    assert re.findall(r'"([^"]*)"', re.search(r"filetypes\s*=\s*\{([^}]*)\}", neovim).group(1)) == ["python"]
    [python] = [language for language in helix["language"] if "trainlint" in language["language-servers"]]
    assert python["name"] == "python"
    # ... and that command is the real one: `trainlint server` is a command of the CLI.
    from trainlint.cli import main

    assert main.get_command(None, "server").name == "server"
    assert "Language Server Protocol" in run("server", "--help").stdout
