"""Issue 27: the console at a terminal shows a prompt and pretty-prints; piped it stays one JSON line
a request (real `scholar-es console` processes; the terminal is a pty)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "scholar_es.cli", "console", "--es"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
REQUESTS = "PUT tty-test\n\nGET tty-test/_count\n"


def _read_until(fd: int, marker: bytes, buf: bytearray, timeout: float = 60.0) -> bytearray:
    end = time.monotonic() + timeout
    while marker not in buf:
        left = end - time.monotonic()
        assert left > 0, f"{marker!r} never came; got {bytes(buf)!r}"
        # poll, not select: in a long test run the pty's descriptor can be above select's FD_SETSIZE
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if poller.poll(left * 1000):
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            buf += chunk
    return buf


def _drain(fd: int, buf: bytearray) -> None:
    """What the exited child left in the terminal."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while poller.poll(200):
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk


def test_at_a_terminal_it_prompts_and_pretty_prints(tmp_path):
    main, child = pty.openpty()
    proc = subprocess.Popen([*CMD, str(tmp_path)], stdin=child, stdout=child, stderr=child, env=ENV, cwd=REPO)
    os.close(child)
    buf = bytearray()
    try:
        _read_until(main, b"scholar-es> ", buf)
        assert b"a blank line sends it, Ctrl-D ends" in buf
        os.write(main, b"PUT tty-test\n")
        _read_until(main, b"... ", buf)  # inside a request: the body prompt
        os.write(main, b"\n")
        _read_until(main, b'"acknowledged": true', buf)
        os.write(main, b"GET tty-test/_count\n\n")
        _read_until(main, b'"count": 0', buf)
        os.write(main, b"\x04")  # Ctrl-D at the start of a line: the end of the input
        assert proc.wait(timeout=60) == 0
        _drain(main, buf)  # the last prompt may still be in the terminal when the answer was read
    finally:
        proc.kill()
        os.close(main)
    text = bytes(buf).decode().replace("\r\n", "\n")
    assert '{\n  "acknowledged": true,' in text  # indented, one key a line
    assert '\n  "count": 0,' in text
    assert text.count("scholar-es> ") >= 3


def test_piped_it_prints_one_json_line_a_request_and_no_prompt(tmp_path):
    proc = subprocess.run(
        [*CMD, str(tmp_path)], input=REQUESTS, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["acknowledged"] is True
    assert json.loads(lines[1])["count"] == 0
    assert "scholar-es>" not in proc.stdout + proc.stderr
