"""Start ``scholar-es serve`` as a real subprocess on a free loopback port, for the serve tests.

The port is chosen by the kernel (``--port 0``) and read back from uvicorn's startup line, so two
test runs never race for one port.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

_RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


class Server:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.stream = proc.stderr if proc.stderr is not None else proc.stdout
        self.log: list[str] = []
        self.port: int | None = None
        self._found = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.stream:
            self.log.append(line)
            m = _RUNNING.search(line)
            if m and self.port is None:
                self.port = int(m[1])
                self._found.set()
        self._found.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_listening(self, timeout: float = 90) -> None:
        if not self._found.wait(timeout) or self.port is None:
            self.stop()
            raise RuntimeError("scholar-es serve did not start:\n" + "".join(self.log[-40:]))

    def wait_model(self, timeout: float = 120, headers: dict | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            req = urllib.request.Request(self.url + "/_scholar/health", headers=headers or {})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    health = json.load(r)
            except urllib.error.HTTPError as e:  # 503: not green (no index yet, say), read why
                with e:
                    health = json.load(e) if e.code == 503 else {}
            except (urllib.error.URLError, OSError):
                health = {}
            if health.get("model_loaded"):
                return
            time.sleep(0.2)
        raise RuntimeError("the server's model did not load:\n" + "".join(self.log[-40:]))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        if not self._reader.is_alive() and self.stream is not None:
            # closed here, not by the garbage collector in some later test (a ResourceWarning
            # for an unclosed pipe, reported wherever the collection happened to run)
            self.stream.close()
        return self.proc.returncode


@contextmanager
def serving(
    target,
    *args: str,
    env: dict | None = None,
    wait_model: bool = False,
    headers: dict | None = None,
    access_log: bool = False,
):
    """``scholar-es serve --es TARGET --port 0 ARGS...`` running for the ``with`` block
    (``wait_model``: until /_scholar/health says the model is loaded, asked with ``headers``; ``access_log``:
    uvicorn's access lines, written to stdout, join ``server.log`` too). A directory TARGET that
    does not exist yet is served with ``--create`` (a new, empty engine)."""
    if not str(target).startswith(("http://", "https://")) and not Path(target).exists():
        args = ("--create", *args)
    cmd = [sys.executable, "-m", "scholar_es.cli", "serve", "--es", str(target), "--port", "0", *args]
    streams = (  # uvicorn writes its access lines to stdout, the rest to stderr
        {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
        if access_log
        else {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    )
    proc = subprocess.Popen(
        cmd,
        **streams,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    server = Server(proc)
    try:
        server.wait_listening()
        if wait_model:
            server.wait_model(headers=headers)
        yield server
    finally:
        server.stop()
