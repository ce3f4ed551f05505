"""Shared fixtures: an embedded engine on a temp dir, and the shared data sets (optional)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tmp_engine(tmp_path):
    """An ``elasticsearch.Elasticsearch`` client backed by a fresh embedded engine in ``tmp_path``."""
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(tmp_path / "engine")
    yield es
    es.close()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or ``$SCHOLAR_ES_DATA``); the test is skipped when it is absent."""
    path = Path(os.environ.get("SCHOLAR_ES_DATA") or REPO.parent / "shared" / "data")
    if not path.is_dir():
        pytest.skip(f"shared data sets not found at {path} (set SCHOLAR_ES_DATA to their folder)")
    return path


@pytest.fixture(scope="session")
def served_demo(tmp_path_factory):
    """The demo papers indexed into an embedded engine, and ``scholar-es serve`` running over it.

    Yields a namespace: ``url`` (the server), ``path`` (the engine directory), ``es`` (an
    in-process client on the same directory, for reference answers), ``embedder``, ``server``.
    """
    from types import SimpleNamespace

    from serving import serving

    from indexer.embedder import Embedder
    from indexer.pipeline import IndexRun
    from scholar_es.engine.rest.transport import embedded_client

    path = tmp_path_factory.mktemp("served") / "engine"
    es = embedded_client(path)
    embedder = Embedder()
    IndexRun(es, embedder).run([REPO / "scripts" / "demo_papers.jsonl"], "jsonl")
    with serving(path, wait_model=True) as server:
        yield SimpleNamespace(url=server.url, path=path, es=es, embedder=embedder, server=server)
