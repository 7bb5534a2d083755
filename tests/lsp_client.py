"""A tiny Language Server Protocol client for the tests: starts ``python -m trainlint server`` as an
editor would and speaks JSON-RPC to it over its stdin/stdout (``Content-Length`` framing). Every
wait has a timeout, so a server that hangs fails the test instead of blocking it."""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 15.0  # seconds for any one answer (a cold analysis imports libcst first)


class ServerGone(AssertionError):
    pass


class LspClient:
    def __init__(self, cwd: Path, args: Sequence[str] = (), pythonpath: Sequence[Path] = (),
                 settings: Optional[dict] = None, env: Optional[Dict[str, str]] = None) -> None:
        environment = dict(os.environ if env is None else env)
        # The tree under test first (and anything a test puts before it), whatever is installed.
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(p) for p in pythonpath] + [str(ROOT)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else []))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainlint", "server", *args], cwd=cwd, env=environment,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.settings = settings or {}
        self.incoming: "queue.Queue[Optional[dict]]" = queue.Queue()
        self.notifications: List[dict] = []
        self.server_requests: List[dict] = []
        self.stderr: List[bytes] = []
        self._ids = 0
        self._responses: Dict[int, dict] = {}
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(iter(self.process.stderr.readline, b"")), daemon=True).start()

    # ------------------------------------------------------------------ wire
    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    self.incoming.put(None)
                    return
                header = header.strip()
                if not header:
                    break
                name, _, value = header.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            body = stream.read(length or 0)
            self.incoming.put(json.loads(body.decode("utf-8")))

    def send(self, payload: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **payload}).encode("utf-8")
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _pump(self, deadline: float) -> None:
        """Handle one incoming message (or raise on timeout or end of output)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer from the server in time; stderr:\n{self.stderr_text()}")
        try:
            message = self.incoming.get(timeout=left)
        except queue.Empty:
            raise TimeoutError(f"no answer from the server in time; stderr:\n{self.stderr_text()}") from None
        if message is None:
            self.incoming.put(None)  # stays at end of output
            raise ServerGone(f"the server closed its output; stderr:\n{self.stderr_text()}")
        if "id" in message and "method" in message:  # a request of the server's: answer it
            self.server_requests.append(message)
            result: Any = None
            if message["method"] == "workspace/configuration":
                result = [self.settings.get(item.get("section"), None) for item in message["params"]["items"]]
            self.send({"id": message["id"], "result": result})
        elif "id" in message:
            self._responses[message["id"]] = message
        else:
            self.notifications.append(message)

    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")[-4000:]

    # ------------------------------------------------------------------ API
    def request(self, method: str, params: Any = None, timeout: float = TIMEOUT) -> Any:
        self._ids += 1
        ident = self._ids
        self.send({"id": ident, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while ident not in self._responses:
            self._pump(deadline)
        response = self._responses.pop(ident)
        if "error" in response:
            raise AssertionError(f"{method} failed: {response['error']}")
        return response["result"]

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, "params": params})

    def wait_for(self, method: str, where: Callable[[dict], bool] = lambda params: True,
                 timeout: float = TIMEOUT) -> dict:
        """The params of the first notification ``method`` (not yet taken) that ``where`` accepts."""
        deadline = time.monotonic() + timeout
        while True:
            for message in self.notifications:
                if message["method"] == method and where(message["params"]):
                    self.notifications.remove(message)
                    return message["params"]
            self._pump(deadline)

    def diagnostics(self, uri: str, where: Callable[[dict], bool] = lambda params: True,
                    timeout: float = TIMEOUT) -> dict:
        return self.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] == uri and where(p), timeout)

    def published(self, *uris: str, timeout: float = TIMEOUT) -> Dict[str, List[dict]]:
        """The diagnostics next published for each of ``uris`` (the server publishes the files one
        analysis affects together), each URI's last publication once all have one."""
        deadline = time.monotonic() + timeout
        while True:
            found = {}
            for message in self.notifications:
                if message["method"] == "textDocument/publishDiagnostics" and message["params"]["uri"] in uris:
                    found[message["params"]["uri"]] = message
            if len(found) == len(uris):
                break
            self._pump(deadline)
        for message in found.values():
            self.notifications.remove(message)
        return {uri: message["params"]["diagnostics"] for uri, message in found.items()}

    def drain(self, seconds: float) -> None:
        """Take in whatever arrives for ``seconds``."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self._pump(deadline)
        except TimeoutError:
            pass

    def initialize(self, root: Path, initialization_options: Optional[dict] = None) -> dict:
        result = self.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "initializationOptions": initialization_options,
            "capabilities": {
                "workspace": {"configuration": True, "didChangeWatchedFiles": {"dynamicRegistration": True}},
                "textDocument": {"publishDiagnostics": {"versionSupport": True}},
            },
        })
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: Optional[str] = None, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": version,
            "text": path.read_text(encoding="utf-8") if text is None else text}})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def close(self, timeout: float = TIMEOUT) -> int:
        """shutdown, exit, and the server's exit status."""
        self.request("shutdown")
        self.notify("exit")
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=TIMEOUT)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass


def apply_edits(text: str, edits: List[dict]) -> str:
    """``text`` with LSP TextEdits applied (UTF-16 positions; the edits do not overlap)."""
    def offset(position: dict) -> int:
        lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)  # LSP's line breaks only
        before = "".join(lines[:position["line"]])
        line = lines[position["line"]] if position["line"] < len(lines) else ""
        units = 0
        for index, char in enumerate(line):
            if units >= position["character"] or char in "\r\n":
                return len(before) + index
            units += 2 if ord(char) > 0xFFFF else 1
        return len(before) + len(line)

    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        text = text[:start] + edit["newText"] + text[end:]
    return text
