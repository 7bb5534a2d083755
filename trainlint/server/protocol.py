"""The pygls wiring of ``trainlint server``: document sync, diagnostics, code actions, hover and
the workspace notifications. The only module of the server that imports pygls.

Analyses run one at a time on one worker thread (the engine keeps process-wide state: parsed
project modules, the library descriptions in force), so the event loop keeps answering hovers and
code actions while a file is checked. A document is analysed when it is opened or saved, and
``DEBOUNCE`` seconds after the last of a burst of changes; when an analysis ends, its result is
published only if the document is still at the version it analysed (the latest text wins). An
exception while analysing one document becomes that document's one "analysis failed" diagnostic;
the server and the other documents carry on.
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Set
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import default_converter
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__
from ..catalog import get_rule
from ..findings import Finding
from ..static.project import forget_parsed
from . import translate
from .analysis import Options, Outcome, absolute, analyse, fix_rules
from .noqa import noqa_text
from .store import DiagnosticStore

DEBOUNCE = 0.3  # seconds after the last change of a burst before the text is analysed
CONFIG_FILES = ("pyproject.toml", "trainlint.toml")
FIX_KIND = "quickfix"
FIX_ALL_KIND = "source.fixAll.trainlint"
logger = logging.getLogger(__name__)


class TrainlintServer(LanguageServer):
    def __init__(self, options: Options) -> None:
        super().__init__("trainlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.options = options
        self.base_options = options  # the command line's; editor settings go over these
        self.store = DiagnosticStore()
        self.outcomes: Dict[str, Outcome] = {}  # uri -> its last published analysis
        self.unsaved: Dict[str, bool] = {}  # uri -> was the text last analysed other than the file's?
        self.engine = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainlint-analysis")
        self.pending: Dict[str, asyncio.TimerHandle] = {}
        self.tasks: Set["asyncio.Task[None]"] = set()
        self.shut_down = False
        self.converter = default_converter()
        self.fixes: Dict[tuple, Optional[str]] = {}  # (text, rules, finding) -> fixed text, for repeated requests

    # ----------------------------------------------------------------- documents
    def open_uris(self) -> List[str]:
        return list(self.workspace.text_documents)

    def is_open(self, uri: str) -> bool:
        return unquote(uri) in self.workspace.text_documents

    def uri_of(self, path: Path) -> str:
        """The URI the client uses for an open document at ``path``, else the file's URI."""
        for uri in self.open_uris():
            local = self.path_of(uri)
            if local is not None and local == path:
                return uri
        return from_fs_path(str(path)) or path.as_uri()

    @staticmethod
    def path_of(uri: str) -> Optional[Path]:
        """The absolute path of a ``file:`` URI (None for unsaved ``untitled:`` buffers and the like)."""
        if not uri.startswith("file:"):
            return None
        local = to_fs_path(uri)
        return absolute(Path(local)) if local else None

    def text_of(self, path: Path) -> str:
        """The open document's text, else the file's; "" when it cannot be read."""
        uri = self.uri_of(path)
        if self.is_open(uri):
            return self.workspace.get_text_document(uri).source
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    @property
    def encoding(self) -> str:
        """The position encoding agreed with the client: ``utf-8``, ``utf-16`` or ``utf-32``."""
        kind = self.workspace.position_encoding or "utf-16"
        return str(getattr(kind, "value", kind))

    # ----------------------------------------------------------------- analysis
    def schedule(self, uri: str, delay: float = DEBOUNCE) -> None:
        """Analyse ``uri`` after ``delay`` seconds, replacing any analysis already waiting for it."""
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        loop = asyncio.get_running_loop()

        def start() -> None:
            self.pending.pop(uri, None)
            task = loop.create_task(self.analyse(uri))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

        self.pending[uri] = loop.call_later(delay, start)

    def schedule_all(self, delay: float = DEBOUNCE, besides: Optional[str] = None) -> None:
        for uri in self.open_uris():
            if uri != besides:
                self.schedule(uri, delay)

    async def analyse(self, uri: str) -> None:
        """Check the open document's current text and publish what it reports, in its own file and in
        the other files its findings are in."""
        path = self.path_of(uri)
        if path is None or not self.is_open(uri):
            return
        document = self.workspace.get_text_document(uri)
        version, text = document.version, document.source
        try:
            outcome = await asyncio.get_running_loop().run_in_executor(self.engine, analyse, path, text, self.options)
        except Exception as exc:  # noqa: BLE001 - one document's crash must not stop the server
            logger.exception("analysing %s failed", uri)
            outcome = Outcome.crashed(exc)
        if not self.is_open(uri) or self.workspace.get_text_document(uri).version != version:
            return  # closed meanwhile, or a newer text is waiting for its own analysis
        self.unsaved[uri] = _disk_text(path) != text
        self.record(uri, path, outcome)

    def record(self, uri: str, path: Path, outcome: Outcome) -> None:
        self.outcomes[uri] = outcome
        by_file: Dict[Path, list] = {file: list(found) for file, found in outcome.findings.items()}
        own = by_file.setdefault(path, [])
        if outcome.failure is not None:
            own.append(outcome.failure)
        own.extend(outcome.notes)
        for file in self.store.replace(uri, by_file):
            self.publish(file)

    def publish(self, path: Path) -> None:
        uri = self.uri_of(path)
        try:
            found = translate.diagnostics(self.store.items(path), self.text_of(path), self.encoding)
        except Exception as exc:  # noqa: BLE001 - a finding that cannot be shown is the file's failure
            logger.exception("publishing %s failed", uri)
            found = [translate.failure_diagnostic(Outcome.crashed(exc).failure, [""])]
        version = self.workspace.get_text_document(uri).version if self.is_open(uri) else None
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=[self.converter.structure(d, types.Diagnostic) for d in found], version=version))

    def findings_at(self, uri: str, rng: dict) -> List[Finding]:
        """The findings shown in ``uri`` whose range meets ``rng``."""
        path = self.path_of(uri)
        if path is None:
            return []
        lines = translate.text_lines(self.text_of(path))
        return [item for item in self.store.items(path) if isinstance(item, Finding) and translate.overlaps(
            translate.span(lines, item.line, item.column, item.end_line, item.end_column, self.encoding), rng)]

    def fixed(self, text: str, path: Path, finding: Optional[Finding]) -> Optional[str]:
        """The text with ``finding`` fixed as ``trainlint --fix`` fixes it (all of them: None), on
        the analysis thread; None when there is no safe fix."""
        outcome = self.outcomes.get(self.uri_of(path))
        if outcome is None or outcome.settings is None or path.suffix != ".py":
            return None
        rules = fix_rules(path, outcome.settings)
        key = (text, rules, finding)
        if key not in self.fixes:
            from ..fix import fix_finding, fix_source

            try:
                if finding is None:
                    new = fix_source(text, rules)[0]
                else:
                    new = fix_finding(text, rules, finding.rule, finding.line, finding.column)
            except Exception:  # noqa: BLE001 - a text being typed may not parse: no fix offered, no error
                logger.warning("no fix for %s", path, exc_info=True)
                new = text
            if len(self.fixes) > 64:
                self.fixes.clear()
            self.fixes[key] = new if new != text else None
        return self.fixes[key]

    async def on_engine(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self.engine, function, *args)


