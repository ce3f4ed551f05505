"""Issue 27: Ctrl-C during a build says what was kept; progress bars stay out of logs.

Real `scholar-es index` processes with the shipped model: SIGINT lands right after the first
progress update of a build too large to finish first.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from indexer.embedder import default_cache_dir
from scholar_es.engine.rest.transport import embedded_client

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CMD = [sys.executable, "-m", "scholar_es.cli", "index"]


def _env(cache: Path) -> dict[str, str]:
    """A fresh embedding cache (so every vector is computed and counted) with the ONNX export the
    default cache already holds, if any (exporting again costs minutes on a small machine)."""
    onnx = default_cache_dir() / "onnx"
    if onnx.is_dir() and not (cache / "onnx").exists():
        shutil.copytree(onnx, cache / "onnx")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCHOLAR_ES_")}
    env = {**clean, "PYTHONPATH": str(REPO), "SCHOLAR_ES_CACHE": str(cache)}
    if not (cache / "onnx").exists():  # a machine that never exported: torch loads in seconds
        env["SCHOLAR_ES_BACKEND"] = "torch"
    return env


def _corpus(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            paragraphs = [
                f"Paragraph {j} of paper {i} reports experiment {i * 7 + j} on topic {i % 13}."
                for j in range(4)
            ]
            paper = {
                "id": f"p{i}",
                "title": f"Paper {i}",
                "abstract": f"Abstract of paper {i}.",
                "sections": [{"heading": "Results", "paragraphs": paragraphs}],
            }
            f.write(json.dumps(paper) + "\n")


def _interrupted(src: Path, engine: Path, cache: Path, total: int) -> tuple[int, str, bytes]:
    """Run `index SRC --es ENGINE`, send SIGINT at the bar's first update; (exit status, stderr, stdout)."""
    main, child = pty.openpty()  # stderr a terminal, so the bar shows progress to wait for
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen(
        [*CMD, str(src), "--es", str(engine)],
        stdout=subprocess.PIPE,
        stderr=child,
        stdin=subprocess.DEVNULL,
        env=_env(cache),
        cwd=REPO,
    )
    os.close(child)
    err = bytearray()
    deadline = time.monotonic() + 300
    try:
        # the bar's first update: papers are being embedded and written
        while not re.search(rb"\b[1-9]\d*/%d\b" % total, err):
            assert time.monotonic() < deadline and proc.poll() is None, bytes(err)
            if select.select([main], [], [], 1)[0]:
                err += os.read(main, 4096)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        while select.select([main], [], [], 0.5)[0]:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        proc.kill()
        os.close(main)
    return proc.returncode, err.decode(errors="replace"), out


def test_ctrl_c_in_a_first_build_says_nothing_was_published_and_the_cache_is_kept(tmp_path):
    src, engine, cache = tmp_path / "papers.jsonl", tmp_path / "engine", tmp_path / "cache"
    _corpus(src, 3000)
    returncode, text, out = _interrupted(src, engine, cache, 3000)
    assert returncode == 130, text
    assert "Aborted!" not in text and "Traceback" not in text, text
    m = re.search(
        r"scholar-es index: interrupted after (\d+) papers \((\d+) chunks\) were read and embedded; nothing was "
        r"published: the half-built (?:chunks-v1, papers-v1|papers-v1, chunks-v1) were deleted and the aliases are as they "
        r"were; the (\d+) embeddings computed so far are kept in the cache (\S+), so rerunning the "
        r"same command reuses them and embeds only the rest",
        " ".join(text.split()),
    )
    assert m, text
    assert 0 < int(m.group(1)) < 3000 and not out.strip()
    # what it says is so: no index left, and the cache holds exactly those vectors
    assert embedded_client(engine).indices.get(index="*") == {}
    assert Path(m.group(4)) == cache / "embeddings.sqlite3"
    with sqlite3.connect(cache / "embeddings.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM emb").fetchone()[0] == int(m.group(3)) > 0


def test_ctrl_c_in_an_update_keeps_the_published_index(tmp_path):
    small, src, engine, cache = (tmp_path / n for n in ("small.jsonl", "papers.jsonl", "engine", "cache"))
    _corpus(small, 5)
    _corpus(src, 3000)
    first = subprocess.run(
        [*CMD, str(small), "--es", str(engine), "--quiet"], capture_output=True, env=_env(cache), cwd=REPO
    )
    assert first.returncode == 0, first.stderr
    returncode, text, _ = _interrupted(src, engine, cache, 3000)
    assert returncode == 130 and "Traceback" not in text, text
    m = re.search(
        r"interrupted after \d+ papers \(\d+ chunks\) were read and embedded; (\d+) papers \(at least\) were written to "
        r"the existing indices \(updated in place, still searchable\); the rest are as they were; the \d+ "
        r"embeddings computed so far are kept in the cache",
        " ".join(text.split()),
    )
    assert m, text
    es = embedded_client(engine)
    es.indices.refresh(index="papers")
    # p0..p4 updated, then new ones (a bulk request in flight may have landed too)
    assert es.count(index="papers")["count"] >= max(5, int(m.group(1)))


def test_progress_bar_is_left_out_when_stderr_is_not_a_terminal(tmp_path):
    src = tmp_path / "papers.jsonl"
    _corpus(src, 5)
    proc = subprocess.run(
        [*CMD, str(src), "--es", str(tmp_path / "engine")],
        capture_output=True,
        text=True,
        env=_env(tmp_path / "cache"),
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "loading the embedding model" in proc.stderr  # the stage lines still come, one a line
    assert "\r" not in proc.stderr and "papers/s" not in proc.stderr and "it/s" not in proc.stderr, (
        proc.stderr
    )
    assert "indexed 5 papers" in proc.stdout
