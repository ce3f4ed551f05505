"""A killed ``--rebuild`` never costs the good version (issue 12).

A run is killed with SIGKILL (no ``finally``, no cleanup) in the middle of filling a new version:
once deterministically through the pipeline's fault hook, once by the test itself at whatever
moment the run has reached. Then the rerun must find the good version still serving, never treat
the half-built one as the rollback version, and delete the leftover.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from indexer import layout
from indexer.pipeline import FAULT_ENV
from scholar_es.engine.rest.transport import embedded_client

REPO = Path(__file__).resolve().parents[3]

#: indexes argv[2] into the engine at argv[1] (rebuild when argv[3] == "rebuild") with a cheap
#: deterministic embedder, so the crash tests need no model
SCRIPT = textwrap.dedent(
    """
    import hashlib, sys, time
    import numpy as np
    from indexer.pipeline import IndexRun
    from scholar_es.engine.rest.transport import embedded_client

    class Bow:
        name, dims, encode_seconds = "fake-bow-16", 16, 0.0
        def encode(self, texts):
            time.sleep(float(sys.argv[4]))  # slow enough for a kill to land mid-run
            out = np.zeros((len(texts), 16), dtype=np.float32)
            for i, t in enumerate(texts):
                for w in t.split():
                    out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 16] += 1.0
                out[i, 0] += 0.01
            return out / np.linalg.norm(out, axis=1, keepdims=True)

    es = embedded_client(sys.argv[1])
    s = IndexRun(es, Bow(), rebuild=sys.argv[3] == "rebuild", bulk_size=100).run([sys.argv[2]], "jsonl")
    print(s.line(), "cleaned", s.cleaned, "pruned", s.pruned, flush=True)
    """
)


def _papers(path: Path, n: int, tag: str) -> None:
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "title": f"{tag} paper {i}", "abstract": f"{tag} words {i % 7}"})
            + "\n"
            for i in range(n)
        )
    )


def _index(target: Path, src: Path, mode: str, *, delay: float = 0.0, env: dict | None = None, wait=True):
    cmd = [sys.executable, "-c", SCRIPT, str(target), str(src), mode, str(delay)]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if wait:
        out, err = proc.communicate(timeout=120)
        proc.out, proc.err = out, err
    return proc


def _build_state(target: Path, index: str) -> str:
    """``_meta.build_state`` as a fresh process reads it (an open engine in this process keeps the
    mapping it loaded; another process's ``_mapping`` update is not reloaded)."""
    code = (
        "import sys; from indexer import layout; from scholar_es.engine.rest.transport import embedded_client; "
        "print(layout.index_meta(embedded_client(sys.argv[1]), sys.argv[2])['build_state'])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(target), index], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def _state(es):
    return {
        "current": layout.physical_indices(es, "chunks"),
        "previous": layout.physical_indices(es, "chunks-previous"),
        "versions": sorted(layout.versions(es, "chunks")),
    }


def _good_two_versions(tmp_path: Path):
    target = tmp_path / "engine"
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    _papers(old, 40, "first")
    _papers(new, 400, "second")
    for mode in ("update", "rebuild"):
        proc = _index(target, old, mode)
        assert proc.returncode == 0, proc.err
    es = embedded_client(target)
    assert _state(es) == {
        "current": ["chunks-v2"],
        "previous": ["chunks-v1"],
        "versions": ["chunks-v1", "chunks-v2"],
    }
    return target, new, es


def _check_after_kill_and_rerun(target: Path, new: Path, es) -> None:
    es = embedded_client(target)  # a fresh reader sees what the killed process committed
    # the good version still serves, the rollback still points at the version before it
    assert _state(es)["current"] == ["chunks-v2"] and _state(es)["previous"] == ["chunks-v1"]
    assert es.count(index="chunks")["count"] == 40
    assert (
        es.search(index="chunks", query={"match": {"title": "first"}}, size=1)["hits"]["total"]["value"] == 40
    )
    leftover = "chunks-v3"
    assert leftover in _state(es)["versions"], "the kill should have left a half-built version"
    assert layout.index_meta(es, leftover)["build_state"] == layout.BUILDING
    assert 0 < es.count(index=leftover)["count"] < 400

    rerun = _index(target, new, "rebuild")
    assert rerun.returncode == 0, rerun.err
    assert "cleaned ['papers-v3', 'chunks-v3'] pruned ['papers-v1', 'chunks-v1']" in rerun.out
    es = embedded_client(target)
    # the new complete version serves; the previous one is the good v2, never the half-built v3
    assert _state(es) == {
        "current": ["chunks-v3"],
        "previous": ["chunks-v2"],
        "versions": ["chunks-v2", "chunks-v3"],
    }
    assert es.count(index="chunks")["count"] == 400
    assert es.count(index="chunks-previous")["count"] == 40
    assert _build_state(target, "chunks-v3") == layout.COMPLETE
    assert layout.physical_indices(es, "papers-previous") == ["papers-v2"]


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_fault_hook_kill_mid_rebuild_then_rerun(tmp_path):
    target, new, es = _good_two_versions(tmp_path)
    killed = _index(target, new, "rebuild", env={FAULT_ENV: "150"})
    assert killed.returncode == -signal.SIGKILL, killed.err
    _check_after_kill_and_rerun(target, new, es)


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_real_kill_9_mid_rebuild_then_rerun(tmp_path):
    target, new, es = _good_two_versions(tmp_path)
    proc = _index(target, new, "rebuild", delay=0.05, wait=False)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # kill once the new version holds some documents
            if (
                es.indices.exists(index="chunks-v3")
                and embedded_client(target).count(index="chunks-v3")["count"]
            ):
                break
            assert proc.poll() is None, "the run ended before it could be killed; slow it down"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    _check_after_kill_and_rerun(target, new, es)


def test_killed_first_build_is_cleaned_and_never_published(tmp_path):
    target, src = tmp_path / "engine", tmp_path / "p.jsonl"
    _papers(src, 400, "only")
    killed = _index(target, src, "update", env={FAULT_ENV: "150"})
    assert killed.returncode == -signal.SIGKILL
    es = embedded_client(target)
    assert not es.indices.exists_alias(name="chunks")
    assert layout.index_meta(es, "chunks-v1")["build_state"] == layout.BUILDING
    rerun = _index(target, src, "update")
    assert rerun.returncode == 0, rerun.err
    assert "cleaned ['papers-v1', 'chunks-v1']" in rerun.out
    es = embedded_client(target)
    assert _state(es) == {"current": ["chunks-v1"], "previous": [], "versions": ["chunks-v1"]}
    assert es.count(index="chunks")["count"] == 400


@pytest.mark.slow  # many seconds: left out of make test-fast
@pytest.mark.parametrize("rebuilds", [3])
def test_rebuilds_keep_exactly_current_and_previous(tmp_path, rebuilds):
    target, src = tmp_path / "engine", tmp_path / "p.jsonl"
    _papers(src, 5, "x")
    assert _index(target, src, "update").returncode == 0
    for _ in range(rebuilds):
        assert _index(target, src, "rebuild").returncode == 0
    es = embedded_client(target)
    assert _state(es) == {
        "current": ["chunks-v4"],
        "previous": ["chunks-v3"],
        "versions": ["chunks-v3", "chunks-v4"],
    }


def test_a_version_whose_builder_still_runs_is_not_a_leftover(tmp_engine):
    """Two runs started together on a fresh directory share ``-v1``: the second must not delete the
    first one's version as a leftover while the first is still filling it."""
    body = layout.index_body("chunks", 16, layout.building_meta({"chunking": "paragraph"}))
    tmp_engine.indices.create(index="chunks-v1", **body)  # built by this (live) process
    assert layout.clean_leftovers(tmp_engine, "chunks") == []
    assert tmp_engine.indices.exists(index="chunks-v1")

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    meta = {**layout.index_meta(tmp_engine, "chunks-v1")}
    meta["builder"] = {**meta["builder"], "pid": int(dead.stdout)}  # a process that has ended
    tmp_engine.indices.put_mapping(index="chunks-v1", meta=meta)
    assert layout.clean_leftovers(tmp_engine, "chunks") == ["chunks-v1"]

    other_host = layout.building_meta({})["builder"] | {"host": "another-machine"}
    assert layout.builder_gone(other_host) is False  # cannot be seen from here: left alone
    assert layout.builder_gone(None) is True  # versions from before builders were recorded