def _disk_text(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _wanted(only: Optional[List[str]], kind: str) -> bool:
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def build(options: Options) -> TrainlintServer:
    server = TrainlintServer(options)

    @server.feature(types.INITIALIZE)
    def initialize(ls: TrainlintServer, params: types.InitializeParams) -> None:
        ls.options = ls.base_options.updated(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TrainlintServer, params: types.InitializedParams) -> None:
        workspace = ls.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace is not None else None
        if watched is not None and watched.dynamic_registration:
            watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in (*CONFIG_FILES, "*.py")]
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
                    id="trainlint-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers))]))
            except Exception:  # noqa: BLE001 - without it, saves still re-check the open files
                logger.warning("the client did not register file watching", exc_info=True)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TrainlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TrainlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TrainlintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.schedule(uri, 0)
        ls.schedule_all(besides=uri)  # the others may import what was saved

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TrainlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        waiting = ls.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        ls.outcomes.pop(uri, None)
        if ls.unsaved.pop(uri, False):
            # The engine keeps a checked module's tree for the files that import it, under the
            # file's time stamp: closed unsaved, its text must not stand for the file any more.
            ls.engine.submit(forget_parsed)
        for path in ls.store.drop_source(uri):
            ls.publish(path)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: TrainlintServer, params: types.DidChangeConfigurationParams) -> None:
        """Settings pushed under ``trainlint``, else pulled (``workspace/configuration``, section
        ``trainlint``) when the client can; the configuration files are read again either way."""
        settings = params.settings
        if isinstance(settings, dict) and "trainlint" in settings:
            ls.options = ls.base_options.updated(settings)
        else:
            workspace = ls.client_capabilities.workspace
            if workspace is not None and workspace.configuration:
                try:  # the pull model: the notification says only that something changed
                    answer = await asyncio.wait_for(ls.workspace_configuration_async(types.ConfigurationParams(
                        items=[types.ConfigurationItem(section="trainlint")])), 5)
                    ls.options = ls.base_options.updated(answer[0] if answer else None)
                except Exception:  # noqa: BLE001 - keep the settings we have
                    logger.warning("workspace/configuration failed", exc_info=True)
        ls.fixes.clear()
        ls.schedule_all(0)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TrainlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        recheck = False
        for change in params.changes:
            path = ls.path_of(change.uri)
            if path is None:
                continue
            if change.type == types.FileChangeType.Deleted:
                ls.store.drop_file(path)
                if not ls.is_open(change.uri):
                    ls.store.drop_source(change.uri)
                ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=change.uri, diagnostics=[]))
            # A configuration file re-read (settings_for reads it on every analysis), or a project
            # module the open files may import: check the open files again.
            recheck = recheck or path.name in CONFIG_FILES or path.suffix == ".py"
        if recheck:
            ls.fixes.clear()
            ls.schedule_all()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]))
    async def code_action(ls: TrainlintServer, params: types.CodeActionParams) -> Optional[List[types.CodeAction]]:
        uri = params.text_document.uri
        path = ls.path_of(uri)
        if path is None or not ls.is_open(uri):
            return None
        text = ls.workspace.get_text_document(uri).source
        lines = translate.text_lines(text)
        only = [str(kind) for kind in params.context.only] if params.context.only else None
        requested = ls.converter.unstructure(params.range)
        actions: List[dict] = []
        for finding in ls.findings_at(uri, requested) if _wanted(only, FIX_KIND) else []:
            rule = get_rule(finding.rule)
            diagnostic = translate.diagnostic(finding, lines, ls.encoding)
            if rule is not None and rule.autofix:
                new = await ls.on_engine(ls.fixed, text, path, finding)
                edit = translate.text_edit(text, new, ls.encoding) if new is not None else None
                if edit is not None:
                    actions.append(translate.action(f"Fix {rule.id} ({rule.name})", FIX_KIND, uri, edit,
                                                    [diagnostic], preferred=True))
            suppressed = noqa_text(text, finding.line, finding.rule)
            if suppressed is not None:
                edit = translate.text_edit(text, suppressed, ls.encoding)
                actions.append(translate.action(f"Suppress with `# noqa: {finding.rule}`", FIX_KIND, uri, edit,
                                                [diagnostic]))
        if only and any(_wanted([k], FIX_ALL_KIND) or k == "source" for k in only):
            fixable = [f for f in ls.store.items(path) if isinstance(f, Finding) and getattr(get_rule(f.rule), "autofix", False)]
            new = await ls.on_engine(ls.fixed, text, path, None) if fixable else None
            edit = translate.text_edit(text, new, ls.encoding) if new is not None else None
            if edit is not None:
                actions.append(translate.action("Apply all trainlint autofixes", FIX_ALL_KIND, uri, edit))
        return [ls.converter.structure(a, types.CodeAction) for a in actions]

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: TrainlintServer, params: types.HoverParams) -> Optional[types.Hover]:
        at = ls.converter.unstructure(params.position)
        found = ls.findings_at(params.text_document.uri, {"start": at, "end": at})
        if not found:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                        value=translate.hover_markdown(found)))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TrainlintServer, params: None) -> None:
        ls.shut_down = True
        for waiting in ls.pending.values():
            waiting.cancel()
        ls.pending.clear()

    return server


def serve(options: Options) -> int:
    """Serve on stdin/stdout until the client's ``exit``; the exit status LSP asks for (0 after a
    ``shutdown`` request, else 1)."""
    server = build(options)
    server.start_io()
    server.engine.shutdown(wait=False, cancel_futures=True)
    return 0 if server.shut_down else 1
