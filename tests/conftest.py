"""Shared fixtures: an embedded engine on a temp dir, and the shared data sets (optional)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tmp_engine(tmp_path):
    """An ``elasticsearch.Elasticsearch`` client backed by a fresh embedded engine in ``tmp_path``."""
    from scholar_es.engine.node import embedded_client

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
