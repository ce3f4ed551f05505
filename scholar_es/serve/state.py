"""What one server process holds: the client, the engine and the embedder.

The embedded engine is safe to share across threads (docs/storage.md, section 4: searches run
lock-free on immutable snapshots, writers are serialized per index by the engine itself), so the
server takes no lock of its own around it: the Elasticsearch REST routes call the engine's
dispatcher and the search API's client (the in-process transport node) calls the same engine
from uvicorn's worker threads concurrently.

One lock remains, around the embedder (:class:`LockedEmbedder`): the model is loaded lazily on
first use (two threads would load it twice), and on two cores running forward passes in
parallel gains nothing over queueing them; a cached question costs one SQLite lookup under it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scholar_es.client import connect, is_url
from scholar_es.engine.index.indices import Engine, open_engine
from scholar_es.errors import ConfigError
from scholar_es.serve.breaker import InFlightBreaker, default_limit

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

    from indexer.embedder import Embedder
    from querybuilder.profiles import Profile

DEFAULT_MAX_BODY = 100 * 1024 * 1024  # Elasticsearch's http.max_content_length default (100mb)
API_KEY_ENV = "SCHOLAR_ES_SERVE_API_KEY"


def api_key_from_env() -> str | None:
    """``$SCHOLAR_ES_SERVE_API_KEY``: None when unset; set but empty (or blank) is refused, since
    serving with no key at all is not what a person who set the variable meant."""
    key = os.environ.get(API_KEY_ENV)
    if key is None:
        return None
    if not key.strip():
        raise ConfigError(
            f"${API_KEY_ENV} is set but empty: set it to the key every request must send, or unset "
            "it to serve without a key"
        )
    return key


class LockedEmbedder:
    """An embedder whose ``encode`` runs one call at a time (model and cache shared by threads)."""

    def __init__(self, embedder: Embedder) -> None:
        self._inner = embedder
        self._lock = threading.Lock()
        self.name = embedder.name

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return self._inner.encode(texts)

    @property
    def dims(self) -> int:
        with self._lock:
            return self._inner.dims

    def token_count(self, text: str) -> tuple[int, int] | None:
        """The inner embedder's :meth:`~indexer.embedder.Embedder.token_count` (its own tokenizer)."""
        return self._inner.token_count(text)


@dataclass
class ServerState:
    target: str
    es: Elasticsearch
    engine: Engine | None  # None against a real cluster: the cluster serves the REST API
    embedder: LockedEmbedder
    profile: Profile  # the profile searches use unless a request names one
    api_key: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    breaker: InFlightBreaker = field(default_factory=lambda: InFlightBreaker(default_limit()))
    model_ready: threading.Event = field(default_factory=threading.Event)
    model_error: str | None = None

    @property
    def embedded(self) -> bool:
        return self.engine is not None


def open_state(
    target: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    profile: str | None = None,
    max_in_flight: int | None = None,
) -> ServerState:
    """Connect to TARGET (a directory: the embedded engine, opened once; a URL: a cluster client).
    ``max_in_flight``: the in-flight requests breaker's limit (default: a quarter of the memory)."""
    from indexer.embedder import DEFAULT_MODEL, Embedder
    from querybuilder.profiles import load_profile

    embedder = LockedEmbedder(Embedder(model or DEFAULT_MODEL))
    loaded = load_profile(profile)
    breaker = InFlightBreaker(default_limit() if max_in_flight is None else max_in_flight)
    if is_url(target):
        return ServerState(target, connect(target), None, embedder, loaded, api_key, max_body, breaker)
    es = connect(target)  # the same checks and messages as every other command (a file, a bad scheme)
    engine = open_engine(Path(target).expanduser())  # the process-wide engine the client's node shares
    return ServerState(target, es, engine, embedder, loaded, api_key, max_body, breaker)


def warm_model(state: ServerState) -> None:
    """Load the model (in a background thread at startup) so the first question does not wait long."""
    try:
        state.embedder.encode(["warm up"])
    except Exception as e:  # noqa: BLE001 - reported by /_scholar/health and every search
        state.model_error = f"{type(e).__name__}: {e}"
    finally:
        state.model_ready.set()
